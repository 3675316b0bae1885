"""`cp-inspect proxy` and `cp-inspect run -- CMD`: inspect any agent through a local recording proxy.

    cp-inspect proxy [--port 8080] [--upstream URL | NAME=URL]... [--record-dir cpsessions]
    cp-inspect run [--no-tui] -- your-agent --its --args

`proxy` runs in the foreground until Ctrl-C. `run` starts the proxy as a child process (so the TUI's
rendering never delays a forwarded byte), starts CMD with the base-URL variables SDKs and litellm
read pointing at it, opens the inspector on CMD's first conversation (its later conversations and
sub-agents are announced there and listed with `o`: see inspector/run_tui.py), and exits with CMD's
exit code.
The engine side (forwarding, recording) is `engine.capture.proxy`; aiohttp is imported only there.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Annotated, Any, cast

import typer

from engine.wording import counted

from .agent_end import ended_said, signal_name
from .cli_common import ThemeOpt, fail, need_terminal
from .token_arg import number_option

UpstreamOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--upstream",
        metavar="URL|NAME=URL",
        help="Where calls go: URL (every provider) or NAME=URL (anthropic, openai, deepseek). "
        "Default: each provider's public API.",
    ),
]
RecordDirOpt = Annotated[
    Path, typer.Option("--record-dir", help="One .cpsession per conversation is written here.",
                       readable=False)
]
DEFAULT_RECORD_DIR = Path("cpsessions")


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def agent_env(url: str, base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment that points SDKs, litellm and common agents at the proxy at `url`."""
    env = dict(os.environ if base is None else base)
    env.update(
        {
            "ANTHROPIC_BASE_URL": url,  # anthropic SDK (Python, TypeScript), Claude Code, litellm
            "ANTHROPIC_API_BASE": url,  # litellm's older name
            "OPENAI_BASE_URL": f"{url}/v1",  # openai SDK (Python, TypeScript), Codex CLI, litellm
            "OPENAI_API_BASE": f"{url}/v1",  # litellm, LangChain's older name
            "DEEPSEEK_API_BASE": f"{url}/deepseek",  # litellm's deepseek provider
            "DEEPSEEK_BASE_URL": f"{url}/deepseek",
            # litellm fetches a model price map from the network at import unless told not to.
            "LITELLM_LOCAL_MODEL_COST_MAP": env.get("LITELLM_LOCAL_MODEL_COST_MAP", "True"),
        }
    )
    return env


def upstreams_from_env(values: list[str], env: dict[str, str]) -> list[str]:
    """`run`: a base URL the user already set (a gateway, a local model server) stays the upstream."""
    given = {v.partition("=")[0].lower() for v in values if "=" in v}
    if any("=" not in v for v in values):
        return values
    out = list(values)
    a = env.get("ANTHROPIC_BASE_URL") or env.get("ANTHROPIC_API_BASE")
    if a and "anthropic" not in given:
        out.append(f"anthropic={a.rstrip('/')}")
    o = env.get("OPENAI_BASE_URL") or env.get("OPENAI_API_BASE")
    if o and "openai" not in given:
        out.append(f"openai={o.rstrip('/').removesuffix('/v1')}")
    return out


# ------------------------------------------------------------------ cp-inspect proxy

# `--port x` is one line saying what --port takes (token_arg.number_option), not typer's usage block.
PORT = number_option("--port", "a port number from 0 to 65535 (0 picks a free one)")
RUN_PID = number_option("--run-pid", "the pid of the `cp-inspect run` that started the proxy")


def proxy(
    port: Annotated[int, typer.Option(parser=PORT, help="Port to listen on; 0 picks a free one (printed).")] = 8080,
    host: Annotated[
        str, typer.Option(help="Address to listen on (loopback unless --allow-remote).")
    ] = "127.0.0.1",
    upstream: UpstreamOpt = None,
    record_dir: RecordDirOpt = DEFAULT_RECORD_DIR,
    serve: Annotated[bool, typer.Option(help="Serve each session to `cp-inspect ps`/`attach`.")] = True,
    allow_remote: Annotated[
        bool, typer.Option(help="Listen on a non-loopback address (others could then use your API keys).")
    ] = False,
    state_file: Annotated[Path | None, typer.Option(hidden=True, readable=False)] = None,
    agent_argv: Annotated[str | None, typer.Option(hidden=True)] = None,  # run's agent (JSON list)
    run_pid: Annotated[int | None, typer.Option(hidden=True, parser=RUN_PID)] = None,  # the `run` that started it
    forward_only: Annotated[
        bool,
        typer.Option("--forward-only", help="Record nothing: only forward (to measure the recorder's cost)."),
    ] = False,
) -> None:
    """A local recording proxy for the Anthropic, OpenAI and DeepSeek APIs: point your agent's base URL at it.

    \b
    Example:
      cp-inspect proxy --port 8080     then ANTHROPIC_BASE_URL=http://127.0.0.1:8080 your-agent ...
    """
    from engine.capture.proxy.recording import Recorder, SessionInfo
    from engine.capture.proxy.routes import parse_upstreams
    from engine.capture.proxy.server import ProxyError, ProxyServer

    _check_port(port)
    if not _is_loopback(host) and not allow_remote:
        fail(
            f"--host {host} is not a loopback address; add --allow-remote if you mean to share this proxy", 2
        )
    try:
        ups = parse_upstreams(upstream or [])
    except ValueError as exc:
        fail(str(exc), 2)

    def on_session(info: SessionInfo) -> None:
        typer.echo(
            f"session {info.number}: {info.model} ({info.provider}) -> {info.path}"
            + (f"   watch: cp-inspect attach {info.target}" if serve else "")
            + _branched(info.branch, "   "),
        )

    created = _record_dir(record_dir, 1)
    # Under `run`, the agent's command is what ps and top show for its sessions (not this proxy's)
    hello: dict[str, Any] = {"proxy": True}
    if agent_argv is not None:
        hello["argv"] = [str(a) for a in json.loads(agent_argv)]
    rec = Recorder(record_dir, serve=serve, on_session=on_session, hello=hello)
    server = ProxyServer(ups, None if forward_only else rec, host=host, port=port)
    try:
        server.start()
    except ProxyError as exc:
        rec.close()
        if created:  # nothing left behind by a proxy that never listened
            with contextlib.suppress(OSError):
                record_dir.rmdir()
        fail(f"{exc} (try another --port, or --port 0 for a free one)")
    url = server.url
    typer.echo(f"cp-inspect proxy listening on {url} (pid {os.getpid()}); recording to {record_dir}/")
    typer.echo(f"  Anthropic SDK / Claude Code:  ANTHROPIC_BASE_URL={url}")
    typer.echo(f"  OpenAI SDK / litellm:         OPENAI_BASE_URL={url}/v1")
    typer.echo(f"  DeepSeek (OpenAI-compatible): base URL {url}/deepseek")
    typer.echo(f"  (or `cp-inspect run -- your-agent ...` sets these for you)  {BANNER_END}")
    if state_file is not None:
        _write_state(state_file, {"url": url, "pid": os.getpid(), "record_dir": str(record_dir)})
    # `run`'s proxy (the state file is run's) is its own session, so no signal reaches it when run itself
    # is killed (SIGKILL, an OOM kill): it served on, for no one, its sessions listed as live by `ps` and
    # `top` and their recordings never closed. It stops when run is gone: when its parent is no longer
    # run's pid, as run names it (a parent read here, after the imports and the server's start, was
    # already another process when run was killed before then, and the proxy served on).
    parent = run_pid if run_pid is not None else os.getppid()
    stop = _wait_for_signal(parent if state_file is not None else None)
    server.stop()
    rec.close()
    summary = [
        {
            "number": i.number,
            "model": i.model,
            "provider": i.provider,
            "path": str(i.path),
            "calls": i.calls,
            "errors": i.errors,
            "tap_errors": i.tap_errors,
            "retried": i.retried,  # failed attempts sent again, kept on their turn (engine/capture/proxy/retries.py)
            "target": i.target,
            "branch": i.branch,  # a conversation with another's opening (engine.capture.lineage)
        }
        for i in sorted([*rec.let_go, *(i for i, _ in rec.sessions.values())], key=lambda i: i.number)
    ]
    if state_file is not None:
        _write_state(
            state_file, {"url": url, "pid": os.getpid(), "sessions": summary, "skipped": rec.skipped}
        )
    typer.echo(f"proxy stopped ({stop}); {counted(len(summary), 'session')}")
    for s in summary:
        calls, errors = counted(cast(int, s["calls"]), "call"), counted(cast(int, s["errors"]), "error")
        typer.echo(f"  {s['path']}: {calls}, {errors}{_retried(s)}{_branched(s.get('branch'))}")
    for note in rec.skipped[:5]:
        typer.echo(f"  not recorded: {note}")


def _retried(s: dict[str, Any]) -> str:
    """', 2 retried attempts' for a session whose failed calls the agent sent again, else ''."""
    n = s.get("retried")
    return f", {counted(n, 'retried attempt')}" if isinstance(n, int) and n else ""


def _branched(branch: Any, sep: str = " ") -> str:
    """' (same opening as session 1)' / ' (forked from session 1 at message 4)' for a session that shares
    another's opening (engine.capture.lineage), else ''."""
    from engine.capture.lineage import branch_short

    return f"{sep}({branch_short(branch)})" if isinstance(branch, dict) else ""


def _write_state(path: Path, obj: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(obj))
    os.replace(tmp, path)  # the reader never sees half a file


# How often a proxy started by `run` looks whether run is still its parent.
PARENT_CHECK_S = 0.5
PARENT_GONE = "cp-inspect run ended"  # (the proxy log's "proxy stopped (...)")


def _wait_for_signal(parent: int | None = None) -> str:
    """Wait for SIGINT, SIGTERM or SIGHUP and say which came; with `parent`, also until this process's
    parent is no longer that pid (it ended, and this process was handed to another)."""
    got: list[str] = []

    def handler(signum: int, _frame: Any) -> None:
        got.append(signal.Signals(signum).name)

    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, handler)
    while not got:
        if parent is not None:
            if os.getppid() != parent:
                return PARENT_GONE
            time.sleep(PARENT_CHECK_S)
        else:
            signal.pause() if hasattr(signal, "pause") else time.sleep(0.5)
    return got[0]


def _check_runnable(program: str) -> None:
    """Exit 1 if `program` cannot be started, before the proxy starts: a misspelt command started the
    proxy, printed its URL as if all were well, left a proxy log in the record directory, and only
    then said it could not start the agent."""
    if shutil.which(program) is not None:
        return
    if os.sep in program or (os.altsep and os.altsep in program):
        p = Path(program)
        why = "no such file" if not p.exists() else "not an executable file (check its mode)"
    else:
        why = "no such command on PATH"
    fail(f"cannot start {program!r}: {why}")


def _check_port(port: int) -> None:
    # Out of range, the bind failed with exit 1 and "try another --port", as if the port were taken.
    if not 0 <= port <= 65535:
        fail(f"--port must be between 0 and 65535 (0 picks a free one), got {port}", 2)


# ------------------------------------------------------------------ cp-inspect run


def run(
    ctx: typer.Context,
    no_tui: Annotated[bool, typer.Option("--no-tui", help="Only record: no inspector.")] = False,
    upstream: UpstreamOpt = None,
    record_dir: RecordDirOpt = DEFAULT_RECORD_DIR,
    port: Annotated[int, typer.Option(parser=PORT, help="The proxy's port (0: a free one).")] = 0,
    theme: ThemeOpt = None,
) -> None:
    """Run CMD with its model calls going through the recording proxy, and watch it live: `cp-inspect run -- CMD ...`.

    \b
    Examples:
      cp-inspect run -- mini -y --exit-immediately -t "fix the bug"
      cp-inspect run --no-tui -- claude -p "summarise README.md"     (only record, to ./cpsessions/)

    The inspector has the terminal: the agent's output goes to a file and it reads no input, so an agent
    that asks (mini's confirmations, without -y) cannot be answered and ends at its first question. Run
    such an agent with --no-tui (it keeps the terminal) and watch it from another terminal with the
    `cp-inspect attach PID.1` the run prints.
    """
    cmd = list(ctx.args)
    if cmd[:1] == ["--"]:
        cmd = cmd[1:]
    if not cmd:
        fail(
            "nothing to run: give the agent's command after `--`, e.g. cp-inspect run -- mini -t 'fix the bug'",
            2,
        )
    _check_port(port)
    if not no_tui:  # before the proxy and the agent are started
        need_terminal("run", "or `cp-inspect run --no-tui -- CMD ...` to only record")
    _check_runnable(cmd[0])
    ups = upstreams_from_env(upstream or [], dict(os.environ))
    created = _record_dir(record_dir, 2)  # said before the agent starts
    work = Path(tempfile.mkdtemp(prefix="cp-run-"))
    # Only the proxy's state file is in it: every run left one behind in /tmp (hundreds on a test host).
    ctx.call_on_close(lambda: shutil.rmtree(work, ignore_errors=True))
    state = work / "proxy.json"
    proxy_log = record_dir / f"proxy-{time.strftime('%Y%m%d-%H%M%S')}.log"
    args = [
        sys.executable,
        "-m",
        "inspector.cli",
        "proxy",
        "--port",
        str(port),
        "--record-dir",
        str(record_dir),
        "--state-file",
        str(state),
        "--agent-argv",
        json.dumps(cmd),
        "--run-pid",
        str(os.getpid()),
    ]
    for u in ups:
        args += ["--upstream", u]
    # The proxy is its own process group: the terminal's Ctrl-C goes to the agent, and the proxy is
    # stopped by us once the agent has ended, so its last calls are recorded whole.
    with proxy_log.open("wb") as log:
        px = subprocess.Popen(
            args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )
    try:
        info = _wait_ready(px, state, proxy_log)
    except typer.Exit:
        if created:  # a proxy that never listened leaves no empty record directory (its log said why)
            with contextlib.suppress(OSError):
                record_dir.rmdir()
        raise
    url = str(info["url"])
    typer.echo(f"cp-inspect: proxy on {url}, recording to {record_dir}/ (proxy log: {proxy_log})", err=True)
    if no_tui:  # the agent has this terminal: the inspector is another's
        typer.echo(
            f"cp-inspect: watch it from another terminal: cp-inspect attach {px.pid}.1 (once the agent has "
            "called its model), or cp-inspect top",
            err=True,
        )
    env = agent_env(url)
    agent_log = record_dir / f"agent-{time.strftime('%Y%m%d-%H%M%S')}.log"
    try:
        if no_tui:
            child = subprocess.Popen(cmd, env=env)
        else:
            # The TUI owns the terminal: the agent's output goes to a file (a pipe nobody reads would
            # fill up and block it) and it reads no terminal input.
            with agent_log.open("wb") as out:
                child = subprocess.Popen(
                    cmd, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
                )
    except OSError as exc:
        _stop_proxy(px)
        fail(f"cannot start {cmd[0]!r}: {exc.strerror or exc}")
    try:
        code = _supervise(child, px, no_tui, theme, agent_log)
    except _Stopped as stop:
        # Give the agent (which got the same signal) a moment to end so its last calls still go
        # through the proxy and are recorded, then stop.
        try:
            child.wait(5)
        except subprocess.TimeoutExpired:
            pass
        _stop_proxy(px)
        raise typer.Exit(128 + stop.signum) from None
    except BaseException:
        _stop_proxy(px)  # the proxy has its own session: never leave it behind
        raise
    _stop_proxy(px)
    if not _summary(state, agent_log if not no_tui else None, code, child.returncode):
        _tidy(proxy_log, record_dir if created else None)
    raise typer.Exit(code)


# The proxy's banner ends with this (the proxy command's last line before it serves): what `run` reads its
# log by.
BANNER_END = "Ctrl-C stops."


def _tidy(proxy_log: Path, made: Path | None) -> None:
    """A run that recorded nothing: its proxy log goes if it holds only what the proxy always says (the
    banner, and that it stopped with no session), and the record directory if this run made it and nothing
    else is in it. Every `cp-inspect run -- true` (or an agent that failed before its first call, or did not
    read the base URL) left a cpsessions/ directory holding that one log in the directory it ran in."""
    try:
        lines = proxy_log.read_text(errors="replace").splitlines()
    except OSError:
        return
    end = next((i for i, line in enumerate(lines) if line.endswith(BANNER_END)), None)
    if end is None or not all(line.startswith("proxy stopped (") for line in lines[end + 1 :]):
        return  # it says something more (a call not recorded, a warning): kept
    proxy_log.unlink(missing_ok=True)
    if made is not None:
        with contextlib.suppress(OSError):  # (not empty: the agent's output log, say)
            made.rmdir()


class _Stopped(BaseException):  # BaseException: asyncio and Textual let it out of the event loop
    """The run was told to end while the inspector had the terminal: SIGHUP (the terminal went away:
    nothing is left to draw on, and an app whose terminal is gone would otherwise keep running, and
    spin, with no one to quit it) or SIGTERM (`kill`, a process manager: the whole run ends, as a
    process told to terminate does, not just the agent behind an inspector left open)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _record_dir(record_dir: Path, code: int) -> bool:
    """Create --record-dir if need be and make sure a file can be made in it, or fail with `code`: an
    existing directory we may not write ended `run` with a PermissionError traceback from its proxy log,
    and the proxy took its first call before finding it could not record it. True if it was created."""
    existed = record_dir.is_dir()
    try:
        record_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # a file of that name, no permission
        fail(f"cannot create the record directory {record_dir}: {exc.strerror}", code)
    from .out_path import cannot_create_in

    why = cannot_create_in(record_dir)
    if why:
        fail(
            f"cannot write in the record directory {record_dir} ({why}): give --record-dir a directory you "
            "can write to",
            code,
        )
    return not existed


def _wait_ready(px: subprocess.Popen[bytes], state: Path, log: Path, wait_s: float = 30.0) -> dict[str, Any]:
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if state.exists():
            return json.loads(state.read_text())  # type: ignore[no-any-return]
        if px.poll() is not None:
            said = log.read_text(errors="replace").strip()
            last = said.splitlines()[-1] if said else ""
            if last.startswith("cp-inspect: "):
                # The proxy said what was wrong, as its own command does (a taken --port): that line,
                # not "the proxy exited with code 1: cp-inspect: ..."; the log held nothing more.
                if said == last:
                    log.unlink(missing_ok=True)
                fail(last.removeprefix("cp-inspect: "))
            fail(f"the proxy exited with code {px.returncode}: {said[-600:]} (see {log})")
        time.sleep(0.05)
    _stop_proxy(px)
    fail(f"the proxy did not start within {wait_s:g} s (see {log})")


def _supervise(
    child: subprocess.Popen[bytes],
    px: subprocess.Popen[bytes],
    no_tui: bool,
    theme: str | None,
    agent_log: Path,
) -> int:
    """Wait for the agent, forwarding SIGTERM/SIGHUP to it; with the TUI, show its sessions meanwhile."""

    stopped: list[int] = []

    def forward(signum: int, _frame: Any) -> None:
        if child.poll() is None:
            child.send_signal(signum)
        if signum in (signal.SIGHUP, signal.SIGTERM) and not no_tui:
            stopped.append(signum)
            # With an app on screen it is closed from its own loop (an exception raised here could be
            # swallowed by it); _tui then returns and the run stops below. No app before run_tui is
            # loaded (and no import inside a signal handler).
            run_tui = sys.modules.get("inspector.run_tui")
            if run_tui is None or not run_tui.request_stop():
                raise _Stopped(signum)

    for s in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, forward)
    # Ctrl-C reaches the agent from the terminal (same process group); we wait for it to act on it.
    signal.signal(signal.SIGINT, forward if not no_tui else lambda *_: None)
    if not no_tui:
        _tui(child, px, theme, agent_log)
        if stopped:
            raise _Stopped(stopped[0])
        if child.poll() is None:
            typer.echo(
                f"cp-inspect: the agent (pid {child.pid}) is still running; waiting for it (Ctrl-C stops it)",
                err=True,
            )
            signal.signal(signal.SIGINT, forward)
    while True:
        try:
            rc = child.wait()
            break
        except KeyboardInterrupt:
            continue
    return rc if rc >= 0 else 128 - rc


def _tui(
    child: subprocess.Popen[bytes], px: subprocess.Popen[bytes], theme: str | None, agent_log: Path
) -> None:
    from engine.errors import ContextPipeError
    from inspector.run_tui import run_session_source

    typer.echo(f"cp-inspect: waiting for the agent's first model call (agent output: {agent_log}) ...", err=True)
    src = None
    while src is None:
        if child.poll() is not None:
            typer.echo("cp-inspect: the agent ended before the inspector could attach", err=True)
            return
        try:
            src = run_session_source(px.pid, 1, timeout=2.0)
        except ContextPipeError:
            time.sleep(0.1)
    from inspector.run_tui import follow_run

    # The first session first; the run's later sessions (sub-agents, other conversations) are
    # announced in the inspector and listed with `o` (or on quitting it).
    follow_run(px.pid, src, theme=theme, agent_ended=lambda: agent_ended(child, agent_log))


def agent_ended(child: subprocess.Popen[bytes], agent_log: Path) -> str | None:
    """How the agent of a run ended, as the inspector says it (None while it runs)."""
    code = child.poll()
    if code is None:
        return None
    if code == 0:
        from .status import FINISHED  # (the inspector's: textual is loaded by then, not before)

        return FINISHED  # the status line says it in its own words
    # Its output is in a file while the inspector has the terminal: where to look when it failed.
    return f"{ended_said(code)} (its output: {agent_log})"


def _stop_proxy(px: subprocess.Popen[bytes]) -> None:
    if px.poll() is None:
        px.send_signal(signal.SIGTERM)
        try:
            px.wait(60)
        except subprocess.TimeoutExpired:
            px.kill()
            px.wait()


def _summary(state: Path, agent_log: Path | None, code: int = 0, returncode: int | None = None) -> bool:
    """Say what the run recorded; False if it recorded nothing (or cannot tell: True then). `returncode`:
    the agent's own (Popen's: a signal negative), said beside its output's file when it failed."""
    try:
        info = json.loads(state.read_text())
    except (OSError, json.JSONDecodeError):
        typer.echo("cp-inspect: the proxy left no summary (it may have been killed)", err=True)
        return True
    sessions = info.get("sessions") or []
    if not sessions and code > 128 and code - 128 in signal.valid_signals():
        # Ended by a signal (the run's code is 128 + N, as a shell's): Ctrl-C before the first call was
        # "exited with status 130 ... (its output says why)", as if the agent had failed.
        name = signal_name(code - 128)
        typer.echo(f"cp-inspect: no model calls went through the proxy: the agent was ended by {name}"
                   f"{' (Ctrl-C)' if name == 'SIGINT' else ''} before making one", err=True)
    elif not sessions and code != 0:
        # An agent that failed before its first call (mini-swe-agent with no model configured): the
        # base-URL question sent its user looking in the wrong place.
        typer.echo(f"cp-inspect: no model calls went through the proxy: the agent exited with status {code} "
                   "before making one (its output says why)", err=True)
    elif not sessions:
        typer.echo(
            "cp-inspect: no model calls went through the proxy (does the agent read "
            "OPENAI_BASE_URL / ANTHROPIC_BASE_URL?)",
            err=True,
        )
    for s in sessions:
        typer.echo(
            f"cp-inspect: session {s['number']} ({s['model']}): {counted(s['calls'], 'call')}, {counted(s['errors'], 'error')}"
            f"{_retried(s)}{_branched(s.get('branch'))} -> {s['path']}  (cp-inspect replay {s['path']})",
            err=True,
        )
    for note in (info.get("skipped") or [])[:5]:
        typer.echo(f"cp-inspect: not recorded: {note}", err=True)
    if agent_log is not None:
        # After the TUI, how the agent ended is said with where its output is: the inspector's banner had
        # it, but it is gone once q is pressed, and the summary above read as a run that went well.
        # (With no session, the line above said how it ended already.)
        whose = f"{ended_said(returncode)}; its" if returncode and sessions else "the agent's"
        typer.echo(f"cp-inspect: {whose} output is in {agent_log}", err=True)
    return bool(sessions)
