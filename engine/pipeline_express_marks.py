"""The express lane at a provider with cache markers (Anthropic, Bedrock): the markers rule's outcome on
a lane turn carried to the next (`_Marks`), the rule run as the general path runs it or skipped when its
answer is the last placement with the tail marker moved to the newest message (`_moved_markers`,
`_tail_moved`: markers._carried's proof), and the check that the sections before the history keep their
carried runs' marks (`_marks_kept`). The lane itself is engine/pipeline_express.py.
"""

from __future__ import annotations

from operator import is_not
from typing import TYPE_CHECKING, Any, NamedTuple

from engine.assembly import Assembly, Section
from engine.optimize import markers
from engine.optimize.history_ops import task_end
from engine.providers.base import _SectionRun
from engine.providers.policy import cache_policy

if TYPE_CHECKING:
    from engine.config import PipelineConfig


# A NamedTuple made from all its fields by tuple's own constructor, in C: the class's generated __new__
# is a Python function (a frame for each of the lane's per-turn tuples).
_new = tuple.__new__


class _Marks(NamedTuple):
    """The markers rule's outcome on a lane turn when it is the Measure's newest placement with the tail
    marker on the history's last item (markers._carried's form), for the next lane turn to move that
    marker without running the rule (_tail_moved)."""

    entry: Any  # the placement (markers._Placed): the Measure's newest after the rule ran
    noted: bool  # the context's task_noted (its other fields follow from the config)
    # The sections the rule ran on, or those of the last lane turn that moved its tail marker: each such
    # turn's history extends the one before (the lineage it extends), so the task that ended inside the
    # rule's history ends at the same item in each (_tail_moved's `extends`).
    applied: Assembly
    other: frozenset[int]  # the history's marked items but its tail (the task's breakpoint)
    actions: list[dict[str, Any]]
    before: tuple[Any, ...]  # the markers before the history


def _moved_markers(
    cfg: PipelineConfig,
    rev2: bool,
    full: Assembly,
    applied: Assembly,
    hidx: int,
    k: _Marks | None,
    before_marks: tuple[Any, ...] | None,
    layout: list[tuple[Section, _SectionRun]],
    m: Any,
    lin: Any,
) -> tuple[frozenset[int], list[dict[str, Any]], tuple[Any, ...], _Marks | None] | None:
    """At a provider with cache markers (Anthropic, Bedrock): the history's marked items, the turn's
    actions (the markers step's, as optimize writes it), the markers before the history and what the
    next lane turn may carry of them, or None when the markers would touch a section before the history
    (the general path's turn then).

    The markers rule is run as cost_aware.run runs it on a held turn that fits as planned (the lane has
    proved that), in the context it gets there; on an append turn it carries the last placement with
    the tail marker moved (markers._carried: a few identity checks), so the sections before the
    history keep the marks their carried runs have and only the history's run changes: the old tail
    written again unmarked, the new messages after it. After a lane turn whose outcome was that
    placement's, the rule is not run: _tail_moved proves it would answer the same with the tail moved. `hidx`, `k`,
    `before_marks` and `layout` are the carried turn's (Carried's fields, which the lane's turn reads
    once: see pipeline_express.turn)."""
    items = full[hidx].items
    noted = rev2 and applied is not full and bool(items) and getattr(items[0], "role", "") == "user"
    if k is not None:
        # (One unpacking: a named tuple's fields read by name are not specialized in Python 3.11.)
        entry, k_noted, k_applied, other, actions, k_before = k
        if k_noted == noted and _tail_moved(k, applied, hidx, m, lin.applied is k_applied):
            # (The very actions' content: the step's detail is the placement's, as _carried gives it.)
            tail = len(applied[hidx].items) - 1
            # Carried on with this turn's sections: the next turn's history extends these, so _tail_moved
            # knows the task still ends where it did without looking for its end (see _Marks.applied).
            moved = _new(_Marks, (entry, k_noted, applied, other, actions, k_before))
            return other | {tail}, list(map(dict, actions)), k_before, moved  # (map: no comprehension frame)
    ctx = _MarkersView(cache_policy(cfg.provider, cfg.model), m, False, rev2, noted)
    out = markers.apply(applied, ctx)  # type: ignore[arg-type]
    if out.asm is not applied or out.reason_not_applied:
        return None
    hist_id = applied[hidx].id
    hitems: list[int] = []
    others: list[Any] = []
    for mk in out.markers:
        if mk.section == hist_id:
            hitems.append(mk.item)
        else:
            others.append(mk)
    before = tuple(others)
    # The markers before the history as the last lane turn had them (the very objects, as the rule
    # carries them): the carried runs have their marks. Else (the general path's turn before this, or
    # a marker that changed) each section's marks are compared with its carried run's.
    if before != before_marks and not _marks_kept(before, layout, hist_id):
        return None
    n = len(applied[hidx].items)
    hmarks = frozenset(i for i in hitems if 0 <= i < n)
    if not out.changed:
        return hmarks, [], before, None
    actions = [{"step": markers.NAME, "detail": out.detail, "tokens_saved": out.tokens_saved}]
    placed = m.placed
    entry = placed[0] if placed else None
    carried = None
    if entry is not None and n - 1 in hmarks and _outcome_of(entry, out, hist_id, n):
        carried = _Marks(entry, noted, applied, hmarks - {n - 1}, actions, before)
    return hmarks, actions, before, carried


def _outcome_of(entry: Any, out: Any, hist_id: str, n: int) -> bool:
    """Whether the markers rule's outcome is `entry`'s (the placement it just made, or the one it
    carried: its markers the very objects but the tail, which is on the history's last item)."""
    got = out.markers
    if got is entry.markers:
        return True
    want = entry.markers
    t = entry.tail
    if out.detail is not entry.detail or len(got) != len(want):
        return False
    for i, (a, b) in enumerate(zip(got, want, strict=True)):
        if a is not b and i != t:
            return False
    tail = got[t]
    return tail.section == hist_id and tail.item == n - 1


def _tail_moved(k: _Marks, applied: Assembly, hidx: int, m: Any, extends: bool) -> bool:
    """Whether the markers rule, run on `applied` in the context it ran in on the last lane turn, would
    answer that turn's outcome with the tail marker moved to the history's new last item: the rule
    tries the Measure's newest placement first, and it is still k.entry; markers._carried then carries
    it when the sections before the history are the very ones of that turn (its identity checks held
    on them), the history is that one with messages appended (its kind, id and scope), reaches the
    minimum cacheable prefix with more tokens than the sections before it, and the task's breakpoint
    (revision 2) is where it was. Any doubt: False (the rule is run). `extends`: the history is that
    turn's with messages appended (its lineage extended: the same items first), so a task that ended
    inside it ends there still."""
    placed = m.placed
    e = k.entry
    prev = k.applied
    if not placed or placed[0] is not e or len(applied) != len(prev):
        return False
    # Every section but the history the very one of that turn, compared by identity in C (map over
    # is_not: a Python loop with enumerate and zip was ~4 us of a lane turn).
    if any(map(is_not, applied[:hidx], prev[:hidx])) or any(
        map(is_not, applied[hidx + 1 :], prev[hidx + 1 :])
    ):
        return False
    hist, was = applied[hidx], prev[hidx]
    items = hist.items
    if hist.kind is not was.kind or hist.id != was.id or hist.scope is not was.scope or not items:
        return False
    cum = e.cum_before + m.section(hist)
    if cum <= e.cum_before or cum < e.policy.min_cacheable_tokens:
        return False
    if e.task_marker and not (extends and e.task_fits):
        return markers.task_where_it_was(items, task_end(items) - (1 if k.noted else 0), e.task_fits, e.task)
    return True


def _marks_kept(before: tuple[Any, ...], layout: list[tuple[Section, _SectionRun]], hist_id: str) -> bool:
    """Whether the markers on the sections before the history give each carried run its own marks."""
    marked: dict[str, set[int]] = {}
    for mk in before:
        marked.setdefault(mk.section, set()).add(mk.item)
    for s, run in layout:
        if s.id == hist_id:
            continue
        got = marked.get(s.id)
        marks = frozenset(i for i in got if 0 <= i < len(s.items)) if got else frozenset()
        if marks != run.marks:
            return False  # a marker moved before the history
    return True


class _MarkersView(NamedTuple):
    """What the markers rule (markers.apply, _carried, _placed, task_marker) reads of an optimize
    context."""

    policy: Any
    measure: Any
    latch_flipped: bool
    task_marker: bool
    task_noted: bool
    edit_back: int = 0  # (an agent that edits its history pauses the lane: engine/pipeline_fold.py)
