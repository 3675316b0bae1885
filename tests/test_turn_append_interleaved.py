"""simulate's two builds a turn through one serializer (under the what-if and with every gate closed):
each history is laid out from the recent run it extends, with the same output as a fresh serializer.

- An append-only turn uses the run it extends even when another sequence's request was built in
  between. Fails on the code before (caa33b9), which tried the append path against the section's
  newest run only: that run is the other sequence's, so every turn read every message's hash again.
- A sliding window's turn (a few new items, a stretch that ends a recent run, a few new items) takes
  the stretch from that run. Fails on the code before (16d1f50), whose general path read every hash.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import engine.providers.base as base
import engine.providers.section_runs as section_runs
from engine.artifacts import Message
from engine.assembly import Measure
from engine.providers import make_serializer
from tests.test_serializer_memo import CHAR, PROVIDERS, TASK, _asm, _check, _hist, _markers, _round


def test_interleaved_appends_read_only_the_appended_hashes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two sequences (a growing history and a compacted one that also grows) built alternately: the
    item hashes read per request stay the same at 120 messages as at 20."""
    read = [0]
    real = section_runs._SHA

    def counting(it: Any) -> str:
        read[0] += 1
        return real(it)  # type: ignore[no-any-return]

    monkeypatch.setattr(section_runs, "_SHA", counting)
    ser = make_serializer("openai")
    summary = Message("user", (base.Text("Summary of the first rounds."),))
    rounds = [_round(t) for t in range(4)]
    per_turn: list[tuple[int, int]] = []
    for t in range(4, 64):
        rounds.append(_round(t))
        read[0] = 0
        ser.serialize(_asm(_hist(rounds)), (), "m", 100, Measure(CHAR), False)
        grown = read[0]
        read[0] = 0
        compacted = (TASK, summary) + tuple(m for r in rounds[2:] for m in r)
        ser.serialize(_asm(compacted), (), "m", 100, Measure(CHAR), False)
        per_turn.append((grown, read[0]))
    assert per_turn[-1] == per_turn[10], per_turn
    assert max(per_turn[-1]) <= 4


def test_a_sliding_window_reads_only_its_new_hashes(monkeypatch: pytest.MonkeyPatch) -> None:
    """A window of the last 40 rounds behind a note that changes every turn, interleaved with the full
    history: the hashes read per window stay those of the note, the task and the new round."""
    read = [0]
    real = section_runs._SHA

    def counting(it: Any) -> str:
        read[0] += 1
        return real(it)  # type: ignore[no-any-return]

    monkeypatch.setattr(section_runs, "_SHA", counting)
    ser = make_serializer("openai")
    rounds = [_round(t) for t in range(40)]
    per_turn: list[int] = []
    for t in range(40, 100):
        rounds.append(_round(t))
        ser.serialize(_asm(_hist(rounds)), (), "m", 100, Measure(CHAR), False)
        note = Message("user", (base.Text(f"[{t - 39} earlier rounds omitted]"),))
        window = (note, TASK) + tuple(m for r in rounds[-40:] for m in r)
        read[0] = 0
        got = ser.serialize(_asm(window), (), "m", 100, Measure(CHAR), False)
        per_turn.append(read[0])
        assert (
            got.blocks
            == make_serializer("openai").serialize(_asm(window), (), "m", 100, Measure(CHAR)).blocks
        )
    assert per_turn[-1] == per_turn[5] <= 6, per_turn


@st.composite
def _turns(draw: st.DrawFn) -> list[tuple[int, int, int]]:
    """Per turn: messages appended to the session (rounds), where the compacted view starts, a marker."""
    n = draw(st.integers(2, 30))
    return [(draw(st.integers(0, 3)), draw(st.integers(0, 6)), draw(st.integers(0, 40))) for _ in range(n)]


@settings(max_examples=60, deadline=None)
@given(provider=st.sampled_from(PROVIDERS), turns=_turns(), extra=st.integers(0, 2))
def test_interleaved_append_layout_equals_a_fresh_one(
    provider: str, turns: list[tuple[int, int, int]], extra: int
) -> None:
    """simulate's pattern through one serializer: per turn the full history, a view of it from a later
    round on (its start moves now and then, as a compaction or a window does), and sometimes a third
    sequence; appends of 0-3 rounds, markers moving. Every request, built with or without its body,
    equals what a fresh serializer makes of it."""
    ser = make_serializer(provider)
    rounds = [_round(t) for t in range(2)]
    for t, (grow, start, mark) in enumerate(turns):
        rounds += [_round(100 + 10 * t + i, 1 + (mark + i) % 4) for i in range(grow)]
        full = _asm(_hist(rounds))
        _check(ser, provider, full, _markers(full, (mark,) if mark % 3 else ()), body=bool(t % 2))
        note = Message("user", (base.Text(f"note {t} {start}"),))
        view = _asm((note,) * (mark % 2) + _hist(rounds[min(start, len(rounds) - 1) :]))
        _check(ser, provider, view, _markers(view, (mark + 1,) if mark % 4 == 0 else ()), body=not t % 2)
        for x in range(extra):
            other = _asm(_hist([_round(5000 + x)] + rounds[-1:]))
            _check(ser, provider, other, body=False)
