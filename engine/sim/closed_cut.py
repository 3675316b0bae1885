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

from collections.abc import Callable, Sequence
from operator import attrgetter, is_not
from typing import TYPE_CHECKING, Any, NamedTuple

from engine import pipeline_closed_reads as closed_reads
from engine.artifacts import Message, Text
from engine.assembly import Assembly, Measure, Section
from engine.config import PipelineConfig
from engine.optimize.context import OptimizeContext, RuleOutcome
from engine.optimize.history_ops import drop_range, dropped_note, without_notes
from engine.optimize.trim_sections import apply, cut_inside_results, protected
from engine.plan import SectionEstimate, allocate, budget_of, ceiling_for
from engine.sim.note_counts import NoteCounts
from engine.sim.running_sums import RunningSums
from engine.tokens import REPLY_PRIMING_TOKENS
from engine.types import Priority, SectionKind

if TYPE_CHECKING:
    from engine.pipeline import Pipeline

TRIMMED = "trimmed inside "  # trim_sections' detail, before the ids of the sections it cut

# Columns (configs) whose last cut and marked task are remembered: simulate's gates-closed column, and
# any other column a what-if runs with every gate closed.
LANES = 8
_TOKENS = attrgetter("tokens")


class _Sent(NamedTuple):
    """What a column's last trimmed request sent, when the rule did nothing after dropping the rounds
    (no result cut inside, no squeeze): the next build sends it again with the appended messages while
    the same rounds are dropped (see ClosedCut.carried)."""

    sources: tuple[Section, ...]  # the sections before the history (the assembly's very objects)
    kept: Section  # the history sent: the task with the note, then the conversation from `end` on
    kept_tokens: int
    rounds: int  # rounds_to_drop's answer then (rounds, tokens, end)
    acc: int
    end: int
    history_len: int  # len(pipe.history) then


class _Alloc(NamedTuple):
    """What the history's budget in a carried build's plan is, while the sections before it hold (see
    ClosedCut.history_budget): allocate cuts the history, the one Normal section, to the ceiling less
    what the others keep once the First ones gave all they have, whatever the history's size."""

    sources: tuple[Section, ...]  # the sections before the history then (their estimates fixed)
    measure: Measure
    key: tuple[str, Any, Any]  # the history section's id, kind and priority
    kept: int  # what the sections before the history keep: the budget is the ceiling less this


class _Lane:
    """One column's last cut (its next build's first assembly is made from it: usually the cut holds)
    and its task message with the omission note, by what made it (task, rounds, tokens): handed to
    drop_range again while those hold, as trim_sections does with a remembered cut, so the request
    holds the same object turn after turn (the serializer's memos then match it by identity)."""

    __slots__ = ("alloc", "cfg", "cut", "marked", "sent")

    def __init__(self, cfg: PipelineConfig) -> None:
        self.cfg = cfg  # held, so its id is not reused while the lane is kept
        self.cut = 0
        self.marked: tuple[Message, int, int, Message] | None = None
        self.sent: _Sent | None = None  # the last build's request, when it may be carried
        self.alloc: _Alloc | None = None  # the history's budget while only the history grows


class ClosedCut(RunningSums):
    """Running sums and round starts of one pipeline's conversation, and the history cut they give."""

    def __init__(self) -> None:
        super().__init__()  # (cum and starts: extended in place, nothing else holds them)
        self._lanes: dict[int, _Lane] = {}
        self._notes = NoteCounts()

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
        over (RunningSums._resume: another conversation or Measure, a swapped tokenizer, a history that
        did not just grow, an agent's edit)."""
        n = self._resume(history, m)
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

    def _start_over(self) -> None:
        self._lanes.clear()  # (their cuts and carried requests were of the conversation the sums were of)

    def rounds_to_drop(self, need: int) -> tuple[int, int, int]:
        """(rounds, tokens, end): oldest_to_drop's choice for the whole conversation (the sums' total:
        the callers check the history's is that) and `need` tokens, and where the dropped rounds end.
        The droppable rounds are every round but the task (before starts[0]) and the newest."""
        n = len(self.starts) - 1  # droppable rounds
        if n <= 0 or need <= 0:
            return 0, 0, 0
        i, acc = self.oldest_rounds(0, n, need)
        return i, acc, self.starts[i]

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
        count, acc, end = self.rounds_to_drop(size - budget)
        if count == 0:
            return None
        return self._drop(
            pipe,
            bound,
            cfg,
            the_plan.ceiling,
            lambda: ctx,
            asm if end == first else None,
            idx,
            te,
            size,
            budget,
            count,
            acc,
            end,
            before,
        )

    def _drop(
        self,
        pipe: Pipeline,
        bound: dict[str, dict[str, Any]],
        cfg: PipelineConfig,
        ceiling: int,
        context: Callable[[], OptimizeContext],
        asm: Assembly | None,
        idx: int,
        te: int,
        size: int,
        budget: int,
        count: int,
        acc: int,
        end: int,
        before: int,
    ) -> RuleOutcome | None:
        """trim's outcome once the rounds to drop are known: `count` rounds (`acc` tokens) ending at
        `end`, from the history at index `idx` with the task ending at `te`, over `budget` by what the
        whole conversation's `size` says; `asm`: the assembly from `end` (None: assembled here),
        `before` its total; `ceiling` the plan's, `context()` the optimize context of the plan (made
        only for the squeeze)."""
        m = pipe.measure
        history = pipe.history
        lane = self._lane(cfg)
        if asm is None:
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
        if marked is None and isinstance(task, Message) and task.role == "user":
            # The task with the new note, as drop_range makes it, the note's count known by its shape.
            marked = dropped_note(without_notes(task), count, acc)
            note = marked.parts[-1]
            assert isinstance(note, Text)  # (dropped_note's last part is the note)
            self._notes.seed(m.counter, note, count, acc)
        asm, _ = drop_range(asm, idx, te, te, count, acc, m, marked)
        kept = asm[idx]
        head = kept.items[0]
        plain = True  # nothing done after the drop: the request may be carried to the next build
        if m.section(kept) > budget:
            plain = False
            # Still over (a large newest result, or the note itself): the rule's next step, the same
            # code over the same kept history.
            asm = (*asm[:idx], cut_inside_results(kept, budget, m), *asm[idx + 1 :])
        trimmed = [hist.id]
        if m.total(asm) > ceiling:
            if m.section(asm[idx]) > budget:
                return None  # apply below would cut the history again; the rule goes on to its squeeze
            # Every section within its budget now, the whole still over the ceiling: what the rule does
            # next is its squeeze, from this very assembly, as apply over it does (over the sent
            # history: no longer the whole conversation).
            out = apply(asm, context())
            asm = out.asm
            plain = False
            if out.changed:
                trimmed += [t for t in out.detail.removeprefix(TRIMMED).split(", ") if t not in trimmed]
        if isinstance(task, Message) and task.role == "user" and isinstance(head, Message):
            lane.marked = (task, count, acc, head)
        lane.cut = end
        if plain and pipe.fast_path:
            lane.sent = _Sent(asm[:idx], kept, m.section(kept), count, acc, end, len(history))
        saved = before - m.total(asm)
        return RuleOutcome(asm, True, TRIMMED + ", ".join(trimmed), saved)

    @staticmethod
    def history_budget(
        pipe: Pipeline, lane: _Lane, sources: tuple[Section, ...], k: Section, size: int, ceiling: int
    ) -> int | None:
        """The history's budget in this turn's plan (`size` its total, `k` the history section), when
        the history is over it and every section before it within its own (as trim reads the plan),
        else None.

        allocate lets the First sections give first, then the Normal ones, then the LastResort ones.
        When the history is the one Normal section and was cut to a budget above 0, the First ones gave
        all they have (and those over their budgets made this None), and the history keeps the ceiling
        less what the others keep (`kept`): the same for any ceiling and any history total that put the
        history over that budget, which stays above 0, so `lane.alloc` answers those without the
        estimates and allocate (~15 us a carried build; the calibration moves the ceiling every turn;
        tests/test_sim_closed_alloc.py)."""
        m = pipe.measure
        fixed = lane.alloc
        if (
            fixed is not None
            and 0 < ceiling - fixed.kept < size
            and fixed.measure is m
            and fixed.key == (k.id, k.kind, k.priority)
            and len(fixed.sources) == len(sources)
            and not any(map(is_not, sources, fixed.sources))
        ):
            return ceiling - fixed.kept
        ests = (
            *(closed_reads.estimate(pipe, s) for s in sources),
            SectionEstimate(k.id, k.name, k.kind, k.scope, k.priority, size),
        )
        unique = len({e.id for e in ests}) == len(ests)
        if sum(map(_TOKENS, ests)) + REPLY_PRIMING_TOKENS <= ceiling and unique:
            return None  # fits as planned (trim_sections.fits_as_planned)
        budgets = allocate(ests, ceiling)
        for s in sources:
            b = budgets.get(s.id)
            if b is not None and not protected(s) and m.section(s) > b:
                return None
        budget = budgets.get(k.id)
        if budget is None or size <= budget:
            return None
        normal = [e for e in ests if e.priority is Priority.NORMAL and e.kind is not SectionKind.GOAL]
        if unique and 0 < budget and len(normal) == 1 and normal[0] is ests[-1]:
            lane.alloc = _Alloc(sources, m, (k.id, k.kind, k.priority), ceiling - budget)
        return budget

    def carried(
        self, pipe: Pipeline, bound: dict[str, dict[str, Any]], cfg: PipelineConfig, need_ctx: bool
    ) -> tuple[Assembly, int, OptimizeContext | None] | None:
        """(request, the plan's ceiling, the optimize context of the plan: with `need_ctx` or when made
        anyway, else None) of a build under `cfg` whose history is over its budget by the rule's usual
        cut (see the module doc), from the column's last request; else None (the caller then builds as
        always).

        Carried when the last build's request was the rule's plain drop (`_Sent`), the sections before
        the history are the very ones the pipeline carries (no bound values, nothing emergent due), the
        conversation only grew (no pending parts, no note but the renamed calls'), and the rule would
        drop the same rounds now: this turn's ceiling and budgets (the history's total the whole
        conversation's, as assembled) put the history over its budget, no other section over its own,
        and rounds_to_drop answers as it did. drop_range would then put the same task message
        (lane.marked) before the same kept rounds: the last request's history with the appended
        messages. When other rounds are dropped now, they are dropped as trim drops them (`_drop`),
        planned once. What the rule does after a drop (a result cut inside, the squeeze) is checked as
        trim checks it: then trim's outcome, or None. Each lane's request is carried at most from its
        previous build (every build of the lane takes it back first)."""
        lane = self._lane(cfg)
        sent, lane.sent = lane.sent, None
        if sent is None or bound or pipe.pending or not pipe.fast_path:
            return None
        sources = closed_reads.carried_sources(pipe)
        if sources is None or pipe.emergent.due(pipe.turn):
            return None
        if len(sources) != len(sent.sources) or any(map(is_not, sources, sent.sources)):
            return None
        history = pipe.history
        m = pipe.measure
        self._extend(history, m)
        if self._lanes.get(id(cfg)) is not lane or len(history) < sent.history_len:
            return None  # the sums started over (another conversation or Measure)
        size = self.cum[-1]
        if size != pipe.history_tokens():  # the history section's total as the pipeline primes it
            return None
        k = sent.kept
        # What the rule reads of this turn's plan, its ceiling and budgets, is a function of the window's
        # usable tokens, the reserves and the sections' totals (plan_of: ceiling_for, allocate); the
        # history's total is the whole conversation's, as assembled. The Plan itself (pressures, tier,
        # reason) only where a context is made from it: the markers rule, the rule's later steps.
        reserves = closed_reads.reserves(pipe, cfg)
        ratio = pipe.stats.calibration_for(cfg.model)
        usable = int(budget_of(cfg.window, cfg.margin).usable / ratio)
        ceiling = ceiling_for(usable, reserves.response + reserves.thinking + reserves.schema)
        budget = self.history_budget(pipe, lane, sources, k, size, ceiling)
        if budget is None:
            return None

        made: list[OptimizeContext] = []

        def context() -> OptimizeContext:
            # The plan trim's caller makes of the assembly from the old cut (the same sections and
            # totals), and its context; made once, where it is read.
            if not made:
                whole = Section(k.id, k.name, k.kind, k.scope, k.priority, ())
                m.prime(whole, size)
                ctx = pipe.optimize_context(cfg, pipe.planned(cfg, (*sources, whole)))
                ctx.task_marker = cfg.policy.revision >= 2
                made.append(ctx)
            return made[0]

        count, acc, end = self.rounds_to_drop(size - budget)
        if (count, acc, end) != (sent.rounds, sent.acc, sent.end):
            # Other rounds: dropped from an assembly at the new cut, as trim drops them.
            if count == 0 or self.starts[0] == 0:
                return None
            # That assembly's total before the drop, as Measure.total sums it: the reply priming and
            # each section's total, the history's the whole conversation's.
            before = REPLY_PRIMING_TOKENS + size
            for s in sources:
                before += m.section(s)
            idx = len(sources)
            te = self.starts[0]
            out = self._drop(
                pipe, bound, cfg, ceiling, context, None, idx, te, size, budget, count, acc, end, before
            )
            if out is None:
                return None
            return out.asm, ceiling, context() if need_ctx or made else None
        appended = history.since(sent.history_len)
        # The note the pipeline puts on the history (only the renamed calls' here: no empty or silent
        # message), which counts the whole conversation's calls, as assembled this turn.
        note = closed_reads.renamed_note(pipe)
        kept = Section(
            k.id, k.name, k.kind, k.scope, k.priority, (*k.items, *appended), k.form, k.omitted, note
        )
        total = sent.kept_tokens
        for msg in appended:
            total += m.item(msg)
        m.derived(kept, total)
        if total > budget:
            return None  # a result to cut inside: the rule's next step
        asm = (*sources, kept)
        if m.total(asm) > ceiling:
            return None  # the squeeze
        lane.sent = _Sent(sources, kept, total, count, acc, end, len(history))
        return asm, ceiling, context() if need_ctx else None
