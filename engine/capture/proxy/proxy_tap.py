"""A session the proxy records (`SessionInfo`) and its tap (`ProxyTap`: the tap's journaling with the
proxy's sinks, a recording and a probe socket per session); who a conversation is (`client_fields`);
an upstream error as the tap's `failed` step takes it (`ProxyCallError`). The recorder that files
exchanges into sessions is engine.capture.proxy.recording's.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.capture.proxy.exchange import Exchange
from engine.capture.proxy.routes import opening_text
from engine.capture.tap_session import Tap
from engine.errors import ContextPipeError
from engine.importers.ingest import ActualRecorder, IngestReport, _Feeder
from engine.pipeline import ENGINE_VERSION, Pipeline


class ProxyCallError(ContextPipeError):
    """An upstream error or a cut stream, as the tap's `failed` step takes it."""


@dataclass
class SessionInfo:
    """A conversation the proxy records: its number, key, wire format, model, file and attach target."""

    number: int
    key: str
    wire: str
    model: str
    provider: str
    path: Path
    target: str  # what `cp-inspect attach` takes
    calls: int = 0
    errors: int = 0  # upstream errors and incomplete streams, journaled as errors
    tap_errors: int = 0  # requests the journal could not take (a format the tap does not parse)
    retried: int = 0  # failed attempts the agent sent again, journaled on the turn of the retry (retries.py)
    notes: list[str] = field(default_factory=list)
    slot: str = ""  # its place in Recorder.sessions (the key, or key~N for a later one with its opening)
    branch: dict[str, Any] | None = None  # the session it branched from (engine.capture.lineage)


class ProxyTap(Tap):
    """The tap's journaling with the proxy's sinks: a recording per session and a probe socket per session."""

    def __init__(self, wire: str, info: SessionInfo, serve: bool, window: int, hello: dict[str, Any]) -> None:
        super().__init__(wire, record=info.path, serve=False, window=window)
        self.info, self.serve_probe, self.hello = info, serve, hello
        # Who the conversation is (client_fields): worked out at its first call, before its probe serves.
        self.client_hello: dict[str, Any] | None = None
        self.routes = False  # the recorder files each request into its session (Recorder._place)
        # Failed attempts waiting to see whether the agent sends them again (engine/capture/proxy/retries.py)
        self.held: list[Any] = []

    def before(self, body: dict[str, Any], sent_at: float | None = None) -> None:
        if self.pipe is None:
            self._open(str(body.get("model", "unknown")))
        super().before(body, sent_at)

    def _open(self, model: str) -> None:
        pipe = Pipeline(
            model, self.info.provider, self.window, record=self.record, serve=False, clock=self.now
        )
        self.pipe = pipe
        self.feeder = _Feeder(pipe, IngestReport())
        self.actual = ActualRecorder(pipe)
        if self.serve_probe:
            from engine.probe.server import ProbeServer

            # The recording's own start time, model and provider: an inspector follows the file only when
            # its header holds the hello's (inspector/sources/live_recording.py); a second clock() read differs.
            recorded = pipe.recorder.header if pipe.recorder is not None else {}
            header = {
                "model": recorded.get("model", model),
                "provider": recorded.get("provider", self.info.provider),
                "engine_version": ENGINE_VERSION,
                "start_time": recorded.get("start_time", self.clock()),
                "session": self.info.number,
                # The key an agent's own probe header uses (Pipeline's hello): an inspector attached to a
                # conversation that ended says where it is kept ("press s to save" saved a second copy).
                "recording": os.path.abspath(self.info.path),
                # the process that made its calls and its opening; a `run`'s agent argv (self.hello) wins
                **(self.client_hello or {}),
                **self.hello,
            }
            events = pipe.journal.events  # append-only: clients read it by index, no copy per client
            probe = ProbeServer(header, lambda: events, session=self.info.number)
            # The session is recorded: an inspector may read its turns from that file rather than be sent
            # them (engine.probe.handshake, "Following the recording"), as an agent's own recording probe.
            # A parked file (its footer written, cut again when the session calls: recorder_sessions) is
            # followed on (live_recording: a footer cut off is not a cut).
            probe.follow_recording = pipe.recorder is not None
            try:
                probe.start()
            except (ContextPipeError, OSError) as exc:  # the session is still recorded, only not served
                probe.close()
                logging.getLogger("contextpipe.probe").warning(
                    "contextpipe: session %s is recorded but not served live: %s", self.info.number, exc
                )
                return
            # The pipeline publishes every journal event to `pipe.probe` (it already subscribed for the
            # recording); setting it here serves this session on its own socket, not the process's.
            pipe.probe = probe


def client_fields(ex: Exchange, wire: str, body: dict[str, Any]) -> dict[str, Any]:
    """What `ps` and `top` show a conversation as (its probe's header): "client", "pid N" of the local
    process that holds the connection its first call came on, with its "argv" and "client_pid", or
    "unknown" (not a local process of this user's, or the connection already closed: peer.py); and
    "opening", the start of its first message. Every conversation of a standalone proxy was listed under
    the proxy's own command line: a person could not tell which agent each one was."""
    from engine.capture.proxy.peer import peer_process

    out: dict[str, Any] = {"client": "unknown"}
    peer = None
    if ex.peer_lookup is not None:  # started when the call arrived (the connection open then)
        try:
            peer = ex.peer_lookup.result(timeout=5)
        except Exception:  # slow or failed: looked up again now, or said unknown
            peer = None
    if peer is None:
        peer = peer_process(ex.peer, ex.local)
    if peer is not None:
        out.update({"client": f"pid {peer.pid}", "client_pid": peer.pid, "argv": peer.argv})
    opening = opening_text(wire, body)
    if opening:
        out["opening"] = opening
    return out
