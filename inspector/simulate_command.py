"""What `cp-inspect simulate` does, importable without typer.

The console script (entry.py) runs a plain `simulate FILE... [options]` (simulate_argv.py) from here
without importing typer: importing it cost ~0.1-0.15 s CPU of a command whose goal is 1 s end to end
(BENCHMARKS.md, "Session-wide what-if and cost"). The typer command (simulate_cli.py) calls the same
`run`, so both read, simulate and print the same way. typer is imported only on the way out of an
error (recording_open.fail) or to read --gate/--threshold values (cli_common's parsers).
"""

from __future__ import annotations

import gc
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.wording import counted

from .cli_overrides import check_window
from .option_check import check_prices, check_thresholds, option_check
from .recording_open import about, fail, open_recording
from .token_arg import tokens_option

if TYPE_CHECKING:
    from engine.sim.cachesim import CallCache
    from engine.sim.simulate import SimulationReport
    from engine.sim.simulate_figures import PolicyFigures


def simulate(
    files: list[Path],
    provider: str | None = None,
    model: str | None = None,
    window: int | str | None = None,
    gate: list[str] | None = None,
    threshold: list[str] | None = None,
    prices: Path | None = None,
    policies: str | None = None,
    policy: str | None = None,
    no_calibrate: bool = False,
    as_json: bool = False,
    per_turn: bool = False,
) -> None:
    """simulate_cli.simulate's work, with the collector held off (see collector_held). `window` as typed
    (32000, 32k, 1.5M) or already read."""
    tokens = tokens_option(window, "--window")
    with collector_held():
        run(files, provider, model, tokens, gate, threshold, prices, policies, policy, no_calibrate, as_json,
            per_turn)  # fmt: skip


@contextmanager
def collector_held() -> Iterator[None]:
    """The cyclic garbage collector off while a command runs, back on (if it was) after.

    simulate allocates a few hundred thousand long-lived objects (the events, every turn's requests and
    figures) and next to no cyclic garbage, yet that growth sets off full collections that rescan all
    of it: ~7-11% of the CPU on a 930-turn session, for nothing (peak memory is the same without them).
    Reference counting frees everything not in a cycle meanwhile."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def run(
    files: list[Path],
    provider: str | None,
    model: str | None,
    window: int | None,
    gate: list[str] | None,
    threshold: list[str] | None,
    prices: Path | None,
    policies: str | None,
    policy: str | None,
    no_calibrate: bool,
    as_json: bool,
    per_turn: bool,
) -> None:
    # Imported here, not at module top: cli.py imports this module while it is still loading.
    from engine.errors import ContextPipeError
    from engine.recording.cpsession import RecordingError
    from engine.recording.replay import ReplayError
    from engine.sim.simulate import SimSettings, simulate_stream
    from engine.sim.simulate_read import read_counts, recording_events
    from engine.sim.simulate_settings import policy_doc

    if per_turn and not as_json:  # it was ignored: the table printed as if it had not been given
        fail("--per-turn adds per-turn figures to the JSON: give it with --json", 2)
    # Said once, as the option's error: it was found simulating the first file and reported as that
    # file's ("FILE: --window must be a positive number of tokens").
    check_window(window)
    if policies is not None and policy is not None:
        # --policies builds each of its engine columns from the policy's name alone: --policy (and its
        # options, cost_aware:target=...) was dropped without a word, the table as if it were not given.
        fail("--policy sets the pipeline column of the what-if table; --policies compares policies side by side "
             "(cost_aware and wave1 among them, with their defaults): give one of them", 2)
    if policies is not None and not policies.strip(" ,"):
        # An empty value read as not given: the plain what-if table came out as if --policies were absent.
        fail("--policies needs 'all' or a comma list of policy names (see simulate --help)", 2)
    # --provider, --policies and --policy checked once, as the options' errors: each was found simulating
    # the first file and said as that file's ("FILE: unknown policy 'all'; known policies: cost_aware,
    # wave1"), and --policy all (the engine's column) did not point to --policies all (every column).
    if provider is not None:
        from engine.providers import canonical_provider

        option_check("--provider", canonical_provider, provider)
    if policies is not None:
        from engine.sim.simulate_settings import _policy_list

        option_check("--policies", _policy_list, [policies])
    if policy is not None:
        from engine.policy.settings import POLICY_NAMES, PolicySettings
        from engine.sim.policies import ALL as PEER_POLICIES

        name = policy.strip().partition(":")[0]
        peer = name not in POLICY_NAMES and (name == "all" or name in PEER_POLICIES)  # a peer's column
        hint = f" (to compare policies side by side: --policies {name})" if peer else ""
        option_check("--policy", PolicySettings.parse, policy, hint=hint)
    gates = thresholds = None
    if gate or threshold:
        # cli_common imports typer (its option annotations): only for the lines that give these.
        from .cli_common import parse_gates, parse_thresholds

        gates, thresholds = parse_gates(gate) or None, parse_thresholds(threshold) or None
        # Against the defaults, as simulate checks them: an out-of-order set was said as the first
        # recording's error ("FILE: invalid thresholds ..."), as if the file were at fault.
        check_thresholds(thresholds)
    seen: dict[Path, Path] = {}
    for file in files:  # a missing one said before the sessions ahead of it are simulated for nothing
        if not file.exists() or file.is_dir():
            open_recording(file)
        # One recording given twice (an overlapping glob, a path spelt two ways) was simulated twice and
        # counted twice in the --policies totals.
        key = file.resolve()
        if key in seen:
            also = "" if str(seen[key]) == str(file) else f" (as {seen[key]} too)"
            fail(f"{file} is given twice{also}: give each recording once", 2)
        seen[key] = file
    # The table (and --model's row in it) checked once, before any recording is read: a bad table or an
    # unknown model was said as the first recording's error ("FILE: price table ...: row ... lacks ..."),
    # as if the recording were at fault. The table read here is the one every recording is priced by.
    table = check_prices(prices)
    if model is not None:
        from engine.sim.simulate_settings import _price_row

        option_check("--model", _price_row, table, model)
    settings = SimSettings(
        provider=provider,
        model=model,
        window=window,
        gates=gates,
        thresholds=thresholds,
        prices=table,
        policy=policy,
        policies=[policies] if policies else None,
        calibrate=not no_calibrate,
    )
    reports: list[SimulationReport] = []
    for file in files:
        reader = open_recording(file)
        try:
            # In their in-memory form already (RecordingReader's doc); of each turn's trace only what
            # simulate reads. A big recording is read again for each pass, not held (recording_events).
            read = recording_events(reader)
            # The agent's own token counts, when the recording carries them: nothing is tokenized again.
            counts, why = read_counts(reader)
            report = simulate_stream(read, settings, source=str(file), counts=counts)
            del read  # a small recording's events, held: not kept while the next file is simulated
            if why:
                report.notes.append(why)
            if reader.damage is not None:
                # Said on stderr as the file opened, but not in the report: --json (what CI reads) gave the
                # turns before the cut as the whole session ("18 of 18 turns") with no word of it.
                report.notes.append(
                    f"recording cut short: {reader.damage.message}; the figures are of the turns before the cut"
                )
            reports.append(report)
        except (ReplayError, RecordingError) as exc:
            fail(about(file, exc))
        except ContextPipeError as exc:
            fail(about(file, exc) + _unpriced_among_several(exc, files, model), 2)
    if as_json:
        docs = {n: policy_doc(n) for n in reports[0].policies if policy_doc(n)}
        if len(reports) == 1:
            out = reports[0].to_json(per_turn)
            if policies:
                out["policy_docs"] = docs
        else:
            out = {"reports": [r.to_json(per_turn) for r in reports], "policy_docs": docs}
            if policies:
                out["total"] = {name: _fig_json(*totals) for name, totals in policy_totals(reports).items()}
        print(json.dumps(out, indent=2))
        return
    from .cli_table import terminal_columns

    room = terminal_columns()
    if policies:
        print(render_policies(reports, room))
        return
    for r in reports:
        print(render_text(r, room))


def _unpriced_among_several(exc: Exception, files: list[Path], model: str | None) -> str:
    """What to do about one recording the table cannot price, given with others: the price error's own
    advice ("Choose the model to price it as with --model M") would price every recording given as M
    (`simulate all/*.cpsession --policies all` over the shared trajectories stopped at the first of
    SWE-agent's unnamed ones, and --model would have priced the DeepSeek runs as that model too)."""
    from engine.sim.pricing import UnknownModelError

    if model is not None or len(files) < 2 or not isinstance(exc.__cause__, UnknownModelError):
        return ""
    return (f" With {len(files)} recordings, --model prices every one as M: to keep the others' own prices, "
            "leave this one out (or give it a run of its own).")


def _fmt_int(v: int | None) -> str:
    return "-" if v is None else f"{v:,}"


ROWS: tuple[tuple[str, Any], ...] = (
    ("prompt tokens", lambda p: _fmt_int(p.totals.input_tokens)),
    ("uncached tokens", lambda p: _fmt_int(p.totals.uncached)),
    ("cache read tokens", lambda p: _fmt_int(p.totals.cache_read)),
    ("cache write tokens", lambda p: _fmt_int(p.totals.cache_write)),
    ("cache hit rate", lambda p: f"{100 * p.cache_hit_rate:.1f}%"),
    ("output tokens", lambda p: _fmt_int(p.output_tokens)),
    ("cost (USD)", lambda p: f"${p.cost_usd:.4f}"),
    ("compactions", lambda p: _fmt_int(p.compactions)),
    ("cache breaks", lambda p: _fmt_int(p.cache_breaks)),
    ("priced as", lambda p: p.model),
    ("cache rules", lambda p: p.cache_rules),
)


def render_text(r: SimulationReport, room: int | None = None) -> str:
    """The columns side by side at `room` columns (None: a pipe's, every row on one line); columns that
    do not fit go to a second table under the first, with the row labels again (cli_table.fitted)."""
    from engine.sim.break_causes import causes_said
    from engine.sim.simulate_figures import POLICY_NAMES

    from .cli_table import Column, fitted, wrapped

    cols = [n for n in POLICY_NAMES]
    pol: dict[str, PolicyFigures | None] = r.policies
    rec = r.recorded
    lines = [f"SIMULATE {r.source}"]
    for line in (
        f"  {r.simulated_turns} of {counted(r.turns, 'turn')}; model {r.model}; engine policy {r.engine_provider}; "
        f"cache rules {r.cache_rules}; window {r.window:,} (recorded {rec['window']:,}, "
        f"{rec['model']} via {rec['provider']})",
        f"  {r.prices_line()}",
    ):
        lines += wrapped(line, room, "    ")
    lines.append("")
    label_w = max(len(label) for label, _ in ROWS) + 2
    cells = {c: [fn(pol[c]) if pol.get(c) is not None else "-" for _, fn in ROWS] for c in cols}
    columns = [Column("", [label for label, _ in ROWS], label_w, left=True)]
    columns += [Column(c, cells[c], max(len(c), *(len(x) for x in cells[c])) + 2) for c in cols]
    lines += fitted(columns, room)
    lines.append("")
    tail: list[str] = []
    be = r.break_even_cached_price_ratio
    p, c = pol["pipeline"], pol["gates_closed"]
    if be is None and p is not None and c is not None:
        # No crossing in [0, 1]: the cost difference keeps one sign over every realistic cached price,
        # so the order at the table's own price is the order at all of them.
        if p.totals == c.totals:
            verdict = "the two policies sent the same requests"
        else:
            cheaper = "pipeline" if p.cost_usd <= c.cost_usd else "gates_closed"
            verdict = f"{cheaper} is cheaper at every cached price from 0 to 100% of the input price"
        tail.append(f"break-even cached-token price: none ({verdict})")
    elif be is not None and p is not None and c is not None:
        above = "pipeline" if p.totals.cache_read < c.totals.cache_read else "gates_closed"
        below = "gates_closed" if above == "pipeline" else "pipeline"
        tail.append(
            f"break-even cached-token price: {100 * be:.1f}% of the input price "
            f"({above} is cheaper above it, {below} below)"
        )
    for name in cols:
        fig = pol.get(name)
        if fig is not None and fig.cache_break_causes:
            causes = "; ".join(causes_said(fig.cache_break_causes))
            tail.append(f"cache breaks ({name}): {causes}")
    for n in r.notes:
        tail.append(f"note: {n}")
    for line in tail:
        lines += wrapped(line, room)
    lines.append(f"({1000 * r.elapsed_s:.0f} ms)")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------- --policies
BASE_COLUMNS = ("pipeline", "gates_closed", "as_sent", "actual")


def policy_totals(reports: list[SimulationReport]) -> dict[str, tuple[CallCache, float, int, int, int]]:
    """Per policy column over every report: (cache totals, cost, compactions, breaks, output tokens)."""
    from engine.sim.cachesim import ZERO

    out: dict[str, tuple[CallCache, float, int, int, int]] = {}
    for r in reports:
        for name, f in r.policies.items():
            if name in BASE_COLUMNS or f is None:
                continue
            t, c, k, b, o = out.get(name, (ZERO, 0.0, 0, 0, 0))
            out[name] = (
                t + f.totals,
                c + f.cost_usd,
                k + (f.compactions or 0),
                b + (f.cache_breaks or 0),
                o + f.output_tokens,
            )
    return out


def _fig_json(t: CallCache, cost: float, comps: int, breaks: int, out: int) -> dict[str, Any]:
    return {
        "prompt_tokens": t.input_tokens,
        "billed_new_tokens": t.uncached + t.cache_write,
        "cache_hit_rate": round(t.hit_rate, 6),
        "output_tokens": out,
        "cost_usd": round(cost, 8),
        "compactions": comps,
        "cache_breaks": breaks,
    }


def render_policies(reports: list[SimulationReport], room: int | None = None) -> str:
    """One table: a row per policy, summed over every recording given, at `room` columns (None: a pipe's,
    every row on one line); columns that do not fit go to a second table under the first, with the
    policy names again (cli_table.fitted)."""
    from engine.sim.simulate_settings import policy_doc

    from .cli_table import Column, fitted, wrapped

    tot = policy_totals(reports)
    base = tot.get("paper")
    many = len(reports) > 1

    def which(rs: list[SimulationReport]) -> str:
        # Said only where the recordings differ: each line names the ones it applies to.
        return f" ({', '.join(r.source for r in rs)})" if many and len(rs) < len(reports) else ""

    # Recordings simulated without --model/--window keep their own model, cache rules and window: the
    # table sums them, so every distinct setting is said, not only the first recording's.
    windows = _grouped(reports, lambda r: f"{r.window:,}")
    head = f"SIMULATE --policies: {counted(len(reports), 'recording')}, window " + "; ".join(
        f"{w}{which(rs)}" for w, rs in windows.items()
    )
    lines = wrapped(head, room)
    for line, rs in _grouped(reports, lambda r: r.prices_line()).items():
        lines += wrapped(f"  {line}{which(rs)}", room, "    ")
    calibrated = [r for r in reports if r.calibration != 1.0]
    for ratio, rs in _grouped(calibrated, lambda r: f"x{r.calibration:.3f}").items():
        on = "every recording" if many and len(rs) == len(reports) else ", ".join(r.source for r in rs)
        lines += wrapped(f"  token counts calibrated to the provider's ({ratio} on {on})", room, "    ")
    lines.append("")
    cols = (
        "policy",
        "prompt tokens",
        "billed new",
        "hit rate",
        "cost (USD)",
        "vs paper",
        "compactions",
        "breaks",
    )
    rows = []
    for name, (t, cost, comps, breaks, _o) in tot.items():
        rel = f"{cost / base[1]:.3f}x" if base and base[1] > 0 else "-"
        rows.append(
            (
                name,
                f"{t.input_tokens:,}",
                f"{t.uncached + t.cache_write:,}",
                f"{100 * t.hit_rate:.1f}%",
                f"${cost:.4f}",
                rel,
                str(comps),
                str(breaks),
            )
        )
    columns = [
        Column(c, [row[i] for row in rows], max(len(c), *(len(row[i]) for row in rows)), left=i == 0)
        for i, c in enumerate(cols)
    ]
    lines += fitted(columns, room, "  ")
    lines.append("")
    for name in tot:
        lines += wrapped(f"{name}: {policy_doc(name)}", room)
    notes: dict[str, list[SimulationReport]] = {}
    for r in reports:
        for n in dict.fromkeys(r.notes):
            notes.setdefault(_shared_note(n, r) if many else n, []).append(r)
    for n, rs in notes.items():
        lines += wrapped(f"note: {n}{which(rs)}", room)
    return "\n".join(lines)


def _shared_note(note: str, r: SimulationReport) -> str:
    """A recording's note as several recordings share it: its calibration ratio, which the head already
    gives for each, left out. Nine recordings' table was followed by nine notes that differed only in
    that ratio, each naming its file after it, and every note that applied to all of them named all nine."""
    scaled = f"token counts scaled by {r.calibration:.3f}: "
    if r.calibration != 1.0 and note.startswith(scaled):
        return "token counts scaled by each recording's ratio above: " + note[len(scaled) :]
    return note


def _grouped(reports: list[SimulationReport], key: Any) -> dict[str, list[SimulationReport]]:
    """The reports by `key(report)`, in the order the keys first appear."""
    out: dict[str, list[SimulationReport]] = {}
    for r in reports:
        out.setdefault(key(r), []).append(r)
    return out
