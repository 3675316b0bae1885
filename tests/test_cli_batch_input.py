"""The batch commands (report, simulate, explain, import, salvage, ctx import, eval) given bad input as a new
user gives it: one `cp-inspect:` line saying what was wrong and what to do, the README's exit code, and
nothing lost or half-made on disk. Each runs the console script's entry point in a child process (its
exit code and streams are the process's)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from engine.recording.frames import HEADER, HEADER_SIZE
from tests.support.console_script import program, run_program
from tests.test_cli_new_user import _damaged_half_way, _long_trajectory

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "demo_sessions" / "scout-anthropic.cpsession"


def _cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return run_program(program(), list(args), typer_dispatch=False, stdin=subprocess.DEVNULL, cwd=cwd)


def _typer(*args: str) -> subprocess.CompletedProcess[str]:
    """The same command line through typer's dispatch (the console script reads plain lines without it)."""
    return run_program(program(), list(args), typer_dispatch=True, stdin=subprocess.DEVNULL)


def _one_error(r: subprocess.CompletedProcess[str], code: int, says: str) -> None:
    """Exit `code`, nothing on stdout, and stderr's only error line (after any warnings) saying `says`."""
    assert r.returncode == code, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and r.stdout == "", (r.stdout, r.stderr)
    errors = [line for line in r.stderr.splitlines() if not line.startswith("cp-inspect: warning:")]
    assert len(errors) == 1 and errors[0].startswith("cp-inspect: ") and says in errors[0], r.stderr


def _cut_before_its_first_turn(path: Path) -> Path:
    """The demo recording cut part way through the frame after its header, as a writer killed then leaves it."""
    data = DEMO.read_bytes()
    length, _ = HEADER.unpack(data[:HEADER_SIZE])
    path.write_bytes(data[: HEADER_SIZE + length + 40])
    return path


def test_report_svg_never_replaces_a_file_that_is_not_a_chart(tmp_path: Path) -> None:
    # `--svg run.cpsession` (the recording named where the chart goes) overwrote the recording with a chart.
    victim = tmp_path / "run.cpsession"
    victim.write_bytes(DEMO.read_bytes())
    r = _cli("report", str(DEMO), "--svg", str(victim))
    _one_error(r, 2, f"--svg {victim} exists and is not an SVG chart: choose another path")
    assert victim.read_bytes() == DEMO.read_bytes()
    # A chart is written, and replaced by the next report's (the README's line run twice), nothing beside it.
    chart = tmp_path / "cost.svg"
    for _ in range(2):
        r = _cli("report", str(DEMO), "--svg", str(chart))
        assert r.returncode == 0 and f"chart written to {chart}" in r.stdout, r.stderr
    assert chart.read_text().startswith("<svg") and sorted(p.name for p in tmp_path.iterdir()) == [
        "cost.svg",
        "run.cpsession",
    ]


def test_salvage_of_a_recording_with_no_whole_turn_writes_nothing(tmp_path: Path) -> None:
    # It wrote "0 complete turns" (exit 0): a recording every reader then refused ("holds no events").
    cut = _cut_before_its_first_turn(tmp_path / "cut.cpsession")
    out = tmp_path / "fixed.cpsession"
    r = _cli("salvage", str(cut), "-o", str(out))
    _one_error(r, 1, f"nothing to salvage: {cut} holds no complete turn before its damage (last frame at offset")
    assert "0 complete turns kept); nothing was written" in r.stderr, r.stderr
    assert "warning" not in r.stderr, r.stderr  # the cut, said once: in the error
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cut.cpsession"]


@pytest.mark.parametrize("where", ["dir", "nodir"])
def test_salvage_out_is_checked_as_import_checks_its_out(tmp_path: Path, where: str) -> None:
    # A directory was "already exists: pass --force" (and with --force exit 1, "Is a directory"); a missing
    # directory was exit 1 naming the temporary file (".x.cpsession.4928.partial").
    out = tmp_path if where == "dir" else tmp_path / "nowhere" / "x.cpsession"
    says = "is a directory: give a file path" if where == "dir" else "directory " + str(tmp_path / "nowhere")
    for force in ([], ["--force"]):
        r = _cli("salvage", str(DEMO), "-o", str(out), *force)
        _one_error(r, 2, f"-o {out}")
        assert says in r.stderr and ".partial" not in r.stderr, r.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("damage", ["half_way", "before_its_first_turn"])
def test_a_failed_ctx_import_leaves_no_store_where_there_was_none(tmp_path: Path, damage: str) -> None:
    # "nothing imported (the store is as it was)" left a new, empty store at --db: `ctx get` then served an
    # empty window from it (exit 0). A recording cut before its first turn was "imported 0 items (#0..#0)".
    if damage == "half_way":
        bad = _damaged_half_way(tmp_path / "bad.cpsession")
        says = f"nothing imported from {bad} (the store is as it was): corrupt frame"
    else:
        bad = _cut_before_its_first_turn(tmp_path / "bad.cpsession")
        says = f"nothing to import: {bad} holds no whole turn"
    db = tmp_path / "ctx.sqlite"
    _one_error(_cli("ctx", "import", str(bad), "--db", str(db)), 1, says)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.cpsession"]
    _one_error(_cli("ctx", "get", "--db", str(db), "--budget", "12k"), 2, "no context store there")


def test_simulate_refuses_policy_with_policies() -> None:
    # --policies built each engine column from the policy's name: --policy (with its options) was dropped.
    r = _cli("simulate", str(DEMO), "--policies", "all", "--policy", "cost_aware:target=0.2")
    _one_error(r, 2, "--policy sets the pipeline column of the what-if table; --policies compares policies")


def test_explain_refuses_format_text_with_json() -> None:
    # It printed JSON: --format text was dropped without a word. Both command-line readers say it alike.
    for run in (_cli, _typer):
        r = run("explain", str(DEMO), "--format", "text", "--json")
        _one_error(r, 2, "--json and --format text ask for two formats: give one")
    r = _cli("explain", str(DEMO), "--format", "json", "--json", "--turn", "3")
    assert r.returncode == 0 and r.stdout.startswith("{"), r.stderr


def test_a_window_out_of_range_is_worded_alike_in_every_command(tmp_path: Path) -> None:
    # report said "a positive number of tokens" for 0 and "budget limit ... is out of range" for 10**12,
    # explain's --budget the latter without the option's name; simulate said "between 1 and 100,000,000".
    from engine.errors import ConfigError
    from engine.store.budget import MAX_BUDGET
    from engine.tokens import Budget
    from inspector.cli_overrides import MAX_WINDOW

    assert MAX_WINDOW == MAX_BUDGET and Budget(MAX_WINDOW).limit == MAX_WINDOW
    with pytest.raises(ConfigError):
        Budget(MAX_WINDOW + 1)
    out = tmp_path / "run.cpsession"
    traj = tmp_path / "t.json"  # refused for its --window before it is read
    traj.write_text("{}")
    for value in ("0", "-5", str(10**12)):
        for cmd, option in (
            (["simulate", str(DEMO), "--window"], "--window"),
            (["report", str(DEMO), "--window"], "--window"),
            (["import", "auto", str(traj), "-o", str(out), "--window"], "--window"),
            (["explain", str(DEMO), "--budget"], "--budget"),
            (["ctx", "get", "--db", str(tmp_path / "none.sqlite"), "--budget"], "--budget"),
        ):
            r = _cli(*cmd, value)
            _one_error(r, 2, f"{option} must be between 1 and 100,000,000 tokens, got {value}")
    assert [p.name for p in tmp_path.iterdir()] == ["t.json"]


def test_eval_given_a_trajectory_file_asks_for_its_folder(tmp_path: Path) -> None:
    # It said "no such folder" of a file that is there.
    traj = tmp_path / "run.traj.json"
    traj.write_text('{"messages": []}')
    r = _cli("eval", "--trajectories", str(traj))
    _one_error(
        r, 2, f"--trajectories {traj} is a file, not a folder: give the folder holding the trajectories"
    )


def test_the_help_examples_run_from_another_folder_say_where_the_demo_recordings_are(tmp_path: Path) -> None:
    # Each command's --help example names demo_sessions/... from the repository's top folder; run anywhere
    # else it was "no such file: demo_sessions/scout-anthropic.cpsession" and no way on.
    demo = "demo_sessions/scout-anthropic.cpsession"
    for cmd, code, there in (
        (["simulate", demo, "--window", "8000"], 1, demo),
        (["report", "demo_sessions/*.cpsession"], 1, "demo_sessions/*.cpsession"),
        (["diff", "recorded", "gate.drop_rounds=off", demo], 2, demo),
        (["explain", demo, "--turn", "17"], 1, demo),
        (["ctx", "import", demo, "--db", "ctx.sqlite"], 2, demo),
    ):
        r = _cli(*cmd, cwd=tmp_path)
        _one_error(
            r, code, f"in {tmp_path}: the --help examples run from {ROOT}; from here, give {ROOT / there}"
        )
    assert list(tmp_path.iterdir()) == []
    r = _cli("verify", "demo_sessions/no-such.cpsession", cwd=tmp_path)  # not a demo recording: no hint
    _one_error(r, 1, "no such file: demo_sessions/no-such.cpsession")
    assert r.stderr == "cp-inspect: no such file: demo_sessions/no-such.cpsession\n"
    assert _cli("verify", str(ROOT / demo), cwd=tmp_path).returncode == 0  # the path it gives works


def test_a_damage_warning_names_its_file_among_several(tmp_path: Path) -> None:
    # `simulate good.cpsession cut.cpsession` warned "last frame at offset ... is incomplete" of one of them.
    cut = tmp_path / "cut.cpsession"
    data = DEMO.read_bytes()
    cut.write_bytes(data[: len(data) // 2])
    r = _cli("simulate", str(DEMO), str(cut), "--json")
    assert r.returncode == 0, r.stderr
    assert r.stderr.startswith(f"cp-inspect: warning: {cut}: last frame at offset "), r.stderr


def test_import_says_when_the_model_it_records_has_no_price(tmp_path: Path) -> None:
    # A mistyped --model was recorded without a word; `report` then skipped the session.
    traj = _long_trajectory(tmp_path / "t.traj.json", rounds=3)
    note = "note: model 'claude-sonet-4' has no price: report and simulate price it only with --model"
    r = _cli("import", "auto", str(traj), "-o", str(tmp_path / "a.cpsession"), "--model", "claude-sonet-4")
    assert r.returncode == 0 and note in r.stdout, (r.stdout, r.stderr)
    for given in (["--model", "claude-sonnet-4"], []):  # a priced name, or the source's own (deepseek-chat)
        r = _cli("import", "auto", str(traj), "-o", str(tmp_path / "b.cpsession"), "--force", *given)
        assert r.returncode == 0 and "has no price" not in r.stdout, (r.stdout, r.stderr)


def test_diff_reads_an_inline_window_as_every_window_option_does() -> None:
    # `simulate --window 8k` ran; `diff recorded window=8k` was "window must be a whole number of tokens".
    a = _cli("diff", "recorded", "window=8k,gate.drop_rounds=off", str(DEMO), "--json")
    b = _cli("diff", "recorded", "window=8000,gate.drop_rounds=off", str(DEMO), "--json")
    assert a.returncode == 0 and a.stdout == b.stdout and a.stdout.startswith("{"), a.stderr
    _one_error(
        _cli("diff", "recorded", "window=-8k", str(DEMO)), 2, "window must be between 1 and 100,000,000"
    )


@pytest.mark.parametrize("run", [_cli, _typer])
@pytest.mark.parametrize("side", ["recorded", "window=8k"])
def test_diff_given_a_configuration_where_the_recordings_go_says_the_order(run, side: str) -> None:
    # `diff A.cpsession B.cpsession recorded` said only "no such recording: recorded".
    r = run("diff", str(DEMO), str(DEMO), side)
    _one_error(r, 2, f"{side!r} is a configuration, given where the recordings go")
    assert "the two configurations come first" in r.stderr


def test_import_list_with_an_out_file_is_refused(tmp_path: Path) -> None:
    # --list printed the conversations; the -o FILE asked for was not written, without a word.
    traj = _long_trajectory(tmp_path / "t.traj.json", rounds=2)
    for extra in (["-o", str(tmp_path / "run.cpsession")], ["--conversation", "1"]):
        r = _cli("import", "auto", str(traj), "--list", *extra)
        _one_error(
            r, 2, "--list lists the conversations and writes nothing: give it without -o and --conversation"
        )
    assert [p.name for p in tmp_path.iterdir()] == ["t.traj.json"]


def test_a_price_table_that_cannot_be_read_is_said_alike_by_every_pricing_command(tmp_path: Path) -> None:
    # simulate and diff said "no such price table: P", report "--prices: price table P does not exist (set
    # CONTEXTPIPE_PRICES to a valid file)" of a --prices file, forks the same without the option's name;
    # a bad $CONTEXTPIPE_PRICES made report skip every session (exit 1).
    nope = tmp_path / "nope.json"
    text = tmp_path / "prices.json"
    text.write_text("not json")
    commands = (
        ["simulate", str(DEMO)],
        ["report", str(DEMO)],
        ["diff", "recorded", "window=8000", str(DEMO)],
        ["forks", str(DEMO)],
    )
    for cmd in commands:
        _one_error(_cli(*cmd, "--prices", str(nope)), 2, f"--prices: no such price table: {nope}")
        _one_error(_cli(*cmd, "--prices", str(text)), 2, f"--prices: price table {text} is not valid JSON")
    for cmd in commands[:3]:
        r = run_program(program(), cmd, typer_dispatch=False, env={"CONTEXTPIPE_PRICES": str(nope)})
        _one_error(r, 2, f"$CONTEXTPIPE_PRICES: price table {nope} does not exist")


def test_report_says_a_skipped_recording_as_a_warning(tmp_path: Path) -> None:
    # A bare "skipped P: ..." line: neither `cp-inspect:` (an error) nor `warning:`, as the README words them.
    text = tmp_path / "notes.cpsession"
    text.write_text("not a recording\n")
    r = _cli("report", str(DEMO), str(text), "--json")
    assert r.returncode == 0 and r.stdout.startswith("{"), r.stderr
    assert r.stderr.startswith(f"cp-inspect: warning: skipped {text}: it is not a cpsession recording"), (
        r.stderr
    )
    assert len(r.stderr.splitlines()) == 1, r.stderr


def test_eval_per_trajectory_with_json_adds_each_trajectorys_figures(tmp_path: Path) -> None:
    # --per-trajectory was dropped from --json without a word.
    _long_trajectory(tmp_path / "one.traj.json", rounds=4)
    plain = _cli("eval", "--trajectories", str(tmp_path), "--json")
    each = _cli("eval", "--trajectories", str(tmp_path), "--json", "--per-trajectory")
    assert plain.returncode == each.returncode == 0, (plain.stderr, each.stderr)
    totals, doc = json.loads(plain.stdout), json.loads(each.stdout)
    (one,) = doc.pop("trajectories")
    assert doc == totals  # the document's other keys as they were
    assert one["name"] and one["calls"] == 4 and isinstance(one["peak"], int)
    assert set(one["cells"]) == set(totals)  # one trajectory: its figures are the totals'
    for key, cell in one["cells"].items():
        assert cell == {k: v for k, v in totals[key].items() if k != "macro_recall"}, key


def test_a_recording_given_as_the_store_and_a_store_given_as_a_recording_say_which_is_which(
    tmp_path: Path,
) -> None:
    # `ctx get --db run.cpsession` said "not a usable context store (file is not a database) ... move it
    # aside and rebuild a fresh store" (advice for a damaged store) of the recording; a store given to
    # simulate was "not a cpsession recording ... frame length 1397836905 exceeds the limit".
    run = tmp_path / "run.cpsession"
    run.write_bytes(DEMO.read_bytes())
    says = f"--db {run} is a .cpsession recording, not a context store: load it into one with `cp-inspect ctx import {run}"
    for cmd in (
        ["ctx", "get", "--db", str(run), "--budget", "12k"],
        ["ctx", "add", "--db", str(run), "a note"],
        ["ctx", "import", str(run), "--db", str(run)],
    ):
        _one_error(_cli(*cmd), 2, says)
    assert run.read_bytes() == DEMO.read_bytes()
    store = tmp_path / "ctx.sqlite"
    assert _cli("ctx", "import", str(run), "--db", str(store)).returncode == 0
    for cmd, code in (
        (["simulate", str(store)], 1),
        (["verify", str(store)], 1),
        (["diff", "recorded", "window=8k", str(store)], 2),
    ):
        _one_error(
            _cli(*cmd), code, f"{store} is a SQLite database (a context store?), not a .cpsession recording"
        )


def test_a_dash_for_stdin_is_said_to_be_no_recording() -> None:
    # "no such file: -": a reader of many programs' help takes - for stdin.
    for cmd in (["verify", "-"], ["simulate", "-"], ["forks", "-"]):
        r = _cli(*cmd)
        assert "recordings are read from a file, not from stdin: give its path" in r.stderr, r.stderr
        _one_error(r, 2 if cmd[0] == "forks" else 1, "no such ")
