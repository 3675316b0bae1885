"""Where a Pipeline's journal goes as it grows: the recording (`record=` or CONTEXTPIPE_RECORD), the live
probe an inspector attaches to (`serve=`), the OpenTelemetry export (`otel=`); and whether anything
observes the journal (a turn nothing observes builds its trace only when read: engine/trace_lazy.py).

The bottom of a Pipeline's stages (see engine/pipeline_state.py); close() is Pipeline's.
"""

from __future__ import annotations

import itertools
import os
import weakref
from pathlib import Path
from typing import Any

from engine.errors import ConfigError, ContextPipeError
from engine.pipeline_state import PipelineState
from engine.probe.optin import redact_requested, serve_requested
from engine.recording.journal import Event, Journal

# Bumped when the same input may give other request bytes (a recording made before then may fail
# `cp-inspect verify`, which then names both versions). 0.2.0: Anthropic/Bedrock empty messages and blank
# text, tool-call ids a provider refuses or repeats (sessions 25-27).
ENGINE_VERSION = "0.2.0"


ENV_RECORD = "CONTEXTPIPE_RECORD"


def _start_probe(header: dict[str, Any], journal: Journal, redact: bool, follow: bool = False) -> Any:
    """The live probe, or None with one warning saying why not and how to fix it. A probe that cannot
    start (a runtime directory planted by another user or with the wrong mode, a socket path too long,
    no descriptors left) must never stop the agent: the agent runs on without it. `follow`: an inspector
    may follow the recording the header names (set before the socket accepts anyone: set after start(),
    an inspector that attached in between, as `cp-inspect demo`'s does the moment the socket is up, was
    sent every turn over the stream, with no word why)."""
    from engine.probe.server import ProbeServer

    events = journal.events  # append-only: clients read it by index, nothing is copied per client
    # The first pipeline of the process serves at <pid>.sock; one made while it still does (a forked
    # sub-agent under CONTEXTPIPE_SERVE=1, or fork(serve=True)) at <pid>.N.sock, as the proxy serves each
    # conversation (`cp-inspect ps` lists it as PID.N): it was refused ("already serving") and ran unserved.
    busy = any(s.session is None and s.running for s in list(_PROBES))
    session = next(_PROBE_SESSIONS) if busy else None
    server = ProbeServer(header, lambda: events, redact=redact, session=session)
    server.follow_recording = follow
    try:
        try:
            server.start()
        except ContextPipeError:
            if server.session is not None:
                raise
            server.close()  # <pid>.sock taken meanwhile (another thread's pipeline): a session socket
            server = ProbeServer(header, lambda: events, redact=redact, session=next(_PROBE_SESSIONS))
            server.follow_recording = follow
            server.start()
    except (ContextPipeError, OSError) as exc:
        server.close()
        import logging  # here: the only use, and ~4 ms of CPU a reader of recordings need not import

        logging.getLogger("contextpipe.probe").warning(
            "contextpipe: the live probe is disabled, the agent runs on without it: %s", exc
        )
        return None
    _PROBES.add(server)
    return server


_PROBES: weakref.WeakSet[Any] = weakref.WeakSet()  # the probe servers this process's pipelines started


_PROBE_SESSIONS = itertools.count(1)


class Sinks(PipelineState):
    """A Pipeline's sinks (opened by Pipeline.__init__, closed by Pipeline.close)."""

    # ----------------------------------------------------------------- sinks
    def _open_sinks(self, record: str | Path | None, serve: bool | None, redact: bool | None) -> None:
        record = record or os.environ.get(ENV_RECORD) or None
        serve = serve_requested(serve)  # an explicit argument wins, else CONTEXTPIPE_SERVE=1
        redact = redact_requested(redact)  # likewise CONTEXTPIPE_REDACT=1
        header = {
            "model": self.config.model,
            "provider": self.config.provider,
            "engine_version": ENGINE_VERSION,
            "start_time": self.clock(),
            **self.links,
        }
        if record:
            from engine.recording.cpsession import RecordingWriter

            if Path(record).exists():
                raise ConfigError(
                    f"{record} already exists: a recording is never overwritten; delete it or record to a new path"
                )
            # The counter rides along so close() stores its counts: a reader need not tokenize again.
            self.recorder = RecordingWriter(record, header, counter=self.counter)
            for ev in self.journal.events:
                self.recorder.append(ev)
        if serve:
            # An inspector that sees the agent exit can then say where the session is kept.
            hello = {**header, "recording": os.path.abspath(record)} if record else header
            # An inspector may read the turns from the recording rather than be sent them: nothing is
            # then encoded or sent for it a turn (engine.probe.handshake, "Following the recording").
            self.probe = _start_probe(hello, self.journal, redact, follow=bool(record))
        if self.recorder is not None or self.probe is not None:
            self.journal.subscribe(self._publish)
        if self.recorder is None and self.probe is not None:
            from engine.probe.journal_lane import install

            # The probe is the one sink: each event goes to it one call deep, not three (journal_lane).
            install(self.journal, self.probe)

    def _open_otel(self, otel: bool | None, redact: bool) -> None:
        """OpenTelemetry export, opt-in: `otel=True` or the standard OTEL_EXPORTER_OTLP_* variables. A
        missing SDK or endpoint asked for explicitly is an error; one implied by the environment only
        warns, so a variable set for other programs never stops the agent."""
        from engine.export.optin import otel_requested

        if not otel_requested(otel):
            return
        from engine.export.otel import OtelSink

        header = {"model": self.config.model, "provider": self.config.provider}
        try:
            sink = OtelSink(header, redact=redact)
        except ConfigError as exc:
            if otel:
                raise
            import warnings

            warnings.warn(f"OpenTelemetry export is off: {exc}", RuntimeWarning, stacklevel=3)
            return
        for ev in self.journal.events:
            sink(ev)
        self.journal.subscribe(sink)
        self.otel = sink

    def _publish(self, ev: Event) -> None:
        """Hand one journal event to the recorder and the probe. The recorder encodes every event it
        writes; the probe gets those bytes too, so its thread does not encode the event a second time."""
        frame = None
        if self.recorder is not None:
            try:
                frame = self.recorder.append(ev)
            except ContextPipeError as exc:
                # A full disk (or any write the OS refuses) must not cost the agent its turn, nor the
                # probe this event: the recorder stops at the failure and keeps what it wrote before.
                self._recorder_failed(exc)
        if self.probe is not None:
            self.probe.publish(ev, frame)

    def _recorder_failed(self, exc: Exception) -> None:
        """Say once that the recording stopped (the journal counts each refused event in sink_errors)."""
        if self.recording_error is None:
            self.recording_error = exc
            if self.probe is not None:
                self.probe.recording_stopped(str(exc))  # (its followers attach again: the journal comes live)
            import warnings

            warnings.warn(
                f"contextpipe: recording stopped, the agent goes on: {exc}", RuntimeWarning, stacklevel=2
            )

    def _defers_trace(self) -> bool:
        """Whether this turn's trace may wait until something reads it (see engine/trace_lazy.py):
        nothing is handed the journal's events as they come, no shadow plans from the trace, the journal
        moves old events to disk (so the records it holds are bounded), and the fast path is on (off,
        every build computes everything at once: the reference the tests compare with)."""
        return (
            self.fast_path
            and self._unwatched()
            and self._shadow is None
            and self.journal.events.keep is not None
        )

    def _unwatched(self) -> bool:
        """Nothing is handed the journal's events as they come but, at most, a live probe with no client
        attached: it drops each event at once (nothing encoded), but its subscription made every turn
        build its trace at once, for an agent that serves and is never attached to: a served agent's
        turn cost ~120 us (~10%) more than one that does not serve, ~35 us now (a paced ~1.2 ms turn,
        measured). A client that attaches reads the journal (its snapshot builds what it reads) and from
        then on turns are built as they come."""
        journal = self.journal
        if not journal.observed:
            return True
        probe = self.probe
        # (A client of the fold stream does not count: it rebuilds the traces from the journal itself,
        # engine.probe.elide.fold_out, so an inspector that attaches that way leaves the turns lazy.)
        return (
            probe is not None
            and self.recorder is None
            and not probe.tracing_clients
            and journal.observed_only_by(self._publish)
        )

    def _watched(self) -> bool:
        return not self._unwatched()
