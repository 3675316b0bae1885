"""What the inspector says as it opens a source, each a toast over the first screen (said on stderr
before the app takes the terminal, it was seen only after `q`): a theme asked for that is not there, an
agent whose recording is not followed, a recording damaged (and how to salvage it), one not closed (its
writer still adding turns, or stopped between two: and how to follow it)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from inspector.recording_open import salvage_advice


def opening_notices(header: Mapping[str, Any], theme_warning: str | None) -> list[tuple[str, dict[str, Any]]]:
    """(message, App.notify's keyword arguments) for each. Every one that names something from outside
    (a theme, a path, an error, a reason) is plain text: as markup, `[b]` in it was styled away and `[/]`
    raised MarkupError in the toast and ended the app."""
    out: list[tuple[str, dict[str, Any]]] = []
    if theme_warning:
        out.append((theme_warning, {"severity": "warning", "markup": False}))
    unfollowed = header.get("not_followed")  # (sources.live_recording.NOT_FOLLOWED)
    if unfollowed:
        out.append(
            (str(unfollowed), {"title": "not following its recording", "severity": "warning", "timeout": 12,
                               "markup": False})
        )  # fmt: skip
    path = header.get("path")
    damage = header.get("damage")
    if damage:  # a recovered tail or a rebuilt index
        # What to do about it, as verify says it: the turns shown are whole, salvage makes a clean copy.
        advice = f"; the turns shown are whole: {salvage_advice(path)}" if path else ""
        out.append(
            (f"recording damaged: {damage}{advice}", {"severity": "warning", "timeout": 12, "markup": False})
        )
    elif header.get("not_closed"):  # (sources.file: no footer, opened without --follow)
        out.append(
            (
                f"{path} is not closed: its writer may still be adding turns (cp-inspect replay --follow "
                f"{path} shows them as they come), or stopped after the turns shown",
                {"title": "recording not closed", "timeout": 12, "markup": False},
            )
        )
    return out
