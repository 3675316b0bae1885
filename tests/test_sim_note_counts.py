"""Omission notes counted by their shape (engine/sim/note_counts.py): the same counts as the tokenizer's.

The premise (every string of one to three digits is one cl100k token) is checked whole; then notes of
many shapes, digit counts on both sides of every boundary, get from a seeded counter what a fresh counter
tokenizes; a version keyed on N's digits only is caught; another tokenizer is left alone.
"""

from __future__ import annotations

from typing import Any

from engine.artifacts import Text
from engine.assembly import omission_marker
from engine.sim.note_counts import BY_SHAPE, NoteCounts
from engine.tokens import TokenCounter, default_tokenizer

_SAVED = [
    0,
    7,
    9,
    10,
    42,
    99,
    100,
    512,
    999,
    1000,
    4096,
    9999,
    10_000,
    12_345,
    99_999,
    100_000,
    654_321,
    10**7,
]
_ROUNDS = [0, 1, 9, 10, 17, 99, 100, 250, 999, 1000, 12_000]


def _note(rounds: int, saved: int) -> Text:
    return Text(omission_marker(saved, f"{rounds} earlier rounds dropped"))


def _mismatches(notes: Any) -> list[tuple[int, int]]:
    """(rounds, saved) whose count from a counter the notes seeded differs from the tokenizer's."""
    tok = default_tokenizer()
    seeded, fresh = TokenCounter(tok), TokenCounter(tok)
    bad = []
    for saved in _SAVED:
        for rounds in _ROUNDS:
            note = _note(rounds, saved)
            notes.seed(seeded, note, rounds, saved)
            if seeded.count(note.text, note.sha) != fresh.count(note.text):
                bad.append((rounds, saved))
    return bad


def test_every_one_to_three_digit_string_is_one_token() -> None:
    tok = default_tokenizer()
    assert tok.name == BY_SHAPE
    assert all(tok.count(str(i).zfill(n)) == 1 for n in (1, 2, 3) for i in range(10**n))


def test_notes_counted_by_shape_equal_the_tokenizer_s() -> None:
    notes = NoteCounts()
    assert _mismatches(notes) == []
    assert len(notes._by_shape) < len(_SAVED) * len(_ROUNDS) // 2  # most were answered by their shape


def test_a_shape_that_leaves_out_the_rounds_is_caught() -> None:
    class Wrong(NoteCounts):
        def seed(self, counter: TokenCounter, note: Text, rounds: int, saved: int) -> None:
            super().seed(counter, note, 1, saved)  # every note as if it dropped 1 round

    assert _mismatches(Wrong()) != []


def test_another_tokenizer_is_left_alone() -> None:
    class Other:
        name = "o200k_base"

        def count(self, text: str) -> int:
            return len(text)

    counter = TokenCounter(Other())  # type: ignore[arg-type]
    notes = NoteCounts()
    for rounds in (1, 2):
        note = _note(rounds, 1000)
        notes.seed(counter, note, rounds, 1000)
        assert counter._cache == {}
