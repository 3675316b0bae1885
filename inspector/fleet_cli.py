"""`cp-inspect export` (recordings -> an OpenTelemetry backend) and `cp-inspect report` (cost and health
of many sessions). The figures come from the engine (engine.export, engine.sim.simulate); this module
parses options, expands paths and prints."""

from __future__ import annotations

import glob
import json
import re
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from engine.wording import counted

from .cli_common import check_window, fail, need_terminal
from .otlp_reach import unreachable, unreachable_grpc
from .recording_open import trajectory_hint, warn
from .token_arg import number_option, tokens_option

if TYPE_CHECKING:  # the commands import what they run lazily: `cp-inspect --help` stays quick
    from .sources.live import LiveSource
    from .top_app import TopView


def expand_paths(patterns: list[str]) -> list[Path]:
    """Files, directories (every .cpsession under them) and globs, in a stable order, each once."""
    out: list[Path] = []
    for pattern in patterns:
        matches = sorted(glob.glob(pattern, recursive=True)) if any(c in pattern for c in "*?[") else [pattern]
        if not matches:
            fail(f"no recordings match {pattern}")
        for m in matches:
            p = Path(m)
            if p.is_dir():
                found = sorted(p.rglob("*.cpsession"))
                if not found:
                    fail(f"{p} is a directory with no .cpsession recordings in it")
                out += found
            elif not p.exists():
                # As typed (Path drops a trailing slash): "report runs/" said "no such file: runs".
                fail(f"no such file or directory: {m}")
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
    """simulate_stream's `read` for `report` (engine.sim.simulate.recording_events), with what reading
    the recording raises wrapped in _Unreadable: an error of the simulation's own, met between two
    events, is not thrown into the generator and passes untouched."""
    from engine.errors import ContextPipeError
    from engine.sim.simulate import recording_events

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
            return hint.removeprefix(f"{path} ")
        return str(exc).removeprefix(f"{path}: ")  # a RecordingError names the file: _skip names it once
    if isinstance(exc, PermissionError):
        return "permission denied (check the file's owner and mode)"
    if isinstance(exc, OSError):
        return f"cannot read it: {exc.strerror or exc}"
    raise exc


def unpack(ev: dict[str, Any]) -> dict[str, Any]:
    from engine.recording.journal import unpack_event

    return unpack_event(ev)


class _Stream:
    """A recording's events read lazily, for a command that needs one at a time (export): its memory
    does not grow with the file. Damage met on the way ends the stream where it is, in `error`: the
    events before it have been handed out, as the salvage command would keep them."""

    def __init__(self, path: Path, reader: Any) -> None:
        self.path, self.reader, self.read = path, reader, 0
        self.error: str | None = None

    def __iter__(self) -> Any:
        try:
            for ev in self.reader.events():
                self.read += 1
                yield unpack(ev)
        except Exception as exc:  # noqa: BLE001 (_why says the ones a recording raises, re-raises the rest)
            self.error = _why(self.path, exc)


def _blob_text(reader: Any) -> Any:
    """A text of the recording by its hash (the content export's fold keeps only the recent ones)."""

    def text(h: str) -> str | None:
        data = reader.blob(h)
        return data.decode("utf-8", "replace") if isinstance(data, bytes) else data

    return text


def _unpriced_model(exc: Exception, header: dict[str, Any]) -> str:
    """The model a price table had no row for: named in its error as `model 'NAME'`, else the
    recording's own model."""
    found = re.search(r"model '([^']*)'", str(exc))
    return found.group(1) if found else str(header.get("model") or "?")


def _skip(path: Path, reason: str) -> None:
    typer.secho(f"skipped {path}: {reason}", fg=typer.colors.YELLOW, err=True)


def export(
    files: Annotated[list[str], typer.Argument(help="Recordings: files, directories or globs.")],
    otlp: Annotated[str | None, typer.Option(
        help="OTLP endpoint, e.g. http://localhost:4318 (OTLP/HTTP), or http://localhost:4317 with "
             "OTEL_EXPORTER_OTLP_PROTOCOL=grpc (default: $OTEL_EXPORTER_OTLP_ENDPOINT).")] = None,
    content: Annotated[bool, typer.Option(
        "--content", help="Also export prompt text (gen_ai.input.messages); never under CONTEXTPIPE_REDACT=1.")
    ] = False,
    timeout: Annotated[float | None, typer.Option(
        parser=number_option("--timeout", "seconds per batch, e.g. 10", float),
        help="Seconds to wait for the backend per batch (default: $OTEL_EXPORTER_OTLP_TIMEOUT, in "
             "milliseconds as the OpenTelemetry specification has it, else 10).")] = None,
) -> None:
    """Send recorded sessions to an OpenTelemetry backend: one span per model call, one trace per session.
    The endpoint, protocol, headers and timeout follow the standard OTEL_EXPORTER_OTLP_* variables.

    \b
    Example:
      cp-inspect export demo_sessions/ --otlp http://localhost:4318
    """
    import logging

    from engine.errors import ConfigError
    from engine.export.otel import SpanEmitter, export_events, exporter_url, make_exporter
    from engine.probe.optin import redact_requested

    if timeout is not None and not 0 < timeout <= 3600:
        # A zero or negative timeout failed every batch at once ("could not export"), after the files were read.
        fail(f"--timeout is seconds per batch, more than 0 and at most 3600; got {timeout:g}", 2)
    paths = expand_paths(files)
    try:
        from opentelemetry.sdk.trace.export import SpanExportResult

        inner = make_exporter(otlp, timeout)
    except ImportError:
        fail("export needs the OpenTelemetry SDK: pip install 'contextpipe-inspector[otel]'")
    except ConfigError as exc:
        fail(str(exc), 2)
    url = exporter_url(inner)
    # Before any file is read: the SDK retried a refused connection for ~7 s before the first failure,
    # over HTTP and gRPC alike (OTEL_EXPORTER_OTLP_PROTOCOL=grpc: the exporter's target is host:port).
    grpc = "grpc" in type(inner).__module__
    why = unreachable_grpc(url) if grpc else unreachable(url)
    if why is not None:
        fail(f"the OTLP{'/gRPC' if grpc else ''} endpoint {url} {why}: start a collector there, or give its "
             "address with --otlp; nothing was sent")

    class Checked:
        """Remembers failures, so the command can say the backend did not take the spans."""

        failures = 0

        def export(self, spans: Any) -> Any:
            if self.failures:  # the backend is gone: do not wait out a timeout for every batch
                return SpanExportResult.FAILURE
            result = inner.export(spans)
            if result != SpanExportResult.SUCCESS:
                self.failures += 1
            return result

        def shutdown(self) -> None:
            inner.shutdown()

    # The SDK logs each failed attempt with a traceback; one line from us says what happened instead.
    # Restored after: the command also runs in-process (tests, a Python caller), and a level left at
    # CRITICAL silenced the SDK for everything after it in that process (an OtelSink could no longer
    # tell that its exporter was retrying: tests/fleet/test_otel_failures.py failed after an export).
    otel_log = logging.getLogger("opentelemetry")
    level = otel_log.level
    otel_log.setLevel(logging.CRITICAL)
    try:
        checked = Checked()
        try:
            emitter = SpanEmitter(checked, batch=True)
        except ConfigError as exc:
            fail(str(exc))
        redact = redact_requested(None)
        total = sessions = skipped = 0
        damaged = 0
        for path in paths:
            reader = _open(path)
            if isinstance(reader, str):
                _skip(path, reader)
                skipped += 1
                continue
            with reader:
                # One event at a time: a session's events are never all held (export_events folds them).
                stream = _Stream(path, reader)
                spans = export_events(stream, dict(reader.header), emitter, content=content, redact=redact,
                                      blob_lookup=_blob_text(reader) if content else None)
            if stream.error is not None:
                if not spans:
                    _skip(path, stream.error)
                    skipped += 1
                    continue
                damaged += 1
                # Its spans are sent (the backend cannot take them back): say how many, and what was wrong.
                warn(f"{path}: {stream.error}; exported the {counted(spans, 'model call')} before the damage")
            total += spans
            sessions += 1
            if checked.failures:
                break
        emitter.close()
        if checked.failures:
            fail(f"the OTLP endpoint {url} did not accept the spans (is a collector listening there?)")
        if not sessions:
            fail(f"{paths[0]} could not be read" if len(paths) == 1
                 else f"none of the {len(paths)} recordings could be read")
        typer.echo(f"exported {counted(total, 'model-call span')} from {counted(sessions, 'session')}, each "
                   f"session's under its invoke_agent span, to {url}"
                   + (f"; {counted(skipped, 'recording')} skipped (see above)" if skipped else "")
                   + (f"; {counted(damaged, 'damaged recording')} exported up to their damage (see above)"
                      if damaged else ""))
    finally:
        otel_log.setLevel(level)


def report(
    files: Annotated[list[str], typer.Argument(help="Recordings: files, directories or globs.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    window_text: Annotated[str | None, typer.Option(
        "--window", metavar="<tokens>",
        help="Window for the engine's what-if, in tokens: 32000, 32k, 1.5M (default: each recording's own).")] = None,
    svg: Annotated[Path | None, typer.Option(help="Also write a bar chart of cost per session here.")] = None,
    model: Annotated[str | None, typer.Option(
        help="Price sessions whose own model has no price as this model (default: they are skipped).")] = None,
    prices: Annotated[Path | None, typer.Option(
        help="Price table JSON (default: $CONTEXTPIPE_PRICES or the bundled one).")] = None,
) -> None:
    """Fleet cost and health: per-session and total tokens, cache-hit rate, cost, cache breaks by cause,
    and what the engine's compaction policy would have saved.

    \b
    Example:
      cp-inspect report 'demo_sessions/*.cpsession' --svg cost.svg
    """
    from engine.errors import ContextPipeError
    from engine.recording.replay import EmptyJournal
    from engine.sim.pricing import UnknownModelError
    from engine.sim.simulate import TRACE_FIELDS, NoRequests, SimSettings, simulate_stream

    from .fleet_report import idle_row, render_svg, render_table, session_row, totals_row

    # Wrong options are refused before any session is simulated: a bad --window was reported as every
    # session "skipped" (exit 1), and an unwritable --svg was a traceback after all the work was done.
    window = tokens_option(window_text, "--window")
    check_window(window)
    if svg is not None:
        if svg.is_dir():
            fail(f"--svg {svg} is a directory: give a file path, e.g. {svg / 'cost.svg'}", 2)
        if not svg.resolve().parent.is_dir():
            fail(f"--svg {svg}: directory {svg.resolve().parent} does not exist", 2)
    if prices is not None or model is not None:
        # Checked now, not when a session first needs them: a missing --prices file skipped every session
        # (exit 1), and a mistyped --model was silently unused when each session had its own price.
        from engine.sim.pricing import load_prices

        try:
            table = load_prices(prices)
        except ContextPipeError as exc:
            fail(f"--prices: {exc}", 2)
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
        typer.secho(f"skipped {counted(count, 'session')} whose model has no price: {names}; {todo}",
                    fg=typer.colors.YELLOW, err=True)
    if not rows:
        fail("no session could be reported")
    total = totals_row(rows)
    if svg is not None:
        try:
            svg.write_text(render_svg(rows), encoding="utf-8")
        except OSError as exc:
            fail(f"cannot write --svg {svg}: {exc.strerror or exc}")
    if as_json:
        typer.echo(json.dumps({"sessions": rows, "total": total, "skipped": skipped}, indent=2))
        return
    typer.echo(render_table(rows, total))
    if skipped:
        typer.echo(f"{counted(len(skipped), 'recording')} skipped: not in the totals (the reasons are above)")
    if svg is not None:
        typer.echo(f"chart written to {svg}")


def attach_from_top(target: str, view: TopView) -> LiveSource | None:
    """The live source for the row `top`'s Enter chose, or None with the reason in `view.notice` for the
    next table to show (printed to the terminal, it was hidden at once by that table)."""
    from engine.errors import ContextPipeError
    from engine.probe.runtime_dir import parse_target

    from .sources.live import LiveSource

    parsed = parse_target(target)
    if parsed is None:
        view.notice = f"cannot attach to {target!r}: not a pid"
        return None
    try:
        return LiveSource(parsed[0], session=parsed[1], fold=True)  # (see attach_command)
    except ContextPipeError as exc:  # it ended between the table and the key press
        view.notice = f"cannot attach to {target}: {exc}"
        return None


def top(
    theme: Annotated[str | None, typer.Option(help="dark, light or high-contrast.")] = None,
) -> None:
    """A live table of every agent on this machine (and every proxy session): Enter attaches, q comes back."""
    from engine.probe.watch import FleetWatcher

    from .app import InspectorApp
    from .app_exit import run_app
    from .top_app import TopApp, TopView

    need_terminal("top", "or `cp-inspect ps --json` for the agents as JSON")
    watcher = FleetWatcher().start()
    view = TopView()  # the sort and filter, as left, when the inspector returns to the table
    try:
        while True:
            target = run_app(TopApp(watcher, theme=theme, view=view))
            if not target:
                return
            source = attach_from_top(target, view)
            if source is not None:
                try:
                    run_app(InspectorApp(source, theme=theme))
                finally:
                    source.close()  # (the app closes it as it exits; not if it never started)
    finally:
        watcher.stop()
