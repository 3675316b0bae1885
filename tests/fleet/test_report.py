"""`cp-inspect report` over many recordings: per-session rows equal `simulate` for the same session, the
total adds them up, and bad paths are one clear line."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from engine.recording.cpsession import RecordingReader
from engine.recording.journal import unpack_event
from engine.sim.simulate import SimSettings, simulate_events
from tests.support.console_script import run_cp_inspect

ROOT = Path(__file__).resolve().parents[2]
DEMOS = sorted((ROOT / "demo_sessions").glob("*.cpsession"))


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    # `cp-inspect` as installed (the console script): ~0.1 s of CPU a run less than `python -m inspector.cli`,
    # which builds typer's whole app first.
    return run_cp_inspect(*args)


def test_report_rows_match_simulate_and_totals_add_up(tmp_path: Path) -> None:
    fleet = tmp_path / "fleet"
    fleet.mkdir()
    for p in DEMOS:
        shutil.copy(p, fleet / p.name)
    svg = tmp_path / "chart.svg"
    out = _cli("report", str(fleet), "--json", "--svg", str(svg))
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert len(data["sessions"]) == len(DEMOS)
    for row in data["sessions"]:
        reader = RecordingReader.open(row["session"])
        rep = simulate_events([unpack_event(e) for e in reader.events()], SimSettings())
        paid = rep.policies["actual"] or rep.policies["as_sent"]
        sent, engine = rep.policies["as_sent"], rep.policies["pipeline"]
        assert paid is not None and sent is not None and engine is not None
        assert row["cost_usd"] == round(paid.cost_usd, 6)
        assert row["engine_simulated_cost_usd"] == round(engine.cost_usd, 6)
        assert row["as_sent_simulated_cost_usd"] == round(sent.cost_usd, 6)
        # The engine's figure on what was paid: its simulated cost over the as-sent one's, times what was paid.
        assert row["engine_cost_usd"] == round(paid.cost_usd * engine.cost_usd / sent.cost_usd, 6)
        assert row["prompt_tokens"] == paid.totals.input_tokens
    total = data["total"]
    assert total["calls"] == sum(r["calls"] for r in data["sessions"])
    assert abs(total["cost_usd"] - sum(r["cost_usd"] for r in data["sessions"])) < 1e-5
    assert svg.read_text().startswith("<svg") and svg.read_text().count("<rect") == 2 * len(DEMOS)


def test_report_table_and_globs() -> None:
    out = _cli("report", str(ROOT / "demo_sessions" / "scout-*.cpsession"))
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0].startswith("SESSION")
    assert f"TOTAL ({len(DEMOS)} sessions)" in out.stdout


def test_report_bad_paths_are_one_line(tmp_path: Path) -> None:
    for args in (["report", str(tmp_path / "missing.cpsession")], ["report", str(tmp_path)],
                 ["report", str(tmp_path / "*.nothing")], ["export", str(DEMOS[0])]):
        out = _cli(*args)
        assert out.returncode != 0, args
        assert "Traceback" not in out.stderr, out.stderr
        assert out.stderr.strip(), args


def _import(tmp_path: Path, fixture: str) -> Path:
    out = tmp_path / (fixture + ".cpsession")
    done = _cli("import", "auto", str(ROOT / "tests" / "fixtures" / "synthetic" / fixture), "-o", str(out))
    assert done.returncode == 0, done.stderr
    return out


def test_report_saving_is_like_for_like_when_the_bill_is_the_providers(tmp_path: Path) -> None:
    """A proxy log with the provider's usage: at the recorded settings the engine sends what the agent sent,
    so it saves nothing, whatever the simulator's error against the real bill (here the fixture's usage is
    made up and 5x the simulated figure). The saving used to be the real bill less the simulated engine
    cost: 83% "saved" by doing nothing."""
    rec = _import(tmp_path, "proxy_anthropic.jsonl")
    out = _cli("report", str(rec), "--json")
    assert out.returncode == 0, out.stderr
    row = json.loads(out.stdout)["sessions"][0]
    assert row["basis"] == "actual"
    assert row["engine_simulated_cost_usd"] == row["as_sent_simulated_cost_usd"] > 0
    assert row["cost_usd"] > 2 * row["as_sent_simulated_cost_usd"]  # the simulator is far off this bill
    assert row["engine_saving_usd"] == 0 and row["engine_cost_usd"] == row["cost_usd"]
    table = _cli("report", str(rec))
    assert table.returncode == 0 and "0.0%" in table.stdout.splitlines()[1], table.stdout


def test_report_model_prices_sessions_whose_model_has_no_price(tmp_path: Path) -> None:
    """--model stands in only where a session's own model has no price (here: a --prices table without it);
    without --model such a session is skipped with a line saying how to price it."""
    rec = _import(tmp_path, "proxy_openai.jsonl")
    table = json.loads((ROOT / "engine" / "sim" / "data" / "prices.json").read_text())
    table["models"] = {k: v for k, v in table["models"].items() if not k.startswith("gpt-4o")}
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps(table))
    out = _cli("report", str(rec), "--prices", str(prices))
    assert out.returncode != 0 and "skipped" in out.stderr and "--model" in out.stderr, out.stderr
    out = _cli("report", str(rec), "--prices", str(prices), "--model", "gpt-4.1", "--json")
    assert out.returncode == 0, out.stderr
    row = json.loads(out.stdout)["sessions"][0]
    assert row["model_stood_in"] and row["priced_as"] == "gpt-4.1"
    out = _cli("report", str(rec), "--prices", str(prices), "--model", "gpt-4.1")
    assert "priced as gpt-4.1 (--model)" in out.stdout
    # A session whose own model has a price keeps it: --model is not an override.
    out = _cli("report", str(rec), "--model", "gpt-4.1", "--json")
    row = json.loads(out.stdout)["sessions"][0]
    assert not row["model_stood_in"] and row["priced_as"] == "gpt-4o"


def test_report_says_which_figures_are_simulated_when_no_usage_was_recorded(tmp_path: Path,
                                                                            trajectories_dir: Path) -> None:
    """An OpenHands trajectory records no usage: its row's PROMPT and HIT are the as-sent simulation's,
    as its COST is, and the footnote said only that the cost was simulated."""
    rec = tmp_path / "oh.cpsession"
    done = _cli("import", "auto", str(trajectories_dir / "adp-swe-gym-openhands" / "python__mypy-15976_0.json"),
                "-o", str(rec))
    assert done.returncode == 0, done.stderr
    row = json.loads(_cli("report", str(rec), "--json").stdout)["sessions"][0]
    sim = json.loads(_cli("simulate", str(rec), "--json").stdout)["policies"]["as_sent"]
    assert row["basis"] == "as_sent"
    assert (row["prompt_tokens"], row["cache_hit_rate"]) == (sim["prompt_tokens"], round(sim["cache_hit_rate"], 4))
    out = _cli("report", str(rec)).stdout
    assert "* no provider usage recorded: prompt tokens, hit rate and cost simulated" in out, out


def test_one_bad_recording_does_not_hide_the_rest(tmp_path: Path) -> None:
    """A fleet directory with a corrupt file, a cut-off one and an agent that stopped before its first
    call: the first used to end the whole report (and export) with one error and no figures; the idle
    session was skipped as unreadable. Now the bad ones are skipped by name (in --json too), the idle
    one is a row of zeros, and every good session is reported."""
    from engine import Pipeline

    fleet = tmp_path / "fleet"
    fleet.mkdir()
    for p in DEMOS:
        shutil.copy(p, fleet / p.name)
    (fleet / "aa-corrupt.cpsession").write_bytes(b"not a recording at all\n")
    (fleet / "zz-cut.cpsession").write_bytes(DEMOS[0].read_bytes()[:40])  # inside the header frame
    idle = Pipeline("gpt-4o", provider="openai", window=8000, record=fleet / "mm-idle.cpsession")
    idle.identity("You are careful.")
    idle.close()
    out = _cli("report", str(fleet), "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    names = [Path(r["session"]).name for r in data["sessions"]]
    assert names == sorted([p.name for p in DEMOS] + ["mm-idle.cpsession"])
    idle_row = data["sessions"][names.index("mm-idle.cpsession")]
    assert (idle_row["calls"], idle_row["cost_usd"], idle_row["model"]) == (0, 0.0, "gpt-4o")
    assert data["total"]["sessions"] == len(DEMOS) + 1
    assert sorted(Path(s["session"]).name for s in data["skipped"]) == ["aa-corrupt.cpsession", "zz-cut.cpsession"]
    assert "skipped" in out.stderr and "aa-corrupt.cpsession" in out.stderr
    table = _cli("report", str(fleet))
    assert table.returncode == 0, table.stderr
    assert f"TOTAL ({len(DEMOS) + 1} sessions)" in table.stdout
    assert "\n2 recordings skipped: not in the totals" in table.stdout  # was "2 recording(s) skipped"
    assert "*" not in table.stdout.splitlines()[1 + sorted(names).index("mm-idle.cpsession")]


def test_export_skips_a_bad_recording_and_sends_the_rest(tmp_path: Path) -> None:
    import pytest

    pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
    from .otlp_receiver import OtlpReceiver

    bad = tmp_path / "bad.cpsession"
    bad.write_bytes(b"garbage")
    with RecordingReader.open(DEMOS[0]) as r:
        turns = r.turn_count
    with OtlpReceiver() as rx:
        out = _cli("export", str(bad), str(DEMOS[0]), "--otlp", rx.url)
        assert out.returncode == 0, out.stderr
        assert len(rx.calls) == turns
    assert f"exported {turns} model-call spans from 1 session, " in out.stdout  # was "1 session(s)"
    assert "; 1 recording skipped (see above)" in out.stdout
    assert "skipped" in out.stderr and "bad.cpsession" in out.stderr


def test_sessions_with_the_same_file_name_are_told_apart(tmp_path: Path) -> None:
    """Agents that each write session.cpsession in their own directory: the table and the chart showed
    the bare file name, so every row read "session.cpsession"."""
    for agent, demo in zip(("agent-a", "agent-b"), DEMOS, strict=False):
        (tmp_path / agent).mkdir()
        shutil.copy(demo, tmp_path / agent / "session.cpsession")
    svg = tmp_path / "chart.svg"
    out = _cli("report", str(tmp_path), "--svg", str(svg))
    assert out.returncode == 0, out.stderr
    rows = out.stdout.splitlines()[1:3]
    assert rows[0].startswith("agent-a/session.cpsession") and rows[1].startswith("agent-b/session.cpsession")
    assert "agent-a/session.cpsession" in svg.read_text() and "agent-b/session.cpsession" in svg.read_text()


def test_long_names_that_differ_at_their_end_are_told_apart(tmp_path: Path) -> None:
    """Imported runs are named for their task and proxy sessions end with their model: cut at the end
    to 33 characters, two such rows read alike ("deepseek_reasoner_dev__marshma..." on both), in the
    table and the chart."""
    names = [f"deepseek_reasoner_dev__marshmallow-code__marshmallow-{n}.cpsession" for n in (1343, 1359)]
    for name, demo in zip(names, DEMOS, strict=False):
        shutil.copy(demo, tmp_path / name)
    svg = tmp_path / "chart.svg"
    out = _cli("report", str(tmp_path), "--svg", str(svg))
    assert out.returncode == 0, out.stderr
    rows = out.stdout.splitlines()[1:3]
    shown = [row.split("  ")[0] for row in rows]
    assert shown == ["deepseek_reason...arshmallow-1343", "deepseek_reason...arshmallow-1359"], rows
    chart = svg.read_text()
    assert "arshmallow-1343<" in chart and "arshmallow-1359<" in chart, chart[:2000]


def test_a_skipped_recording_is_named_once(tmp_path: Path) -> None:
    """"skipped P: P is empty: ..." and "skipped P: P is not a cpsession recording ...": the reason
    repeated the path the line had just given."""
    fleet = tmp_path / "fleet"
    fleet.mkdir()
    shutil.copy(DEMOS[0], fleet / DEMOS[0].name)
    (fleet / "aa-corrupt.cpsession").write_bytes(b"not a recording at all\n")
    (fleet / "bb-empty.cpsession").write_bytes(b"")
    (fleet / "cc-trajectory.cpsession").write_text('{"messages": []}\n')  # ("skipped P: is JSON, not ...")
    out = _cli("report", str(fleet))
    assert out.returncode == 0, out.stderr
    skipped = [line for line in out.stderr.splitlines() if line.startswith("cp-inspect: warning: skipped ")]
    assert len(skipped) == 3 and len(out.stderr.splitlines()) == 3, out.stderr  # a warning as every command's
    for line, name, why in zip(skipped, ("aa-corrupt", "bb-empty", "cc-trajectory"),
                               ("it is not a cpsession", "it is empty", "it is JSON, not a .cpsession"), strict=True):
        path = str(fleet / f"{name}.cpsession")
        named = 2 if name == "cc-trajectory" else 1  # (and once in the import command it gives)
        assert line.startswith(f"cp-inspect: warning: skipped {path}: {why}") and line.count(path) == named, line
