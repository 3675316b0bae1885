"""Helpers every `cp-inspect` command module shares: the what-if options' typer annotations, and (from
cli_overrides.py, cli_events.py and recording_open.py, which import no typer, for the typer-free paths)
NAME=VALUE options, reading a recording's events, error exits and opening recordings; and what the TUI
commands share: `_run_app` (a terminal UI on a source) and `_check_new_recording` (a --record path)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from .cli_events import (
    MalformedTurn,
    check_turn_event,
    event_frames,
    event_offset,
    iter_events_for_turn,
    read_events,
    read_events_for_turn,
)
from .cli_overrides import check_window, on_off, parse_gates, parse_pairs, parse_thresholds
from .option_check import THEME_HELP, theme_option
from .recording_open import fail, open_recording, warn

# What-if options shared by `explain` and `simulate` (parsed with parse_gates / parse_thresholds).
GateOpt = Annotated[
    list[str] | None,
    typer.Option(
        metavar="NAME=on|off",
        help="NAME=on|off for an optimizer gate (repeatable): reorder, trim_schemas, clear_tool_results, "
        "spill, llm_summary, drop_rounds."
    ),
]
# --theme of every command that starts a terminal UI (replay, attach, demo, top, run): one check, one help.
ThemeOpt = Annotated[str | None, typer.Option(help=THEME_HELP, callback=theme_option)]
ThresholdOpt = Annotated[
    list[str] | None,
    typer.Option(
        metavar="NAME=VALUE",
        help="NAME=VALUE tier threshold as a fraction of the window (repeatable): trim, compact, prune "
        "(or trim_schemas, compact_history, aggressive_prune)."
    ),
]


def need_terminal(command: str, instead: str) -> None:
    """The inspector's UI reads keys from stdin: with no terminal there (a pipe, /dev/null, a CI job)
    Textual's input loop saw end of input over and over, ~80% of a core, with nothing shown and no end."""
    import sys

    if not sys.stdin.isatty():
        fail(f"{command} is an interactive terminal UI and stdin is not a terminal: run it in one ({instead})", 2)


__all__ = ["GateOpt", "ThemeOpt", "ThresholdOpt", "check_window", "warn", "event_frames", "event_offset", "fail", "need_terminal", "on_off", "open_recording",
           "parse_gates", "parse_pairs", "parse_thresholds", "read_events", "read_events_for_turn", "iter_events_for_turn",
           "MalformedTurn", "check_turn_event"]


def _run_app(
    source: Any,
    theme: str | None,
    start_turn: int | None = None,
    agent_ended: Callable[[], str | None] | None = None,
    save_on_quit: str | None = None,
) -> None:
    need_terminal("the inspector", "or `cp-inspect explain` for text")
    from .app_exit import run_inspector

    run_inspector(source, theme, start_turn, agent_ended, save_on_quit)


def _check_new_recording(record: Path, example: str) -> None:
    """A --record path a recording can be created at: checked before the session, not after it."""
    if record.is_dir():
        fail(f"--record {record} is a directory: give a new file path, e.g. {record / example}", 2)
    if record.exists() or record.is_symlink():
        fail(f"--record {record} already exists: a recording is never overwritten; choose a new path", 2)
    from .out_path import check_creatable  # a --record's own (--help imports cli.py)

    check_creatable(record, "--record")  # not after the session: the agent's own writer died on it
