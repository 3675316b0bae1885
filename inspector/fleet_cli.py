"""`cp-inspect export` (recordings -> an OpenTelemetry backend) and `cp-inspect report` (cost and health
of many sessions). The figures come from the engine (engine.export, engine.sim.simulate); this module
parses options, expands paths and prints."""

from __future__ import annotations

import glob
import json
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

import typer

from .cli_common import fail, open_recording


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
                fail(f"no such file: {p}")
            else:
                out.append(p)
    unique: dict[Path, Path] = {}
    for p in out:
        unique.setdefault(p.resolve(), p)
    return list(unique.values())


def _events(path: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    from engine.errors import ContextPipeError
    from engine.recording.journal import unpack_event

    reader = open_recording(path)
    try:
        return [unpack_event(e) for e in reader.events()], dict(reader.header)
    except ContextPipeError as exc:
        fail(f"{path}: {exc}")


def export(
    files: Annotated[list[str], typer.Argument(help="Recordings: files, directories or globs.")],
    otlp: Annotated[str | None, typer.Option(
        help="OTLP/HTTP endpoint, e.g. http://localhost:4318 (default: $OTEL_EXPORTER_OTLP_ENDPOINT).")] = None,
    content: Annotated[bool, typer.Option(
        "--content", help="Also export prompt text (gen_ai.input.messages); never under CONTEXTPIPE_REDACT=1.")
    ] = False,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for the backend per batch.")] = 10.0,
) -> None:
    """Send recorded sessions to an OpenTelemetry backend: one span per model call, one trace per session."""
    import logging
    import os

    from engine.errors import ConfigError
    from engine.export.otel import ENV_ENDPOINT, SpanEmitter, export_events, traces_url
    from engine.probe.optin import redact_requested

    url = otlp or os.environ.get(ENV_ENDPOINT)
    if not url:
        fail(f"no OTLP endpoint: pass --otlp URL or set {ENV_ENDPOINT}", 2)
    paths = expand_paths(files)
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.trace.export import SpanExportResult
    except ImportError:
        fail("export needs the OpenTelemetry SDK: pip install 'contextpipe-inspector[otel]'")

    class Checked(OTLPSpanExporter):  # type: ignore[misc]
        """Remembers failures, so the command can say the backend did not take the spans."""

        failures = 0

        def export(self, spans: Any) -> Any:
            if Checked.failures:  # the backend is gone: do not wait out a timeout for every span
                return SpanExportResult.FAILURE
            result = super().export(spans)
            if result != SpanExportResult.SUCCESS:
                Checked.failures += 1
            return result

    # The SDK logs each failed attempt with a traceback; one line from us says what happened instead.
    logging.getLogger("opentelemetry").setLevel(logging.CRITICAL)
    exporter = Checked(endpoint=traces_url(url), timeout=timeout)
    try:
        emitter = SpanEmitter(exporter, batch=True)
    except ConfigError as exc:
        fail(str(exc))
    redact = redact_requested(None)
    total = 0
    for path in paths:
        events, header = _events(path)
        total += export_events(events, header, emitter, content=content, redact=redact)
        if Checked.failures:
            break
    emitter.close(timeout)
    if Checked.failures:
        fail(f"the OTLP endpoint {traces_url(url)} did not accept the spans (is a collector listening there?)")
    typer.echo(f"exported {total} spans from {len(paths)} session(s) to {traces_url(url)}")


def report(
    files: Annotated[list[str], typer.Argument(help="Recordings: files, directories or globs.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    window: Annotated[int | None, typer.Option(
        help="Window for the engine's what-if (default: each recording's own).")] = None,
    svg: Annotated[Path | None, typer.Option(help="Also write a bar chart of cost per session here.")] = None,
    model: Annotated[str | None, typer.Option(
        help="Price sessions whose own model has no price as this model (default: they are skipped).")] = None,
    prices: Annotated[Path | None, typer.Option(
        help="Price table JSON (default: $CONTEXTPIPE_PRICES or the bundled one).")] = None,
) -> None:
    """Fleet cost and health: per-session and total tokens, cache-hit rate, cost, cache breaks by cause,
    and what the engine's compaction policy would have saved."""
    from engine.errors import ContextPipeError
    from engine.sim.pricing import UnknownModelError
    from engine.sim.simulate import SimSettings, simulate_events

    from .fleet_report import render_svg, render_table, session_row, totals_row

    paths = expand_paths(files)
    rows: list[dict[str, Any]] = []
    for path in paths:
        events, _ = _events(path)
        settings = SimSettings(window=window, prices=prices)
        stood_in = False
        try:
            try:
                rep = simulate_events(events, settings, source=str(path))
            except ContextPipeError as exc:
                # A fleet mixes models: only the sessions whose own model has no price take --model.
                if model is None or not isinstance(exc.__cause__, UnknownModelError):
                    raise
                rep = simulate_events(events, replace(settings, model=model), source=str(path))
                stood_in = True
        except ContextPipeError as exc:
            typer.secho(f"skipped {path}: {exc}", fg=typer.colors.YELLOW, err=True)
            continue
        rows.append(session_row(path, rep, stood_in))
    if not rows:
        fail("no session could be reported")
    total = totals_row(rows)
    if svg is not None:
        svg.write_text(render_svg(rows), encoding="utf-8")
    if as_json:
        typer.echo(json.dumps({"sessions": rows, "total": total}, indent=2))
        return
    typer.echo(render_table(rows, total))
    if svg is not None:
        typer.echo(f"chart written to {svg}")


def top(
    theme: Annotated[str | None, typer.Option(help="dark, light or high-contrast.")] = None,
) -> None:
    """A live table of every agent on this machine (and every proxy session): Enter attaches, q comes back."""
    from engine.errors import ContextPipeError
    from engine.probe.runtime_dir import parse_target
    from engine.probe.watch import FleetWatcher

    from .app import InspectorApp
    from .sources.live import LiveSource
    from .top_app import TopApp

    watcher = FleetWatcher().start()
    try:
        while True:
            target = TopApp(watcher, theme=theme).run()
            if not target:
                return
            parsed = parse_target(target)
            if parsed is None:
                continue
            try:
                source = LiveSource(parsed[0], session=parsed[1])
            except ContextPipeError as exc:  # it ended between the table and the key press
                typer.secho(f"cannot attach to {target}: {exc}", fg=typer.colors.YELLOW, err=True)
                continue
            InspectorApp(source, theme=theme).run()
    finally:
        watcher.stop()
