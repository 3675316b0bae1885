"""`cp-inspect import` of an empty (or whitespace-only) file says the file is empty, sniffed or with a
forced format; it said 'invalid JSON at line 1, column 1: Expecting value'."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.importers import ImportFormatError, load


@pytest.mark.parametrize("fmt", [None, "mini-swe-agent", "swe-agent", "openhands", "swe-smith"])
@pytest.mark.parametrize("body", ["", "\n  \n"])
def test_empty_file_is_said_to_be_empty(tmp_path: Path, fmt: str | None, body: str) -> None:
    p = tmp_path / "run.json"
    p.write_text(body)
    with pytest.raises(ImportFormatError) as info:
        load(p, fmt)
    assert "the file is empty" in str(info.value)
    assert "Expecting value" not in str(info.value)


def test_a_cut_json_file_still_names_where(tmp_path: Path) -> None:
    p = tmp_path / "run.json"
    p.write_text('{"messages": [')
    with pytest.raises(ImportFormatError) as info:
        load(p, None)
    assert "invalid JSON at line 1" in str(info.value)
