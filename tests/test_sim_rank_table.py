"""engine/sim/rank_table.py: cl100k's ranks read in place from a file derived from the bundled rank
file, used only while it matches that file as it is now; stale, damaged or unwritable means rebuilt
or not used, never a wrong rank."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from engine import bpe_ranks
from engine.sim import rank_table
from engine.sim.few_texts import FewTextsTokenizer


@pytest.fixture(scope="module")
def ranks() -> dict[bytes, int]:
    data = bpe_ranks.ranks_file_data()
    assert data is not None
    return bpe_ranks.parse_ranks(data)


def source_copy(tmp_path: Path) -> str:
    src = tmp_path / "cl100k_base.tiktoken"
    shutil.copyfile(bpe_ranks._ranks_path(), src)
    return str(src)


def test_every_rank_and_no_other_token(tmp_path: Path, ranks: dict[bytes, int]) -> None:
    table = rank_table.load_or_build(str(tmp_path / "t.ranks"), source_copy(tmp_path))
    assert table is not None
    assert all(table.rank(tok) == r for tok, r in ranks.items())
    for other in (b"", b"\x00\x00\x00\xff", b"zzqqxxjj" * 3, b" " * 300):
        assert (other in ranks) == (table.rank(other) is not None)


def wrong(ranks: dict[bytes, int]) -> dict[bytes, int]:
    """Only the tokens of one or two bytes: a table of these counts every longer word as several."""
    return {tok: r for tok, r in ranks.items() if len(tok) <= 2}


def count_with(table: rank_table.RankTable, text: str) -> int:
    class NoReal:
        name = "cl100k_base"
        _encode = None

        def count(self, t: str) -> int:
            raise AssertionError("the real tokenizer was asked")

    t = FewTextsTokenizer(NoReal(), budget=10**9)  # type: ignore[arg-type]
    t._rank_of = table.rank
    import re

    from engine.sim.few_texts import ASCII_PAT_STR

    t._split_ascii = re.compile(ASCII_PAT_STR, re.ASCII)
    return t.count(text)


TEXT = "I'll read pydicom/dataset.py: def __getattr__(self, name): return self[tag]  # 12345\n" * 3


def test_a_stale_table_is_rebuilt_not_trusted(tmp_path: Path, ranks: dict[bytes, int]) -> None:
    """A table left from the rank file as it was (another size or mtime) is not read: it is rebuilt
    from the file as it is. Here the old table holds wrong ranks, so trusting it miscounts."""
    src = source_copy(tmp_path)
    path = str(tmp_path / "t.ranks")
    expected = len(bpe_ranks.cl100k_offline().encode_ordinary(TEXT))
    stale = rank_table.write(path, src, wrong(ranks))
    assert stale is not None and count_with(stale, TEXT) != expected  # the wrong table does miscount
    st = os.stat(src)
    os.utime(src, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))  # the rank file changed since
    assert rank_table.read(path, src) is None
    table = rank_table.load_or_build(path, src)
    assert table is not None and count_with(table, TEXT) == expected
    assert rank_table.read(path, src) is not None  # rewritten for the file as it is now


@pytest.mark.parametrize("damage", ["body", "header", "truncated", "magic"])
def test_a_damaged_table_is_rebuilt(tmp_path: Path, damage: str) -> None:
    src = source_copy(tmp_path)
    path = tmp_path / "t.ranks"
    assert rank_table.load_or_build(str(path), src) is not None
    data = bytearray(path.read_bytes())
    if damage == "body":
        data[-5] ^= 0x40
    elif damage == "header":
        data[len(rank_table.MAGIC) + 6] ^= 0x01
    elif damage == "truncated":
        del data[len(data) // 2 :]
    else:
        data[0] ^= 0xFF
    path.write_bytes(bytes(data))
    assert rank_table.read(str(path), src) is None
    table = rank_table.load_or_build(str(path), src)
    assert table is not None
    assert count_with(table, TEXT) == len(bpe_ranks.cl100k_offline().encode_ordinary(TEXT))


def test_an_unwritable_place_or_a_changed_source_means_no_table(tmp_path: Path) -> None:
    src = source_copy(tmp_path)
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    assert rank_table.load_or_build(str(blocker / "t.ranks"), src) is None  # cannot be written
    assert rank_table.load_or_build(str(tmp_path / "u.ranks"), src, write_ok=False) is None
    with open(src, "ab") as f:
        f.write(b"AAAA 100256\n")  # not the bundled file any more (its sha256): nothing is built from it
    assert rank_table.load_or_build(str(tmp_path / "v.ranks"), src) is None


def test_without_a_table_simulates_count_with_the_engine_tokenizer(monkeypatch: pytest.MonkeyPatch) -> None:
    """No usable table (here: none can be written): FewTextsTokenizer hands over as before and the
    counts are the engine tokenizer's."""
    from engine.tokens import TiktokenTokenizer

    monkeypatch.setattr(rank_table, "cl100k_rank", lambda: None)
    real = TiktokenTokenizer()
    t = FewTextsTokenizer(real, budget=10**9)
    assert t.count(TEXT) == len(bpe_ranks.cl100k_offline().encode_ordinary(TEXT))
