"""`cp-inspect export` (recordings -> an OpenTelemetry backend) and `cp-inspect report` (cost and health
of many sessions). The figures come from the engine (engine.export, engine.sim.simulate); this module
parses options, expands paths and prints; report's work is in cli_report.py (typer-free, for cli_argv.py),
with the reading of recordings export shares."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from engine.wording import counted

from . import cli_report
from .cli_common import ThemeOpt, fail, need_terminal
from .cli_report import _open, _skip, _why, expand_paths, unpack
from .otlp_reach import unreachable, unreachable_grpc
from .recording_open import warn
from .token_arg import number_option

if TYPE_CHECKING:  # the commands import what they run lazily: `cp-inspect --help` stays quick
    from .app import InspectorApp
    from .sources.live import LiveSource
    from .sources.live_recording import RecordingFollower
    from .top_app import TopView


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
    if content and redact_requested(None):
        # The environment wins (it keeps prompt text out of every export), but the option asked for was
        # dropped without a word: the spans went out without the text and the command said nothing.
        warn("--content is ignored: CONTEXTPIPE_REDACT is set, which keeps prompt text out of every export")
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
    svg: Annotated[Path | None, typer.Option(
        help="Also write a bar chart of cost per session here (an earlier chart is replaced, no other file).",
        readable=False)] = None,
    model: Annotated[str | None, typer.Option(
        help="Price sessions whose own model has no price as this model (default: they are skipped).")] = None,
    prices: Annotated[Path | None, typer.Option(
        help="Price table JSON (default: $CONTEXTPIPE_PRICES or the bundled one).", readable=False)] = None,
) -> None:
    """Fleet cost and health: per-session and total tokens, cache-hit rate, cost, cache breaks by cause,
    and what the engine's compaction policy would have saved.

    \b
    Example:
      cp-inspect report 'demo_sessions/*.cpsession' --svg cost.svg
    """
    cli_report.report(files, as_json, window_text, svg, model, prices)


def attach_from_top(target: str, view: TopView) -> LiveSource | RecordingFollower | None:
    """The live source for the row `top`'s Enter chose, or None with the reason in `view.notice` for the
    next table to show (printed to the terminal, it was hidden at once by that table)."""
    from engine.errors import ContextPipeError
    from engine.probe.runtime_dir import parse_target

    from .sources.live_recording import open_live

    parsed = parse_target(target)
    if parsed is None:
        view.notice = f"cannot attach to {target!r}: not a pid"
        return None
    try:
        # (see attach_command; a recording it cannot follow is attached to live, as before: the table's
        # notice says "not attached", which would be wrong for it)
        source, _why = open_live(parsed[0], session=parsed[1], fold=True)
    except ContextPipeError as exc:  # it ended between the table and the key press
        view.notice = f"cannot attach to {target}: {exc}"
        return None
    return source


def inspector_from_top(source: LiveSource | RecordingFollower, target: str, theme: str | None = None) -> InspectorApp:
    """The inspector `top`'s Enter runs on the row `target`'s agent, told how to learn that the agent ended
    (attach_command.process_ended), as `attach`'s is: from `top`, an agent that ran to its end read as a
    red "Agent disconnected", where `attach` said "Agent exited" (and "Session ended" for PID.N)."""
    from engine.probe.runtime_dir import parse_target

    from .app import InspectorApp
    from .attach_command import process_ended

    app = InspectorApp(source, theme=theme)
    parsed = parse_target(target)
    if parsed is not None:
        app.agent_ended = process_ended(*parsed)
    return app


def top(
    theme: ThemeOpt = None,
) -> None:
    """A live table of every agent on this machine (and every proxy session): Enter attaches, q comes back."""
    from engine.probe.watch import FleetWatcher

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
                    run_app(inspector_from_top(source, target, theme))
                finally:
                    source.close()  # (the app closes it as it exits; not if it never started)
    finally:
        watcher.stop()
