"""`cp-inspect`: the command line. Headless commands print; `attach`, `replay` and `demo` open the TUI."""

from __future__ import annotations

import inspect
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.models import CommandInfo

from . import fleet_cli, replay_command
from .attach_cli import attach
from .cli_common import (
    GateOpt,
    ThemeOpt,
    ThresholdOpt,
    fail,
)

# explain's work lives in cli_explain.py (typer-free, for cli_argv.py); its names stay reachable here.
from .cli_explain import _DAMAGED, _DISAGREE, _explain_once, _explain_streamed, load_events  # noqa: F401
from .ctx_cli import ctx_app, eval_command
from .demo_cli import demo
from .diff_cli import diff, forks
from .entry import hold_closed_stdout, output_failed, run_plain_command
from .import_cli import import_
from .missing_param import OneLineMissing
from .proxy_cli import proxy, run
from .simulate_cli import simulate


class CommandLine(typer.Typer):
    """The program's typer app. A plain `replay FILE [options]` (replay_argv.py) goes straight to
    `replay`, and a plain `simulate FILE... [options]` (simulate_argv.py) to `simulate` (entry.py, the
    console script, does both before importing this module; this covers `python -m inspector.cli` and a
    console script installed as `inspector.cli:app`). Every other command line, and every call with
    arguments (tests, CliRunner), is typer's."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not args and not kwargs:
            hold_closed_stdout()
            run_plain_command(sys.argv[1:])
        try:
            return super().__call__(*args, **kwargs)
        except OSError as exc:  # the output could not be written (a full disk): one line, exit 1
            output_failed(exc)
            raise


app = CommandLine(
    name="cp-inspect",
    help="Inspect how an LLM agent assembles its context: live, from recordings, or as what-ifs.",
    # Where a person new to it starts: the README's first three commands.
    epilog="\b\nStart with:\n"
           "  cp-inspect demo                   a scripted agent, inspected live\n"
           "  cp-inspect replay FILE.cpsession  a recording (demo_sessions/ has three)\n"
           "  cp-inspect run -- CMD ARGS...     your own agent, through a recording proxy\n"
           "Each command's --help has an example.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # A missing required argument or option is one cp-inspect line, not typer's usage block.
    cls=OneLineMissing,
    # Plain click help: rich mode prints a type tag on every flag ("--json <bool>"), which reads as if
    # the flag took a value.
    rich_markup_mode=None,
)


# ------------------------------------------------------------------ ps / explain / verify

# `replay`, `explain` and `verify` read one file each. A shell glob (`replay demo_sessions/*.cpsession`)
# gave them several, and click's answer was a three-line usage block ending "Got unexpected extra
# arguments" that neither named the files nor said what to do. These commands take the extra arguments
# (ONE_FILE) and refuse them with the program's own one-line error.
ONE_FILE: dict[str, Any] = {"allow_extra_args": True}

# Every path parameter of the program is typer's with readable=False: typer checks a path it may read
# (os.access) before the command runs, and a file without read permission got its usage block and
# "Invalid value for 'src': path 'x' is not readable." (exit 2) where the same command line without
# typer (cli_argv.py) says "cp-inspect: cannot open recording x: Permission denied" (exit 1): an
# unreadable input is a file the command could not use, not a wrong argument. Each command opens its
# files itself and says what went wrong (tests/test_cli_unreadable.py).


def one_file_only(ctx: typer.Context, command: str, first: object, what: str = "recording") -> None:
    """Refuse the arguments after the first (ctx.args) with one line naming them and what to do."""
    extra = list(ctx.args)
    if not extra:
        return
    shown = ", ".join(extra[:3]) + (f" and {len(extra) - 3} more" if len(extra) > 3 else "")
    fail(
        f"{command} takes one {what}, got {len(extra) + 1} (also {shown}): run `cp-inspect {command} "
        f"{first}`, then each of the others the same way (for f in FILES; do cp-inspect {command} \"$f\"; done)",
        2,
    )


@app.command()
def ps(
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON array, one object per agent.")] = False,
) -> None:
    """List live agents that `attach` can open: processes serving a probe socket, and each conversation of a
    `cp-inspect run` or `proxy` as PID.N (stale sockets are cleaned up), shown by the opening of its first
    message and the local process that made its calls ("unknown agent" when the proxy could not tell).

    \b
    A socket ps will not open (another user's, or a file that is not a socket) is named on
    stderr, one line each, with why and what to do.
    Exit status: 0 when the runtime directory could be read (also with no agents, or with
    sockets skipped); 1 when it is not safely yours (the message says how to fix it)."""
    from .cli_ps import ps as run

    run(as_json)


@app.command(context_settings=ONE_FILE)
def explain(
    ctx: typer.Context,
    target: Annotated[str, typer.Argument(help="A .cpsession recording or the pid of a live agent.")],
    # Read as text: a number of tokens as the inspector prints it (32k, 1.5M) and a turn that is not a
    # number are one cp-inspect line each (token_arg.py), not typer's three-line usage block.
    turn: Annotated[str | None, typer.Option(metavar="<int>", help="Turn to explain (default: the last; -1 is the last, -2 the one before).")] = None,
    budget_text: Annotated[str | None, typer.Option("--budget", metavar="<tokens>", help="Re-plan with this window (tokens: 32000, 32k, 1.5M).")] = None,
    gate: GateOpt = None,
    threshold: ThresholdOpt = None,
    provider: Annotated[str | None, typer.Option(
        help="Re-plan for another provider policy: anthropic, openai, bedrock, prefix or deepseek.")] = None,
    fmt: Annotated[str | None, typer.Option("--format", help="text (the default) or json")] = None,
    # Every other command's JSON switch: `explain FILE --json` was "No such option: --json".
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON (the same as --format json).")] = False,
) -> None:
    """EXPLAIN a turn: pressure, tier, sections, markers, skipped steps, alerts; re-planned under overrides.

    \b
    Example:
      cp-inspect explain demo_sessions/scout-anthropic.cpsession --turn 17 --gate drop_rounds=off
    """
    from .cli_explain import explain as run

    one_file_only(ctx, "explain", target, "recording or agent")
    run(target, turn, budget_text, gate, threshold, provider, fmt, as_json)


@app.command(context_settings=ONE_FILE)
def verify(
    ctx: typer.Context, file: Annotated[Path, typer.Argument(help="A .cpsession recording.", readable=False)]
) -> None:
    """Replay a recording and check every turn's request hash (exit 0 when all match).

    \b
    Example:
      cp-inspect verify demo_sessions/scout-anthropic.cpsession
    """
    from .cli_verify import verify as run

    one_file_only(ctx, "verify", file)
    run(file)


@app.command(context_settings=ONE_FILE)
def find(
    ctx: typer.Context,
    target: Annotated[
        str, typer.Argument(help="A .cpsession recording, or a running agent: PID or PID.SESSION as `ps` lists them.")
    ],
    text: Annotated[str, typer.Argument(help="The text to look for (any case).")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON: every turn it enters or leaves.")] = False,
) -> None:
    """The turns where TEXT entered or left what the agent sent, with the section and a snippet.

    \b
    Entered: a turn whose sections hold more of it than the turn before (first seen, or seen again);
    left: none of it any more (compacted, dropped). A match is within one section: text split
    across two sections is not found. Exit 1 when no turn sent it, as grep.
    A running agent (PID): its turns so far, read from the agent through its probe as `attach`
    reads them (every turn up to now, also one its recording has not written yet); the agent is
    not stopped. Its recording, if it keeps one, is searched by giving its path.
    Example:
      cp-inspect find demo_sessions/scout-anthropic.cpsession latch
      cp-inspect find 4242 'tokens.py'
    """
    from .cli_find import find as run

    one_file_only(ctx, "find", target, "recording or agent")
    run(target, text, as_json)


@app.command()
def salvage(
    file: Annotated[Path, typer.Argument(help="A damaged .cpsession recording.", readable=False)],
    out: Annotated[Path, typer.Option("-o", "--out", help="Where to write the intact part.", readable=False)],
    force: Annotated[bool, typer.Option("--force", help="Overwrite OUT if it exists.")] = False,
) -> None:
    """Copy every intact event before the first damage into a new recording (also migrates old formats).

    \b
    Example:
      cp-inspect salvage damaged.cpsession -o intact.cpsession
    """
    from .cli_salvage import salvage as run

    run(file, out, force)


app.command("import")(import_)


# ------------------------------------------------------------------ TUI entry points


@app.command(context_settings=ONE_FILE)
def replay(
    ctx: typer.Context,
    file: Annotated[Path, typer.Argument(help="A .cpsession recording.", readable=False)],
    # Text, read by replay_command: `--turn abc` is one line naming the file's turns, not typer's usage block.
    turn: Annotated[str | None, typer.Option(
        metavar="<int>", help="Open at this turn (-1 is the last; default: the last).")] = None,
    follow: Annotated[bool, typer.Option(help="Tail a file another process is still writing.")] = False,
    theme: ThemeOpt = None,
) -> None:
    """Step through a recorded session turn by turn.

    \b
    Example:
      cp-inspect replay demo_sessions/scout-anthropic.cpsession --turn 17
    """
    one_file_only(ctx, "replay", file)
    replay_command.replay(file, turn, follow, theme)


app.command()(attach)


app.command()(demo)


# Command groups that live in their own modules: the context store's `ctx` and `eval`, and `simulate`.
app.add_typer(ctx_app, name="ctx")  # its help is ctx_app's own (one text, listing every subcommand)
app.command("eval")(eval_command)
app.command()(simulate)
app.command()(diff)
app.command()(forks)
app.command()(fleet_cli.export)
app.command()(fleet_cli.report)
# The proxy and `run` (proxy_cli imports only the standard library and typer; aiohttp loads on use).
app.command()(proxy)
app.command(
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    options_metavar="[OPTIONS] -- CMD [ARGS]...",  # the usage line showed no CMD at all
)(run)
app.command()(fleet_cli.top)

# What each command is for, in one line of `cp-inspect --help`. Without these click cut every docstring
# at the list's width with "...", so a new user read "Import a real agent trajectory as a recording: each
# model..." and "Re-run whole sessions under what-if settings vs every..." (13 of the 17 commands).
SUMMARIES = {
    "ps": "List live agents and proxy conversations (for attach).",
    "explain": "EXPLAIN one turn of a recording, or re-plan it.",
    "verify": "Replay a recording; every request hash must match.",
    "find": "The turns a text entered or left a prompt (file or PID).",
    "salvage": "Copy a damaged recording's intact part to a new file.",
    "import": "Turn another tool's trajectory into a recording.",
    "replay": "Step through a recording in the inspector.",
    "attach": "Watch a running agent live in the inspector.",
    "demo": "Run the scripted demo agent with the inspector on it.",
    "eval": "Score the context store's windows on real trajectories.",
    "simulate": "Re-run and price whole sessions under other settings.",
    "diff": "Two configurations turn by turn; a CI gate (--fail-on).",
    "forks": "A recording's sub-agents as a tree, what they share, cost.",
    "export": "Send recordings to an OpenTelemetry backend.",
    "report": "Cost, cache hits and breaks per session and in total.",
    "proxy": "A recording proxy for Anthropic and OpenAI-style APIs.",
    "run": "Run your agent through the recording proxy, inspected.",
    "top": "A live table of every agent on this machine.",
}


def summary_of(info: CommandInfo) -> str | None:
    """The command's line in `cp-inspect --help`: its SUMMARIES entry, else its docstring's first line.

    A command registered without an entry must not take the whole CLI down at import (a KeyError here did);
    tests/test_cli_new_user.py checks that every command has an entry, so the fallback is only a safety net.
    """
    name = str(info.name or getattr(info.callback, "__name__", "")).replace("_", "-")
    if name in SUMMARIES:
        return SUMMARIES[name]
    doc = inspect.getdoc(info.callback) if info.callback is not None else None
    first = doc.strip().splitlines()[0].strip() if doc and doc.strip() else ""
    return first or None  # None: click makes its own from the help text


for _info in app.registered_commands:
    _info.short_help = summary_of(_info)

if __name__ == "__main__":
    app()
