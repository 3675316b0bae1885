"""The wave-1 column's request built from the conversation's running sums (simulate's wave-1 builds).

Every turn the wave-1 policy plans the whole conversation and runs every Optimize rule over it: the
oldest tool results cleared (clear_tool_results, up to its circuit breaker), the oldest rounds dropped
(drop_rounds: a share of them that grows with the pressure), then the budget guarantee (trim_sections)
drops more of the oldest rounds until the history fits its budget. Through the rules a build makes a
tuple of the whole conversation, its cleared copy and the copy drop_rounds kept, and frees the last
turn's: a few passes over every message a turn (6,000 turns: the build grew from 267 to 612 us a turn).

In a long session all of that ends in the same shape: every result the rule clears lies in the rounds
drop_rounds drops, and what is sent is the task, carrying trim_sections' omission note, then the
conversation from the end of trim's cut. `Wave1Lane` keeps the conversation's running token sums, round
starts, called tool names, full results and largest result, extended by what was appended (a replayed
conversation only grows), and finds the three rules' choices from them as the rules find them in the
whole conversation: clear_results.clear_places over the results, drop_rounds.rounds_to_drop, and
history_ops.oldest_to_drop's bisection over the rounds drop_rounds kept (RunningSums.oldest_rounds). The
request is assembled with the task and the conversation from trim's cut only (`Pipeline.assembled(bound,
cut)`: its history total is the whole conversation's, which the plan reads); trim_schemas is given the
tools the whole conversation called (trim_schemas.keep_used), spill runs over the sections but the
history (spill_large.spill_sections: nothing in it is over the threshold), and the other rules run on it
as they are: the same request, markers and actions as Pipeline.decide's, for what was appended plus what
is sent (no scan of the sent window either: it starts elsewhere nearly every turn, so the rules' carried
scans of it would start over).

Taken only where that shape is certain: every gate open, the tier at AggressivePrune, no summarizer, no
pending parts, a task before the first assistant message (a user message, which carries the note), no
result in the conversation over the spill threshold, every cleared result in the rounds drop_rounds
drops, at least four droppable rounds and one left after drop_rounds' cut, and trim's cut bringing what
drop_rounds kept within the history's budget (after cutting inside results, as the rule does), or that
within it already. Anything else gives None and the caller builds through Pipeline.decide.
tests/test_sim_wave1_lane.py holds the two equal turn by turn.
"""

from __future__ import annotations

from collections.abc import Sequence, Set
from typing import TYPE_CHECKING, Any

from engine.artifacts import Message, ToolResult
from engine.assembly import Assembly, Measure, Section
from engine.config import PipelineConfig
from engine.optimize import RULES
from engine.optimize import clear_results as clear_rule
from engine.optimize import drop_rounds as drop_rule
from engine.optimize import spill_large as spill_rule
from engine.optimize import trim_schemas as schemas_rule
from engine.optimize import trim_sections as trim_rule
from engine.optimize.context import Marker, OptimizeContext, OptimizeLimits
from engine.optimize.history_ops import dropped_note, note_tokens, without_notes
from engine.sim.running_sums import RunningSums
from engine.types import Form, SectionKind, Tier

if TYPE_CHECKING:
    from engine.pipeline import Pipeline


class Wave1Lane(RunningSums):
    """One pipeline's conversation as the wave-1 rules read it, and the last request's cut."""

    def __init__(self) -> None:
        super().__init__()  # cum, starts (RunningSums)
        # names: the tools called; results: every full tool result's (message, part), oldest first;
        # largest: the largest one's tokens.
        self.names: set[str] = set()
        self.results: list[tuple[int, int]] = []
        self.largest = 0
        self.cut = 0  # where the last request's conversation began (after the task)
        # The task with trim's note, by what made it (task, rounds, tokens): the same object while they
        # hold, so the serializer's memos match it by identity (as closed_cut's lanes do).
        self._marked: tuple[Message, int, int, Message] | None = None

    def extend(self, history: Sequence[Message], m: Measure) -> None:
        """Bring the scans up to `history`, the one last seen plus appended messages, or start over
        (RunningSums._resume)."""
        n = self._resume(history, m)
        if len(history) == n:
            return
        new = history[n:]
        cum, starts, names, results = self.cum, self.starts, self.names, self.results
        total = cum[-1]
        item, big = m.item, m.largest_result
        for i, msg in enumerate(new, n):
            total += item(msg)
            cum.append(total)
            if msg.role == "assistant":
                starts.append(i)
            names.update(c.name for c in msg.tool_calls)
            for j, p in enumerate(msg.parts):
                if isinstance(p, ToolResult) and p.form == "full":
                    results.append((i, j))
            self.largest = max(self.largest, big(msg))
        self._last = new[-1]

    def _start_over(self) -> None:
        self.names, self.results = set(), []
        self.largest, self.cut, self._marked = 0, 0, None

    def build(
        self, pipe: Pipeline, bound: dict[str, dict[str, Any]], cfg: PipelineConfig
    ) -> tuple[Assembly, tuple[Marker, ...], list[str], int] | None:
        """(request, markers, actions, the plan's ceiling) of the wave-1 build under `cfg`, as
        Pipeline.decide makes it, when it has the shape the module doc names; else None."""
        history = pipe.history
        lim = cfg.limits
        if (
            pipe.pending
            or history.chunk is not None
            or not all(getattr(lim, g) for g in OptimizeLimits.GATES)
        ):
            return None
        m = pipe.measure
        self.extend(history, m)
        starts, cum = self.starts, self.cum
        n = len(history)
        last = len(starts) - 1  # the newest round starts at starts[last]; rounds 1..last-1 are droppable
        if last < drop_rule.MIN_DROPPABLE or starts[0] == 0 or self.largest > lim.spill_threshold:
            return None
        te = starts[0]
        size = cum[-1]
        if size != pipe.history_tokens():  # the history section's total as the pipeline primes it
            return None
        msgs = history.whole()
        task = msgs[0]
        if task.role != "user":
            return None
        c = self.cut if te < self.cut < n and msgs[self.cut].role == "assistant" else starts[last]
        asm = pipe.assembled(bound, c)
        if not _holds(asm, m, te, n, c, size):
            return None
        plan = pipe.planned(cfg, asm)  # the whole conversation's plan: the history's total is its
        ctx = pipe.optimize_context(cfg, plan)
        hist = asm[-1]
        budget = plan.budgets.get(hist.id)
        if ctx.tier < Tier.AGGRESSIVE_PRUNE or ctx.summarizer is not None or budget is None:
            return None
        if trim_rule.protected(hist):
            return None
        # clear_tool_results over the whole conversation: what it clears, and what that frees.
        _, at, cleared_tokens, cleared, _ = clear_rule.clear_places(
            msgs, self.results, len(self.results), m, lim
        )
        # drop_rounds: the oldest `count` droppable rounds, [te, end), holding every cleared result.
        count = min(drop_rule.rounds_to_drop(last, plan.predictive_pressure), last)
        end = starts[count]
        if any(not te <= i < end for i, _ in at):
            return None
        parts = without_notes(task)
        dropped = cum[end] - cum[te] - cleared_tokens  # as drop_oldest sums the cleared history
        noted = dropped_note(parts, count, dropped)
        kept = size - (cum[end] - cum[te]) + m.item(noted) - m.item(task)  # drop_range's total
        need = kept - budget
        if count >= last:
            return None  # no round left for trim to drop: it would cut inside the kept results
        if need <= 0:
            # Within its budget: trim_sections leaves the kept history as it is (the task with
            # drop_rounds' note, then the conversation from drop_rounds' cut).
            cut, head, total, trimmed = end, noted, kept, False
            omitted = 0
        else:
            # trim_sections over what drop_rounds kept: oldest_to_drop over its droppable rounds, the
            # conversation's rounds count..last-1 (their running sums are the conversation's, shifted).
            i, acc = self.oldest_rounds(count, last, need)
            rounds = i - count
            if rounds == 0:
                return None
            cut, head, trimmed = starts[i], self._marked_task(task, parts, rounds, acc), True
            total = kept - acc + m.item(head) - m.item(noted)
            omitted = acc - (m.item(head) - m.item(noted)) - note_tokens(noted, m)
        if cut != c:
            asm = pipe.assembled(bound, cut)
            if not _holds(asm, m, te, n, cut, size):
                return None
            hist = asm[-1]
        # drop_range's kept history: the task with the last note, then the conversation from the cut.
        # Its omitted tokens as the three rules' edits add them up (drop_range: what it dropped net of
        # the task's change and the note it replaced).
        omitted += cleared_tokens + dropped - (m.item(noted) - m.item(task)) - note_tokens(task, m)
        sent = hist.with_items((head, *hist.items[1:]), Form.TRIMMED, omitted)
        m.derived(sent, total)
        if trimmed and m.section(sent) > budget:
            sent = trim_rule.cut_inside_results(sent, budget, m)  # the rule's next step
            if m.section(sent) > budget:
                return None
        out = _optimize(asm, hist, sent, ctx, self.names, cleared > 0, trimmed, plan.ceiling)
        if out is not None:
            self.cut = cut  # the next turn plans from here: usually its cut too
        return out

    def _marked_task(self, task: Message, parts: tuple[Any, ...], rounds: int, acc: int) -> Message:
        got = self._marked
        if got is not None and got[0] is task and got[1] == rounds and got[2] == acc:
            return got[3]
        marked = dropped_note(parts, rounds, acc)
        self._marked = (task, rounds, acc, marked)
        return marked


def _optimize(
    asm: Assembly,
    hist: Section,
    sent: Section,
    ctx: OptimizeContext,
    names: Set[str],
    cleared: bool,
    trimmed: bool,
    ceiling: int,
) -> tuple[Assembly, tuple[Marker, ...], list[str], int] | None:
    """optimize's pass over `asm` (the task and the conversation from trim's cut) with the history rules'
    outcomes known: trim_schemas given the tools the whole conversation called (`names`), spill's
    history holding nothing over its threshold, clear_tool_results and drop_rounds recorded (`cleared`:
    the rule cleared a result), trim_sections given the history it leaves (`sent`; `trimmed`: it cut
    the history) and run over the rest; every other rule as it is."""
    actions: list[str] = []
    markers: tuple[Marker, ...] = ()
    for rule in RULES:
        name = rule.name
        if name == clear_rule.NAME:
            if cleared:
                actions.append(name)
            continue
        if name == drop_rule.NAME:
            actions.append(name)
            continue
        if name == trim_rule.NAME:
            if asm[-1] is not hist:
                return None  # an earlier rule changed the history: not the shape taken here
            asm = (*asm[:-1], sent)
        if name == schemas_rule.NAME:
            out = schemas_rule.keep_used(asm, names, ctx.measure)
        elif name == spill_rule.NAME:
            out = spill_rule.spill_sections(asm, ctx, history=False)
        else:
            out = rule.fn(asm, ctx)
        if out.markers:
            markers = out.markers
        if out.changed:
            asm = out.asm
        if out.changed or (trimmed and name == trim_rule.NAME):
            actions.append(name)
    return asm, markers, actions, ceiling


def _holds(asm: Assembly, m: Measure, te: int, n: int, cut: int, size: int) -> bool:
    """Whether `asm`'s history is the task and the conversation from `cut` on, its total the whole's."""
    if not asm or asm[-1].kind is not SectionKind.HISTORY:
        return False
    hist = asm[-1]
    return len(hist.items) == te + n - cut and m.section(hist) == size
