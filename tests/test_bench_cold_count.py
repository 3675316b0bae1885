"""benchmarks/bench_cold_count.py: its piece memo is offered as another way to count the engine's new
content, so it must give the crate's counts; and its phase replay must time the engine's own turns
(every text the engine's counter tokenized, in its turns, and nothing else)."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_cold_count as bcc  # noqa: E402

from engine.importers import load  # noqa: E402
from engine.tokens_cl100k import CHECKS, installed  # noqa: E402

needs_crate = pytest.mark.skipif(not installed(), reason="the bpe-openai crate is not installed")


@needs_crate
def test_piece_memo_counts_as_the_crate_does() -> None:
    count, pretokenize = bcc.crate()
    memo = bcc.piece_memo(count, pretokenize)
    rng = random.Random(44)
    alphabet = "ab Z9\n\r\t  .:'(){}_-é中\U0001f600"
    texts = [t for t, _ in CHECKS] + ["", "\n\n\n", "    x", "x  \n  y", "it's 1234567 ok?!\n"]
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 80))) for _ in range(300)]
    for text in texts * 2:  # twice: the second time the pieces come from the memo
        assert memo(text) == count(text), repr(text)
    # A wrong count for one piece shows in every text holding it (the memo is what is summed).
    broken = bcc.piece_memo(lambda p: count(p) + (p == " world"), pretokenize)
    assert broken("hello world") == count("hello world") + 1


def test_replay_phases_collects_the_engines_counts_per_turn() -> None:
    imp = load(ROOT / "tests" / "fixtures" / "synthetic" / "proxy_anthropic.jsonl")
    times, texts = bcc.replay_phases(imp, 32_000, None)
    assert len(times) == len(texts) == len(imp.calls)
    assert all(len(row) == len(bcc.PHASES) and min(row) >= 0 for row in times)
    counted = [t for turn in texts for t in turn]
    assert counted and all(isinstance(t, str) and t for t in counted)
    # Turn 0 tokenizes the system prompt and the first user message (at least those).
    assert any(m.content in texts[0] for m in imp.calls[0].messages if m.role == "system")
