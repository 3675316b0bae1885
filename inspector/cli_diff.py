"""What `cp-inspect diff BASELINE CANDIDATE [RECORDING...]` does, importable without typer.

`diff ... --fail-on cache-break` is a CI gate, run on every push, often over several recordings in a
loop; under typer each run imported typer, built every command and pydantic's argument adapters
before the engine did any work. A plain diff command line (cli_argv.py) runs diff() here directly;
the typer command (diff_cli.py) calls it too, so both check and answer alike.
"""

from __future__ import annotations

import json
from pathlib import Path

from .cli_output import echo
from .option_check import check_prices
from .recording_open import fail, missing, trajectory_hint


def diff(baseline: str, candidate: str, recordings: list[Path] | None, fail_on: list[str] | None, as_json: bool,
         markdown: bool, all_turns: bool, prices: Path | None) -> None:
    """`diff`'s work: both configurations over the recordings; exit 1 when a --fail-on gate fails."""
    from engine.errors import ContextPipeError
    from engine.sim.diff_report import diff_recordings
    from engine.sim.session_diff import parse_side, to_markdown, to_text

    if as_json and markdown:
        fail("choose one of --json and --markdown", 2)
    if all_turns and (as_json or markdown):  # ignored there: the JSON has every turn, the report none
        fail("--all lists identical turns in the text report: leave out --json / --markdown", 2)
    check_prices(prices)
    for p in recordings or []:
        if not p.exists():
            fail(_misplaced_side(p) or missing(p, "recording"), 2)
    try:
        base, cand = parse_side(_window_tokens(baseline)), parse_side(_window_tokens(candidate))
        report = diff_recordings(base, cand, recordings or [], prices=prices)
        failures = report.failures(fail_on or [])
    except ContextPipeError as exc:
        fail(_json_hint([baseline, candidate], recordings or [], exc) or str(exc), 2)
    if as_json:
        out = report.to_json()
        out["failures"] = failures
        echo(json.dumps(out, indent=2))
    elif markdown:
        echo(to_markdown(report, failures))
    else:
        from .cli_table import fit_text, terminal_columns

        echo(fit_text(to_text(report, all_turns=all_turns), terminal_columns()))
    if failures:
        import typer  # a failed gate only: its red lines and exit 1, as the typer command gave them

        if not (as_json or markdown):
            for f in failures:
                typer.secho(f"cp-inspect: gate failed: {f}", fg=typer.colors.RED, err=True)
        raise typer.Exit(1)


def _misplaced_side(p: Path) -> str | None:
    """A configuration given where the recordings go (`diff A.cpsession B.cpsession recorded`): the two
    sides come first, so 'no such recording: recorded' alone left the user guessing at the order."""
    spec = str(p)
    if spec != "recorded" and "=" not in spec:
        return None
    return (f"{spec!r} is a configuration, given where the recordings go: the two configurations come first, "
            f"then the recordings, e.g. cp-inspect diff recorded {spec if spec != 'recorded' else 'window=32k'} "
            "FILE.cpsession")


def _window_tokens(spec: str) -> str:
    """An inline side's window=32k (or 1.5M) as every --window reads it: the engine's inline pairs take a
    whole number, so `diff recorded window=32k` was refused ("window must be a whole number of tokens")
    where `simulate --window 32k` runs. Anything else, and a value that is not a count of tokens, is left
    for the engine's own message."""
    if "=" not in spec or Path(spec.strip()).suffix in (".cpsession", ".toml", ".json"):
        return spec
    from .token_arg import parse_tokens

    pairs = []
    for pair in spec.split(","):
        key, eq, value = pair.partition("=")
        text = value.strip()
        if key.strip() == "window" and text[-1:] in ("k", "K", "m", "M"):
            sign = "-" if text.startswith("-") else ""  # read, for the engine's range check to refuse
            try:
                value = sign + str(parse_tokens(text.removeprefix("-")))
            except ValueError:
                pass
        pairs.append(f"{key}{eq}{value}")
    return ",".join(pairs)


def _json_hint(sides: list[str], recordings: list[Path], exc: Exception) -> str | None:
    """For a trajectory or proxy log given where a recording goes, what to do (import it first), where
    the frame reader said 'not a cpsession recording ... frame length 2065850658 exceeds the limit'.
    A side ending .json is a config, not a recording, and keeps its own message."""
    named = [Path(s) for s in sides if not s.endswith((".json", ".toml"))] + list(recordings)
    for p in named:
        if str(p) in str(exc) and (hint := trajectory_hint(p)) is not None:
            return hint
    return None
