"""A widget's bottom-border subtitle changed by repainting that one border row, not the whole widget.

Setting `Widget.border_subtitle` calls `refresh()` with no region: the widget's cached lines are all
dropped and every line of it is drawn again in the next frame. The section table (panels/manifest.py)
keeps its scale note there, and the note changes on a step as the session's calibration settles (9 of
30 steps from turn 0 of pydicom-1413): each such step re-rendered the whole table (~4.5 ms at 200x60,
~8 ms of the frame with the compositor's share), the slowest steps of a run. The subtitle is drawn on
the bottom border row alone (Textual 8.2: StylesCache.render_widget), so that row is all that changes.

Here the subtitle is stored as `Widget.border_subtitle`'s setter stores it (Textual 8.2: `_BorderTitle`),
and the row repainted through panels/repaint.py (which falls back to `refresh` of that region). When
that is not plainly equivalent (no size yet, no subtitle before or none after, a Textual without these
internals) the public setter does it.
"""

from __future__ import annotations

from textual.geometry import Region
from textual.widget import Widget

from panels.repaint import repaint

_USABLE = all(hasattr(Widget, name) for name in ("render_str", "content_offset", "outer_size"))


def set_border_subtitle(widget: Widget, text: str) -> None:
    """`widget.border_subtitle = text`, repainting only the bottom border row when it can."""
    outer = widget.outer_size
    if not (_USABLE and text and outer.height >= 2 and getattr(widget, "_border_subtitle", None) is not None):
        widget.border_subtitle = text
        return
    widget._border_subtitle = widget.render_str(text).expand_tabs(4).split()[0]  # as the setter stores it
    offset = widget.content_offset  # (repaint's regions are relative to the content, inside the border)
    repaint(widget, Region(-offset.x, outer.height - 1 - offset.y, outer.width, 1))
