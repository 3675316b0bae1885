"""A live session whose agent exited before the traces it had only summarized were fetched says which
turns it lacks, in words that read right for one turn ("1 turns' traces were not received" before)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from engine.probe.client import ProbeError
from tests.support.probe_agent import T, run_turns, serving_pipeline
from tests.test_probe_lean import _followed_burst


@pytest.mark.parametrize("left", [1, 3])
def test_a_save_after_the_agent_exited_counts_the_turns_it_lacks(
    monkeypatch: pytest.MonkeyPatch, rtdir: Path, left: int
) -> None:
    pipe = serving_pipeline(monkeypatch, rtdir)
    try:
        run_turns(pipe, range(2))
        src, _ = _followed_burst(pipe, range(2, 6), elide=False)
        assert sorted(src._missing) == [2, 3, 4]  # the newest came whole
        if left == 1:
            src.full_trace(3)  # fetches 3 and the summarized one before it
            assert sorted(src._missing) == [4]
    finally:
        pipe.close()
    # What the agent sent as it closed (the traces it was asked for among them) is read off the socket
    # and dropped: the source is left as by an agent killed before it sent them.
    while src.client.recv(T) is not None:
        pass
    deadline = time.monotonic() + T
    while not src.client.disconnected:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    with pytest.raises(ProbeError) as exc:
        src._load_events()
    said = str(exc.value)
    if left == 1:
        assert said.startswith(
            "turn 4's trace was not received from the agent: it sent its summary while busy "
            "and exited before it was fetched"
        ), said
    else:
        assert said.startswith(
            "3 turns' traces were not received from the agent (e.g. turn 2): it sent their "
            "summaries while busy and exited before they were fetched"
        ), said


@pytest.mark.parametrize("left", [1, 3])
def test_a_save_after_the_agent_exited_counts_the_journal_events_it_lacks(
    monkeypatch: pytest.MonkeyPatch, rtdir: Path, left: int
) -> None:
    """The elided stream's journal fetched up to `left` events short of the end the agent told, then the
    agent gone with the rest unread: a save says how many, in words that read right for one ("1 events
    of the agent's journal were not received" before)."""
    from tests.test_probe_lean import _live

    pipe = serving_pipeline(monkeypatch, rtdir)
    try:
        run_turns(pipe, range(1))
        src = _live(pipe)
        run_turns(pipe, range(1, 4))  # (streamed without the kinds the elided stream leaves out)
        n = len(pipe.journal.events)
        src._fetch_journal(n - left)  # a range answer: the journal's length, and all but `left` of it
        assert src._jpos == n - left and src._journal_size == n
    finally:
        pipe.close()
    while src.client.recv(T) is not None:  # what the agent flushed as it closed, dropped unread
        pass
    deadline = time.monotonic() + T
    while not src.client.disconnected:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    with pytest.raises(ProbeError) as exc:
        src._load_events()
    said = str(exc.value)
    if left == 1:
        assert said.startswith(
            "1 event of the agent's journal was not received (it exited before it was fetched)"
        ), said
    else:
        assert said.startswith(
            "3 events of the agent's journal were not received (it exited before they were fetched)"
        ), said
