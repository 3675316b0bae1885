"""simulate's Blocks layout (engine/sim/block_layout.py) against the provider serializer's.

BlockLayout keeps only the Blocks of each section's recent layouts and reuses them for the shapes a
simulate meets (unchanged sections, appended histories, sliding windows). Held here on random request
sequences, interleaved as simulate interleaves its columns (a growing history, a window that slides or
jumps, a compacted view, a third sequence now and then; markers moving; a tool call left without its
result now and then): every request's Blocks (and those not of the history) are the ones a fresh
serializer lays out, Block for Block, and a request whose pairing is broken raises the error the
serializer raises. A run that is reused also hands out the same Block objects turn after turn (what the
cache simulator's identity checks rely on).
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.artifacts import Message, Text
from engine.assembly import Measure
from engine.providers import make_serializer
from engine.sim.blocks import BlockSerializer
from tests.test_serializer_memo import CHAR, PROVIDERS, TASK, _asm, _markers, _round

_SEQS = ("full", "window", "compacted", "other", "broken")


def _fresh(provider: str, asm: Any, markers: Any) -> Any:
    try:
        return make_serializer(provider).serialize(asm, markers, "m", 100, Measure(CHAR), False).blocks
    except Exception as exc:  # noqa: BLE001 - the same error either way
        return (type(exc), str(exc))


def _lean(ser: BlockSerializer, asm: Any, markers: Any, apart: bool) -> Any:
    try:
        if apart:
            blocks, others = ser.blocks_apart(asm, markers, Measure(CHAR), "history")
            assert list(others) == [b for b in blocks if b.section != "history"]
            return blocks
        return ser.blocks(asm, markers, Measure(CHAR))
    except Exception as exc:  # noqa: BLE001
        return (type(exc), str(exc))


@st.composite
def _requests(draw: st.DrawFn) -> list[tuple[str, int, int, int, bool]]:
    """Per request: which sequence, rounds appended before it, where a view starts, a marker position
    (0: none), whether to lay it out apart."""
    return draw(
        st.lists(
            st.tuples(
                st.sampled_from(_SEQS),
                st.integers(0, 3),
                st.integers(0, 12),
                st.integers(0, 40),
                st.booleans(),
            ),
            min_size=2,
            max_size=40,
        )
    )


@settings(max_examples=120, deadline=None)
@given(provider=st.sampled_from(PROVIDERS), reqs=_requests(), marked=st.booleans())
def test_the_layout_is_the_serializers(
    provider: str, reqs: list[tuple[str, int, int, int, bool]], marked: bool
) -> None:
    ser = BlockSerializer(provider)
    rounds = [_round(t) for t in range(3)]
    summary = Message("user", (Text("Summary of the first rounds."),))
    for t, (seq, grow, start, mark, apart) in enumerate(reqs):
        rounds += [_round(100 + 10 * t + i, 1 + (mark + i) % 4) for i in range(grow)]
        flat = tuple(m for r in rounds for m in r)
        if seq == "full":
            hist: tuple[Message, ...] = (TASK, *flat)
        elif seq == "window":  # a note that changes, the task, the last rounds from a moving start
            note = Message("user", (Text(f"[{start} earlier rounds omitted]"),))
            hist = (note, TASK, *flat[2 * min(start, len(rounds) - 1) :])
        elif seq == "compacted":
            hist = (TASK, summary, *flat[2 * min(start // 3, len(rounds) - 1) :])
        elif seq == "other":
            hist = (TASK, *_round(5000 + start), *flat[-2:])
        else:  # the newest round's result left out after a later call: no provider takes this
            hist = (TASK, *flat[:-1], *_round(9000 + t))
        asm = _asm(hist)
        markers = _markers(asm, (mark,) if marked and mark else ())
        want = _fresh(provider, asm, markers)
        got = _lean(ser, asm, markers, apart)
        assert got == want, (t, seq)


def test_a_growing_history_keeps_its_block_objects() -> None:
    """An appended history hands out the same Block objects for what it sent before, and reads only the
    new items (the Blocks of the old ones are not made again)."""
    ser = BlockSerializer("deepseek")
    rounds = [_round(t) for t in range(5)]
    prev: list[Any] = []
    for t in range(5, 40):
        rounds.append(_round(t))
        blocks = ser.blocks(_asm((TASK, *(m for r in rounds for m in r))), (), Measure(CHAR))
        assert all(a is b for a, b in zip(prev, blocks, strict=False))
        assert len(blocks) == len(prev) + 2 or not prev
        prev = blocks


@settings(max_examples=100, deadline=None)
@given(
    provider=st.sampled_from(PROVIDERS),
    steps=st.lists(
        st.tuples(st.integers(0, 2), st.sampled_from(["none", "pending", "close", "reclose"]), st.booleans()),
        min_size=2,
        max_size=30,
    ),
)
def test_a_history_known_to_be_the_logs_is_laid_out_as_the_serializers(
    provider: str, steps: list[tuple[int, str, bool]]
) -> None:
    """A history said to start with an append-only log's own messages (`own`, as the build pass's
    whole-conversation build says: SimBuilt.log_own) is compared with the run it extends only past what
    that run's log part was: the Blocks are still the fresh serializer's when a turn's pending message
    (after the log's) is closed into the log as itself or as another message ("reclose": a layout that
    trusted the whole earlier run hands out the pending message's Block again), with another column's
    history laid out between turns now and then."""
    ser = BlockSerializer(provider)
    log: list[Message] = [TASK]
    pending: Message | None = None
    for t, (grow, op, other) in enumerate(steps):
        for i in range(grow):
            log += _round(100 + 10 * t + i)
        if op == "pending":
            pending = Message("user", (Text(f"pending at {t}"),))
        elif op == "close" and pending is not None:
            log.append(pending)
            pending = None
        elif op == "reclose" and pending is not None:
            log.append(Message("user", (Text(f"closed at {t}"),)))
            pending = None
        hist = (*log, pending) if pending is not None else tuple(log)
        asm = _asm(hist)
        want = _fresh(provider, asm, ())
        try:
            got: Any = ser.blocks_apart(asm, (), Measure(CHAR), "history", True, (log, len(log)))[0]
        except Exception as exc:  # noqa: BLE001 - the same error either way
            got = (type(exc), str(exc))
        assert got == want, t
        if other:  # another column's history (not the log's): laid out with nothing known
            side = _asm((TASK, *log[-2:]))
            assert _lean(ser, side, (), True) == _fresh(provider, side, ())
