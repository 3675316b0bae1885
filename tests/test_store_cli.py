"""`cp-inspect ctx ...` and `cp-inspect eval` through typer's CliRunner (against ctx_app directly)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from inspector.ctx_cli import ctx_app, eval_command

runner = CliRunner()


def _run(*args: str, input: str | None = None):
    return runner.invoke(ctx_app, list(args), input=input)


def test_add_get_expand(tmp_path: Path) -> None:
    db = str(tmp_path / "c.db")
    r = _run("add", "--db", db, "--kind", "system", "--pin", "You are careful.")
    assert r.exit_code == 0, r.output
    sys_id = int(r.output.strip())
    big = "row with needle_value\n" * 400
    r = _run("add", "--db", db, "--kind", "tool_result", "--source", "call_7", "-", input=big)
    assert r.exit_code == 0, r.output
    big_id = int(r.output.strip())
    for i in range(5):
        assert _run("add", "--db", db, "--importance", "0.5", f"message number {i}").exit_code == 0

    r = _run("get", "--db", db, "--budget", "400", "--json", "--fresh")
    assert r.exit_code == 0, r.output
    m = json.loads(r.output)
    assert m["budget"] == 400 and m["used"] <= 400
    assert m["items"][0]["id"] == sys_id
    assert {"id", "kind", "form", "tokens"} <= set(m["items"][0])
    assert isinstance(m["dropped"], list)
    forms = {i["id"]: i["form"] for i in m["items"]}
    assert forms.get(big_id) in ("stub", "summary", None)

    r = _run("get", "--db", db, "--budget", "400", "--explain", "--query", "needle_value")
    assert r.exit_code == 0, r.output
    for section in ("pinned", "recent", "relevant", "summaries", "stubs", "dropped", "of 400 tokens used"):
        assert section in r.output

    r = _run("expand", "--db", db, str(big_id))
    assert r.exit_code == 0 and r.output.rstrip("\n") == big.rstrip("\n")


def test_cli_errors_are_clear(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    r = _run("get", "--db", str(db), "--budget", "0")
    assert r.exit_code == 2 and "--budget must be between 1" in r.output
    r = _run("add", "--db", str(db), "--kind", "nonsense", "x")
    assert r.exit_code == 2 and "unknown item kind" in r.output
    r = _run("expand", "--db", str(db), "42")
    assert r.exit_code == 2 and "no context store there" in r.output and not db.exists()
    r = _run("get", "--db", str(db), "--budget", "1000")
    assert r.exit_code == 2 and "no context store there" in r.output and not db.exists()
    r = _run("get", "--db", str(db), "--budget", "4")
    assert r.exit_code == 2 and "--budget: budget 4 is too small to hold even one message" in r.output
    assert _run("add", "--db", str(db), "one item").exit_code == 0
    r = _run("expand", "--db", str(db), "42")
    assert r.exit_code == 1 and "no item #42" in r.output
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"garbage" * 500)
    r = _run("get", "--db", str(bad), "--budget", "100")
    assert r.exit_code == 1 and str(bad) in r.output and "ctx import" in r.output
    r = _run("add", "--db", str(db), "--pin", "word " * 3000)
    r = _run("get", "--db", str(db), "--budget", "200")
    assert r.exit_code == 1 and "pinned items alone need" in r.output


def test_pins_over_the_budget_say_the_budget_that_holds_them(tmp_path: Path) -> None:
    """"Raise the budget or unpin something" named no budget, and no command unpins: the error now says the
    budget that holds the pins, and the store-per-run way to keep fewer of them. That budget serves."""
    import re

    db = str(tmp_path / "c.db")
    for n in (1200, 700, 300):
        assert _run("add", "--db", db, "--pin", "word " * n).exit_code == 0
    assert _run("add", "--db", db, "an unpinned note").exit_code == 0
    r = _run("get", "--db", db, "--budget", "1000", "--fresh")
    assert r.exit_code == 1 and "pinned items alone need" in r.output, r.output
    assert "unpin something" not in r.output and "import runs into separate stores (--db)" in r.output
    found = re.search(r"Give --budget (\d+) or more", r.output)
    assert found is not None, r.output
    need = int(found.group(1))
    assert _run("get", "--db", db, "--budget", str(need), "--fresh").exit_code == 0
    assert _run("get", "--db", db, "--budget", str(need - 200), "--fresh").exit_code == 1


def _traj_root() -> Path:
    env = os.environ.get("CONTEXTPIPE_TRAJECTORIES")
    return Path(env) if env else Path(__file__).resolve().parents[2] / "shared" / "trajectories"


def test_import_trajectory(tmp_path: Path) -> None:
    f = _traj_root() / "mini-swe-agent-pr816" / "deepseek_reasoner_dev__pvlib__pvlib-python-1072.traj.json"
    if not f.is_file():
        pytest.skip(f"real trajectories not present at {f.parent}")
    db = str(tmp_path / "imp.db")
    r = _run("import", "--db", db, str(f))
    assert r.exit_code == 0, r.output
    assert r.output.startswith("imported ") and "mini-swe-agent" in r.output
    r = _run("get", "--db", db, "--budget", "3000", "--json")
    m = json.loads(r.output)
    assert m["used"] <= 3000 and m["items"][0]["kind"] == "system" and m["items"][1]["pinned"]


def test_import_bad_file(tmp_path: Path) -> None:
    f = tmp_path / "x.json"
    f.write_text('{"nothing": 1}')
    r = _run("import", "--db", str(tmp_path / "i.db"), str(f))
    assert r.exit_code == 1 and "x.json" in r.output
    r = _run("import", "--db", str(tmp_path / "i.db"), str(tmp_path))
    assert r.exit_code == 2 and "is a directory: give one recording or trajectory file" in r.output


def test_eval_command_without_trajectories_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing evaluated is exit 1 (README: it could not do what was asked), not "skipped: ..." and 0."""
    app = typer.Typer()
    app.command()(eval_command)
    monkeypatch.setenv("CONTEXTPIPE_TRAJECTORIES", str(tmp_path / "absent"))
    r = runner.invoke(app, [])
    assert r.exit_code == 1, r.output
    assert f"cp-inspect: nothing to evaluate: CONTEXTPIPE_TRAJECTORIES={tmp_path / 'absent'} does not exist" in r.output
    assert "--trajectories DIR" in r.output


def test_eval_command_on_one_trajectory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = _traj_root() / "swe-agent" / "marshmallow-1867_function_calling.traj"
    if not src.is_file():
        pytest.skip(f"real trajectories not present at {src.parent}")
    root = tmp_path / "t"
    root.mkdir()
    (root / src.name).write_bytes(src.read_bytes())  # a private copy in tmp, not in the project tree
    app = typer.Typer()
    app.command()(eval_command)
    r = runner.invoke(app, ["--trajectories", str(root)])
    assert r.exit_code == 0, r.output
    assert "quarter  store-sticky" in r.output and "baseline" in r.output


def test_explain_headings_add_up_to_the_window(tmp_path: Path) -> None:
    """`ctx get --explain` lists every item of the window once, under one heading, so the headings' counts
    and tokens are the window's: items both recent and relevant were listed twice, and items in for
    references or value per token under no heading (the counts summed to more, or fewer, than the window)."""
    from engine.store import ContextStore
    from inspector.ctx_cli import _explain

    db = tmp_path / "c.db"
    demo = Path(__file__).resolve().parents[1] / "demo_sessions" / "scout-anthropic.cpsession"
    assert _run("import", str(demo), "--db", str(db)).exit_code == 0
    store = ContextStore(db)
    try:
        for budget in (3000, 8000):
            window = store.context_get(budget, query="grep parser tests", sticky=False)
            items = window.manifest()["items"]
            out = _explain(window)  # what `ctx get --explain` prints of this window
            kept = out[: out.index("\ndropped (")].splitlines()
            heads = [line for line in kept[1:] if not line.startswith("  ")]
            listed = [int(line.split()[0][1:]) for line in kept if line.startswith("  #")]
            assert sorted(listed) == sorted(i["id"] for i in items), (budget, out)
            counts = [h.rsplit("(", 1)[1].rstrip(")").split(", ") for h in heads]
            assert sum(int(n) for n, _ in counts) == len(items)
            assert sum(int(t.split()[0]) for _, t in counts) == sum(i["tokens"] for i in items)
    finally:
        store.close()


def test_import_into_store_locked_as_it_opens_says_nothing_imported(tmp_path: Path) -> None:
    # Another writer holds the store as the import opens it: the error said only that it was locked,
    # leaving open whether part of the recording had gone in. It says nothing did, and to retry.
    import sqlite3

    from engine.store import ContextStore

    demo = Path(__file__).resolve().parents[1] / "demo_sessions" / "scout-anthropic.cpsession"
    db = tmp_path / "locked.db"
    with ContextStore(db) as s:
        s.add("already here")
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        r = _run("import", "--db", str(db), str(demo))
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert r.exit_code == 1
    out = " ".join(r.output.split())
    assert f"nothing imported from {demo}" in out and "the store is as it was" in out
    assert "locked" in out and "run the import again" in out
    with ContextStore(db) as s:
        assert len(s) == 1
