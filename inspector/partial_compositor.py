"""The main screen's compositor: a partial update renders only the widgets and rows that changed.

Textual's partial update (Compositor.render_partial_update, Textual 8.2) crops to the bounding box
of every dirty region and asks each widget inside that box for all of its rows, then cuts every
row that holds a dirty span. A step dirties the status line at the top and the manifest or content
at the bottom, so the box is the whole screen: every widget (footer, tabs, containers, scrollbars)
was rendered and every changed row cut across all of them, about half of a step's UI time.

Here the update is the same ChopsUpdate (same spans, and the same text written in them), but only
the chops ChopsUpdate writes text from are rendered: for each row, the cut-to-cut pieces that overlap
a span on it, each from the frontmost widget covering it (visible_widgets is in front-to-back order).
A widget is rendered only for the rows where such a piece is still wanted, so the containers behind a
widget (screen, Horizontal, tabs, panes) are not rendered for the rows it covers, and a widget beside
the dirty spans is not rendered at all. That is exact: ChopsUpdate writes only inside the spans, from
the piece of each cut it is given; a piece it is not given (None) it skips, and a piece outside every
span on its row it would have skipped too (bar a cursor move with no text after it). A full update
(layout, resize, a dirty screen) is Textual's own. tests/tui/test_partial_compositor.py replays every
partial update onto the previous frame and compares it with a full render of the screen.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import cast

from textual import events
from textual._compositor import ChopsUpdate, Compositor
from textual.geometry import Region
from textual.screen import Screen
from textual.strip import Strip


class DirtyRowsCompositor(Compositor):
    # This leans on Textual internals (8.2): if a Textual without them is installed, or the override
    # fails once, the screen falls back to Textual's own partial update for good: slower, never wrong.
    _usable = all(hasattr(Compositor, name) for name in ("_regions_to_spans", "cuts", "visible_widgets"))

    def render_partial_update(self) -> ChopsUpdate | None:
        if not self._usable:
            return super().render_partial_update()
        update_regions: set[Region] = set()
        try:
            update_regions = self._dirty_regions.copy()
            return self._render_partial(update_regions)
        except Exception:
            self._usable = False
            if update_regions:  # what the failed pass took, so Textual's own pass draws it
                self._dirty_regions.update(update_regions)
            return super().render_partial_update()

    def _render_partial(self, update_regions: set[Region]) -> ChopsUpdate | None:
        self._dirty_regions.clear()
        if not update_regions:
            return None
        screen = self.size.region
        spans = [span for span in self._regions_to_spans(update_regions) if 0 <= span[0] < screen.height]
        if not spans:
            return None
        chops = self._render_dirty_rows(spans)
        chop_ends = [cut_set[1:] for cut_set in self.cuts]
        return ChopsUpdate(chops, spans, chop_ends)

    def _render_dirty_rows(self, spans: list[tuple[int, int, int]]) -> Sequence[dict[int, Strip | None]]:
        cuts = self.cuts
        fromkeys = cast("Callable[[list[int]], dict[int, Strip | None]]", dict.fromkeys)
        chops = [fromkeys(cut_set[:-1]) for cut_set in cuts]
        # The chops ChopsUpdate writes text from, per row: those overlapping a span (x2 is exclusive: a
        # chop starting at x2 gives a cursor move and no text). Only these are rendered; the others stay
        # None, which ChopsUpdate skips.
        wanted: dict[int, set[int]] = {}
        for y, x1, x2 in spans:
            cut_set = cuts[y]
            row = wanted.setdefault(y, set())
            row.update(x for x, end in zip(cut_set, cut_set[1:], strict=False) if x < x2 and end > x1)
        covered: dict[int, list[tuple[int, int]]] = {}
        for y, x1, x2 in spans:
            covered.setdefault(y, []).append((x1, x2))
        intersection = Region.intersection
        # Front to back (visible_widgets is in render order): the first widget covering a wanted chop draws
        # it and it is no longer wanted, so the containers behind a widget (the screen, Horizontal, tabs,
        # panes) are not rendered for the rows it covers, and a row no chop of which is wanted is skipped.
        for widget, (region, clip) in self.visible_widgets.items():
            if not wanted:
                break
            shown = intersection(region, clip)
            left, right = shown.column_span
            top, bottom = shown.line_span
            rows = [y for y in range(top, bottom) if y in wanted and any(left <= x < right for x in wanted[y])]
            if not rows:
                continue
            first, last = rows[0], rows[-1]
            # One call for the band of rows (a widget renders only the rows of its crop).
            strips = widget.render_lines(
                Region(left - region.x, first - region.y, right - left, last - first + 1)
            )
            for y in rows:
                strip = strips[y - first]
                chops_line, row = chops[y], wanted[y]
                final_cuts = [cut for cut in cuts[y] if right >= cut >= left]
                pieces = final_cuts[:-1]
                if (len(pieces) > 1 and pieces[0] == left and left in row and final_cuts[-1] == right
                        and strip.cell_length == right - left
                        and all(cut in row or chops_line[cut] is not None for cut in pieces)
                        and any(x1 <= left and right <= x2 for x1, x2 in covered[y])):
                    # The row lies inside one span and each of its pieces is either wanted from this
                    # widget or already drawn by one in front of it. ChopsUpdate writes a chop inside
                    # its span whole, and the chops of a row in order of x, so the row goes in as one
                    # chop from its first cut and the front widgets' chops after it draw over their
                    # cells: the same screen without cutting the row apart (the content's rows hold a
                    # cut where the scrollbar is, in front: a divide per changed content row a step).
                    chops_line[left] = strip
                    row.difference_update(pieces)
                    if not row:
                        del wanted[y]
                    continue
                for cut, part in zip(final_cuts, strip.divide([cut - left for cut in final_cuts[1:]]),
                                     strict=False):
                    if cut in row:
                        chops_line[cut] = part
                        row.discard(cut)
                if not row:
                    del wanted[y]
        return chops


class MainScreen(Screen[None]):
    """The app's default screen, with the compositor above (modal screens keep Textual's own)."""

    def __init__(self, name: str | None = None, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self._compositor = DirtyRowsCompositor()
        self._shown = False

    def _on_screen_resume(self, event: events.ScreenResume) -> None:
        # Textual restyles the whole screen each time it is shown (Screen._on_screen_resume, 8.2: for a
        # theme or CSS change made while another screen was on top). The first time, every widget was
        # styled as it mounted, moments before, and each change since (a class, focus) restyled the nodes
        # it touched: that second pass over the ~50 widgets was 76 of 185 Stylesheet.apply calls, ~40 ms
        # of CPU, before the first frame of `replay` (bench_startup.py). Textual calls this class's handler, then Screen's, which does the
        # rest of the resume (layout, refresh, auto focus). Later resumes (after Help, Go to) restyle as before.
        if not self._shown:
            self._shown = True
            event.refresh_styles = False

    def _compositor_refresh(self) -> None:
        timing = getattr(self.app, "step_timing", None)  # CONTEXTPIPE_STEP_TIMING (step_timing.py)
        if timing is None:
            super()._compositor_refresh()
            return
        cpu = time.thread_time()
        super()._compositor_refresh()
        timing.frame(time.thread_time() - cpu)
