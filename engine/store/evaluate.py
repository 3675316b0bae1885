"""Evaluation over real trajectories: does the store keep what the agent is about to use?

For each trajectory the session is replayed call by call. Before call k the prompt's new messages
are added to a store, and a window is requested at full, half and quarter of the trajectory's peak
prompt size. The window is then checked against what the agent did in its response to call k.

Definition of "used" (the metric):

* An *anchor* is a file path or a code identifier, extracted by regex from text:
  - path: at least two slash-separated parts (``django/contrib/admin/views/autocomplete.py``,
    ``/testbed/setup.cfg``) or a bare file name with a source/config extension (``setup.py``);
  - identifier: a word of 5+ characters that is snake_case (contains an inner ``_``) or camelCase /
    PascalCase (a lower-case letter followed by an upper-case one), e.g. ``get_context_data``,
    ``AutocompleteJsonView``.
  English words never match, so anchors are the names an agent re-opens, edits and cites.
* A *use* at call k is an anchor that occurs in the model's response to call k (its text plus its
  tool-call arguments, decoded from JSON) **and** occurred in an earlier message of the session
  after the task (a tool result, a file it read, or the agent's own earlier message), **and** does
  not occur in the system prompt or the first user message. (Anchors from the task are measured by
  the separate "task present" column; anchors that are new at call k are not a use of context.)
  Each (call, anchor) pair counts once.
* A use is *served* if the anchor occurs (as a substring) in the text of the window served for
  call k. Stubs and summaries count only through the text they actually put in the window.
* *Task present*: the first user message's full text is in the window.

Baseline: the system prompt (if it fits) plus the last N messages that fit, N as large as possible.
Both policies are counted with the same tokenizer, the same per-message overhead and the same usable
budget (limit minus the 2% margin).

How the replaying application uses the store (the same for every trajectory): system prompt and
first user message pinned when it costs at most a quarter of the budget (otherwise it gets
importance 1 and competes; if pins alone still exceed a budget, the task and then the system prompt
are unpinned and given importance 1); tool results link `replies_to` the
assistant message that made the call; a message that mentions a file path seen in an earlier item
links `cites` to the latest such item; the query is the latest assistant message plus the latest
tool result. Default StoreConfig weights throughout.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from engine.store.config import StoreConfig
from engine.store.errors import PinsExceedBudgetError
from engine.store.eval_steps import Msg, Step, anchors, path_anchors, steps_from_session
from engine.store.items import Kind, LinkKind
from engine.store.store import ContextStore
from engine.tokens import MESSAGE_OVERHEAD_TOKENS, REPLY_PRIMING_TOKENS, Budget, TokenCounter
from engine.wording import counted

BUDGET_FRACTIONS: tuple[tuple[str, float], ...] = (("full", 1.0), ("half", 0.5), ("quarter", 0.25))
PIN_TASK_SHARE = 0.25
POLICIES = ("baseline", "store-sticky", "store-fresh")


@dataclass
class Cell:
    """Counts for one budget and policy of `cp-inspect eval`."""
    uses: int = 0
    served: int = 0
    calls: int = 0
    task_present: int = 0
    tokens_used: int = 0
    resolves: int = 0  # windows that were not a sticky append (each one breaks the prefix cache)

    def add(self, other: Cell) -> None:
        self.resolves += other.resolves
        self.uses += other.uses
        self.served += other.served
        self.calls += other.calls
        self.task_present += other.task_present
        self.tokens_used += other.tokens_used

    @property
    def recall(self) -> float:
        return self.served / self.uses if self.uses else 1.0

    @property
    def task_rate(self) -> float:
        return self.task_present / self.calls if self.calls else 1.0


@dataclass
class TrajectoryResult:
    """`cp-inspect eval`'s cells for one trajectory."""
    name: str
    calls: int
    peak: int
    cells: dict[tuple[str, str], Cell]  # (budget label, policy) -> cell
    notes: list[str] = field(default_factory=list)


@dataclass
class EvalReport:
    """`cp-inspect eval`'s results over every trajectory it read, and the ones it skipped."""
    results: list[TrajectoryResult]
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (file, why it was not read)

    def totals(self) -> dict[tuple[str, str], Cell]:
        # Every cell present even with no trajectory read (the report's table crashed on a KeyError).
        tot: dict[tuple[str, str], Cell] = {(lb, pol): Cell() for lb, _ in BUDGET_FRACTIONS for pol in POLICIES}
        for r in self.results:
            for k, c in r.cells.items():
                tot.setdefault(k, Cell()).add(c)
        return tot

    def macro(self, label: str, policy: str) -> float:
        rs = [r.cells[(label, policy)].recall for r in self.results if r.cells[(label, policy)].uses]
        return sum(rs) / len(rs) if rs else 1.0

    def wins(self, label: str) -> tuple[int, int, int]:
        """(store-sticky better, equal, worse) than baseline, per trajectory, at this budget."""
        better = equal = worse = 0
        for r in self.results:
            a, b = r.cells[(label, "store-sticky")].recall, r.cells[(label, "baseline")].recall
            if abs(a - b) < 1e-9:
                equal += 1
            elif a > b:
                better += 1
            else:
                worse += 1
        return better, equal, worse


def _baseline(msgs: Sequence[Msg], costs: Sequence[int], usable: int) -> tuple[list[int], int]:
    """System prompt (if it fits) plus the longest suffix of messages that fits."""
    room = usable - REPLY_PRIMING_TOKENS
    keep: list[int] = []
    start = 0
    if msgs and msgs[0].role == "system" and costs[0] <= room:
        keep.append(0)
        room -= costs[0]
        start = 1
    tail: list[int] = []
    for i in range(len(msgs) - 1, start - 1, -1):
        if costs[i] > room:
            break
        tail.append(i)
        room -= costs[i]
    keep.extend(reversed(tail))
    return keep, usable - room


class _Replayer:
    """One store fed message by message the way an application would use it."""

    def __init__(
        self, path: str, budget: int, sticky: bool, config: StoreConfig, pin_task: bool = True
    ) -> None:
        self.pin_task = pin_task
        self.store = ContextStore(path, config=config)
        self.budget = budget
        self.sticky = sticky
        self.ids: list[int] = []
        self.call_owner: dict[str, int] = {}
        self.last_assistant: int | None = None
        self.path_owner: dict[str, int] = {}
        self.task_id: int | None = None
        self.system_id: int | None = None
        self.notes: list[str] = []

    def add(self, idx: int, m: Msg, first_user: int | None) -> None:
        pin = (m.role == "system" and idx == 0) or (idx == first_user and self.pin_task)
        kind = {"system": Kind.SYSTEM, "user": Kind.USER, "assistant": Kind.ASSISTANT}.get(
            m.role, Kind.TOOL_RESULT
        )
        links: list[tuple[LinkKind | str, int]] = []
        if m.role == "tool":
            target = self.call_owner.get(m.reply_to or "", self.last_assistant)
            if target is not None:
                links.append((LinkKind.REPLIES_TO, target))
        elif m.role == "user" and self.last_assistant is not None and idx != first_user:
            links.append((LinkKind.REPLIES_TO, self.last_assistant))  # observation-as-user formats
        paths = sorted(path_anchors(m.text))
        if not pin and idx != first_user:
            cited = sorted({self.path_owner[p] for p in paths if p in self.path_owner})
            links.extend((LinkKind.CITES, t) for t in cited)
        importance = 1.0 if idx == first_user else 0.0
        new_id = self.store.add(m.text, kind, pin=pin, importance=importance, source=m.reply_to, links=links)
        self.ids.append(new_id)
        if m.role == "assistant":
            self.last_assistant = new_id
            for c in m.call_ids:
                self.call_owner[c] = new_id
        if idx == first_user:
            self.task_id = new_id
        if m.role == "system" and idx == 0:
            self.system_id = new_id
        if not pin and idx != first_user:
            for p in paths:
                self.path_owner[p] = new_id

    def window(self, query: str) -> tuple[str, bool, int, bool]:
        for _ in range(3):
            try:
                w = self.store.context_get(self.budget, query=query, sticky=self.sticky)
                break
            except PinsExceedBudgetError:
                # The application's fallback: demote the biggest pin to maximum importance.
                victim = (
                    self.task_id
                    if self.task_id is not None and self.store.get(self.task_id).pinned
                    else self.system_id
                )
                if victim is None:
                    raise
                self.store.pin(victim, False)
                self.store.set_importance(victim, 1.0)
                self.notes.append(f"budget {self.budget}: pins too big, unpinned #{victim} (importance 1)")
        else:  # pragma: no cover - two pins at most
            raise RuntimeError("unreachable")
        text = "\n".join(e.text for e in w.entries)
        task_in = self.task_id is not None and any(
            e.id == self.task_id and e.form == "full" for e in w.entries
        )
        return text, task_in, w.used, w.mode != "sticky"

    def close(self) -> None:
        self.store.close()


def evaluate_steps(
    name: str, steps: Sequence[Step], counter: TokenCounter, config: StoreConfig, workdir: str
) -> TrajectoryResult:
    if not steps:
        return TrajectoryResult(name, 0, 0, {(lb, p): Cell() for lb, _ in BUDGET_FRACTIONS for p in POLICIES})
    full_msgs = list(steps[-1].prompt)
    first_user = next((i for i, m in enumerate(full_msgs) if m.role == "user"), None)
    costs_all = [counter.count(m.text) + MESSAGE_OVERHEAD_TOKENS for m in full_msgs]
    peak = max(REPLY_PRIMING_TOKENS + sum(costs_all[: len(s.prompt)]) for s in steps)
    fixed = " ".join(full_msgs[i].text for i in range(min(len(full_msgs), (first_user or 0) + 1)))
    fixed_anchors = anchors(fixed)
    task_text = full_msgs[first_user].text if first_user is not None else ""

    cells: dict[tuple[str, str], Cell] = {(lb, p): Cell() for lb, _ in BUDGET_FRACTIONS for p in POLICIES}
    replayers: dict[tuple[str, str], _Replayer] = {}
    for lb, frac in BUDGET_FRACTIONS:
        limit = max(64, int(peak * frac))
        for pol, sticky in (("store-sticky", True), ("store-fresh", False)):
            # Pin the task when it is affordable (at most PIN_TASK_SHARE of the budget); a task bigger
            # than that (one trajectory's first message is a 5K-token demonstration) gets importance 1
            # instead and competes in the knapsack like everything else.
            pin_task = first_user is not None and costs_all[first_user] <= PIN_TASK_SHARE * limit
            replayers[(lb, pol)] = _Replayer(f"{workdir}/{lb}-{pol}.db", limit, sticky, config, pin_task)
    seen: set[str] = set()  # anchors introduced by messages after the task
    added = 0
    notes: list[str] = []
    try:
        for step in steps:
            prompt = step.prompt
            for i in range(added, len(prompt)):
                for rep in replayers.values():
                    rep.add(i, prompt[i], first_user)
                if first_user is not None and i > first_user:
                    seen |= anchors(prompt[i].text)
            added = max(added, len(prompt))
            uses = (anchors(step.output) & seen) - fixed_anchors
            last_asst = next((m.text for m in reversed(prompt) if m.role == "assistant"), "")
            query = last_asst + "\n" + (prompt[-1].text if prompt and prompt[-1].role != "assistant" else "")
            for lb, frac in BUDGET_FRACTIONS:
                limit = max(64, int(peak * frac))
                usable = Budget(limit).usable
                keep, used = _baseline(prompt, costs_all[: len(prompt)], usable)
                btext = "\n".join(prompt[i].text for i in keep)
                _tally(
                    cells[(lb, "baseline")],
                    uses,
                    btext,
                    first_user in keep if first_user is not None else False,
                    used,
                )
                for pol in ("store-sticky", "store-fresh"):
                    text, task_in, used, resolved = replayers[(lb, pol)].window(query)
                    _tally(cells[(lb, pol)], uses, text, task_in, used)
                    cells[(lb, pol)].resolves += int(resolved)
                _ = task_text
    finally:
        for rep in replayers.values():
            notes.extend(n for n in rep.notes if n not in notes)
            rep.close()
    return TrajectoryResult(name, len(steps), peak, cells, notes)


def _tally(cell: Cell, uses: Iterable[str], window_text: str, task_in: bool, used: int) -> None:
    cell.calls += 1
    cell.task_present += int(task_in)
    cell.tokens_used += used
    for a in uses:
        cell.uses += 1
        cell.served += int(a in window_text)


def default_root() -> Path:
    """../shared/trajectories next to the repository (this file is engine/store/evaluate.py)."""
    import os

    env = os.environ.get("CONTEXTPIPE_TRAJECTORIES")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[3] / "shared" / "trajectories"


def trajectory_files(root: Path) -> list[Path]:
    files = [p for p in sorted(root.rglob("*")) if p.is_file() and p.suffix in (".json", ".traj")]
    return files


def run_eval(
    root: Path | None = None,
    *,
    config: StoreConfig | None = None,
    progress: Callable[[str], None] | None = None,
    limit: int | None = None,
) -> EvalReport:
    """Replay every trajectory under `root`; raises FileNotFoundError if the folder is absent. A file
    that is not a trajectory (or cannot be read) is listed in the report's `skipped`: one foreign .json
    in the folder ended the whole run with a traceback."""
    from engine.importers import ImportFormatError, load

    base = root if root is not None else default_root()
    if not base.is_dir():
        raise FileNotFoundError(
            f"no trajectories at {base}: set CONTEXTPIPE_TRAJECTORIES or put them in ../shared/trajectories"
        )
    cfg = config or StoreConfig()
    counter = TokenCounter()
    results: list[TrajectoryResult] = []
    skipped: list[tuple[str, str]] = []
    files = trajectory_files(base)[: limit if limit else None]
    for path in files:
        name = str(path.relative_to(base))
        try:
            session = load(path)
        except (ImportFormatError, OSError) as exc:
            if isinstance(exc, PermissionError):  # "[Errno 13] Permission denied: 'PATH'": whose, and what to do
                from engine.access import denied

                why = denied(path)
            else:
                why = str(exc).removeprefix(f"{path}: ")
            skipped.append((name, why))
            if progress is not None:
                progress(f"{name}: skipped: {why}")
            continue
        steps = steps_from_session(session)
        with tempfile.TemporaryDirectory(prefix="ctx-eval-") as tmp:
            res = evaluate_steps(name, steps, counter, cfg, tmp)
        results.append(res)
        if progress is not None:
            progress(f"{name}: {counted(res.calls, 'call')}, peak {res.peak} tokens")
    return EvalReport(results, skipped)


def format_report(report: EvalReport, per_trajectory: bool = False) -> str:
    tot = report.totals()
    lines = [
        f"{counted(len(report.results), 'trajectory', 'trajectories')}, "
        f"{counted(sum(r.calls for r in report.results), 'model call')}",
        "",
        "budget   policy         uses  served  recall  macro   task-present  avg-used  re-solves",
    ]
    for lb, _ in BUDGET_FRACTIONS:
        for pol in POLICIES:
            c = tot[(lb, pol)]
            avg = c.tokens_used / c.calls if c.calls else 0
            lines.append(
                f"{lb:<8} {pol:<13} {c.uses:>5}  {c.served:>6}  {c.recall:>6.1%}  {report.macro(lb, pol):>6.1%}"
                f"  {c.task_rate:>12.1%}  {avg:>8.0f}  {c.resolves if pol != 'baseline' else '-':>9}"
            )
        b, e, w = report.wins(lb)
        lines.append(f"{'':<8} store-sticky vs baseline per trajectory: {b} better, {e} equal, {w} worse")
    if report.skipped:
        lines.append("")
        skips = len(report.skipped)
        that = "is not a trajectory" if skips == 1 else "are not trajectories"
        lines.append(f"skipped {counted(skips, 'file')} that {that}:")
        lines.extend(f"  {name}: {why}" for name, why in report.skipped)
    if per_trajectory:
        lines.append("")
        lines.append("per trajectory (recall baseline / sticky / fresh at half and quarter):")
        for r in report.results:
            cells = []
            for lb in ("half", "quarter"):
                cells.append("/".join(f"{r.cells[(lb, p)].recall:.0%}" for p in POLICIES))
            lines.append(
                f"  {r.name[:60]:<60} calls {r.calls:>3} peak {r.peak:>6}  half {cells[0]:<12} quarter {cells[1]}"
            )
            for n in r.notes:
                lines.append(f"      note: {n}")
    return "\n".join(lines)
