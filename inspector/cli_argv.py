"""Plain `explain`, `verify`, `salvage`, `ps`, `ctx get`, `ctx add`, `ctx expand`, `ctx import`, `diff`,
`forks`, `report` and `eval` command lines, read without typer's dispatch.

These are the headless commands people run in scripts and loops (`for f in *.cpsession; do cp-inspect
explain "$f" --format json; done`, a CI step's `verify`, a poll of `ps --json`, an agent's `ctx add` and
`ctx get` every turn, `ctx import` of each run, a CI gate's `diff --fail-on`, `forks --json` over
recordings, a cron job's `report runs/ --json`, `eval --json`). Under typer each
run imported typer, built every command of the program (~20) and pydantic's argument adapters: 40-80% of
the CPU of a run on a demo recording, ~80% of a `ctx get` (BENCHMARKS.md, Start-up). Their values are
plain (a path or a pid, texts, repeatable NAME=VALUE texts, flags, numbers read as the typer commands'
parsers read them) and come out of typer exactly as read here, and the commands' work is in typer-free
modules (cli_explain.py, cli_verify.py, cli_salvage.py, cli_ps.py, cli_ctx.py, cli_ctx_import.py,
cli_diff.py, cli_forks.py, cli_report.py, cli_eval.py) that the typer commands call too, so the console
script (entry.py) runs them directly.

Anything else returns None and goes through typer as before, so its answers stay typer's own: help, an
unknown or repeated option (other than --gate, --threshold, --fail-on), a value that looks like an
option (except a signed whole number for --turn, --budget, --offset and --limit, which click takes as
the value too), an option without its value, a number its parser refuses, a missing or extra argument,
`--`, a lone `-` (except `ctx add`'s TEXT: stdin), a token that is empty, holds NUL or cannot be
encoded, shell completion. tests/test_cli_argv.py checks the two agree: what each hands the command,
and the program's output, files and exit status on the same command lines.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path

from .replay_argv import scan_plain, shell_completing


def scan(
    rest: Sequence[str],
    flags: Collection[str],
    valued: Collection[str],
    repeated: Collection[str] = (),
    signed: Collection[str] = (),
    dash: bool = False,
) -> tuple[list[str], dict[str, list[str]]] | None:
    """A plain command line's positional arguments in order and each option's values in order (a flag's
    value ""), or None when typer must read it: replay_argv.scan_plain's reading, its options grouped
    by name."""
    scanned = scan_plain(rest, flags, valued, repeated, signed, dash)
    if scanned is None:
        return None
    options: dict[str, list[str]] = {}
    for name, value in scanned[1]:
        options.setdefault(name, []).append(value)
    return scanned[0], options


def _one(options: dict[str, list[str]], name: str) -> str | None:
    return options[name][0] if name in options else None


def plain_explain(rest: Sequence[str]) -> Callable[[], None] | None:
    scanned = scan(rest, ("--json",), ("--turn", "--budget", "--provider", "--format"),
                   ("--gate", "--threshold"), ("--turn", "--budget"))
    if scanned is None or len(scanned[0]) != 1:
        return None  # no TARGET (typer's one line) or a second one (explain's own, with ctx.args)
    (target,), opts = scanned

    def run() -> None:
        from .cli_explain import explain

        explain(target, _one(opts, "--turn"), _one(opts, "--budget"), opts.get("--gate"),
                opts.get("--threshold"), _one(opts, "--provider"), _one(opts, "--format"),
                "--json" in opts)

    return run


def plain_verify(rest: Sequence[str]) -> Callable[[], None] | None:
    scanned = scan(rest, (), ())
    if scanned is None or len(scanned[0]) != 1:
        return None
    file = Path(scanned[0][0])

    def run() -> None:
        from .cli_verify import verify

        verify(file)

    return run


def plain_salvage(rest: Sequence[str]) -> Callable[[], None] | None:
    # `-o OUT` as its own two tokens only: click reads `-oOUT` and `-o=OUT` ("=OUT") its own ways.
    scanned = scan(["--out" if t == "-o" else t for t in rest], ("--force",), ("--out",))
    if scanned is None or len(scanned[0]) != 1 or "--out" not in scanned[1]:
        return None  # no FILE, a second one, or no -o: typer's one-line refusals
    (file,), opts = scanned
    out, force = Path(opts["--out"][0]), "--force" in opts

    def run() -> None:
        from .cli_salvage import salvage

        salvage(Path(file), out, force)

    return run


def plain_ps(rest: Sequence[str]) -> Callable[[], None] | None:
    scanned = scan(rest, ("--json",), ())
    if scanned is None or scanned[0]:
        return None
    as_json = "--json" in scanned[1]

    def run() -> None:
        from .cli_ps import ps

        ps(as_json)

    return run


def plain_ctx_get(rest: Sequence[str]) -> Callable[[], None] | None:
    scanned = scan(rest, ("--explain", "--json", "--fresh"), ("--db", "--budget", "--query", "--model"),
                   signed=("--budget",))
    if scanned is None or scanned[0] or "--db" not in scanned[1] or "--budget" not in scanned[1]:
        return None  # an argument, or no --db or --budget: typer's one-line refusals
    opts = scanned[1]
    db, budget = Path(opts["--db"][0]), opts["--budget"][0]

    def run() -> None:
        from . import cli_ctx

        cli_ctx.get(db, budget, _one(opts, "--query"), _one(opts, "--model"), "--explain" in opts,
                    "--json" in opts, "--fresh" in opts)

    return run


def plain_ctx_add(rest: Sequence[str]) -> Callable[[], None] | None:
    scanned = scan(rest, ("--pin",), ("--db", "--kind", "--importance", "--source"), dash=True)
    if scanned is None or len(scanned[0]) > 1 or "--db" not in scanned[1]:
        return None
    args, opts = scanned
    importance = 0.0
    if "--importance" in opts:
        from .token_arg import parse_real

        try:
            importance = parse_real(opts["--importance"][0])
        except ValueError:
            return None  # typer's parser says so (number_option's one line)
    db, text = Path(opts["--db"][0]), (args[0] if args else None)

    def run() -> None:
        from . import cli_ctx

        cli_ctx.add(db, text, _one(opts, "--kind") or "user", "--pin" in opts, importance, _one(opts, "--source"))

    return run


def plain_ctx_expand(rest: Sequence[str]) -> Callable[[], None] | None:
    scanned = scan(rest, ("--all",), ("--db", "--offset", "--limit"), signed=("--offset", "--limit"))
    if scanned is None or len(scanned[0]) != 1 or "--db" not in scanned[1]:
        return None
    (item,), opts = scanned
    from .token_arg import parse_whole

    try:
        item_id = parse_whole(item)
        offset, limit = (None if n not in opts else parse_whole(opts[n][0]) for n in ("--offset", "--limit"))
    except ValueError:
        return None  # number_option's one line, from typer, which reads the parameters in its own order
    db = Path(opts["--db"][0])

    def run() -> None:
        from . import cli_ctx

        cli_ctx.expand(db, item_id, offset, limit, "--all" in opts)

    return run


def plain_diff(rest: Sequence[str]) -> Callable[[], None] | None:
    scanned = scan(rest, ("--json", "--markdown", "--all"), ("--prices",), ("--fail-on",))
    if scanned is None or len(scanned[0]) < 2:
        return None  # no CANDIDATE: typer's one line
    args, opts = scanned
    recordings = [Path(a) for a in args[2:]] or None
    prices = None if "--prices" not in opts else Path(opts["--prices"][0])

    def run() -> None:
        from . import cli_diff

        cli_diff.diff(args[0], args[1], recordings, opts.get("--fail-on"), "--json" in opts, "--markdown" in opts,
                      "--all" in opts, prices)

    return run


def plain_forks(rest: Sequence[str]) -> Callable[[], None] | None:
    scanned = scan(rest, ("--json",), ("--prices",))
    if scanned is None or not scanned[0]:
        return None  # no PARENT: typer's one line
    args, opts = scanned
    children = [Path(a) for a in args[1:]] or None
    prices = None if "--prices" not in opts else Path(opts["--prices"][0])

    def run() -> None:
        from . import cli_forks

        cli_forks.forks(Path(args[0]), children, "--json" in opts, prices)

    return run


def plain_report(rest: Sequence[str]) -> Callable[[], None] | None:
    scanned = scan(rest, ("--json",), ("--window", "--svg", "--model", "--prices"), signed=("--window",))
    if scanned is None or not scanned[0]:
        return None  # no FILES: typer's one line
    files, opts = scanned
    svg, prices = (None if n not in opts else Path(opts[n][0]) for n in ("--svg", "--prices"))

    def run() -> None:
        from . import cli_report

        cli_report.report(files, "--json" in opts, _one(opts, "--window"), svg, _one(opts, "--model"), prices)

    return run


def plain_eval(rest: Sequence[str]) -> Callable[[], None] | None:
    scanned = scan(rest, ("--per-trajectory", "--json"), ("--trajectories",))
    if scanned is None or scanned[0]:
        return None  # an argument: typer's usage error
    opts = scanned[1]
    root = None if "--trajectories" not in opts else Path(opts["--trajectories"][0])

    def run() -> None:
        from . import cli_eval

        cli_eval.eval_(root, "--per-trajectory" in opts, "--json" in opts)

    return run


def plain_ctx_import(rest: Sequence[str]) -> Callable[[], None] | None:
    scanned = scan(rest, ("--again",), ("--db", "--format"))
    if scanned is None or len(scanned[0]) != 1 or "--db" not in scanned[1]:
        return None  # no FILE, a second one, or no --db: typer's one-line refusals
    (file,), opts = scanned
    db = Path(opts["--db"][0])

    def run() -> None:
        from . import cli_ctx_import

        cli_ctx_import.import_(db, Path(file), _one(opts, "--format"), "--again" in opts)

    return run


_CTX: dict[str, Callable[[Sequence[str]], Callable[[], None] | None]] = {
    "get": plain_ctx_get, "add": plain_ctx_add, "expand": plain_ctx_expand, "import": plain_ctx_import,
}


def plain_ctx(rest: Sequence[str]) -> Callable[[], None] | None:
    """`ctx get`, `ctx add` and `ctx expand`: what an agent that keeps its context in the store runs in
    its loop (cli_ctx.py); `ctx import`, what loads each run into it (cli_ctx_import.py)."""
    if not rest or rest[0] not in _CTX:
        return None
    return _CTX[rest[0]](rest[1:])


_COMMANDS: dict[str, Callable[[Sequence[str]], Callable[[], None] | None]] = {
    "explain": plain_explain, "verify": plain_verify, "salvage": plain_salvage, "ps": plain_ps, "ctx": plain_ctx,
    "diff": plain_diff, "forks": plain_forks, "report": plain_report, "eval": plain_eval,
}


def plain_command(argv: Sequence[str], environ: Mapping[str, str]) -> Callable[[], None] | None:
    """The command a plain `explain`, `verify`, `salvage`, `ps`, `ctx get`, `ctx add`, `ctx expand`,
    `ctx import`, `diff`, `forks`, `report` or `eval` command line runs, as typer would run it, or None when typer must read the line (see the module's
    docstring)."""
    if not argv or argv[0] not in _COMMANDS or shell_completing(environ):
        return None
    return _COMMANDS[argv[0]](argv[1:])
