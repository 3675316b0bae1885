"""The serializer's memos (per-item fragments, recent runs per section, resumable body hashes) never
change what it produces: every request equals what a fresh serializer, with nothing cached, makes of
the same assembly, byte for byte and hash for hash, whatever came before it.

Sequences mix what simulate and a live agent do to one serializer: several interleaved request
sequences (simulate builds each turn under the what-if, with every gate closed and per engine policy),
appends, compactions, a sliding window, a message replaced at the same position, moved cache markers,
and a tokenizer change. A memo that returned stale bytes, a stale block or a resumed hash from the wrong
body fails here."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.artifacts import Message, SectionItem, Text, ToolCall, ToolResult, ToolSchema
from engine.assembly import Assembly, Measure, Section
from engine.errors import UnpairedToolResultError
from engine.optimize.context import Marker
from engine.providers import make_serializer
from engine.providers.base import SerializedRequest, Serializer
from engine.tokens import CharTokenizer, TokenCounter
from engine.types import CacheScope, Priority, SectionKind

PROVIDERS = ("openai", "anthropic", "bedrock", "prefix")


def _section(sid: str, kind: SectionKind, items: tuple[SectionItem, ...]) -> Section:
    return Section(sid, sid, kind, CacheScope.SESSION, Priority.NORMAL, items)


def _round(t: int, size: int = 3, variant: str = "") -> tuple[Message, Message]:
    call = ToolCall(f"c{t}", "bash", json.dumps({"cmd": f"cat f{t}"}))
    out = "".join(f"line {t}.{i}{variant}\n" for i in range(size))
    return Message("assistant", (Text(f"step {t}{variant}"), call)), Message(
        "user", (ToolResult(f"c{t}", out),)
    )


TASK = Message("user", (Text("Fix the failing test."),))
TOOL = ToolSchema.create(
    "bash", "Run a shell command", {"type": "object", "properties": {"cmd": {"type": "string"}}}
)


def _asm(history: tuple[Message, ...], system: str = "You are careful.") -> Assembly:
    return (
        _section("identity", SectionKind.IDENTITY, (Text(system),)),
        _section("tools", SectionKind.TOOLS, (TOOL,)),
        _section("history", SectionKind.HISTORY, history),
    )


def _hist(rounds: list[tuple[Message, Message]]) -> tuple[Message, ...]:
    return (TASK,) + tuple(m for r in rounds for m in r)


def _markers(asm: Assembly, at: tuple[int, ...]) -> tuple[Marker, ...]:
    n = len(asm[-1].items)
    return tuple(Marker("history", i % n, "session", "test") for i in at if n)


def _fresh(
    provider: str, asm: Assembly, markers: tuple[Marker, ...], counter: TokenCounter
) -> SerializedRequest:
    return make_serializer(provider).serialize(asm, markers, "m", 100, Measure(counter))


def _same(got: SerializedRequest, want: SerializedRequest) -> None:
    assert got.body == want.body
    assert got.request_sha256 == want.request_sha256 == hashlib.sha256(got.body).hexdigest()
    assert got.prefix_sha256 == want.prefix_sha256
    assert got.cacheable_prefix_tokens == want.cacheable_prefix_tokens
    assert got.blocks == want.blocks
    assert got.tool_shas == want.tool_shas
    assert got.section_shas == want.section_shas
    assert got.last_marked == want.last_marked


CHAR = TokenCounter(CharTokenizer())


def _carried_figures(ser: Serializer, got: SerializedRequest) -> None:
    """What serialize reads from its runs instead of walking the blocks (each run's segment set and token
    sum, carried to the run that extends it in place) and what it hands the pipeline (the last marked
    block, the cacheable prefix's tokens) are what the blocks say."""
    marked = [i for i, b in enumerate(got.blocks) if b.marker]
    assert got.last_marked == (marked[-1] if marked else -1)
    n = len(got.blocks)
    prefix = got.last_marked + 1 if ser.policy.supports_markers else max(0, n - 1)
    assert got.cacheable_prefix_tokens == sum(b.tokens for b in got.blocks[:prefix])
    for runs in ser._runs.values():
        for run in runs:
            assert run.segset is None or run.segset == frozenset(run.segments)
            assert run.tokens is None or run.tokens == sum(b.tokens for b in run.blocks)


def _check(ser: Serializer, provider: str, asm: Assembly, markers: tuple[Marker, ...] = (),
           counter: TokenCounter = CHAR, body: bool = True) -> SerializedRequest:  # fmt: skip
    got = ser.serialize(asm, markers, "m", 100, Measure(counter), body)
    _carried_figures(ser, got)
    want = _fresh(provider, asm, markers, counter)
    if body:
        _same(got, want)
    else:
        # What simulate reads is all there; the body and the hashes of it are not made.
        assert (got.body, got.request_sha256, got.prefix_sha256) == (b"", "", "")
        _same(replace(got, body=want.body, request_sha256=want.request_sha256,
                      prefix_sha256=want.prefix_sha256), want)  # fmt: skip
    return got


@pytest.mark.parametrize("provider", PROVIDERS)
def test_replaced_message_at_the_same_position_is_reserialized(provider: str) -> None:
    ser = make_serializer(provider)
    rounds = [_round(t) for t in range(6)]
    _check(ser, provider, _asm(_hist(rounds)))
    # The same length and position, other content (an edit of the message that was there).
    rounds[2] = _round(2, variant=" (edited)")
    got = _check(ser, provider, _asm(_hist(rounds)))
    assert b"(edited)" in got.body


@pytest.mark.parametrize("provider", PROVIDERS)
def test_compaction_then_append(provider: str) -> None:
    ser = make_serializer(provider)
    rounds = [_round(t, 40) for t in range(30)]
    _check(ser, provider, _asm(_hist(rounds)))
    summary = Message("user", (Text("Summary of rounds 0-19."),))
    kept = rounds[20:]
    compacted = (TASK, summary) + tuple(m for r in kept for m in r)
    got = _check(ser, provider, _asm(compacted))
    assert b"line 3.1" not in got.body and b"Summary of rounds" in got.body
    kept.append(_round(30, 40))
    _check(ser, provider, _asm((TASK, summary) + tuple(m for r in kept for m in r)))


def test_one_assembly_through_every_provider_and_tokenizer() -> None:
    asm = _asm(_hist([_round(t) for t in range(5)]))
    bodies = set()
    for provider in PROVIDERS:
        ser = make_serializer(provider)
        a = _check(ser, provider, asm, _markers(asm, (3,)))
        # Another tokenizer: the same bytes, other token counts; nothing carried over from the first.
        b = _check(ser, provider, asm, _markers(asm, (3,)), TokenCounter())
        assert a.body == b.body
        assert [x.tokens for x in a.blocks] != [x.tokens for x in b.blocks]
        bodies.add(a.body)
    assert len(bodies) >= 3  # the providers' wire formats differ


def test_unpaired_result_is_caught_after_memoized_requests() -> None:
    ser = make_serializer("openai")
    rounds = [_round(t) for t in range(4)]
    _check(ser, "openai", _asm(_hist(rounds)))
    orphan = Message("user", (ToolResult("nope", "x"),))
    with pytest.raises(UnpairedToolResultError):
        ser.serialize(_asm(_hist(rounds) + (orphan,)), (), "m", 100, Measure(CHAR))
    # A call whose result is missing before the next assistant message, found by a resumed scan.
    a, _u = _round(9)
    with pytest.raises(UnpairedToolResultError):
        ser.serialize(_asm(_hist(rounds) + (a,) + _round(10)), (), "m", 100, Measure(CHAR))
    _check(ser, "openai", _asm(_hist(rounds + [_round(4)])))


def test_interleaved_sequences_each_resume_their_own_body_hash() -> None:
    """simulate's pattern: a growing sequence and a sliding window built alternately by one serializer.
    The growing one must hash only what it appended, not its whole body every other request."""
    ser = make_serializer("openai")
    rounds = [_round(t, 600) for t in range(40)]
    total = grow_hashed = 0
    for t in range(10, 40):
        before = ser._body_hash.hashed
        grow = _check(ser, "openai", _asm(_hist(rounds[: t + 1])))
        if t > 10:
            grow_hashed += ser._body_hash.hashed - before
            total += len(grow.body)
        before = ser._body_hash.hashed
        slide = _check(ser, "openai", _asm(_hist(rounds[t - 9 : t + 1])))  # the last ten rounds only
        assert ser._body_hash.hashed - before > len(slide.body) // 2  # it shifts: little to resume
    # Each growing request hashes what it appended (one round, ~13 KB) plus at most one checkpoint step.
    step = type(ser._body_hash).CHECKPOINT
    assert grow_hashed < 29 * (13_500 + step) < total / 4


@st.composite
def _programs(draw: st.DrawFn) -> list[tuple[int, str, int, bool]]:
    n = draw(st.integers(3, 25))
    ops = st.sampled_from(["append", "append", "append", "compact", "slide", "edit", "mark", "system"])
    return [(draw(st.integers(0, 2)), draw(ops), draw(st.integers(0, 10_000)), draw(st.booleans()))
            for _ in range(n)]  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(provider=st.sampled_from(PROVIDERS), program=_programs())
def test_memoized_serializer_equals_a_fresh_one(
    provider: str, program: list[tuple[int, str, int, bool]]
) -> None:
    """Three interleaved request sequences through one serializer, each a random walk of appends,
    compactions, sliding windows, in-place edits, marker moves and system prompt changes; any request
    may be built without its body (as simulate builds them), and the requests after it, with or
    without, are still what a fresh serializer makes."""
    ser = make_serializer(provider)
    streams: list[dict[str, object]] = [{"rounds": [_round(s * 1000 + t) for t in range(3)], "sys": "A", "marks": ()} for s in range(3)]  # fmt: skip
    for which, op, arg, body in program:
        st_ = streams[which]
        rounds: list[tuple[Message, Message]] = st_["rounds"]  # type: ignore[assignment]
        if op == "append":
            rounds.append(_round(which * 1000 + len(rounds) + arg % 7, 1 + arg % 30))
        elif op == "compact" and len(rounds) > 2:
            del rounds[: 1 + arg % (len(rounds) - 1)]
        elif op == "slide" and rounds:
            del rounds[0]
            rounds.append(_round(which * 1000 + 500 + arg % 400, 2))
        elif op == "edit" and rounds:
            i = arg % len(rounds)
            rounds[i] = _round(which * 1000 + i, 1 + arg % 5, variant=f" v{arg}")
        elif op == "mark":
            st_["marks"] = (arg % 11, arg % 3) if arg % 4 else ()
        elif op == "system":
            st_["sys"] = "B" if st_["sys"] == "A" else "A"
        asm = _asm(_hist(rounds), str(st_["sys"]))
        _check(ser, provider, asm, _markers(asm, st_["marks"]), body=body)  # type: ignore[arg-type]


def _reference_pairing(history: tuple[Message, ...]) -> None:
    """check_pairing as it was written before it was made incremental: a plain left-to-right scan."""
    prev_calls: set[str] = set()
    pending: set[str] = set()
    for it in history:
        if it.role == "assistant":
            if pending:
                raise UnpairedToolResultError(sorted(pending)[0], "before the next assistant message")
            prev_calls = {p.id for p in it.parts if isinstance(p, ToolCall)}
            pending = set(prev_calls)
        else:
            results = [p for p in it.parts if isinstance(p, ToolResult)]
            for r in results:
                if r.call_id not in prev_calls:
                    raise UnpairedToolResultError(r.call_id, "without a matching call")
                pending.discard(r.call_id)
            if results or it.parts:
                if pending and results:
                    raise UnpairedToolResultError(sorted(pending)[0], "in the following user message")
                prev_calls, pending = set(), set()


def _outcome(f: object, *args: object) -> str | None:
    """The call id named by the pairing error, or None when the history passes."""
    try:
        f(*args)  # type: ignore[operator]
    except UnpairedToolResultError as exc:
        return exc.call_id
    return None


_MSGS = st.one_of(
    st.builds(lambda ids: Message("assistant", tuple(ToolCall(f"c{i}", "f", "{}") for i in ids)),
              st.lists(st.integers(0, 3), max_size=2, unique=True)),
    st.builds(lambda ids, text: Message("user", tuple(ToolResult(f"c{i}", "r") for i in ids) + ((Text("t"),) if text else ())),
              st.lists(st.integers(0, 3), max_size=2, unique=True), st.booleans()),
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(seqs=st.lists(st.lists(_MSGS, max_size=12), min_size=1, max_size=6), slide=st.integers(0, 4))
def test_pairing_memoized_agrees_with_a_plain_scan(seqs: list[list[Message]], slide: int) -> None:
    """Histories that share stretches (grown, slid, spliced) pass or fail the serializer's incremental
    pairing check exactly as a plain scan of the whole history does, with the same call named."""
    ser = make_serializer("openai")
    good: list[Message] = []
    for seq in seqs:
        for hist in ((TASK, *good, *seq), (TASK, *good[slide:], *seq), (TASK, *seq, *good)):
            want = _outcome(_reference_pairing, hist)
            got = _outcome(ser.serialize, _asm(hist), (), "m", 100, Measure(CHAR))
            assert got == want, (hist, got, want)
        if _outcome(_reference_pairing, (TASK, *good, *seq)) is None:
            good = [*good, *seq]


def test_a_body_less_request_is_not_hashed_and_leaves_the_next_full_one_resumable() -> None:
    """A body-less build hashes nothing; the full request after it still resumes the hash of the
    full request before it (its memos are the same as if the body-less one was never built)."""
    ser = make_serializer("openai")
    rounds = [_round(t, 600) for t in range(12)]
    _check(ser, "openai", _asm(_hist(rounds[:10])))
    before = ser._body_hash.hashed
    _check(ser, "openai", _asm(_hist(rounds[1:11])), body=False)  # a sliding window, as gates-closed
    assert ser._body_hash.hashed == before
    grown = _check(ser, "openai", _asm(_hist(rounds[:11])))
    assert ser._body_hash.hashed - before < len(grown.body) // 4
