"""An append-only turn at a provider with cache breakpoints (Anthropic, Bedrock), where the tail marker
moves to the newest message every turn: the serializer reuses the history's run up to the first item
whose marking changed and writes the few after it (providers/base.py `_appended`), with the bytes,
blocks and hashes a fresh serializer makes."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import engine.providers.section_runs as section_runs
from engine.pipeline import Pipeline
from engine.providers import make_serializer
from engine.tokens import CharTokenizer, TokenCounter
from tests.test_serializer_memo import _asm, _check, _hist, _markers, _round
from tests.turn_session import tool_round


@pytest.mark.parametrize("provider", ["anthropic", "bedrock"])
def test_a_marked_append_only_turn_reads_the_hashes_of_what_was_appended(
    provider: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Item hashes the serializer reads in one turn of a growing session with breakpoints: the same at
    160 messages as at 20. Fails on 36f00d9 (the general path read every message's hash again each
    turn, the marker on the tail having moved: +1 a message)."""
    read = [0]
    real = section_runs._SHA

    def counting(it: Any) -> str:
        read[0] += 1
        return real(it)  # type: ignore[no-any-return]

    monkeypatch.setattr(section_runs, "_SHA", counting)
    pipe = Pipeline("claude-sonnet-4", provider, 400_000, counter=TokenCounter(CharTokenizer()), serve=False,
                    clock=lambda: 0.0)  # fmt: skip
    pipe.identity("You are careful. " * 200)  # over the minimum cacheable prefix: breakpoints are placed
    pipe.user("fix the bug " * 50)
    per_turn: dict[int, int] = {}
    for t in range(80):
        tool_round(pipe, t, f"output {t}\n" * 20)
        read[0] = 0
        req = pipe.next_request()
        per_turn[t] = read[0]
        pipe.record_usage({"input_tokens": 10, "output_tokens": 5})
    assert req.trace["compaction"]["cut"] == 0  # never compacted: every turn appended
    assert any(mk["section"] == "history" for mk in req.trace["markers"])  # the tail breakpoint
    assert per_turn[79] == per_turn[10] <= 4, per_turn


@st.composite
def _programs(draw: st.DrawFn) -> list[tuple[str, int]]:
    ops = st.sampled_from(["append", "append", "append", "append2", "compact", "tail", "fixed", "none"])
    return draw(st.lists(st.tuples(ops, st.integers(0, 10_000)), min_size=3, max_size=30))


@settings(max_examples=80, deadline=None)
@given(provider=st.sampled_from(["anthropic", "bedrock", "openai"]), program=_programs(), task_mark=st.booleans())
def test_marked_appends_equal_a_fresh_serializer(provider: str, program: list[tuple[str, int]], task_mark: bool) -> None:
    """A growing history whose markers follow the tail (as the markers rule places them), stay put, or
    vanish, with appends of one or two rounds and compactions between: every request is what a fresh
    serializer makes."""
    ser = make_serializer(provider)
    rounds = [_round(t) for t in range(2)]
    mode = "tail"
    for op, arg in program:
        if op == "append":
            rounds.append(_round(len(rounds) + 100 * (arg % 3), 1 + arg % 9))
        elif op == "append2":
            rounds += [_round(len(rounds) + 7000), _round(len(rounds) + 8000, 2)]
        elif op == "compact" and len(rounds) > 2:
            del rounds[: 1 + arg % (len(rounds) - 1)]
        else:
            mode = op if op in ("tail", "fixed", "none") else mode
        asm = _asm(_hist(rounds))
        at: tuple[int, ...] = {"tail": (-1,), "fixed": (arg % 9,), "none": ()}[mode]
        if task_mark:
            at += (0,)
        _check(ser, provider, asm, _markers(asm, at))
