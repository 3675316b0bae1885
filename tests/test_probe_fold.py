"""The probe's fold stream: an attached inspector that does not make the agent build its turns' traces.

Real agents (Pipelines serving their probe), real Unix sockets, the real live source
(inspector/sources/live.py) and client. The folded view's traces are compared with the agent's own
(`Pipeline.traces`, built when read) for the same turns, on random sessions with compactions, spills,
annotations, errors and window changes; the agent's turns stay unbuilt while only a fold client is
attached; a rebuilt request that does not match falls back to the agent's trace (`trace N`); an old
protocol client, and an inspector that does not ask for the fold stream, get today's stream; a
malformed `trace` request is refused with a clear error frame and the agent and the stream go on.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.probe.handshake import FOLD_PROTOCOL
from engine.recording.frames import decode_frames, encode_frame
from inspector.sources import NewTurn
from inspector.sources.live import LiveSource

T = 10.0


def _pipeline(rtdir: Path, window: int = 200_000) -> Any:
    from engine.pipeline import Pipeline

    pipe = Pipeline("claude-sonnet-4", "anthropic", window, serve=True, max_output_tokens=1024)
    assert pipe.probe is not None
    pipe.identity("You are a careful coding agent.")
    pipe.user("Fix the failing test.")
    return pipe


def _turn(pipe: Any, t: int, size: int = 20, *, note: bool = True, error: bool = False) -> None:
    req = pipe.next_request()  # (the count only: an agent that never reads its traces)
    if note:
        pipe.annotate("note", {"turn": t, "size": size})
    if error:
        pipe.record_error("overloaded", f"busy at {t}")
    else:
        pipe.record_usage({"input_tokens": req.final_tokens, "output_tokens": 10 + t})
    calls = pipe.assistant(f"step {t}", [{"id": f"c{t}", "name": "bash", "arguments": "{}"}])
    pipe.tool_result(calls[0].id, f"output of step {t}\n" + "word " * size)


def _kinds(pipe: Any, start: int = 0) -> set[str]:
    return {type(pipe.traces.raw(i)).__name__ for i in range(start, len(pipe.traces))}


class _Follower:
    """follow() of a live source in a thread of its own (as the app's reader), collecting new turns."""

    def __init__(self, src: LiveSource) -> None:
        self.src = src
        self.turns: list[dict[str, Any]] = list(src.load_initial())
        self._stop = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        for e in self.src.follow():
            if isinstance(e, NewTurn):
                self.turns.append(e.trace)
            if self._stop:
                return

    def wait_for(self, turn: int) -> None:
        deadline = time.monotonic() + T
        while not any(t.get("turn") == turn for t in self.turns):
            assert time.monotonic() < deadline, (
                f"turn {turn} did not reach the view: {[t['turn'] for t in self.turns]}"
            )
            time.sleep(0.01)

    def stop(self) -> None:
        self._stop = True
        self.src.close()
        self.thread.join(T)


def _agent_traces(pipe: Any) -> dict[int, dict[str, Any]]:
    # Read after the comparison's turns ran: reading builds them (the agent's own, as trace() would).
    return {tr["turn"]: tr for tr in list(pipe.traces)}


def _shown(src: LiveSource, turns: list[int]) -> dict[int, dict[str, Any]]:
    return {t: dict(src.full_trace(t)) for t in turns}


session_ops = st.lists(
    st.tuples(
        st.integers(min_value=0, max_value=1500),  # the tool result's size (words): compactions, spills
        st.booleans(),  # annotate
        st.integers(min_value=0, max_value=9),  # 0: an error, 1: a window change, 2: a spill, else plain
    ),
    min_size=3,
    max_size=14,
)


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(before=st.integers(min_value=0, max_value=4), ops=session_ops)
def test_folded_traces_equal_the_agents_own(before: int, ops: list[tuple[int, bool, int]]) -> None:
    # Each example's own runtime directory (the rtdir fixture is made once per test, not per example):
    # earlier examples' pipelines of this process served there, and the attach by pid must find this one.
    base = Path(tempfile.mkdtemp(prefix="cpf-", dir="/tmp"))
    was = os.environ.get("XDG_RUNTIME_DIR")
    os.environ["XDG_RUNTIME_DIR"] = str(base)
    pipe = _pipeline(base / "rt", window=12_000)
    try:
        for t in range(before):
            _turn(pipe, t, 200)
        # (It asks for what the agent holds back once the agent is idle: the turns that closed within
        # FOLD_COALESCE of the agent's last send, engine.probe.agent_send, held for its next.)
        src = LiveSource(os.getpid(), timeout=T, backfill_idle=0.15, fold=True)
        assert src._folding and src.client.fold and src.client.hello["protocol"] == FOLD_PROTOCOL
        view = _Follower(src)
        deadline = time.monotonic() + T
        while pipe.probe.client_count != 1 or pipe.probe.tracing_clients != 0:
            assert time.monotonic() < deadline
            time.sleep(0.005)
        live = []
        for i, (size, note, kind) in enumerate(ops):
            t = before + i
            if kind == 1:
                pipe.set_window(8_000 + 1000 * (size % 9))
            # (A result over the spill threshold, 10k tokens, is spilled the turn after.)
            _turn(pipe, t, 12_000 if kind == 2 else size, note=note, error=kind == 0)
            live.append(t)
        pipe.close_turn()
        view.wait_for(live[-1])
        # The fold client did not make the agent build its turns: they are still records.
        assert _kinds(pipe, before) == {"TurnRecord"}
        shown = _shown(src, live)
        view.stop()
        # (Not the turns before the attach: annotated while nobody was attached, they are sent built;
        # see tests/test_attach_fold_snapshot.py.)
        # Every turn came as its marker and was folded here, the annotated ones too: their annotations
        # were journaled apart while the client was attached (the record knows it: TurnEvent.private).
        assert src.folded_turns == len(live) and src.asked_traces == 0
        agent = _agent_traces(pipe)
        for t in live:
            assert shown[t] == agent[t], t
            assert list(shown[t]) == list(agent[t])  # key order too: the journal's event, byte for byte
        assert any(t.get("note") for t in shown.values()) == any(n for _, n, _ in ops)
    finally:
        pipe.close()
        if was is None:
            os.environ.pop("XDG_RUNTIME_DIR", None)
        else:
            os.environ["XDG_RUNTIME_DIR"] = was
        shutil.rmtree(base, ignore_errors=True)


def test_a_turn_that_does_not_rebuild_to_its_hash_is_asked_of_the_agent(rtdir: Path) -> None:
    pipe = _pipeline(rtdir)
    # Every turn sent at its close: this inspector never asks for what the agent holds back (turns
    # closer than FOLD_COALESCE wait for a later send: tests/test_probe_fold_coalesce.py).
    pipe.probe.fold_coalesce = 0.0
    try:
        _turn(pipe, 0)
        src = LiveSource(os.getpid(), timeout=T, backfill_idle=None, fold=True)
        view = _Follower(src)
        _turn(pipe, 1)
        view.wait_for(1)
        # The fold's next build of this session comes out different from the agent's (as another
        # engine version's would): its request hash does not match, so the view asks for the trace.
        tf = src._tf
        assert tf is not None and tf.pipe is not None
        text = "a different identity, so the rebuilt request differs"
        h = tf.pipe.journal.blob(text)
        tf.pipe.fold({"k": "content", "id": "identity", "h": h})
        _turn(pipe, 2)
        view.wait_for(2)
        deadline = time.monotonic() + T
        while 2 in src._missing:
            assert time.monotonic() < deadline, "the agent's trace of the mismatched turn never came"
            time.sleep(0.01)
        assert tf.mismatches == [2] and src.asked_traces == 1
        shown = dict(src.full_trace(2))
        entry = next(t for t in view.turns if t["turn"] == 2)
        view.stop()
        agent = _agent_traces(pipe)
        assert shown == agent[2]
        assert entry["final_tokens"] == agent[2]["final_tokens"]  # the timeline's stand-in was filled
    finally:
        pipe.close()


def test_an_old_protocol_client_and_an_unfolding_inspector_get_todays_stream(rtdir: Path) -> None:
    pipe = _pipeline(rtdir)
    try:
        _turn(pipe, 0)
        # A client from before protocol 2 (raw: its own hello, as an older cp-inspect sends it).
        raw = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        raw.connect(str(pipe.probe.path))
        raw.sendall(
            encode_frame(
                {"k": "hello", "protocol": 1, "lean": True, "elide": True, "fold": True, "quiet": True}
            )
        )
        src = LiveSource(os.getpid(), timeout=T, backfill_idle=None, fold=False)
        assert not src._folding and not src.client.fold
        view = _Follower(src)
        _turn(pipe, 1)
        view.wait_for(1)
        assert _kinds(pipe, 1) == {"dict"}  # a tracing client: turns built as they come, as before
        raw.settimeout(T)
        data = b""
        frames: list[dict[str, Any]] = []
        deadline = time.monotonic() + T
        while not any(f.get("k") == "batch" and f.get("events") for f in frames):
            assert time.monotonic() < deadline
            data += raw.recv(65536)
            got, used = decode_frames(data)
            frames += got
            data = data[used:]
        hello = frames[0]
        assert hello["k"] == "hello" and hello["protocol"] == 1
        live = [e for f in frames if f.get("k") == "batch" for e in f["events"]]
        # Protocol 1 asked for fold: not given (the elided stream: turns, no request/usage events).
        assert {e["k"] for e in live} == {"turn"}
        raw.close()
        view.stop()
    finally:
        pipe.close()


def test_a_malformed_trace_request_gets_an_error_frame_and_nothing_else_changes(rtdir: Path) -> None:
    from tests.support.fold_stream import raw_fold_client  # (it imports this module)

    pipe = _pipeline(rtdir)
    try:
        _turn(pipe, 0)
        c = raw_fold_client(pipe)
        for bad in ("three", -1, None, [1, 2], 1.5):
            assert c._send({"k": "trace", "turn": bad})
        errors: list[dict[str, Any]] = []
        deadline = time.monotonic() + T
        while len(errors) < 5:
            assert time.monotonic() < deadline
            ev = c.recv(0.2)
            if ev is not None and ev.get("k") == "error":
                errors.append(ev)
        assert {e["code"] for e in errors} == {"bad_request"} and not c.disconnected
        assert "names one turn number" in errors[0]["message"] and "'three'" in errors[0]["message"]
        # The agent carries on, its turns unbuilt; the stream carries on; a good request is answered.
        _turn(pipe, 1)
        pipe.close_turn()
        assert _kinds(pipe) == {"TurnRecord"}
        assert c.request_trace(1)
        kinds: list[str] = []
        deadline = time.monotonic() + T
        answer = None
        while answer is None:
            assert time.monotonic() < deadline
            ev = c.recv(0.2)
            if ev is None:
                continue
            kinds.append(ev["k"])
            if ev["k"] == "trace":
                answer = ev
        assert "turn_deferred" in kinds and "request" in kinds and "turn" not in kinds
        assert answer["turn"] == 1 and answer["trace"] == _agent_traces(pipe)[1]
        assert pipe.probe.publish_errors == 0 and pipe.journal.sink_errors == 0
        c.close()
    finally:
        pipe.close()
