"""docs/PACKAGES.md is the one page to find the module for any concept: every module of engine/, inspector/,
panels/ and themes/ is named there (as `name`, or as name.py), so a module added or split off without a
word there fails here. (Before this test, 158 of 324 modules were named nowhere on the page.)"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("engine", "inspector", "panels", "themes")


def _modules() -> list[Path]:
    return sorted(
        p
        for pkg in PACKAGES
        for p in (ROOT / pkg).rglob("*.py")
        if p.name != "__init__.py" and "__pycache__" not in p.parts
    )


def _named(name: str, page: str) -> bool:
    """`name` in backticks (alone or before a non-word character: `name`, `name (...)`) or name.py."""
    return (
        re.search(rf"`{re.escape(name)}(?!\w)", page) is not None
        or re.search(rf"(?<![\w.]){re.escape(name)}\.py\b", page) is not None
    )


def test_every_module_is_named_in_packages_md() -> None:
    page = (ROOT / "docs" / "PACKAGES.md").read_text()
    modules = _modules()
    assert len(modules) > 300  # (the walk found the packages)
    missing = [str(p.relative_to(ROOT)) for p in modules if not _named(p.stem, page)]
    assert not missing, (
        f"modules docs/PACKAGES.md does not name (add a phrase saying what each holds): {missing}"
    )


def test_a_name_only_inside_another_name_does_not_count() -> None:
    page = "`tap_session` (the shadow session), `live_fold`, see proxy/peer.py"
    assert _named("tap_session", page) and _named("live_fold", page) and _named("peer", page)
    assert not _named("tap", page) and not _named("session", page) and not _named("live", page)
    assert not _named("fold", page) and not _named("proxy", page)
