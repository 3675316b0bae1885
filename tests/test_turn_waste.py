"""Work an engine turn did twice or from scratch, and the figures that must not move when it stops.

- The response-reserve percentile is read from a sorted window kept in step with the samples, not a
  sort of the 256 samples on every new one (engine/stats.py).
- The alert rules that read only the request say their piece once a turn: at the outcome (usage or an
  error) only the rules that read it run again (engine/alerts.py), with the same alerts as a full pass.
- A growing session's request hash resumes where the previous body's messages ended, so it hashes the
  new messages and the envelope's tail, not up to a 16 KB checkpoint step again (providers/base.py).
- A tool's output is JSON-escaped once a turn: the ToolResult's content hash and the OpenAI request
  fragment share the escaped string (engine/hashing.json_string), with the same bytes and hashes.
Each behaviour test fails on the code before (191354f).
"""

from __future__ import annotations

import hashlib
import json
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import engine.alerts as alert_rules
import engine.hashing as hashing
import engine.stats as stats_mod
from engine.artifacts import Message, Text, ToolCall, ToolResult, ToolSchema
from engine.assembly import Measure, Section
from engine.hashing import call_hash, canonical_json, content_hash, result_hash
from engine.optimize.context import Marker
from engine.pipeline import Pipeline
from engine.providers import make_serializer
from engine.providers.openai import message_blocks, tool_messages
from engine.stats import MAX_SAMPLES, Statistics, percentile
from engine.tokens import CharTokenizer, TokenCounter
from engine.types import CacheScope, Priority, SectionKind
from tests.turn_session import char_pipe, tool_round


def _pipe(window: int = 6_000) -> Pipeline:
    return char_pipe(window)


def _round(pipe: Pipeline, t: int, size: int) -> None:
    tool_round(pipe, t, "".join(f'output {t}.{i} "é"\t\\\n' for i in range(size)))


# ------------------------------------------------------------------ the reserve's percentile
@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b"]), st.integers(-5, 5000)), max_size=700))
def test_reserve_is_the_percentile_of_the_samples(records: list[tuple[str, int]]) -> None:
    s = Statistics()
    for i, (src, n) in enumerate(records):
        s.record_completion("m", src, n)
        if i % 7 == 0:
            s.enter_recovery()  # p95 as well as p75
        elif i % 3 == 0:
            s.turn_succeeded()
        for b in ("a", "b"):
            got, pct = s.response_reserve("m", b, default=-1)
            samples = s.completions.get(Statistics.bucket("m", b))
            assert got == (percentile(samples, pct) if samples else -1)
            assert samples is None or len(samples) <= MAX_SAMPLES


def test_reserve_is_rebuilt_when_the_samples_were_replaced() -> None:
    s = Statistics()
    for n in range(40):
        s.record_completion("m", "x", n)
    assert s.response_reserve("m", "x", 0)[0] == 29  # p75, nearest rank
    s.completions["m|x"] = [7] * 10  # edited from outside: the sorted window no longer matches
    s.record_completion("m", "x", 7)
    assert s.response_reserve("m", "x", 0)[0] == 7


def test_a_new_sample_does_not_sort_the_window(monkeypatch: pytest.MonkeyPatch) -> None:
    s = Statistics()
    for n in range(MAX_SAMPLES + 20):
        s.record_completion("m", "x", (n * 7919) % 4001)
    s.response_reserve("m", "x", 0)
    sorts = []

    def counting_sorted(values: Any, **kw: Any) -> list[Any]:
        sorts.append(len(values))
        return sorted(values, **kw)

    monkeypatch.setattr(stats_mod, "sorted", counting_sorted, raising=False)
    for n in range(30):
        s.record_completion("m", "x", n * 13)
        s.response_reserve("m", "x", 0)
    assert sorts == []  # on the code before: one sort of 256 samples per new sample


# ------------------------------------------------------------------ alerts
def test_alerts_equal_a_full_pass_over_every_outcome() -> None:
    """Usage that is off the estimate, cache misses, errors and prompt_too_long recoveries, compactions
    and a window change: every turn's alerts equal evaluate() over the final trace and the turns before."""
    pipe = _pipe(4_000)
    pipe.user("fix the bug")
    rnd = random.Random(5)
    for t in range(60):
        _round(pipe, t, rnd.choice((2, 10, 40)))
        if t == 30:
            pipe.set_window(3_000)
        req = pipe.next_request()
        kind = rnd.random()
        if kind < 0.15:
            pipe.record_error("prompt_too_long" if kind < 0.08 else "error", "too long")
        else:
            est = req.trace["final_tokens"]
            inp = max(1, int(est * rnd.choice((0.5, 1.0, 1.3))))
            pipe.record_usage(
                {
                    "input_tokens": inp,
                    "output_tokens": 50,
                    "cache_read_tokens": rnd.choice((0, inp // 2, inp)),
                }
            )
    traces = [ev["trace"] for ev in pipe.journal.events if ev["k"] == "turn"]
    assert len(traces) == 60
    rules = set()
    for i, tr in enumerate(traces):
        assert tr["alerts"] == alert_rules.evaluate(tr, traces[:i]), i
        rules |= {a["rule"] for a in tr["alerts"]}
    assert {"estimate_error", "prompt_too_long", "prompt_too_long_recovery"} <= rules


def test_only_the_outcome_rules_run_again_at_the_outcome(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: dict[str, int] = {}

    def counted(rule: Any) -> Any:
        def run(t: Any, prev: Any) -> Any:
            calls[rule.__name__] = calls.get(rule.__name__, 0) + 1
            return rule(t, prev)

        return run

    wrapped = {r: counted(r) for r in alert_rules.RULES}
    monkeypatch.setattr(alert_rules, "RULES", tuple(wrapped[r] for r in alert_rules.RULES))
    outcome = {"recovery", "estimate_error", "low_cache_hit"}
    monkeypatch.setattr(
        alert_rules,
        "OUTCOME_RULES",
        frozenset(w for r, w in wrapped.items() if r.__name__ in outcome),
        raising=False,
    )
    # Observed (a subscriber on the journal: the alerts are said as each request and outcome come) and
    # not (the traces built when the journal is read, engine/trace_lazy.py): the same rule calls.
    for observed in (True, False):
        calls.clear()
        pipe = _pipe()
        if observed:
            pipe.journal.subscribe(lambda ev: None)
        pipe.user("fix the bug")
        for t in range(5):
            _round(pipe, t, 5)
            pipe.next_request()
            pipe.record_usage({"input_tokens": 900, "output_tokens": 10})
        _round(pipe, 5, 5)
        pipe.next_request()
        pipe.record_error("error", "boom")
        assert sum(ev["k"] == "turn" for ev in pipe.journal.events) == 6
        # Six requests: every rule once each; the six outcomes: only the three that read them, again.
        for name in (r.__name__ for r in wrapped):
            assert calls[name] == (12 if name in outcome else 6), (name, calls, observed)


# ------------------------------------------------------------------ the request hash
def test_a_growing_session_hashes_what_it_appended() -> None:
    """Each request of a session that only appends re-hashes its new messages and the envelope's tail
    (the model and tools), not the last checkpoint step (up to 16 KB) of what the previous one sent."""
    ser = make_serializer("openai")
    measure = Measure(TokenCounter(CharTokenizer()))
    tool = ToolSchema.create(
        "bash", "Run a command", {"type": "object", "properties": {"cmd": {"type": "string"}}}
    )
    history: list[Message] = [Message("user", (Text("fix the bug"),))]
    prev = b""
    for t in range(40):
        call = ToolCall(f"c{t}", "bash", json.dumps({"cmd": f"cat f{t}"}))
        out = "".join(f'output {t}.{i} "é"\t\\\n' for i in range(60))
        history += [
            Message("assistant", (Text(f"step {t}"), call)),
            Message("user", (ToolResult(f"c{t}", out),)),
        ]
        asm = (
            Section("tools", "Tools", SectionKind.TOOLS, CacheScope.GLOBAL, Priority.LAST_RESORT, (tool,)),
            Section(
                "history", "History", SectionKind.HISTORY, CacheScope.NONE, Priority.NORMAL, tuple(history)
            ),
        )
        before = ser._body_hash.hashed
        body = ser.serialize(asm, (), "deepseek-chat", 4096, measure).body
        hashed = ser._body_hash.hashed - before
        if t >= 2:
            assert body.startswith(prev[: len(prev) - 200])  # it appended
            assert hashed <= len(body) - len(prev) + 200, (t, hashed, len(body) - len(prev))
        prev = body
    assert len(prev) > 3 * 16384  # long enough that the checkpoints alone would re-hash kilobytes


@pytest.mark.parametrize("provider", ["anthropic", "bedrock"])
def test_a_moving_tail_breakpoint_rehashes_only_the_message_it_left(provider: str) -> None:
    """With breakpoints, the tail marker sits on the newest message and moves to the next newest on the
    next request, which rewrites the previous newest message without it. That request re-hashes that
    one message, its new messages and the envelope's tail; before, the body hash kept its state at the
    end of the messages, missed it, and went back to the last 16 KB checkpoint (up to 16 KB a turn)."""
    ser = make_serializer(provider)
    measure = Measure(TokenCounter(CharTokenizer()))
    tool = ToolSchema.create(
        "bash", "Run a command", {"type": "object", "properties": {"cmd": {"type": "string"}}}
    )
    history: list[Message] = [Message("user", (Text("fix the bug"),))]
    prev = b""
    prev_last = 0  # the previous body's newest message, as it was sent (marked)
    for t in range(40):
        call = ToolCall(f"c{t}", "bash", json.dumps({"cmd": f"cat f{t}"}))
        out = "".join(f'output {t}.{i} "é"\t\\\n' for i in range(60))
        history += [
            Message("assistant", (Text(f"step {t}"), call)),
            Message("user", (ToolResult(f"c{t}", out),)),
        ]
        asm = (
            Section("tools", "Tools", SectionKind.TOOLS, CacheScope.GLOBAL, Priority.LAST_RESORT, (tool,)),
            Section(
                "identity",
                "Identity",
                SectionKind.IDENTITY,
                CacheScope.GLOBAL,
                Priority.NEVER,
                (Text("Be brief."),),
            ),
            Section(
                "history", "History", SectionKind.HISTORY, CacheScope.NONE, Priority.NORMAL, tuple(history)
            ),
        )
        tail = Marker("history", len(history) - 1, "none", "conversation tail")
        before = ser._body_hash.hashed
        req = ser.serialize(asm, (tail,), "claude-sonnet-4", 4096, measure)
        hashed = ser._body_hash.hashed - before
        if t >= 2:
            assert hashed <= len(req.body) - len(prev) + prev_last + 400, (
                t,
                hashed,
                len(req.body) - len(prev),
            )
        assert req.request_sha256 == hashlib.sha256(req.body).hexdigest()
        prev = req.body
        last = ser._items[(measure.counter.tokenizer.name, "history", history[-1].sha, True)][0]
        assert last in prev
        prev_last = len(last)
    assert len(prev) > 3 * 16384  # long enough that the checkpoints alone would re-hash kilobytes


# ------------------------------------------------------------------ escaping a tool output once
texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=600)


@settings(max_examples=200, deadline=None)
@given(texts, texts, st.booleans(), st.sampled_from(["full", "cleared", "spilled"]))
def test_result_and_call_hashes_are_the_content_hash(a: str, b: str, err: bool, form: str) -> None:
    assert result_hash(a, b, err, form) == content_hash(["result", a, b, err, form])
    assert call_hash(a, form, b) == content_hash(["call", a, form, b])
    assert ToolResult(a, b, err, form).sha == content_hash(["result", a, b, err, form])
    assert ToolCall(a, "bash", b).sha == content_hash(["call", a, "bash", b])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(texts, texts), min_size=1, max_size=4))
def test_tool_messages_are_the_canonical_bytes_of_the_dicts(results: list[tuple[str, str]]) -> None:
    m = Message("user", tuple(ToolResult(cid, out) for cid, out in results))
    want = b",".join(
        canonical_json({"role": "tool", "tool_call_id": r.call_id, "content": r.content})
        for r in m.tool_results
    )
    assert tool_messages(m) == message_blocks(m, False) == want


def test_tool_messages_leave_other_messages_to_the_dicts() -> None:
    mixed = Message("user", (ToolResult("c1", "out"), Text("and a note")))
    assert tool_messages(mixed) is None
    assert isinstance(message_blocks(mixed, False), list)
    assert tool_messages(Message("user", (Text("hi"),))) is None
    odd = ToolResult("c1", "x", is_error=1)  # type: ignore[arg-type]
    assert odd.sha == content_hash(["result", "c1", "x", 1, "full"])  # not a bool: the generic encoder


def test_a_tool_output_is_escaped_once_a_turn(monkeypatch: pytest.MonkeyPatch) -> None:
    """The output's characters go through a JSON string escape once between tool_result() and the
    request's bytes (on the code before: twice, for the ToolResult's hash and for the fragment)."""
    out = "".join(f'line {i}: "quoted" \\ tab\t é\n' for i in range(300))
    escaped: list[int] = []
    enc, esc = hashing._encode, hashing.encode_basestring if hasattr(hashing, "encode_basestring") else None

    def counting_encode(value: Any) -> str:
        escaped.append(json.dumps(value).count("line 299"))
        return enc(value)

    monkeypatch.setattr(hashing, "_encode", counting_encode)
    if esc is not None:

        def counting_esc(text: str) -> str:
            escaped.append(text.count("line 299"))
            return esc(text)

        monkeypatch.setattr(hashing, "encode_basestring", counting_esc)
    hashing._ESCAPED.clear() if hasattr(hashing, "_ESCAPED") else None
    pipe = _pipe(400_000)
    pipe.user("fix the bug")
    calls = pipe.assistant("look", [{"id": "c1", "name": "bash", "arguments": "{}"}])
    escaped.clear()
    pipe.tool_result(calls[0].id, out)
    req = pipe.next_request()
    assert out in req.body["messages"][-1]["content"]
    assert sum(escaped) == 1, escaped


# ------------------------------------------------------------------ hashing what is new
def test_chain_hasher_equals_hashing_whole() -> None:
    from engine.providers.hex_chain import ChainHasher

    rnd = random.Random(3)
    for to_bytes, alphabet in ((None, "0123456789abcdef"), (bytes.fromhex, "0123456789abcdef")):
        ch = ChainHasher() if to_bytes is None else ChainHasher(to_bytes, keep=3)
        seqs = ["", "", ""]
        for _ in range(300):
            k = rnd.randrange(3)
            op = rnd.random()
            piece = "".join(rnd.choice(alphabet) for _ in range(2 * rnd.randrange(0, 40)))
            if op < 0.6:
                seqs[k] += piece  # grows
            elif op < 0.8:
                seqs[k] = seqs[k][: 2 * rnd.randrange(len(seqs[k]) // 2 + 1)] + piece  # cut and grown
            else:
                seqs[k] = piece  # unrelated
            raw = seqs[k].encode() if to_bytes is None else bytes.fromhex(seqs[k])
            assert ch.hexdigest(seqs[k]) == hashlib.sha256(raw).hexdigest()


def test_a_turn_hashes_what_is_new_not_the_history(monkeypatch: pytest.MonkeyPatch) -> None:
    """Bytes through sha256 in one turn of a session that only appends rounds of the same size: the
    same at 150 messages as at 30 (on the code before, the section and prefix hashes re-hashed every
    item's hash every turn: +~96 bytes a message)."""
    real = hashlib.sha256
    hashed = [0]

    class Counting:
        def __init__(self, data: bytes = b"", inner: Any = None) -> None:
            self.inner = real() if inner is None else inner
            if data:
                self.update(data)

        def update(self, data: Any) -> None:
            hashed[0] += memoryview(data).nbytes
            self.inner.update(data)

        def copy(self) -> Counting:
            return Counting(inner=self.inner.copy())

        def hexdigest(self) -> str:
            return str(self.inner.hexdigest())

        def digest(self) -> bytes:
            return bytes(self.inner.digest())

    monkeypatch.setattr(hashlib, "sha256", Counting)
    pipe = _pipe(2_000_000)
    pipe.user("fix the bug")
    per_turn = []
    for t in range(75):
        before = hashed[0]
        _round(pipe, t, 20)
        req = pipe.next_request()
        pipe.record_usage({"input_tokens": 900, "output_tokens": 10})
        per_turn.append(hashed[0] - before)
    assert req.trace["sections"][-1]["items"] > 150
    assert max(per_turn[60:]) <= min(per_turn[10:20]) + 500, (per_turn[10:20], per_turn[60:])
