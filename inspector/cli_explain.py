"""What `cp-inspect explain TARGET` does, importable without typer.

A plain explain command line (cli_argv.py) runs from here without typer's dispatch (every command
built, pydantic imported to coerce the arguments) or the other commands' modules: that was ~40% of
the CPU of `explain FILE --format json` on a demo recording, a command people run in scripts and
loops (BENCHMARKS.md, Start-up). The typer command `explain` (cli.py) calls explain() here, so both
read, check and answer the same way.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.errors import ContextPipeError

from .cli_events import (
    MalformedTurn,
    check_turn_event,
    event_offset,
    iter_events_for_turn,
    read_events,
    read_events_for_turn,
)
from .cli_output import echo
from .cli_overrides import check_window, parse_gates, parse_thresholds
from .option_check import check_thresholds, option_check
from .recording_open import fail, open_recording, warn, warn_plain
from .token_arg import parse_turn, tokens_option

if TYPE_CHECKING:
    from engine.recording.cpsession import RecordingReader
    from engine.whatif import Overrides

_DAMAGED = "check the file came from an engine recording; `cp-inspect salvage FILE -o OUT` keeps what precedes damage"


def load_events(target: str) -> tuple[list[dict[str, Any]], dict[str, Any], list[int]]:
    """Journal events from a recording path or a live pid (`PID` or `PID.SESSION`: its recording when it
    offers one it may be read from, else its journal through the probe), with each event's file offset
    (recordings)."""
    from engine.probe.runtime_dir import parse_target

    live = parse_target(target)
    if live is not None and not Path(target).exists():
        r, events, header = _live_read(*live)
        if r is None:
            return events, header, []
    else:
        r = open_recording(Path(target))
    events, offsets = read_events(r)
    return events, r.header, offsets


def _live_read(pid: int, session: int | None) -> tuple[RecordingReader | None, list[dict[str, Any]], dict[str, Any]]:
    """A running agent's turns so far: (its recording, opened and checked as `attach` checks it, [], {})
    when it records (the agent sends nothing; the file is read as any recording is), else (None, its
    journal's events whole through the probe's fold stream, its hello). Why an offered recording is not
    read is said on stderr, as `attach` says it."""
    from inspector.sources.live_recording import open_recorded

    try:
        got, why = open_recorded(pid, session)
    except ContextPipeError as exc:
        fail(str(exc))
    if why is not None:
        warn_plain(why)
    from inspector.sources.live import LiveSource

    if not isinstance(got, LiveSource):
        return got, [], {}
    try:
        # The journal to its end as the agent has it now (fetched by range), as `find PID` reads it: a
        # snapshot past TAIL_MIN events is its tail, with stand-ins for the turns before it (`explain PID`
        # said "no completed turns yet" of an agent past ~1,024 events).
        got.replayer()
    except ContextPipeError as exc:
        got.close()
        fail(f"agent {pid if session is None else f'{pid}.{session}'}: {exc}")
    got.client.close()
    from engine.recording.journal import unpack_event

    return None, [unpack_event(e) for e in got.events], got.header


def explain(
    target: str,
    turn: str | None = None,
    budget_text: str | None = None,
    gate: list[str] | None = None,
    threshold: list[str] | None = None,
    provider: str | None = None,
    fmt: str | None = None,
    as_json: bool = False,
) -> None:
    """`cp-inspect explain`'s work, with its options as typer passes them (texts, lists of texts or
    None, and the --json flag); the typer command first refuses a second file (cli.one_file_only)."""
    from engine.recording.journal import trace_of
    from engine.recording.replay import Replayer, ReplayError
    from engine.recording.why import why_missed
    from engine.whatif import Overrides

    from .cli_table import fit_text, terminal_columns
    from .explain import to_json, to_text

    if as_json:
        if fmt not in (None, "json"):  # --format text too: it printed JSON, one of the two asks dropped
            fail(f"--json and --format {fmt} ask for two formats: give one", 2)
        fmt = "json"
    fmt = "text" if fmt is None else fmt
    if fmt not in ("text", "json"):
        fail("--format must be text or json", 2)
    budget = tokens_option(budget_text, "--budget")
    # Overrides reads a 0 window as "no override": --budget 0 explained the recorded plan as asked-for.
    check_window(budget, "--budget")
    thresholds = parse_thresholds(threshold) or None
    # Checked before the recording is read, and said as the option's error, as simulate says them.
    check_thresholds(thresholds)
    if provider is not None:
        from engine.providers import canonical_provider

        option_check("--provider", canonical_provider, provider)
    r, n, live = _explain_target(target, turn)
    ov = Overrides(budget, thresholds, parse_gates(gate) or None, provider)
    streamed = _explain_streamed(r, n, ov, fmt) if r is not None else None
    if streamed is not None:
        echo(streamed if fmt == "json" else fit_text(streamed, terminal_columns()))
        return
    # A live agent's journal, or a recording the single pass could not explain: everything read and held,
    # which also says any damage or malformed event as it always has.
    events, offsets, actual_ev = live if live is not None else _explain_read(target, r, n)
    actual = trace_of(actual_ev)
    trace, base = actual, None
    try:
        replayer = Replayer(events)
        if not ov.is_empty():
            trace = replayer.replan(n, ov).trace
            base = actual
        why = why_missed(events, n, None if ov.is_empty() else ov, replayer=replayer)
    except ReplayError as exc:
        fail(f"{target}: {exc}{event_offset(offsets, exc.event_index)}; {_DAMAGED}")
    except ContextPipeError as exc:
        fail(str(exc), 2)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:  # hostile event contents
        fail(f"{target}: the events before turn {n} are malformed ({type(exc).__name__}: {exc}); {_DAMAGED}")
    try:
        out = json.dumps(to_json(trace, base, why), indent=2) if fmt == "json" else to_text(trace, base, why)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        where = f" (turn {n} at offset {offsets[events.index(actual_ev)]})" if offsets else ""
        fail(f"{target}: turn {n}'s trace is malformed ({type(exc).__name__}: {exc}){where}; {_DAMAGED}")
    echo(out if fmt == "json" else fit_text(out, terminal_columns()))


def _explain_streamed(r: RecordingReader, n: int, ov: Overrides, fmt: str) -> str | None:
    """`explain`'s output for turn `n` of a recording, read once and folded as it is read
    (Replayer.for_turns): no event is held, only the folded state before turns n-1 and n, turn n's
    usage events and the as-sent bodies of those two turns. The events were held whole (the replayer
    keeps the journal for random access), ~18x the file in memory for the last turn of a long one.

    Texts are counted from the recording's token-count table when it has one (as `simulate` counts
    them): rebuilding turn n-1 measures the whole folded history, every text of it tokenized afresh,
    ~90% of explaining the last turn of a long session (27,000 turns of ~48 KB tool outputs: ~70 s of
    ~80 s CPU). The rebuilt turns are held against their recorded traces (a section with the recorded
    content has the recorded tokens); if the table disagrees, the turn is explained again with every
    text tokenized, so the output is what a fresh count gives either way.

    None when anything goes wrong (damage before turn n, a malformed event, a journal with spill
    failures): the caller then reads the events whole and says it exactly as it did before."""
    counter = _carried_counter(r)
    if counter is not None:
        out = _explain_once(r, n, ov, fmt, counter)
        if out is not _DISAGREE:
            return out
    out = _explain_once(r, n, ov, fmt, None)
    return None if out is _DISAGREE else out


_DISAGREE = "counts disagree"  # _explain_once's answer when the count table does not match the traces


def _carried_counter(r: RecordingReader) -> Any:
    """A counter answering from the recording's token-count table, or None (no table, an unreadable one
    or another tokenizer's: every text is tokenized, as before)."""
    from engine.recording.counts import CarriedCounter, CountTableError
    from engine.sim.few_texts import FewTextsTokenizer

    try:
        table = r.token_counts()
        return CarriedCounter(table, FewTextsTokenizer()) if table is not None else None
    except (CountTableError, OSError):
        return None
    except ContextPipeError:  # damage where the table is: counted afresh, the damage said by the read
        return None


def _explain_once(r: RecordingReader, n: int, ov: Overrides, fmt: str, counter: Any) -> str | None:
    """_explain_streamed with `counter` (None: a fresh one); _DISAGREE when `counter`'s counts do not
    give the recorded tokens of turn n-1's or n's sections."""
    from engine.recording.journal import trace_of
    from engine.recording.replay import Replayer
    from engine.recording.why import ActualBodies, why_missed

    from .explain import to_json, to_text

    pair = {n - 1, n} if n > 0 else {n}
    damage: list[str] = []
    found: dict[int, dict[str, Any]] = {}  # the turn events of turns n-1 and n
    usage: list[dict[str, Any]] = []  # turn n's usage events: all of the journal diagnostics() reads
    sent = ActualBodies(pair)

    def events() -> Iterator[dict[str, Any]]:
        for _, ev in iter_events_for_turn(r, n, damage.append):
            k = ev.get("k")
            if k == "turn" and ev.get("turn") in pair:
                found[ev["turn"]] = ev
            elif k == "usage" and ev.get("turn") == n:
                usage.append(ev)
            sent.feed(ev)
            yield ev

    try:
        replayer = Replayer.for_turns(events(), pair, counter)
        actual = trace_of(found[n])
        if counter is not None:
            for t in sorted(pair):
                if t in found and not _sections_agree(replayer.replan(t).trace, trace_of(found[t])):
                    return _DISAGREE
        trace, base = actual, None
        if not ov.is_empty():
            trace = replayer.replan(n, ov).trace
            base = actual
        why = why_missed(usage, n, None if ov.is_empty() else ov, replayer=replayer, actual=sent.out)
        out = json.dumps(to_json(trace, base, why), indent=2) if fmt == "json" else to_text(trace, base, why)
    except Exception:  # noqa: BLE001 - said by the caller's second, whole read, as it always was
        return None
    for message in damage:
        warn(message)
    return out


def _sections_agree(built: dict[str, Any], recorded: dict[str, Any]) -> bool:
    """Whether every section of a rebuilt trace with a recorded section's content (id and hash) has its
    recorded token total: counts are a function of the content alone (SimBuilt.check_counts' rule)."""
    rec = {s.get("id"): s for s in recorded.get("sections", ()) if isinstance(s, dict)}
    for s in built.get("sections", ()):
        got = rec.get(s["id"])
        if got is not None and got.get("sha256") == s["sha256"] and got.get("tokens") != s["tokens"]:
            return False
    return True


def _explain_read(target: str, r: Any, n: int) -> tuple[list[dict[str, Any]], list[int], dict[str, Any]]:
    """The events `explain` folds to rebuild turn `n` of recording `r`, their frame offsets, and that
    turn's event, read through its index up to that turn only (cli_common.read_events_for_turn)."""
    from engine.recording.cpsession import RecordingError

    try:
        return read_events_for_turn(r, n)
    except MalformedTurn as exc:
        fail(f"{target}: {exc}{event_offset(exc.offsets, exc.index)}; {_DAMAGED}")
    except RecordingError as exc:
        fail(f"{exc}{_readable_before(r, exc.offset)}")
    except OSError as exc:
        fail(f"cannot read {target}: {exc.strerror or exc}")


def _explain_target(
    target: str, turn_text: str | None
) -> tuple[Any, int, tuple[list[dict[str, Any]], list[int], dict[str, Any]] | None]:
    """The turn `explain` is asked for (`turn_text`: None for the last, negative from the last): (the open
    recording, n, None), or for a live agent (None, n, its events whole, [], turn n's event)."""
    from engine.probe.runtime_dir import parse_target

    live_target = parse_target(target)
    is_live = live_target is not None and not Path(target).exists()
    r: Any = None
    if is_live:
        assert live_target is not None
        # A recording agent's turns are read from its recording (checked as attach checks it), as any
        # recording is: the agent sends nothing, and the single pass explains the turn.
        r, events, _ = _live_read(*live_target)
        offsets: list[int] = []
        is_live = r is None
    if is_live:
        nums: list[int] = []
        for i, e in enumerate(events):
            if e.get("k") == "turn":
                try:
                    check_turn_event(e, i, [], 0)
                except MalformedTurn as exc:
                    fail(f"{target}: {exc}{event_offset(offsets, i)}; {_DAMAGED}")
                nums.append(e["turn"])
    else:
        r = r or open_recording(Path(target))
        nums = r.turn_numbers()
    if not nums:
        fail(f"{target} has no completed turns yet")
    try:
        turn = None if turn_text is None else parse_turn(turn_text)
    except ValueError:
        fail(f"--turn: turn numbers are integers, got {turn_text!r} ({target} has turns {min(nums)}..{max(nums)}; "
             "-1 is the last)", 2)
    n = max(nums) if turn is None else (turn if turn >= 0 else max(nums) + 1 + turn)
    if n not in nums:
        # The turn as given (-100 was reported as "turn -60"), and a usage error as in `replay --turn`.
        fail(f"turn {turn} is not in {target} (it has turns {min(nums)}..{max(nums)}; -1 is the last)", 2)
    if is_live:
        return None, n, (events, offsets, next(e for e in events if e.get("k") == "turn" and e.get("turn") == n))
    return r, n, None


def _readable_before(r: Any, offset: int | None) -> str:
    """What `explain` can still show of a recording damaged at `offset`: the turns whose frames the index
    puts before it (each read only what precedes it)."""
    if offset is None:
        return ""
    before = r.turns_before(offset)
    if not before:
        return ""
    return f"; turns {before[0]}..{before[-1]} precede the damage and can be explained (--turn {before[-1]})"
