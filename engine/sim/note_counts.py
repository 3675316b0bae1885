"""The omission note's token count by its shape (simulate's gates-closed builds whose dropped rounds moved).

Such a build puts a new note on the task, "[...N tokens omitted (K earlier rounds dropped)...]"
(engine.assembly.omission_marker; history_ops.drop_range), and counting it went the whole way through
the token counter each time: the recording's table, the short-text memo, the tokenizer (~20 us a note,
405 notes on the 930-turn synthetic session). Under cl100k_base the count depends only on how many
digits N and K have: the tokenizer's pre-split puts each run of up to three digits in a piece of its own,
apart from the punctuation and words around it (engine.bpe_ranks.PAT_STR: `\\p{N}{1,3}`; pieces are
merged apart), and every string of one to three digits is a single cl100k token. So a note is counted
once per shape, the usual way, and a later note of that shape gets that count put in the counter's
cache under its own hash: what counting it would have cached. Other tokenizers: counted the usual way.
tests/test_sim_note_counts.py holds the shapes' counts equal to the tokenizer's.
"""

from __future__ import annotations

from engine.artifacts import Text
from engine.tokens import TokenCounter

# The tokenizer whose digit runs are one token per three digits (checked for every 1-3 digit string).
BY_SHAPE = "cl100k_base"


class NoteCounts:
    """Counts of omission notes by (tokenizer, digits of N, digits of K)."""

    def __init__(self) -> None:
        self._by_shape: dict[tuple[str, int, int], int] = {}

    def seed(self, counter: TokenCounter, note: Text, rounds: int, saved: int) -> None:
        """Make `counter` know the count of `note` (omission_marker(saved, f"{rounds} earlier rounds
        dropped")): from its shape when one was counted before, else by counting it."""
        name = counter.tokenizer.name
        if name != BY_SHAPE or rounds < 0 or saved < 0:
            return  # counted where it is read, as always
        shape = (name, len(str(saved)), len(str(rounds)))
        n = self._by_shape.get(shape)
        if n is None:
            self._by_shape[shape] = counter.count(note.text, note.sha)
            return
        counter._cache.setdefault((name, note.sha), n)
