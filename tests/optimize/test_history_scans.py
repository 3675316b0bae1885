"""Carried history scans (engine/optimize/history_scans.py) against the full scans they replace.

Wave 1 hands trim_schemas and clear_tool_results the whole raw history every turn; each carries what it
scanned from the last turn's history and reads only the appended messages. Differential: over random
sessions (appends, equal copies, rewrites inside the history, cuts, switches to another history and
back, two interleaved columns on one Measure) every carried answer equals the full scan, and the rules'
outcomes equal those on a fresh Measure (no memo at all).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.artifacts import Message, SpillReference, Text, ToolCall, ToolResult
from engine.assembly import Measure
from engine.history_rounds import history_rounds
from engine.optimize import OptimizeLimits, clear_results, trim_schemas
from engine.optimize.history_scans import called_names, carried_names, carried_results, full_results
from engine.tokens import CharTokenizer, TokenCounter
from engine.types import Tier
from tests.optimize.fixtures import ctx, history, identity, rounds, tools

NAMES = ("bash", "edit", "grep", "view")


def _measure() -> Measure:
    m = Measure(TokenCounter(CharTokenizer()))
    m.prefix_min = 1  # follow remembered prefixes at every length (the long-session path)
    return m


@st.composite
def _round(draw: Any, k: int) -> tuple[Message, ...]:
    """An assistant message with 0-2 calls, then a user message with their results (full, cleared or
    spilled, some tiny, some large) and sometimes a plain user aside."""
    names = draw(st.lists(st.sampled_from(NAMES), max_size=2))
    calls = tuple(ToolCall(f"c{k}.{i}", n, "{}") for i, n in enumerate(names))
    out: list[Message] = [Message("assistant", (Text(f"step {k}"),) + calls)]
    if calls:
        parts: list[Any] = []
        for c in calls:
            form = draw(st.sampled_from(("full", "full", "cleared", "spilled")))
            size = draw(st.sampled_from((10, 300, 1200)))
            parts.append(ToolResult(c.id, "x" * size, False, form))
        if draw(st.booleans()):
            parts.append(Text("an aside"))
        out.append(Message("user", tuple(parts)))
    elif draw(st.booleans()):
        out.append(Message("user", (Text("go on"),)))
    return tuple(out)


# One step of a session: append rounds, hand over an equal copy, rewrite a message inside, cut the
# oldest rounds (a compaction), or switch to the other column's history.
_OPS = st.sampled_from(("append", "append", "append", "copy", "rewrite", "cut", "switch"))


@settings(max_examples=60)
@given(st.data())
def test_carried_scans_equal_the_full_scans(data: Any) -> None:
    m = _measure()
    task = Message("user", (Text("Fix the failing test."),))
    cols: list[tuple[Any, ...]] = [(task,), (task, Message("assistant", (ToolCall("z", "other", "{}"),)))]
    col = 0
    k = 0
    for _ in range(data.draw(st.integers(4, 30))):
        op = data.draw(_OPS)
        items = cols[col]
        if op == "append":
            for _ in range(data.draw(st.integers(1, 3))):
                items = items + data.draw(_round(k))
                k += 1
        elif op == "copy":
            items = tuple(replace(i, sha="") for i in items)  # equal messages, new objects
        elif op == "rewrite" and len(items) > 1:
            i = data.draw(st.integers(1, len(items) - 1))
            msg = items[i]
            parts = tuple(
                ToolResult(p.call_id, "cleared", p.is_error, "cleared")
                if isinstance(p, ToolResult)
                else ToolCall(p.id, "renamed", p.arguments)
                if isinstance(p, ToolCall)
                else p
                for p in msg.parts
            )
            items = items[:i] + (Message(msg.role, parts),) + items[i + 1 :]
        elif op == "cut" and len(items) > 2:
            cut = data.draw(st.integers(1, len(items) - 1))
            items = items[:1] + items[cut:]
        elif op == "switch":
            cols[col] = items
            col = 1 - col
            items = cols[col]
        cols[col] = items
        assert carried_names(m, items) == called_names(items)
        positions, n = carried_results(m, items)
        assert tuple(positions[:n]) == full_results(items)
        assert full_results(items) == tuple(
            (i, j)
            for i, it in enumerate(items)
            for j, p in enumerate(it.parts)
            if isinstance(p, ToolResult) and p.form == "full"
        )


def _outcome(out: Any) -> tuple[Any, ...]:
    return (out.asm, out.changed, out.detail, out.tokens_saved, out.reason_not_applied)


@settings(max_examples=40)
@given(st.data())
def test_rules_on_a_carrying_measure_equal_a_fresh_one(data: Any) -> None:
    """trim_schemas and clear_tool_results turn by turn on one Measure (carrying) give what they give
    on a new Measure each turn; the cleared history's remembered total and rounds are the summed ones."""
    m = _measure()
    limits = OptimizeLimits(
        keep_recent_results=data.draw(st.integers(0, 4)),
        max_clear_tokens=data.draw(st.sampled_from((200, 60_000))),
    )
    items: tuple[Any, ...] = (Message("user", (Text("Fix the failing test."),)),)
    k = 0
    for _ in range(data.draw(st.integers(2, 14))):
        if data.draw(st.integers(0, 5)) == 0 and len(items) > 3:
            items = items[:1] + items[data.draw(st.integers(2, len(items) - 1)) :]  # a compaction
        for _ in range(data.draw(st.integers(1, 3))):
            items = items + data.draw(_round(k))
            k += 1
        asm = (identity(), tools(*NAMES), history(items))
        for rule, tier in ((trim_schemas, Tier.TRIM_SCHEMAS), (clear_results, Tier.COMPACT_HISTORY)):
            carried = ctx(asm, tier, limits=limits)
            carried.measure = m
            fresh = ctx(asm, tier, limits=limits)
            fresh.measure = _measure()
            got = rule.apply(asm, carried)
            assert _outcome(got) == _outcome(rule.apply(asm, fresh))
            if rule is clear_results and got.changed:
                new = got.asm[-1]
                assert m.section(new) == _measure().section(new)
                assert m.rounds(new.items) == history_rounds(new.items)
                for limit in (50, 200, 10_000):  # the first result over the limit, searched afresh
                    assert m.first_over(new.items, limit) == _measure().first_over(new.items, limit)
        assert trim_schemas.carried_used(asm, carried) == trim_schemas.used_tool_names(asm)


class _CountedParts(tuple):  # type: ignore[type-arg]
    """A message's parts that count how often they are walked (iterated)."""

    walks = 0

    def __iter__(self) -> Any:
        _CountedParts.walks += 1
        return super().__iter__()


def _counted_round(k: int) -> tuple[Message, Message]:
    a = Message("assistant", _CountedParts((Text(f"step {k}"), ToolCall(f"c{k}", "bash", "{}"))))
    u = Message("user", _CountedParts((ToolResult(f"c{k}", "small"),)))  # under MIN_WORTH_CLEARING
    return a, u


def test_a_turn_reads_only_the_appended_messages() -> None:
    """30 turns on a 1,601-message history, two messages appended a turn: each rule walks the new
    messages' parts, not the whole history's (before: every message's parts, every turn)."""
    m = _measure()
    items: tuple[Any, ...] = (Message("user", (Text("Fix the failing test."),)),)
    for k in range(800):
        items += _counted_round(k)
    walks: dict[str, int] = {}
    for rule, tier in ((trim_schemas, Tier.TRIM_SCHEMAS), (clear_results, Tier.COMPACT_HISTORY)):
        turn_items = items
        asm = (identity(), tools("bash", "edit"), history(turn_items))
        c = ctx(asm, tier)
        c.measure = m
        rule.apply(asm, c)  # the first turn scans everything
        _CountedParts.walks = 0
        for t in range(30):
            turn_items = turn_items + _counted_round(800 + t)
            asm = (identity(), tools("bash", "edit"), history(turn_items))
            c = ctx(asm, tier)
            c.measure = m
            out = rule.apply(asm, c)
            if rule is trim_schemas:
                assert out.changed and "edit" in out.detail
        walks[rule.NAME] = _CountedParts.walks
    # 60 new messages in 30 turns (the carried scans walk each once; counting them walks them again).
    assert walks[trim_schemas.NAME] <= 4 * 60, walks
    assert walks[clear_results.NAME] <= 4 * 60, walks


def test_measure_items_reads_counts_of_any_items() -> None:
    """Measure.items: messages counted before are summed from their remembered counts; anything else
    (a message not counted yet, a spill reference, a system text) is counted as item() counts it."""
    m = _measure()
    msgs = [Message("user", (Text("a" * n),)) for n in (4, 40, 400)]
    mixed: list[Any] = [*msgs, Text("system text"), SpillReference("k", "spill://k", 1000, "preview")]
    expected = sum(m.item(i) for i in mixed)
    assert m.items(mixed) == expected
    assert m.items(iter(mixed)) == expected
    assert m.items(tuple(msgs)) == sum(m.item(i) for i in msgs)
    m.forget(msgs[:1])  # no longer remembered: counted again
    assert m.items(msgs) == sum(_measure().item(i) for i in msgs)


def test_measure_cumulative_reads_counts_of_any_items() -> None:
    """Measure.cumulative from scratch: remembered message counts read in C, anything else counted."""
    msgs = tuple(Message("user", (Text("a" * n),)) for n in (4, 40, 400))
    for items in (msgs, msgs[:2] + (Text("system text"),), ()):
        m = _measure()
        want = [sum(_measure().item(i) for i in items[:k]) for k in range(len(items) + 1)]
        assert m.cumulative(items) == want  # nothing counted yet
        m2 = _measure()
        m2.items(items)
        assert m2.cumulative(items) == want  # every count remembered


def test_the_same_results_are_cleared_from_remembered_forms(monkeypatch: Any) -> None:
    """Wave 1 clears the same oldest results from the raw history every turn: the placeholders of 20
    turns are made for the results cleared the first time and the few cleared later, not every turn."""
    made = [0]
    real = clear_results.placeholder

    def counted(r: ToolResult, tokens: int) -> ToolResult:
        made[0] += 1
        return real(r, tokens)

    monkeypatch.setattr(clear_results, "placeholder", counted)
    m = _measure()
    items: tuple[Any, ...] = (Message("user", (Text("Fix the failing test."),)),)
    for k in range(100):
        items += (
            Message("assistant", (ToolCall(f"c{k}", "bash", "{}"),)),
            Message("user", (ToolResult(f"c{k}", "r" * 800),)),
        )
    limits = OptimizeLimits(max_clear_tokens=2_000)  # about ten results a turn
    cleared = 0
    for t in range(20):
        items += (
            Message("assistant", (ToolCall(f"n{t}", "bash", "{}"),)),
            Message("user", (ToolResult(f"n{t}", "r" * 800),)),
        )
        asm = (identity(), history(items))
        c = ctx(asm, Tier.COMPACT_HISTORY, limits=limits)
        c.measure = m
        out = clear_results.apply(asm, c)
        assert out.changed
        cleared += sum(
            p.form == "cleared"
            for x in out.asm[-1].items
            if isinstance(x, Message)
            for p in x.parts
            if isinstance(p, ToolResult)
        )
    assert cleared >= 20 * 9
    assert made[0] <= 12, made[0]


def test_a_cleared_history_is_searched_from_where_the_raw_one_was(monkeypatch: Any) -> None:
    """spill_large looks for the first result over its threshold in the history clear_tool_results left
    (a new tuple every wave-1 turn): with none in the raw history, none is looked for message by
    message (it read every message of the cleared history, every turn)."""
    m = _measure()
    looked = [0]
    real = Measure.largest_result

    def counted(self: Measure, msg: Message) -> int:
        looked[0] += 1
        return real(self, msg)

    monkeypatch.setattr(Measure, "largest_result", counted)
    items: tuple[Any, ...] = (Message("user", (Text("Fix the failing test."),)),)
    for k in range(300):
        items += (
            Message("assistant", (ToolCall(f"c{k}", "bash", "{}"),)),
            Message("user", (ToolResult(f"c{k}", "r" * 800),)),
        )
    limits = OptimizeLimits(max_clear_tokens=2_000)
    for t in range(10):
        items += (
            Message("assistant", (ToolCall(f"n{t}", "bash", "{}"),)),
            Message("user", (ToolResult(f"n{t}", "r" * 800),)),
        )
        m.first_over(items, 10_000)  # the raw history, as a turn searches it (carried)
        asm = (identity(), history(items))
        c = ctx(asm, Tier.COMPACT_HISTORY, limits=limits)
        c.measure = m
        out = clear_results.apply(asm, c)
        assert out.changed
        if t == 0:
            looked[0] = 0
        assert m.first_over(out.asm[-1].items, 10_000) == len(items)
    assert looked[0] <= 9 * 4, looked[0]


class _CountingMeasure(Measure):
    """A Measure that counts the items it is asked to sum."""

    summed = 0

    def items(self, items: Any) -> int:
        seq = tuple(items)
        _CountingMeasure.summed += len(seq)
        return super().items(seq)


def test_dropping_most_rounds_sums_what_stays() -> None:
    """drop_rounds at high pressure drops 3/4 of the rounds of the whole history (wave 1, every turn):
    the tokens dropped are the section's total less what stays, the shorter sum, and equal the sum of
    what goes (it summed the dropped range: 300 of 401 messages)."""
    from engine.optimize import drop_rounds
    from tests.optimize.fixtures import rounds

    for n in (12, 200):
        msgs = rounds(n)
        asm = (identity(), history(msgs))
        c = ctx(asm, Tier.AGGRESSIVE_PRUNE, pressure=1.5)
        c.measure = m = _CountingMeasure(TokenCounter(CharTokenizer()))
        m.section(asm[-1])
        _CountingMeasure.summed = 0
        out = drop_rounds.apply(asm, c)
        assert out.changed
        kept = out.asm[-1].items
        reference = _measure()
        gone = reference.items(msgs[1 : len(msgs) - len(kept) + 1])
        note = reference.item(kept[0]) - reference.item(msgs[0])
        assert out.tokens_saved == gone - note
        assert m.section(out.asm[-1]) == reference.section(out.asm[-1])
        assert _CountingMeasure.summed <= len(msgs) // 2 + 2, (n, _CountingMeasure.summed)


def test_two_histories_grown_from_one_keep_their_own_positions() -> None:
    # One list of positions per lineage, extended in place: a second history grown from the same one
    # (another column's, or last turn's again) must not read the first one's appended positions.
    m = Measure(TokenCounter(CharTokenizer()))
    m.prefix_min = 1
    base = rounds(4)
    a = base + rounds(2, tool="grep")[1:]
    b = base + (Message("user", (Text("no result here"),)),)
    seen = [(x, carried_results(m, x)) for x in (base, a, b, a, base)]
    for items, (positions, n) in seen:
        assert tuple(positions[:n]) == full_results(items)
