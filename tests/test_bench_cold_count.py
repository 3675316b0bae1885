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


@needs_crate
def test_ideal_turns_rebuild_each_request_by_appending() -> None:
    """IdealTurns is a bound only if it does the work: each turn's body, made from the carried pieces and
    the changed messages alone, is the floor's encoding of that turn's request, and its resumed hash is
    that body's sha256."""
    import hashlib
    import json

    imp = load(ROOT / "tests" / "fixtures" / "synthetic" / "proxy_anthropic.jsonl")
    bodies: list[dict[str, object]] = []
    _, texts = bcc.replay_phases(imp, 32_000, None, bodies)
    ideal = bcc.IdealTurns(bodies, texts, bcc.crate()[0])
    kept: list[tuple[bytes, str]] = []
    rows = ideal.run(None, 1, kept)
    assert len(rows) == len(bodies) - 1 and len(kept) == len(bodies)
    for body, (got, digest) in zip(bodies, kept, strict=True):
        # The same request (its messages put last: the carried head is everything else).
        assert json.loads(got) == body
        assert (
            got
            == json.dumps(
                {**{k: v for k, v in body.items() if k != "messages"}, "messages": body["messages"]}
            ).encode()
        )
        # The resumed hash covers each message's encoding, in order (the carried head apart).
        whole = b"".join(json.dumps(m).encode() for m in body["messages"])  # type: ignore[union-attr]
        assert digest == hashlib.sha256(whole).hexdigest()
    # The fixture's later turns append: the last one encodes only what changed since the one before.
    assert ideal.plan[-1][2] > 0
