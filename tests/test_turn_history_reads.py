"""The turn's reads of the newest messages (HistoryLog.since, newest, starts_round, task_and_window) answer
what the Sequence reads they replace answer (history[i:], history[-1], the round check and
history[:te] + history[cut:] of Pipeline._assemble_from), with the task and old messages on disk or not;
and a steady turn of a compacted session makes fewer Python-level reads of the log (counting: on 5404302
its len() and item reads were 12 a turn, now 1)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.recording.history_log import HistoryLog
from tests.test_history_window import _msg
from tests.test_trace_lazy import _start, _turns
from tests.test_turn_lineage import _pipe


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 6), st.integers(0, 40)), max_size=40),
    st.integers(1, 6),
    st.integers(0, 3),
    st.lists(st.tuples(st.integers(-1, 50), st.integers(-1, 50)), min_size=1, max_size=12),
)
def test_the_turn_reads_answer_like_the_sequence_reads(
    ops: list[tuple[int, int]], chunk: int, lo: int, probes: list[tuple[int, int]]
) -> None:
    log, model = HistoryLog(chunk), []
    for n, upto in ops:
        for _ in range(n):
            model.append(_msg(len(model)))
            log.append(model[-1])
        log.release(lo, upto)
        assert log.newest() == (model[-1] if model else None)
        for te, cut in probes:
            if cut >= 0:
                assert log.since(cut) == model[cut:]
            te = max(te, 0)
            starts = te < cut < len(model) and model[cut].role == "assistant"
            assert log.starts_round(te, cut) is starts
            window = log.task_and_window(te, cut)
            assert window == (model[:te] + model[cut:] if starts else None)
            assert window is None or type(window) is list


def _count_log_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    n = [0]
    for name in ("__len__", "__getitem__"):
        real = getattr(HistoryLog, name)

        def counted(self: HistoryLog, *a: Any, _real: Any = real) -> Any:
            n[0] += 1
            return _real(self, *a)

        monkeypatch.setattr(HistoryLog, name, counted)
    return n


def test_a_compacted_steady_turn_reads_the_log_a_few_times(monkeypatch: pytest.MonkeyPatch) -> None:
    p = _pipe(4_001, "cost_aware", False, True)
    _start(p)
    _turns(p, 40)
    assert p.compaction.cut > 0  # compacted: the turn assembles the task and the window from the cut
    reads = _count_log_reads(monkeypatch)
    _turns(p, 10, start=40)
    assert reads[0] <= 2 * 10, reads[0]
    p.close()
