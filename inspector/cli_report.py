"""What `cp-inspect report FILES...` does (cost and health of many sessions), importable without typer,
and the reading of recordings it shares with `export` (fleet_cli.py).

`report` runs in scripts and cron jobs over a folder of recordings (`report runs/ --json > fleet.json`);
under typer each run imported typer, built every command of the program and pydantic's argument adapters
before the first recording was read. A plain report command line (cli_argv.py) runs report() here
directly; the typer command (fleet_cli.py) calls it too, so both check and answer alike.
"""

from __future__ import annotations

import glob
import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from engine.wording import counted

from .cli_output import echo
from .cli_overrides import check_window
from .option_check import check_prices
from .recording_open import demo_hint, fail, missing, trajectory_hint, warn
from .token_arg import tokens_option


def expand_paths(patterns: list[str]) -> list[Path]:
    """Files, directories (every .cpsession under them) and globs, in a stable order, each once."""
    out: list[Path] = []
    for pattern in patterns:
        matches = sorted(glob.glob(pattern, recursive=True)) if any(c in pattern for c in "*?[") else [pattern]
        if not matches:
            fail(f"no recordings match {pattern}{demo_hint(pattern)}")
        for m in matches:
            p = Path(m)
            if p.is_dir():
                found = sorted(p.rglob("*.cpsession"))
                if not found:
                    fail(f"{p} is a directory with no .cpsession recordings in it")
                out += found
            elif not p.exists():
                # As typed (Path drops a trailing slash): "report runs/" said "no such file: runs".
                fail(missing(m, "file or directory"))
            else:
                out.append(p)
    unique: dict[Path, Path] = {}
    for p in out:
        unique.setdefault(p.resolve(), p)
    return list(unique.values())


class _Unreadable(Exception):
    """A recording's events could not be read (`error`: what the reader raised), met by a command that
    reads them as it goes: said as _why says it (one line), not as the simulation's error."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


def _report_events(reader: Any, trace_fields: tuple[str, ...]) -> Any:
    """simulate_stream's `read` for `report` (engine.sim.simulate_read.recording_events), with what reading
    the recording raises wrapped in _Unreadable: an error of the simulation's own, met between two
    events, is not thrown into the generator and passes untouched."""
    from engine.errors import ContextPipeError
    from engine.sim.simulate_read import recording_events

    try:
        read = recording_events(reader, trace_fields, convert=unpack)  # a small recording is read here
    except (ContextPipeError, OSError) as exc:
        raise _Unreadable(exc) from None

    def events() -> Any:
        try:
            yield from read()
        except (ContextPipeError, OSError) as exc:
            raise _Unreadable(exc) from None

    return events


def _open(path: Path) -> Any:
    """An open RecordingReader (its cut-off tail warned of), or why the file cannot be read."""
    from engine.recording.cpsession import RecordingReader

    try:
        reader = RecordingReader.open(path)
    except Exception as exc:  # noqa: BLE001 (_why says the ones a recording raises, re-raises the rest)
        return _why(path, exc)
    if reader.damage is not None:
        warn(f"{path}: {reader.damage.message}")
    return reader


def _why(path: Path, exc: Exception) -> str:
    from engine.errors import ContextPipeError

    if isinstance(exc, ContextPipeError):
        hint = trajectory_hint(path)  # a trajectory where a recording goes: say to import it
        if hint is not None:
            return "it " + hint.removeprefix(f"{path} ")  # ("skipped P: it is JSON, not ...")
        # A RecordingError names the file ("P: ...", "P is empty: ...", "P is not a cpsession recording"):
        # _skip names it once ("skipped P: P is empty" said it twice).
        text = str(exc)
        if text.startswith(f"{path}: "):
            return text[len(f"{path}: "):]
        return "it" + text[len(str(path)):] if text.startswith(f"{path} ") else text
    if isinstance(exc, PermissionError):
        from engine.access import denied

        return denied(path)
    if isinstance(exc, OSError):
        return f"cannot read it: {exc.strerror or exc}"
    raise exc


def unpack(ev: dict[str, Any]) -> dict[str, Any]:
    from engine.recording.journal import unpack_event

    return unpack_event(ev)


def _unpriced_model(exc: Exception, header: dict[str, Any]) -> str:
    """The model a price table had no row for: named in its error as `model 'NAME'`, else the
    recording's own model."""
    found = re.search(r"model '([^']*)'", str(exc))
    return found.group(1) if found else str(header.get("model") or "?")


def _skip(path: Path, reason: str) -> None:
    # A warning as every command words one (the README: errors `cp-inspect:`, warnings `warning:`): it was a
    # bare "skipped ..." line, which a script sorting stderr by its prefix took for neither.
    warn(f"skipped {path}: {reason}")

def _is_chart(path: Path) -> bool:
    """Whether `path` holds an SVG document (a chart an earlier report wrote, or one like it)."""
    try:
        with path.open("rb") as f:
            head = f.read(256).lstrip(b"\xef\xbb\xbf \t\r\n")
    except OSError:
        return False  # unreadable (or not a regular file): not replaced
    return head.startswith((b"<svg", b"<?xml")) and b"<svg" in head


def _write_chart(svg: Path, text: str) -> None:
    """The chart written beside `svg` and renamed over it when complete, as import and salvage write: a
    full disk or Ctrl-C part way left a cut-off chart (and the earlier one gone)."""
    from .out_path import written_whole

    try:
        with written_whole(svg) as partial:
            partial.write_text(text, encoding="utf-8")
    except OSError as exc:
        fail(f"cannot write --svg {svg}: {exc.strerror or exc}")


def report(files: list[str], as_json: bool, window_text: str | None, svg: Path | None, model: str | None,
           prices: Path | None) -> None:
    """`report`'s work: each recording simulated as recorded and priced, a row each and the totals (a table,
    or one JSON document), and the chart with `svg`; exit 1 when no session could be reported."""
    from engine.errors import ContextPipeError
    from engine.recording.replay import EmptyJournal
    from engine.sim.pricing import UnknownModelError
    from engine.sim.simulate import SimSettings, simulate_stream
    from engine.sim.simulate_read import TRACE_FIELDS
    from engine.sim.simulate_settings import NoRequests

    from .cli_table import terminal_columns
    from .fleet_report import idle_row, render_svg, render_table, session_row, totals_row

    # Wrong options are refused before any session is simulated: a bad --window was reported as every
    # session "skipped" (exit 1), and an unwritable --svg was a traceback after all the work was done.
    window = tokens_option(window_text, "--window")
    check_window(window)
    if svg is not None:
        if svg.is_dir():
            fail(f"--svg {svg} is a directory: give a file path, e.g. {svg / 'cost.svg'}", 2)
        from .out_path import check_creatable

        check_creatable(svg, "--svg")  # its directory exists and takes a file: not after all the work
        if svg.exists() and not _is_chart(svg):
            # Re-running a report replaces its chart; any other file is refused: `--svg run.cpsession`
            # (a recording named where the chart goes) replaced the recording with a chart, silently.
            fail(f"--svg {svg} exists and is not an SVG chart: choose another path (an earlier chart is replaced)", 2)
    # Checked now, not when a session first needs them: a missing --prices file (or a bad
    # $CONTEXTPIPE_PRICES) skipped every session (exit 1), and a mistyped --model was silently unused when
    # each session had its own price.
    table = check_prices(prices)
    if model is not None:
        try:
            table.get(model)
        except ContextPipeError as exc:
            fail(f"--model: {exc}", 2)
    paths = expand_paths(files)
    rows: list[dict[str, Any]] = []
    skipped: list[dict[str, str]] = []
    # Sessions skipped because their model has no price, by model: said once, in one line, after the
    # loop. Each used to print the whole price table's model list: a fleet of one unpriced model was a
    # screen of the same long warning.
    unpriced: dict[str, int] = {}
    for path in paths:
        opened = _open(path)
        if isinstance(opened, str):
            _skip(path, opened)
            skipped.append({"session": str(path), "reason": opened})
            continue
        settings = SimSettings(window=window, prices=prices)
        stood_in = False
        try:
            with opened as reader:
                header = dict(reader.header)
                # Of each turn's trace only what the simulation reads, as `simulate` reads it: the rest of
                # a trace is ~2/3 of what decoding a recording builds. A big recording is read again for
                # each of simulate's passes instead of held: 2.7 GB for a 126 MB one (recording_events).
                # A read error is tagged (_Unreadable) to be said as one (_why), as before.
                read = _report_events(reader, TRACE_FIELDS)
                try:
                    rep = simulate_stream(read, settings, source=str(path))
                except ContextPipeError as exc:
                    # A fleet mixes models: only the sessions whose own model has no price take --model.
                    if model is None or not isinstance(exc.__cause__, UnknownModelError):
                        raise
                    rep = simulate_stream(read, replace(settings, model=model), source=str(path))
                    stood_in = True
                del read
        except _Unreadable as exc:
            why = _why(path, exc.error)
            _skip(path, why)
            skipped.append({"session": str(path), "reason": why})
            continue
        except (EmptyJournal, NoRequests):  # an agent that stopped before its first call: idle, not damaged
            rows.append(idle_row(path, header))
            continue
        except ContextPipeError as exc:
            if isinstance(exc.__cause__, UnknownModelError):
                name = _unpriced_model(exc.__cause__, header)
                unpriced[name] = unpriced.get(name, 0) + 1
                skipped.append({"session": str(path), "reason": f"no price for model {name!r}"})
                continue
            _skip(path, str(exc))
            skipped.append({"session": str(path), "reason": str(exc)})
            continue
        rows.append(session_row(path, rep, stood_in))
    if unpriced:
        count = sum(unpriced.values())
        names = ", ".join(f"{name} ({n})" for name, n in sorted(unpriced.items(), key=lambda kv: (-kv[1], kv[0])))
        todo = ("add their rows with --prices FILE" if model is not None
                else "price them as a known model with --model MODEL, or add their rows with --prices FILE")
        warn(f"skipped {counted(count, 'session')} whose model has no price: {names}; {todo}")
    if not rows:
        fail("no session could be reported")
    total = totals_row(rows)
    if svg is not None:
        _write_chart(svg, render_svg(rows))
    if as_json:
        echo(json.dumps({"sessions": rows, "total": total, "skipped": skipped}, indent=2))
        return
    echo(render_table(rows, total, terminal_columns()))
    if skipped:
        echo(f"{counted(len(skipped), 'recording')} skipped: not in the totals (the reasons are above)")
    if svg is not None:
        echo(f"chart written to {svg}")
