"""`cp-inspect` as a new user meets it: help that lists what a command does, one clear line for each wrong
argument, and nothing half-written when a command fails or is interrupted. Commands run as a subprocess
(signals, exit codes, streams) or through typer's CliRunner, as a user runs them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from typer.testing import CliRunner

from inspector.cli import app
from tests.support.ctrl_c import ctrl_c_as_in_a_terminal

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "demo_sessions" / "scout-anthropic.cpsession"


def _cli(*args: str) -> subprocess.Popen[bytes]:
    """The console script's entry point in a child process (its own signals, streams, exit code)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    code = "import sys; sys.argv[0] = 'cp-inspect'; from inspector.entry import main; main()"
    return subprocess.Popen(
        [sys.executable, "-c", code, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
        preexec_fn=ctrl_c_as_in_a_terminal,
    )


def _long_trajectory(path: Path, rounds: int = 600) -> Path:
    """A mini-swe-agent trajectory long enough that importing it takes seconds on this machine."""
    msgs: list[dict[str, object]] = [
        {"role": "system", "content": "You are a shell agent."},
        {"role": "user", "content": "Find the bug in the parser and fix it."},
    ]
    for i in range(rounds):
        call = {"id": f"call_{i}", "type": "function",
                "function": {"name": "bash", "arguments": json.dumps({"command": f"grep -n parse src/m{i}.py"})}}
        msgs.append({"role": "assistant", "content": f"Looking at module {i}.", "tool_calls": [call],
                     "extra": {"response": {"model": "deepseek-chat", "usage": {
                         "prompt_tokens": 1000 + 60 * i, "completion_tokens": 20}}, "timestamp": float(i)}})
        msgs.append({"role": "tool", "tool_call_id": f"call_{i}",
                     "content": "\n".join(f"{j}: def parse_{i}_{j}(x): return x" for j in range(12))})
    msgs.append({"role": "exit", "content": "", "extra": {"exit_status": "Submitted"}})
    path.write_text(json.dumps({"trajectory_format": "mini-swe-agent-1.1", "instance_id": "long",
                                "info": {}, "messages": msgs}))
    return path


def _interrupt_when(proc: subprocess.Popen[bytes], started: object, timeout: float = 60.0) -> tuple[str, str]:
    """SIGINT the command once `started()` says it is half way through writing, as Ctrl-C would."""
    deadline = time.monotonic() + timeout
    while not started():  # type: ignore[operator]
        assert proc.poll() is None, "the command ended before it could be interrupted"
        assert time.monotonic() < deadline
        time.sleep(0.005)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    return out.decode(), err.decode()


def test_import_interrupted_writes_nothing_and_keeps_the_old_file(tmp_path: Path) -> None:
    traj = _long_trajectory(tmp_path / "long.traj.json")
    out = tmp_path / "run.cpsession"
    out.write_bytes(DEMO.read_bytes())  # replaced only by a complete import (--force)

    def writing() -> bool:
        # Half way: a recording being written (the old code wrote OUT itself) has grown past 20 kB.
        for p in tmp_path.iterdir():
            try:
                size = p.stat().st_size
            except FileNotFoundError:
                continue
            if p != traj and size > 20_000 and (p != out or size != len(DEMO.read_bytes())):
                return True
        return False

    proc = _cli("import", "auto", str(traj), "-o", str(out), "--force")
    _, err = _interrupt_when(proc, writing)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "interrupted: nothing imported" in err, err
    assert out.read_bytes() == DEMO.read_bytes()  # the file --force would have replaced is untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["long.traj.json", "run.cpsession"]


def _damaged_half_way(path: Path) -> Path:
    """The demo recording with a frame in its second half overwritten: the first half reads fine."""
    data = bytearray(DEMO.read_bytes())
    mid = len(data) // 2
    data[mid : mid + 40] = bytes(b ^ 0xFF for b in data[mid : mid + 40])
    path.write_bytes(bytes(data))
    return path


def _store_items(db: Path) -> list[tuple[int, str]]:
    from engine.store import ContextStore

    with ContextStore(db) as store:
        return [(i, store.expand(i)) for i in range(1, len(store) + 1)]


def test_ctx_import_of_a_recording_damaged_half_way_imports_nothing(tmp_path: Path) -> None:
    db = tmp_path / "ctx.sqlite"
    r = CliRunner().invoke(app, ["ctx", "add", "--db", str(db), "notes from before"])
    assert r.exit_code == 0, r.output
    before = _store_items(db)
    bad = _damaged_half_way(tmp_path / "bad.cpsession")
    r = CliRunner().invoke(app, ["ctx", "import", "--db", str(db), str(bad)])
    assert r.exit_code == 1
    assert f"nothing imported from {bad} (the store is as it was): corrupt frame" in r.output, r.output
    assert _store_items(db) == before  # the old import left the 18 turns before the damage in the store
    # The same store goes on: the next import and add take the ids the failed import had used.
    r = CliRunner().invoke(app, ["ctx", "import", "--db", str(db), str(DEMO)])
    assert r.exit_code == 0 and r.output.startswith("imported "), r.output


def test_a_store_batch_that_fails_leaves_nothing_behind_and_the_store_usable(tmp_path: Path) -> None:
    from engine.store import ContextStore, Kind

    with ContextStore(tmp_path / "s.sqlite") as store:
        first = store.add("kept", Kind.USER)
        try:
            with store.batch():
                ghost = store.add("rolled back", Kind.USER, pin=True)
                store.advance_turn()
                raise RuntimeError("half way")
        except RuntimeError:
            pass
        assert len(store) == 1 and store.turn == 0
        again = store.add("real", Kind.USER)
        assert again == ghost  # SQLite reuses the id: the cached body of the rolled-back row must be gone
        assert store.expand(again) == "real" and store.expand(first) == "kept"
        window = store.context_get(1000, sticky=False)
        assert [e.text for e in window.entries] == ["kept", "real"]


def test_ctx_help_names_every_subcommand() -> None:
    top = CliRunner().invoke(app, ["--help"])
    ctx = CliRunner().invoke(app, ["ctx", "--help"])
    assert top.exit_code == 0 and ctx.exit_code == 0
    ctx_line = next(line for line in top.output.splitlines() if line.strip().startswith("ctx "))
    description = ctx.output.split("Options:")[0]
    for sub in ("add", "import", "get", "expand"):
        assert sub in ctx_line and sub in description, (sub, ctx_line, description)


def test_ctx_expand_of_a_negative_or_zero_id_says_ids_start_at_1(tmp_path: Path) -> None:
    db = tmp_path / "ctx.sqlite"
    assert CliRunner().invoke(app, ["ctx", "add", "--db", str(db), "hello"]).exit_code == 0
    for args in (["-1"], ["--", "-1"], ["0"]):
        r = CliRunner().invoke(app, ["ctx", "expand", "--db", str(db), *args])
        assert r.exit_code == 2, (args, r.output)
        assert "item ids start at 1" in r.output and "No such option" not in r.output, (args, r.output)
    r = CliRunner().invoke(app, ["ctx", "expand", "--db", str(db), "1"])
    assert r.exit_code == 0 and r.output == "hello\n"


def test_explain_refuses_budget_0_and_names_the_turn_as_given() -> None:
    r = CliRunner().invoke(app, ["explain", str(DEMO), "--budget", "0"])
    # It printed the recorded plan (exit 0), as if re-planned with a window of 0.
    assert r.exit_code == 2 and "--budget must be between 1 and 100,000,000 tokens, got 0" in r.output, r.output
    r = CliRunner().invoke(app, ["explain", str(DEMO), "--turn", "-100"])
    assert r.exit_code == 2, r.output
    assert "turn -100 is not in" in r.output and "turns 0..39" in r.output, r.output  # it said "turn -60"
    r = CliRunner().invoke(app, ["explain", str(DEMO), "--turn", "-40", "--format", "json"])
    assert r.exit_code == 0 and json.loads(r.output)["turn"] == 0


def test_a_max_output_tokens_not_below_the_window_is_refused() -> None:
    import pytest

    from engine import Pipeline
    from engine.errors import ConfigError

    for out in (16_000, 8_000):  # every request would ask for a reply the window cannot hold beside a prompt
        with pytest.raises(ConfigError, match=rf"max_output_tokens={out:,} is not below the window \(8,000"):
            Pipeline("claude-sonnet-4", window=8_000, max_output_tokens=out, serve=False)
    pipe = Pipeline("claude-sonnet-4", window=20_000, max_output_tokens=8_000, serve=False)
    with pytest.raises(ConfigError, match="not below the window"):
        pipe.set_window(6_000)
    assert pipe.config.window == 20_000
    # The default is not held to a small planning window (what-ifs, importers, tests), nor inherited
    # by a fork as if it had been chosen.
    small = Pipeline("claude-sonnet-4", window=3_000, serve=False)
    small.identity("You are careful.")
    small.user("Go.")
    assert small.next_request().body["max_tokens"] == 4096
    assert small.fork("A side task.").config.max_output_tokens == 4096


def test_report_refuses_bad_options_before_any_work(tmp_path: Path) -> None:
    cases = {
        ("--window", "0"): "--window must be between 1 and 100,000,000 tokens, got 0",
        ("--window", "-5"): "--window must be between 1 and 100,000,000 tokens, got -5",
        ("--window", str(10**12)): "--window must be between 1 and 100,000,000 tokens, got 1000000000000",
        ("--svg", str(tmp_path)): "is a directory: give a file path",  # was a traceback after the report
        ("--svg", str(tmp_path / "no" / "c.svg")): "does not exist",
        ("--prices", str(tmp_path / "none.json")): "--prices: no such price table",  # every session was skipped
        ("--model", "no-such-model"): "--model: no price for model 'no-such-model'",  # was unused, exit 0
    }
    for args, says in cases.items():
        r = CliRunner().invoke(app, ["report", str(DEMO), *args])
        assert r.exit_code == 2 and says in r.output and "skipped" not in r.output, (args, r.output)
        assert r.exception is None or isinstance(r.exception, SystemExit), (args, r.exception)
    r = CliRunner().invoke(app, ["report", str(DEMO), "--svg", str(tmp_path / "c.svg")])
    assert r.exit_code == 0 and (tmp_path / "c.svg").read_text().startswith("<svg"), r.output


def test_proxy_and_run_refuse_a_bad_port_or_record_dir_before_starting(tmp_path: Path) -> None:
    a_file = tmp_path / "notes.txt"
    a_file.write_text("not a directory")
    cases = [
        (["proxy", "--port", "-1"], "--port must be between 0 and 65535"),  # was exit 1, "try another --port"
        (["proxy", "--port", "70000"], "--port must be between 0 and 65535"),
        (["run", "--no-tui", "--port", "70000", "--", "true"], "--port must be between 0 and 65535"),
        (["run", "--no-tui", "--record-dir", str(a_file), "--", "true"],  # was a FileExistsError traceback
         f"cannot create the record directory {a_file}"),
    ]
    for args, says in cases:
        r = CliRunner().invoke(app, args)
        assert r.exit_code == 2 and says in r.output, (args, r.exit_code, r.output, r.exception)
        assert r.exception is None or isinstance(r.exception, SystemExit), (args, r.exception)


def test_wrong_options_are_usage_errors_everywhere(tmp_path: Path) -> None:
    """Exit 2 for a wrong option or argument, as the README says, in the commands that gave 1."""
    db = tmp_path / "ctx.sqlite"
    out = tmp_path / "kept.cpsession"
    out.write_bytes(b"keep me")
    traj = tmp_path / "t.json"
    traj.write_text("{}")
    cases = [
        (["ctx", "add", "--db", str(db), "--importance", "5", "x"], "--importance must be between 0 and 1"),
        (["ctx", "import", "--db", str(db), str(traj), "--format", "nope"], "unknown import format 'nope'"),
        (["salvage", str(DEMO), "-o", str(out)], "already exists"),
    ]
    for args, says in cases:
        r = CliRunner().invoke(app, args)
        assert r.exit_code == 2 and says in r.output, (args, r.exit_code, r.output)
    assert not db.exists() and out.read_bytes() == b"keep me"


def test_import_refuses_bad_plan_options_and_a_recording_before_any_work(tmp_path: Path) -> None:
    traj = _long_trajectory(tmp_path / "short.traj.json", rounds=3)
    out = tmp_path / "run.cpsession"
    cases = [
        (["--window", "0"], "--window must be between 1 and 100,000,000 tokens, got 0"),  # was no window: exit 0
        (["--window", "-5"], "--window must be between 1 and 100,000,000 tokens, got -5"),
        (["--window", str(10**12)], "--window must be between 1 and 100,000,000 tokens, got 1000000000000"),
        (["--provider", "nope"], "--provider: unknown provider 'nope'"),  # was replaced by openai: exit 0
    ]
    for extra, says in cases:
        r = CliRunner().invoke(app, ["import", "auto", str(traj), "-o", str(out), *extra])
        assert r.exit_code == 2 and says in r.output, (extra, r.exit_code, r.output)
        assert not out.exists()
    r = CliRunner().invoke(app, ["import", "auto", str(DEMO), "-o", str(out)])
    assert r.exit_code == 2 and "is already a recording" in r.output, r.output
    r = CliRunner().invoke(app, ["demo", "--no-tui", "--delay", "1e308"])  # overflowed the agent's sleep
    assert r.exit_code == 2 and "--delay must be between 0 and 3600" in r.output, r.output
    r = CliRunner().invoke(app, ["import", "auto", str(traj), "-o", str(out), "--window", "32000"])
    assert r.exit_code == 0 and "3 turns" in r.output, r.output


def test_help_shows_what_each_option_takes_and_eval_refuses_a_missing_folder(tmp_path: Path) -> None:
    runner = CliRunner()
    for cmd in (["explain"], ["simulate"], ["diff"], ["proxy"], ["run"]):
        out = runner.invoke(app, [*cmd, "--help"]).output
        # A repeatable option read as taking a list ("--gate <list[str]>"); it takes one NAME=on|off a time.
        assert "--gate <list" not in out and "--threshold <list" not in out, cmd
        assert "--upstream <list" not in out and "--fail-on <list" not in out, cmd
    assert "--gate NAME=on|off" in runner.invoke(app, ["explain", "--help"]).output
    for cmd in ("explain", "import"):
        assert "deepseek" in runner.invoke(app, [cmd, "--help"]).output, cmd  # --provider names its choices
    r = runner.invoke(app, ["eval", "--trajectories", str(tmp_path / "typo")])
    assert r.exit_code == 2 and "no such folder" in r.output, r.output  # was "skipped", exit 0


def test_diff_takes_the_short_threshold_names_as_explain_and_simulate_do() -> None:
    def run(side: str) -> str:
        r = CliRunner().invoke(app, ["diff", "recorded", side, str(DEMO), "--json"])
        assert r.exit_code == 0, (side, r.output)  # was "unknown threshold(s) ['trim']", exit 2
        return r.output.replace(side, "SIDE")  # the side's label is the text as given

    short, full = run("threshold.trim=0.5"), run("threshold.trim_schemas=0.5")
    assert short == full and json.loads(short)["totals"]


def test_simulate_names_a_missing_file_before_simulating_the_ones_ahead_of_it(tmp_path: Path) -> None:
    missing = tmp_path / "missing.cpsession"
    # The model is only priced once a session is simulated: the old code simulated DEMO first, so the
    # model was what it reported; a missing tenth file was found after nine sessions' work.
    proc = _cli("simulate", str(DEMO), str(missing), "--model", "no-such-model")
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1 and err.decode() == f"cp-inspect: no such file: {missing}\n", err


def test_demo_no_tui_ctrl_c_in_a_terminal_ends_cleanly_with_130(tmp_path: Path) -> None:
    """Ctrl-C in a terminal reaches the whole foreground process group: the demo agent too. It printed a
    KeyboardInterrupt traceback from the agent and exited 254 (the agent's -2)."""
    rec = tmp_path / "demo.cpsession"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    code = "import sys; sys.argv[0] = 'cp-inspect'; from inspector.entry import main; main()"
    proc = subprocess.Popen(
        [sys.executable, "-c", code, "demo", "--no-tui", "--turns", "500", "--delay", "0.05", "--record", str(rec)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, start_new_session=True,
        preexec_fn=ctrl_c_as_in_a_terminal,
    )
    try:
        assert proc.stdout is not None
        while not proc.stdout.readline().startswith(b"turn   3 "):
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        os.killpg(proc.pid, signal.SIGINT)  # what the terminal does on Ctrl-C
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert "Traceback" not in err.decode() and "KeyboardInterrupt" not in err.decode(), err.decode()
    assert proc.returncode == 130, (proc.returncode, err.decode())
    assert b"recording kept at" in out
    r = CliRunner().invoke(app, ["verify", str(rec)])  # the agent closed its recording on the way out
    assert r.exit_code == 0 and r.output.startswith("ok:"), r.output


def test_ctx_import_warns_of_a_cut_off_recording_and_makes_no_store_for_a_foreign_file(tmp_path: Path) -> None:
    data = DEMO.read_bytes()
    cut = tmp_path / "cut.cpsession"
    cut.write_bytes(data[: len(data) // 2])  # a writer killed mid-write: the turns before the cut are whole
    db = tmp_path / "ctx.sqlite"
    r = CliRunner().invoke(app, ["ctx", "import", "--db", str(db), str(cut)])
    assert r.exit_code == 0 and "imported " in r.output, r.output
    assert f"warning: {cut}: last frame at offset" in r.output, r.output  # imported with no word of the rest
    foreign = tmp_path / "notes.cpsession"
    foreign.write_text('{"not": "a recording"}')
    other = tmp_path / "other.sqlite"
    r = CliRunner().invoke(app, ["ctx", "import", "--db", str(other), str(foreign)])
    assert r.exit_code == 1 and "is JSON, not a .cpsession recording" in r.output, r.output
    assert not other.exists()  # an empty store was made before the file was read


def test_salvage_interrupted_while_writing_keeps_the_file_force_would_replace(tmp_path: Path) -> None:
    rec = tmp_path / "long.cpsession"
    r = CliRunner().invoke(app, ["import", "auto", str(_long_trajectory(tmp_path / "t.json", 400)), "-o", str(rec)])
    assert r.exit_code == 0, r.output
    out = tmp_path / "fixed.cpsession"
    out.write_bytes(DEMO.read_bytes())
    size = out.stat().st_size

    def writing() -> bool:
        # The old salvage truncated OUT as it began writing; the new one writes a file beside it.
        names = [p.name for p in tmp_path.iterdir()]
        return any(n.endswith(".partial") for n in names) or out.stat().st_size != size

    proc = _cli("salvage", str(rec), "-o", str(out), "--force")
    _, err = _interrupt_when(proc, writing)
    assert proc.returncode == 130 and "Traceback" not in err, err
    assert out.read_bytes() == DEMO.read_bytes(), "the file --force would have replaced was cut short"
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".partial")]


def test_explain_takes_json_like_every_other_command() -> None:
    a = CliRunner().invoke(app, ["explain", str(DEMO), "--turn", "12", "--json"])
    b = CliRunner().invoke(app, ["explain", str(DEMO), "--turn", "12", "--format", "json"])
    assert a.exit_code == 0, a.output  # was "No such option: --json" (exit 2)
    assert a.output == b.output and json.loads(a.output)["turn"] == 12


def test_the_terminal_uis_refuse_to_start_without_a_terminal(tmp_path: Path) -> None:
    """With stdin not a terminal (a pipe, /dev/null, CI) the UI saw end of input over and over: ~80% of
    a core, nothing shown, no end. Now one line and exit 2, before anything is started."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    code = "import sys; sys.argv[0] = 'cp-inspect'; from inspector.entry import main; main()"
    for args, instead in ((["top"], "ps --json"), (["demo", "--turns", "3"], "demo --no-tui"),
                          (["run", "--record-dir", str(tmp_path), "--", sys.executable, "-c", "pass"],
                           "run --no-tui"),
                          (["replay", str(DEMO)], "cp-inspect explain"),  # the plain (typer-free) path
                          (["replay", str(DEMO), "--theme=light"], "cp-inspect explain")):
        proc = subprocess.Popen([sys.executable, "-c", code, *args], stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, start_new_session=True)
        try:
            _, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        assert proc.returncode == 2, (args, proc.returncode, err)
        assert b"stdin is not a terminal" in err and instead.encode() in err, (args, err)
    assert not list(tmp_path.iterdir())  # run started neither its proxy nor the agent (their logs)


def test_run_usage_line_shows_the_command_it_runs() -> None:
    out = CliRunner().invoke(app, ["run", "--help"]).output
    assert out.startswith("Usage: cp-inspect run [OPTIONS] -- CMD [ARGS]..."), out  # was "run [OPTIONS]"


def test_a_reader_that_stops_early_gets_no_traceback_from_simulate() -> None:
    """`cp-inspect simulate ... --json | head`: the plain simulate path (no typer, entry.py) let the
    BrokenPipeError out as a traceback; typer's commands already ended quietly (click's own handling)."""
    # The three demo recordings (one given twice is refused): ~180 kB, more than a pipe holds.
    proc = _cli("simulate", *sorted(str(p) for p in DEMO.parent.glob("*.cpsession")), "--json", "--per-turn")
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.read(10)  # ~180 kB follow: more than a pipe holds, so the writer meets the closed end
    proc.stdout.close()
    err = proc.stderr.read().decode()
    proc.wait(timeout=60)
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    assert proc.returncode == 1


def test_options_that_would_be_ignored_are_refused() -> None:
    cases = [
        (["simulate", str(DEMO), "--per-turn"], "give it with --json"),  # the table printed without them
        (["diff", "recorded", "recorded", str(DEMO), "--all", "--json"], "--all lists identical turns"),
        (["ctx", "get", "--db", str(DEMO), "--budget", "5000", "--json", "--explain"], "choose one of --json"),
    ]
    for args, says in cases:
        r = CliRunner().invoke(app, args)
        assert r.exit_code == 2 and says in r.output, (args, r.exit_code, r.output)


def test_eval_json_without_trajectories_is_an_error_with_nothing_on_stdout(tmp_path: Path) -> None:
    """Nothing was evaluated: exit 1 and the error on stderr, stdout empty (it was {"skipped": ...}, exit 0,
    which a script reads as a result)."""
    env = {**os.environ, "CONTEXTPIPE_TRAJECTORIES": str(tmp_path / "absent")}
    code = "import sys; sys.argv[0] = 'cp-inspect'; from inspector.entry import main; main()"
    res = subprocess.run([sys.executable, "-c", code, "eval", "--json"], capture_output=True, text=True,
                         env={**env, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert res.returncode == 1 and res.stdout == "", (res.returncode, res.stdout)
    assert res.stderr.startswith("cp-inspect: nothing to evaluate:") and "absent" in res.stderr, res.stderr


def test_import_helps_name_every_format_they_take() -> None:
    from engine.importers import FORMATS

    for cmd in (["import"], ["ctx", "import"]):
        out = " ".join(CliRunner().invoke(app, [*cmd, "--help"]).output.split())  # unwrapped
        for name in FORMATS:  # ctx import's --format named none of them, and its FILE not claude-trace
            assert name.replace("-", "- ") in out or name in out, (cmd, name)


def test_a_trajectory_given_where_a_recording_goes_is_told_to_import_it(tmp_path: Path) -> None:
    traj = _long_trajectory(tmp_path / "run.traj.json", rounds=2)
    for cmd in (["verify"], ["explain"], ["simulate"], ["report"]):
        r = CliRunner().invoke(app, [*cmd, str(traj)])
        assert r.exit_code == 1, (cmd, r.output)
        # It said "not a cpsession recording, or its header frame is cut off or corrupt (frame length
        # 2065850658 exceeds the limit ...); nothing can be recovered from it".
        assert f"import it first: cp-inspect import auto {traj} -o run.cpsession" in r.output, (cmd, r.output)


def test_a_fifo_is_refused_at_once_by_import_and_ctx_import(tmp_path: Path) -> None:
    fifo = tmp_path / "log.jsonl"
    os.mkfifo(fifo)  # nobody writes it: reading it waited forever
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    code = "import sys; sys.argv[0] = 'cp-inspect'; from inspector.entry import main; main()"
    for args in (["import", "auto", str(fifo), "-o", str(tmp_path / "o.cpsession")],
                 ["ctx", "import", "--db", str(tmp_path / "s.sqlite"), str(fifo)]):
        try:
            res = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env,
                                 timeout=30)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{args[:2]} waited on the FIFO") from None
        assert res.returncode in (1, 2) and "is not a regular file" in res.stderr, (args, res.stderr)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["log.jsonl"]


def test_simulate_says_a_bad_window_once_as_the_options_error() -> None:
    for w in ("0", "-5", str(10**12)):
        r = CliRunner().invoke(app, ["simulate", str(DEMO), str(DEMO.with_name("scout-openai.cpsession")), "--window", w])
        assert r.exit_code == 2, r.output
        # It was "FILE: --window must be a positive number of tokens", as if the file were at fault.
        assert r.output == f"cp-inspect: --window must be between 1 and 100,000,000 tokens, got {w}\n", r.output


def test_an_empty_policies_list_and_a_timeout_that_cannot_work_are_refused() -> None:
    cases = [
        # "" read as no --policies: the what-if table printed as if the option were absent.
        (["simulate", str(DEMO), "--policies", ""], "--policies needs 'all' or a comma list"),
        (["simulate", str(DEMO), "--policies", " , "], "--policies needs 'all' or a comma list"),
        # Every batch failed at once, after the files had been read and the spans built.
        (["export", str(DEMO), "--otlp", "http://127.0.0.1:9", "--timeout", "0"], "--timeout is seconds"),
        (["export", str(DEMO), "--otlp", "http://127.0.0.1:9", "--timeout", "-1"], "--timeout is seconds"),
    ]
    for args, says in cases:
        r = CliRunner().invoke(app, args)
        assert r.exit_code == 2 and says in r.output, (args, r.exit_code, r.output)


def _command_list(output: str) -> list[str]:
    """The rows of a help text's "Commands:" list (a wrapped summary's continuation rows included)."""
    rows = output.split("Commands:\n", 1)[1].split("\n\n", 1)[0]
    return [row for row in rows.splitlines() if row.strip()]


def test_the_command_lists_say_what_each_command_does_without_cutting_it() -> None:
    # Click cut each docstring to the list's width with "...": 13 of 17 commands read like "import
    # Import a real agent trajectory as a recording: each model..." at 80 columns.
    for width in (80, 60):
        for group in ([], ["ctx"]):
            shown = CliRunner().invoke(app, [*group, "--help"], terminal_width=width)
            assert shown.exit_code == 0, shown.output
            rows = _command_list(shown.output)
            assert len(rows) >= (18 if not group else 5), rows
            assert not [row for row in rows if row.rstrip().endswith("...")], (width, group, rows)
            assert all(len(row) <= width for row in rows), (width, rows)
    listed = _command_list(CliRunner().invoke(app, ["--help"], terminal_width=80).output)
    assert "  import    Turn another tool's trajectory into a recording." in listed


def test_report_and_export_name_a_missing_directory_as_it_was_typed(tmp_path: Path) -> None:
    # `report runs/` said "no such file: runs": a directory named as a file, its slash dropped.
    for command in ("report", "export"):
        r = CliRunner().invoke(app, [command, f"{tmp_path}/runs/"])
        assert r.exit_code == 1, r.output
        assert r.output == f"cp-inspect: no such file or directory: {tmp_path}/runs/\n", r.output


def test_run_of_an_agent_that_fails_before_any_call_says_so(tmp_path: Path) -> None:
    # `cp-inspect run --no-tui -- mini -t ...` with no model configured: mini exits 1 at its setup prompt,
    # and the run asked "does the agent read OPENAI_BASE_URL / ANTHROPIC_BASE_URL?", the wrong place.
    env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_RUNTIME_DIR": str(tmp_path)}
    code = "import sys; sys.argv[0] = 'cp-inspect'; from inspector.entry import main; main()"
    failing = [sys.executable, "-c", "import sys; print('no model configured', file=sys.stderr); sys.exit(3)"]
    res = subprocess.run([sys.executable, "-c", code, "run", "--no-tui", "--record-dir", str(tmp_path / "rec"),
                          "--", *failing], capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 3, res.stderr
    assert "no model configured" in res.stderr  # the agent's own words, on the terminal
    assert "the agent exited with status 3 before making one" in res.stderr, res.stderr
    assert "BASE_URL" not in res.stderr, res.stderr


def test_every_command_has_its_own_summary_and_a_missing_one_falls_back_to_the_docstring() -> None:
    import typer
    from typer.models import CommandInfo

    from inspector.cli import SUMMARIES, summary_of
    from inspector.ctx_cli import ctx_app

    # A command registered without a SUMMARIES entry crashed the whole CLI at import (KeyError); now it
    # falls back, and this test is what catches the gap instead.
    names = [
        str(i.name or i.callback.__name__).replace("_", "-") for i in app.registered_commands if i.callback
    ]
    assert names and [n for n in names if n not in SUMMARIES] == []
    for info in ctx_app.registered_commands:
        assert info.short_help, (
            f"ctx {info.name} has no short_help: `cp-inspect ctx --help` would cut its docstring"
        )
    top = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "200"})
    assert top.exit_code == 0
    for name in names:
        assert SUMMARIES[name] in top.output, name

    def brand_new(x: int = 1) -> None:
        """Do a brand new thing.

        More words that click would cut at the list's width with '...'.
        """

    def undocumented() -> None:
        pass

    extra = typer.Typer()
    extra.command()(brand_new)
    extra.command()(undocumented)
    infos: list[CommandInfo] = extra.registered_commands
    assert summary_of(infos[0]) == "Do a brand new thing."
    assert summary_of(infos[1]) is None


def test_explain_and_simulate_say_a_wrong_provider_or_threshold_alike(tmp_path: Path) -> None:
    """explain said "unknown provider 'nope'" without the option's name, and a tier-order error listed
    three values ("got (0.6, 0.5, 0.9)") without saying two of them were defaults the user never gave.
    Both commands now say it as the option's error (exit 2), before any recording is read."""
    missing = tmp_path / "absent.cpsession"  # the option is said first: it is checked before the file
    for cmd in (["explain", str(missing), "--turn", "3"], ["simulate", str(missing)]):
        r = CliRunner().invoke(app, [*cmd, "--provider", "nope"])
        assert r.exit_code == 2 and r.output.startswith("cp-inspect: --provider: unknown provider 'nope'"), (
            cmd, r.output)
        r = CliRunner().invoke(app, [*cmd, "--threshold", "compact=0.5"])
        assert r.exit_code == 2, (cmd, r.output)
        assert r.output.startswith("cp-inspect: --threshold: invalid thresholds {'compact_history': 0.5}: "), r.output
        assert r.output.rstrip().endswith(
            "got (0.6, 0.5, 0.9); trim_schemas=0.6 and aggressive_prune=0.9 are the defaults "
            "(give them with --threshold too to move them)"
        ), (cmd, r.output)
        r = CliRunner().invoke(app, [*cmd, "--threshold", "compact=0.5", "--threshold", "prune=0.4"])
        assert "trim_schemas=0.6 is the default (give it with --threshold too" in r.output, (cmd, r.output)
    r = CliRunner().invoke(app, ["explain", str(DEMO), "--turn", "3", "--threshold", "trim=0.5", "--provider", "deepseek"])
    assert r.exit_code == 0 and r.output.startswith("EXPLAIN turn 3"), r.output


def test_an_unknown_theme_is_the_options_error_in_every_command_with_a_terminal_ui(tmp_path: Path) -> None:
    """One rule for unknown option values: `--theme neon` was a toast in the app and the default theme
    (replay, attach, demo, top, run), while an unknown provider or policy was exit 2. It is exit 2 now,
    before anything starts (no agent for `run` or `demo`), on typer's path and the plain one alike."""
    said = "cp-inspect: --theme: unknown theme 'neon'; choose dark, light or high-contrast"
    started = tmp_path / "started"
    commands = [
        ["replay", str(DEMO)], ["replay", str(tmp_path / "absent.cpsession")], ["attach", "4242"],
        ["attach", "4242", "--record", str(tmp_path / "r.cpsession")], ["demo"], ["top"],
        ["run", "--", "touch", str(started)],
    ]
    for cmd in commands:
        r = CliRunner().invoke(app, [cmd[0], "--theme", "neon", *cmd[1:]])  # (before run's `--`)
        assert r.exit_code == 2 and r.output.startswith(said), (cmd, r.exit_code, r.output)
        assert "--theme" in CliRunner().invoke(app, [cmd[0], "--help"]).output
    assert not started.exists()
    code = "import sys; sys.argv[0] = 'cp-inspect'; from inspector.entry import main; main()"
    for cmd in (["replay", str(DEMO), "--theme", "neon"], ["attach", "4242", "--theme=neon"]):  # no typer
        res = subprocess.run([sys.executable, "-c", code, *cmd], capture_output=True, text=True, timeout=120,
                             env={**os.environ, "PYTHONPATH": str(ROOT)}, stdin=subprocess.DEVNULL)
        assert res.returncode == 2 and res.stderr.startswith(said), (cmd, res.returncode, res.stderr)
    help_text = " ".join(CliRunner().invoke(app, ["top", "--help"]).output.split())
    assert "another name is an error (exit 2)" in help_text, help_text
    # A known name passes the check (then the missing terminal is what stops it).
    for theme in ("light", "hc", "nord"):
        r = CliRunner().invoke(app, ["replay", str(DEMO), "--theme", theme])
        assert r.exit_code == 2 and "--theme" not in r.output and "stdin is not a terminal" in r.output, r.output
