"""newest_round_start (threshold_compaction's cut at a compaction) is the last of round_starts past the
column's cut, read from the newest message back instead of splitting the whole conversation."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.artifacts import Message, Text
from engine.sim.policies.base import newest_round_start, round_starts


@settings(max_examples=300, deadline=None)
@given(
    roles=st.lists(st.sampled_from(("user", "assistant", "system")), max_size=30), after=st.integers(-2, 32)
)
def test_the_newest_round_start_is_round_starts_last(roles: list[str], after: int) -> None:
    messages = tuple(Message(r, (Text(f"m{k}"),)) for k, r in enumerate(roles))
    starts = [s for s in round_starts(messages) if s > after]
    assert newest_round_start(messages, after) == (starts[-1] if starts else None)


def test_an_assistant_message_first_starts_no_round_past_it() -> None:
    messages = (Message("assistant", (Text("a"),)), Message("user", (Text("u"),)))
    assert newest_round_start(messages, -1) is None and round_starts(messages) == []
