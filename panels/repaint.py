"""Repaint part of a widget in the next frame without a round trip through its own message queue.

`Widget.refresh(*regions)` marks the regions dirty and posts a Prompt to the widget; the widget's task
wakes, handles the Prompt, runs its idle handler, and only that posts an Update to the screen, whose
task then adds the widget to the screen's dirty set. A step repaints a line or two in about ten
widgets (the status line, the overview panels, the manifest, the content, its scrollbar), so each step
paid ten task wake-ups and twenty messages for what is a set insertion: a sizeable part of the ~4-5 ms
a step spent in Textual's loop outside the app's code (benchmarks/BENCHMARKS.md, stepping).

`repaint` does the same bookkeeping as `refresh` followed by the widget's idle check (Textual 8.2:
Widget.refresh, Widget._check_refresh, Screen._on_update), directly: the same regions reach the
compositor through the same `update_widgets` in the same frame. Whenever that shortcut is not plainly
equivalent (the widget is not on the current screen's map, not displayed, not mounted, the screen is
not yet composed, or this Textual lacks the internals), it calls `refresh` instead.
"""

from __future__ import annotations

from textual.geometry import Region
from textual.widget import Widget

_USABLE = all(hasattr(Widget, name) for name in ("_set_dirty", "clear_cached_dimensions", "check_idle"))
_CACHES = ("_layout_cache", "_rich_style_cache", "_closing")  # set on each widget by its __init__


def repaint(widget: Widget, *regions: Region) -> None:
    """Like `widget.refresh(*regions)` (no regions: the whole widget), minus the widget's message round trip."""
    if not _fast_path(widget):
        widget.refresh(*regions)
        return
    screen = widget.screen
    # Widget.refresh's repaint branch (the widget's own caches of its size and style)...
    widget._layout_cache.clear()
    widget._set_dirty(*regions)
    widget.clear_cached_dimensions()
    widget._rich_style_cache.clear()
    # ...and what its idle check and the screen's Update handler would then do.
    screen._dirty_widgets.add(widget)
    screen.check_idle()


def _fast_path(widget: Widget) -> bool:
    if not (_USABLE and all(hasattr(widget, name) for name in _CACHES)):
        return False
    if not widget.is_mounted or not widget.display or widget._closing:
        return False
    try:
        screen = widget.screen
    except Exception:  # not in a screen (being removed): Textual's own path knows what to do
        return False
    dirty = getattr(screen, "_dirty_widgets", None)
    compositor = getattr(screen, "_compositor", None)
    # A widget not on the compositor's map (a hidden tab's, a screen not current) makes Textual map the
    # whole screen again when it is updated; `refresh` decides that as before.
    return (isinstance(dirty, set) and compositor is not None and screen.is_current
            and screen in compositor and widget in compositor.visible_widgets)
