"""The gates-closed column's history cut, carried from turn to turn (simulate's closed builds).

Every turn, simulate's gates-closed column sends the budget guarantee's trim of the whole, never
compacted conversation: trim_sections drops the fewest oldest rounds whose tokens reach what the
history is over its budget (history_ops.oldest_to_drop), behind one omission note on the task. Done
through the rule, a build assembles the whole conversation as a tuple, and the Measure memos the rule
reads (running sums, rounds, remembered cuts) each copy or compare it to learn that it only grew: a few
O(n) passes a turn, so the build grew with the session (median 121 -> 162 us from the second to the
last fifth of a 1,880-turn synthetic session, `bench_simulate.py --growth`; 104 -> 105 with this).

Between builds a replayed conversation only grows (its HistoryLog is append-only), so `ClosedCut` keeps
the conversation's running token sums and round starts, extended by what was appended, and finds the
cut by bisection over them as oldest_to_drop does over the whole history's. The request is then
assembled with the task and what follows the cut only (`Pipeline.assembled(bound, cut)`, whose history
total is still the whole conversation's: what the plan and the drop read) and the rounds are dropped by
the engine's own `drop_range`. A build costs what was appended plus what it sends.

Taken here: the history over its budget (any other section within its own) losing whole rounds, then,
as the rule goes on, the middle of its largest results cut (trim_sections.cut_inside_results) and the
squeeze under the ceiling (trim_sections.apply over the kept assembly), each over the sent history only.
Anything else (another section over its budget, no round to drop, a history within its budget that
only the squeeze would cut, no task before the first assistant message, pending parts) gives None, and
the caller builds through the rule. tests/test_sim_closed_cut.py holds the two equal turn by turn.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from engine.artifacts import Message
from engine.assembly import Assembly, Measure
from engine.config import PipelineConfig
from engine.optimize.context import OptimizeContext, RuleOutcome
from engine.optimize.history_ops import drop_range
from engine.optimize.trim_sections import apply, cut_inside_results, protected
from engine.types import SectionKind

if TYPE_CHECKING:
    from engine.pipeline import Pipeline

TRIMMED = "trimmed inside "  # trim_sections' detail, before the ids of the sections it cut

# Columns (configs) whose last cut and marked task are remembered: simulate's gates-closed column, and
# any other column a what-if runs with every gate closed.
LANES = 8


class _Lane:
    """One column's last cut (its next build's first assembly is made from it: usually the cut holds)
    and its task message with the omission note, by what made it (task, rounds, tokens): handed to
    drop_range again while those hold, as trim_sections does with a remembered cut, so the request
    holds the same object turn after turn (the serializer's memos then match it by identity)."""

    __slots__ = ("cfg", "cut", "marked")

    def __init__(self, cfg: PipelineConfig) -> None:
        self.cfg = cfg  # held, so its id is not reused while the lane is kept
        self.cut = 0
        self.marked: tuple[Message, int, int, Message] | None = None


class ClosedCut:
    """Running sums and round starts of one pipeline's conversation, and the history cut they give."""

    def __init__(self) -> None:
        self._history: Sequence[Message] | None = None  # the conversation the sums are of
        self._measure: Measure | None = None
        self._tokenizer = ""
        self._last: Message | None = None  # its newest message when last extended (an append-only check)
        # cum[i]: tokens of the first i messages (as Measure.item counts them); starts: where each
        # assistant message is (a round starts there). Extended in place: nothing else holds them.
        self.cum: list[int] = [0]
        self.starts: list[int] = []
        self._lanes: dict[int, _Lane] = {}

    def first_cut(self, pipe: Pipeline, cfg: PipelineConfig) -> int:
        """Where a build under `cfg` assembles the conversation from to plan it (the plan reads only the
        history's total, the whole conversation's either way): 0 (all of it) unless the column's last
        build was cut here, then that cut (the task and what follows it: a window's worth), so
        planning copies little, and when the cut holds (about half the trimming turns of a long
        session), `trim` sends that very assembly instead of assembling again from the cut it finds."""
        lane = self._lane(cfg)
        if lane.cut == 0 or pipe.pending:
            return 0
        return lane.cut

    def _lane(self, cfg: PipelineConfig) -> _Lane:
        """The column of `cfg`: by identity (simulate derives a column's config once), else by value."""
        lane = self._lanes.get(id(cfg))
        if lane is not None and lane.cfg is cfg:
            return lane
        lane = next((x for x in self._lanes.values() if x.cfg == cfg), None)
        if lane is None:
            if len(self._lanes) >= LANES:
                self._lanes.clear()
            lane = _Lane(cfg)
        else:
            del self._lanes[id(lane.cfg)]
            lane.cfg = cfg
        self._lanes[id(cfg)] = lane
        return lane

    def _extend(self, history: Sequence[Message], m: Measure) -> None:
        """Bring the sums up to `history`, which is the one last seen plus appended messages, or start
        over (another conversation or Measure, a swapped tokenizer, a history that did not just grow)."""
        n = len(self.cum) - 1
        name = m.counter.tokenizer.name
        if (
            history is not self._history
            or m is not self._measure
            or name != self._tokenizer
            or len(history) < n
            or (n and history[n - 1] is not self._last)
        ):
            self._history, self._measure, self._tokenizer = history, m, name
            self.cum, self.starts = [0], []
            self._lanes.clear()
            n = 0
        if len(history) == n:
            return
        new = history[n:]
        cum = self.cum
        total = cum[-1]
        item = m.item
        for i, msg in enumerate(new, n):
            total += item(msg)
            cum.append(total)
            if msg.role == "assistant":
                self.starts.append(i)
        self._last = new[-1]

    def rounds_to_drop(self, size: int, need: int) -> tuple[int, int, int]:
        """(rounds, tokens, end): oldest_to_drop's choice for the whole conversation (total `size`) and
        `need` tokens, and where the dropped rounds end. The droppable rounds are every round but the
        task (before starts[0]) and the newest: round j runs from starts[j] to starts[j + 1]."""
        starts, cum = self.starts, self.cum
        n = len(starts) - 1  # droppable rounds
        if n <= 0 or need <= 0:
            return 0, 0, 0
        first, last = starts[0], starts[n]
        total_droppable = size - cum[first] - (cum[-1] - cum[last])
        room = total_droppable - need
        # The oldest round that can stay: the first whose start's running sum reaches cum[last] - room.
        i = bisect_left(starts, cum[last] - room, 0, n, key=cum.__getitem__)
        kept = cum[last] - cum[starts[i]] if i < n else 0
        return i, total_droppable - kept, starts[i]

    def trim(
        self,
        pipe: Pipeline,
        bound: dict[str, dict[str, Any]],
        cfg: PipelineConfig,
        ctx: OptimizeContext,
        asm: Assembly,
        first: int,
    ) -> RuleOutcome | None:
        """trim_sections.apply's outcome for `asm` in `ctx` (whose plan is `asm`'s), when it is the
        usual one (see the module doc), else None. `asm`: `pipe.assembled(bound, first)`, `first` from
        first_cut."""
        the_plan = ctx.plan
        m = pipe.measure
        history = pipe.history
        if pipe.pending or not asm or asm[-1].kind is not SectionKind.HISTORY:
            return None
        self._extend(history, m)
        idx = len(asm) - 1
        hist = asm[idx]
        size = m.section(hist)
        te = self.starts[0] if self.starts else 0
        if te == 0 or size != self.cum[-1]:  # no task before the first assistant message; a total off
            return None
        budgets = the_plan.budgets
        for s in asm[:idx]:  # the rule trims any section over its budget: here only the history may be
            b = budgets.get(s.id)
            if b is not None and not protected(s) and m.section(s) > b:
                return None
        if protected(hist):
            return None
        before = m.total(asm)
        budget = budgets.get(hist.id)
        if budget is None or size <= budget:
            return None  # the rule would cut the history only to squeeze the whole: not taken here
        count, acc, end = self.rounds_to_drop(size, size - budget)
        if count == 0:
            return None
        lane = self._lane(cfg)
        if end != first:
            asm = pipe.assembled(bound, end)
            hist = asm[idx]
        # The assembly holds the task, then what follows the cut: exactly that (a pipeline that did not
        # elide would hand back the whole conversation, where the drop below would take the wrong range).
        if len(hist.items) != te + len(history) - end or m.section(hist) != size:
            return None
        task = hist.items[0]
        carried = lane.marked
        same = carried is not None and carried[0] is task and carried[1] == count and carried[2] == acc
        marked = carried[3] if carried is not None and same else None
        asm, _ = drop_range(asm, idx, te, te, count, acc, m, marked)
        kept = asm[idx]
        head = kept.items[0]
        if m.section(kept) > budget:
            # Still over (a large newest result, or the note itself): the rule's next step, the same
            # code over the same kept history.
            asm = (*asm[:idx], cut_inside_results(kept, budget, m), *asm[idx + 1 :])
        trimmed = [hist.id]
        if m.total(asm) > the_plan.ceiling:
            if m.section(asm[idx]) > budget:
                return None  # apply below would cut the history again; the rule goes on to its squeeze
            # Every section within its budget now, the whole still over the ceiling: what the rule does
            # next is its squeeze, from this very assembly, as apply over it does (over the sent
            # history: no longer the whole conversation).
            out = apply(asm, ctx)
            asm = out.asm
            if out.changed:
                trimmed += [t for t in out.detail.removeprefix(TRIMMED).split(", ") if t not in trimmed]
        if isinstance(task, Message) and task.role == "user" and isinstance(head, Message):
            lane.marked = (task, count, acc, head)
        lane.cut = end
        saved = before - m.total(asm)
        return RuleOutcome(asm, True, TRIMMED + ", ".join(trimmed), saved)
