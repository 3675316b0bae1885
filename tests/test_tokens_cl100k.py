"""The engine's cl100k_base counter: bpe-openai's Rust crate when installed, with tiktoken's counts exactly.

The engine keys every cached count by (tokenizer name, content hash) and recordings store counts under
the name, so the faster backend keeps the name "cl100k_base" only because its counts are the same:
these tests hold them equal to tiktoken's `encode_ordinary` over real trajectories, the benchmark's
synthetic outputs, adversarial text, and text that is not valid Unicode.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import tokens_cl100k
from engine.bpe_ranks import cl100k_offline
from engine.tokens import TiktokenTokenizer

rust = tokens_cl100k.rust_counter()
needs_rust = pytest.mark.skipif(rust is None, reason="bpe-openai is not installed (pip install bpe-openai)")


def tiktoken_count(text: str) -> int:
    return len(cl100k_offline().encode_ordinary(text))


@needs_rust
def test_the_engine_counts_with_the_crate_when_it_is_installed() -> None:
    tk = TiktokenTokenizer()
    assert tk.count("hello world") == 2
    assert tk.backend == "bpe-openai"
    assert tk.name == "cl100k_base"  # cached counts and recordings' count tables stay valid


def test_without_the_crate_the_engine_counts_with_tiktoken(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tokens_cl100k, "_compiled_module", lambda: None)
    tk = TiktokenTokenizer()
    text = "I'LL they're 12345 x.\n\n  def f():\n\treturn 0  \n"
    assert tk.count(text) == tiktoken_count(text) == 18
    assert tk.backend == "tiktoken"


def test_a_backend_that_disagrees_with_a_known_count_is_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    class Wrong:
        @staticmethod
        def tokenizer_for_encoding(name: str) -> object:
            class T:
                @staticmethod
                def count(text: str) -> int:
                    return len(text) // 4  # roughly right, and wrong

            return T()

    monkeypatch.setattr(tokens_cl100k, "_compiled_module", lambda: Wrong)
    assert tokens_cl100k.rust_counter() is None
    tk = TiktokenTokenizer()
    assert tk.count("naïve café") == tiktoken_count("naïve café")
    assert tk.backend == "tiktoken"


def test_a_backend_that_fails_to_load_is_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom() -> object:
        raise ImportError("an incompatible build")

    monkeypatch.setattr(tokens_cl100k, "_compiled_module", boom)
    assert tokens_cl100k.rust_counter() is None


@needs_rust
def test_text_that_is_not_valid_unicode_is_counted_as_tiktoken_counts_it() -> None:
    tk = TiktokenTokenizer()
    for text in ("\ud800", "a\udfffb", "ok \ud83d then"):
        with pytest.raises(UnicodeEncodeError):
            assert rust is not None
            rust(text)  # the crate refuses it ...
        assert tk.count(text) == tiktoken_count(text)  # ... the engine falls back


@needs_rust
def test_equal_counts_over_the_shared_trajectories(trajectories_dir: Path) -> None:
    from engine.importers import load
    from tests.conftest import trajectory_files

    texts: list[str] = []
    for f in trajectory_files():
        try:
            imp = load(f)
        except Exception:  # a file no importer reads is another test's business
            continue
        for call in imp.calls[-1:]:
            for m in call.messages:
                texts.append(m.content or "")
                texts.extend(c.name + " " + c.arguments for c in m.tool_calls)
    assert sum(map(len, texts)) > 500_000  # the comparison covers a real amount of text
    assert rust is not None
    assert [rust(t) for t in texts] == [tiktoken_count(t) for t in texts]


@needs_rust
def test_equal_counts_on_the_benchmark_sessions_outputs() -> None:
    import random

    for t in range(200):
        rnd = random.Random(t)
        text = "".join(
            f"line {t}.{i}: {rnd.random():.6f} value = compute(x_{i}, y_{t})\n"
            for i in range(rnd.choice((5, 60)))
        )
        assert rust is not None and rust(text) == tiktoken_count(text)


# The split pattern's edge cases: whitespace runs before text, at the end and around newlines,
# contractions in any case, digit runs, punctuation, combining marks, and characters outside the BMP.
PIECES = [
    " ", "  ", "\t", "\n", "\r", "\r\n", "\u00a0", "\u3000", "\u2028", "\x0b", "\x0c", "\x85", "\x00",
    "a", "Z", "é", "ß", "ǅ", "İ", "ſ", "K", "ﬁ", "1", "23", "456", "٣", "Ⅻ", "𝟘", "'", "'s", "'LL", "'Ve",
    "'d", ".", ",", "!?", "$", "{}", "\U0001f600", "中文", "ا", "\u200b", "\u0301", "x\u0301", "\ufeff",
    "-", "_", "def ", "    return", "\n\n\n", " \n ", "\t\n",
]  # fmt: skip


@needs_rust
@settings(max_examples=400)
@given(
    text=st.lists(st.sampled_from(PIECES), max_size=40).map("".join)
    | st.text(st.characters(blacklist_categories=["Cs"]), max_size=200)
)
def test_equal_counts_on_adversarial_text(text: str) -> None:
    assert rust is not None
    assert rust(text) == tiktoken_count(text)
