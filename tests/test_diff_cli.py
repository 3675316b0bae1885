"""`cp-inspect diff`: recordings of one session that differ by each common accident (tool order, a
timestamp in the system prompt, an edited tool description, a changed latch) are told apart by cause
and section; identical configurations report no difference; --fail-on gates set the exit status."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from engine import Pipeline
from inspector.cli import app

DEMO = Path(__file__).resolve().parents[1] / "demo_sessions" / "scout-anthropic.cpsession"
PARAMS = {"type": "object", "properties": {"cmd": {"type": "string"}}}
ACCIDENT_TURN = 3


def record(path: Path, accident: str | None = None, turns: int = 7) -> Path:
    """A small agent session (enough text for Anthropic's 1024-token cache minimum); `accident`
    happens before turn ACCIDENT_TURN's request (the timestamp one on every turn)."""
    clock = iter(range(1000, 2000, 7))
    p = Pipeline(
        "claude-sonnet-4", provider="anthropic", window=200_000, record=path, clock=lambda: next(clock)
    )
    p.identity("You are a careful coding agent. Read before you edit; run the tests after. " * 90)
    p.constraints("Never push to main. Ask before deleting files.")
    p.add_tool("bash", "Run a shell command", PARAMS)
    p.add_tool("read_file", "Read a file", PARAMS)
    p.add_tool("grep", "Search files", PARAMS)
    p.latch("permissions", "read-only")
    p.goal("Make tests/test_io.py pass.")
    p.user("The test fails with a KeyError, please fix it.")
    for t in range(turns):
        if accident == "timestamp":
            p.identity(
                "You are a careful coding agent. Read before you edit; run the tests after. " * 90
                + f"Current time: 2026-12-01T05:{10 + t:02d}:00Z."
            )
        if t == ACCIDENT_TURN:
            if accident == "tool_order":
                p.remove_tool("bash")
                p.add_tool("bash", "Run a shell command", PARAMS)  # same tool, now last
            elif accident == "tool_description":
                p.add_tool("read_file", "Read a file (UTF-8, up to 1 MB)", PARAMS)
            elif accident == "latch":
                p.latch("permissions", "read-write")
        req = p.next_request()
        p.record_usage({"input_tokens": req.trace["final_tokens"], "output_tokens": 50})
        calls = p.assistant(
            f"Step {t}: looking.", tool_calls=[{"id": f"c{t}", "name": "bash", "arguments": '{"cmd": "ls"}'}]
        )
        p.tool_result(calls[0].id, f"README.md\nengine\ntests\n(listing {t})\n" * 5)
    p.close()
    return path


def run(*args: str) -> Any:
    return CliRunner().invoke(app, ["diff", *args])


@pytest.mark.parametrize(
    ("accident", "cause", "section"),
    [
        ("tool_order", "tool_order", "tools"),
        ("tool_description", "tool_description", "tools"),
        ("latch", "latch_changed", "latches"),
        ("timestamp", "volatile", "identity"),
    ],
)
def test_each_accident_is_a_new_cache_break_named_by_cause_and_section(
    tmp_path: Path, accident: str, cause: str, section: str
) -> None:
    base = record(tmp_path / "base.cpsession")
    cand = record(tmp_path / "cand.cpsession", accident)
    res = run(str(base), str(cand), "--json", "--fail-on", "cache-break")
    assert res.exit_code == 1, res.output
    out = json.loads(res.stdout)
    assert out["failures"] and out["failures"][0].startswith("cache-break")
    assert cause in out["totals"]["new_cache_breaks"]
    # Counted in words ("1 new cache break(s)" before): one accident at one turn, a timestamp at each.
    n = sum(out["totals"]["new_cache_breaks"].values())
    said = "1 new cache break in" if n == 1 else f"{n} new cache breaks in"
    assert out["failures"][0].startswith(f"cache-break: {said} the candidate ({cause} x{n})"), (
        n,
        out["failures"],
    )
    turns = out["sessions"][0]["per_turn"]
    first = next(t for t in turns if t["first_difference"] is not None)
    assert first["first_difference"]["section"] == section
    broken = [t for t in turns if t["new_cache_break"]]
    assert broken and broken[0]["new_cache_break"] == cause
    own = broken[0]["candidate"]["own_diff"]
    assert own["cause"] == cause and own["section"] == section
    if accident != "timestamp":
        assert first["turn"] == ACCIDENT_TURN and broken[0]["turn"] == ACCIDENT_TURN
    if accident.startswith("tool"):
        assert first["baseline"]["schema_hash"] != first["candidate"]["schema_hash"]
    # The text report and the markdown report say the same.
    res = run(str(base), str(cand))
    assert res.exit_code == 0 and f"NEW CACHE BREAK ({cause})" in res.stdout
    md = run(str(base), str(cand), "--markdown", "--fail-on", "cache-break")
    assert md.exit_code == 1 and f"`{cause}`" in md.stdout and "**failed** cache-break" in md.stdout


def test_identical_configurations_report_no_difference(tmp_path: Path) -> None:
    base = record(tmp_path / "base.cpsession")
    twin = tmp_path / "twin.cpsession"
    shutil.copy(base, twin)
    res = run(str(base), str(twin), "--json", "--fail-on", "cache-break", "--fail-on", "cost:+0%")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["totals"]["differing_turns"] == 0 and out["totals"]["new_cache_breaks"] == {}
    assert out["totals"]["cost_usd"][0] == out["totals"]["cost_usd"][1] > 0
    res = run("recorded", "recorded", str(DEMO), "--json")
    assert res.exit_code == 0 and json.loads(res.stdout)["totals"]["differing_turns"] == 0


def test_config_sides_and_the_cost_gate(tmp_path: Path) -> None:
    # On the demo session, dropping old rounds makes requests smaller: the recorded policy costs more than
    # a candidate with drop_rounds off only by the amount the JSON reports.
    res = run("gate.drop_rounds=off", "recorded", str(DEMO), "--json")
    assert res.exit_code == 0, res.output
    tot = json.loads(res.stdout)["totals"]
    change = tot["cost_change_pct"]
    assert change is not None and tot["differing_turns"] > 0
    above, below = f"cost:+{change + 1:.2f}%", f"cost:+{max(change - 1, 0):.2f}%"
    assert run("gate.drop_rounds=off", "recorded", str(DEMO), "--fail-on", above).exit_code == 0
    failed = run("gate.drop_rounds=off", "recorded", str(DEMO), "--fail-on", below)
    assert failed.exit_code == (1 if change > 0 else 0)
    # A TOML config file is a side too.
    cfg = tmp_path / "candidate.toml"
    cfg.write_text("window = 8000\n[gates]\ndrop_rounds = false\n")
    res = run("recorded", str(cfg), str(DEMO), "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["candidate"] == "candidate.toml"


def test_the_tokens_column_is_the_prompt_the_cost_and_the_totals_are_of(tmp_path: Path) -> None:
    """Each turn's `tokens` was the trace's final_tokens (the request's framing included, ~3 tokens a
    turn more) while the simulator priced the blocks only: the turns did not add up to the totals'
    prompt_tokens, the figure the cost and --fail-on tokens:+N% read. Now they do, and the trace's whole
    request is `request_tokens` beside it."""
    base = record(tmp_path / "base.cpsession")
    res = run("recorded", "gate.drop_rounds=off", str(base), "--json")
    assert res.exit_code == 0, res.output
    s = json.loads(res.stdout)["sessions"][0]
    for side in ("baseline", "candidate"):
        per = [t[side] for t in s["per_turn"]]
        assert len(per) == s["turns"] == 7
        assert sum(p["tokens"] for p in per) == s[side]["prompt_tokens"]
        assert all(0 < p["request_tokens"] - p["tokens"] < 10 for p in per)
    text = run("recorded", "gate.drop_rounds=off", str(base), "--all")
    assert text.exit_code == 0 and "; prompt tokens " in text.stdout


@pytest.mark.parametrize(
    "args",
    [
        ["recorded", "nonsense", str(DEMO)],
        ["recorded", "gate.nope=off", str(DEMO)],
        ["recorded", "recorded"],
        ["recorded", "recorded", "missing.cpsession"],
        ["recorded", "recorded", str(DEMO), "--fail-on", "speed:+1%"],
        ["recorded", "recorded", str(DEMO), "--fail-on", "cost:lots"],
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str]) -> None:
    res = run(*args)
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output and "cp-inspect:" in res.output


def test_a_recording_with_nothing_to_diff_is_exit_2_not_a_passing_gate(tmp_path: Path) -> None:
    """A recording whose agent died before its first request diffed as 0 turns, exit 0: a CI gate on a
    candidate run that never got going passed (its cost was zero)."""
    full = record(tmp_path / "full.cpsession", turns=3)
    empty = tmp_path / "empty.cpsession"
    Pipeline("claude-sonnet-4", record=empty).close()
    for args in (
        [str(full), str(empty), "--fail-on", "cost:+0%"],
        ["recorded", "recorded", str(empty)],
        [str(empty), str(full)],
    ):
        res = run(*args)
        assert res.exit_code == 2, (args, res.output)
        assert f"{empty} holds no requests" in res.output and "nothing to diff" in res.output


def test_turns_only_one_side_has_are_one_note_and_a_cut_short_file_says_so(tmp_path: Path) -> None:
    """A long recording against a short one was a note per turn (thousands for a long session), with no
    word that the totals still count them; a recording cut short was read up to the cut in silence."""
    long_run = record(tmp_path / "long.cpsession", turns=7)
    short_run = record(tmp_path / "short.cpsession", turns=2)
    res = run(str(long_run), str(short_run), "--json")
    assert res.exit_code == 0, res.output
    notes = json.loads(res.stdout)["sessions"][0]["notes"]
    assert notes == [
        "turns 2-6 are only in the baseline (5 turns): not compared turn by turn, but counted in the "
        "baseline's totals (cost, tokens, hit rate)"
    ]
    data = long_run.read_bytes()
    cut = tmp_path / "cut.cpsession"
    cut.write_bytes(data[: len(data) * 2 // 3])
    res = run(str(long_run), str(cut))
    assert res.exit_code == 0, res.output
    assert f"note: {cut}: last frame at offset" in res.stdout and "complete turns kept" in res.stdout
    assert "are only in the baseline" in res.stdout


def test_two_models_diff_turn_by_turn_with_the_cause_at_byte_0(tmp_path: Path) -> None:
    a = record(tmp_path / "a.cpsession", turns=2)
    clock = iter(range(1000, 2000, 7))
    p = Pipeline(
        "gpt-4o",
        provider="openai",
        window=128_000,
        record=tmp_path / "b.cpsession",
        clock=lambda: next(clock),
    )
    p.identity("You are a careful coding agent. Read before you edit; run the tests after. " * 90)
    p.user("The test fails with a KeyError, please fix it.")
    req = p.next_request()
    p.record_usage({"input_tokens": req.trace["final_tokens"], "output_tokens": 50})
    p.close()
    res = run(str(a), str(tmp_path / "b.cpsession"))
    assert res.exit_code == 0, res.output
    assert "turn    0: model_changed at byte 0;" in res.stdout  # was "at  byte 0": no unit to name
    assert "turn 1 is only in the baseline (1 turn)" in res.stdout


def test_another_provider_is_named_as_the_difference_not_an_edited_tool(tmp_path: Path) -> None:
    """Anthropic and OpenAI spell a tool differently, so the first unit to differ was the first tool:
    every turn read "tool_schema: input schema of tool 'bash' edited", though no tool was edited."""
    rec = record(tmp_path / "a.cpsession", turns=2)
    res = run("recorded", "provider=openai", str(rec), "--json")
    assert res.exit_code == 0, res.output
    for t in json.loads(res.stdout)["sessions"][0]["per_turn"]:
        fd = t["first_difference"]
        assert fd["cause"] == "provider_changed" and fd["breaks_cache"] and fd["offset"] == 0
        assert fd["detail"].startswith("provider anthropic -> openai")
    res = run("recorded", "provider=openai", str(rec))
    assert "turn    0: provider_changed at byte 0;" in res.stdout and "tool_schema" not in res.stdout


@pytest.mark.parametrize("command", ["diff", "forks"])
def test_a_price_table_that_is_a_directory_is_one_line_and_exit_2(tmp_path: Path, command: str) -> None:
    rec = record(tmp_path / "a.cpsession", turns=1)
    args = ["recorded", "recorded", str(rec)] if command == "diff" else [str(rec), str(rec)]
    res = CliRunner().invoke(app, [command, *args, "--prices", str(tmp_path)])
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output and f"price table {tmp_path} cannot be read" in res.output


def test_a_side_whose_requests_exceed_its_window_is_said_to_be_unsendable(tmp_path: Path) -> None:
    """window=50 priced requests of thousands of tokens as a 70% saving, with no word that a provider
    would refuse every one of them."""
    rec = record(tmp_path / "a.cpsession", turns=3)
    res = run("recorded", "window=50", str(rec), "--json")
    assert res.exit_code == 0, res.output
    notes = json.loads(res.stdout)["sessions"][0]["notes"]
    assert (
        "candidate: 3 of 3 requests are larger than its window (50), which a provider would reject: its "
        "figures are of requests that could not be sent"
    ) in notes
    assert not any(n.startswith("baseline:") for n in notes)
    # The CI comment carries the notes too (it showed the -70% and nothing else).
    md = run("recorded", "window=50", str(rec), "--markdown").stdout
    assert (
        "**Notes:**" in md and "- `a.cpsession`: candidate: 3 of 3 requests are larger than its window" in md
    )


def test_two_recording_sides_and_more_recordings_is_a_usage_error(tmp_path: Path) -> None:
    """`diff a b c d`: the same a-vs-b diff ran once per extra recording, labelled c and d, and the
    totals counted it twice."""
    a = record(tmp_path / "a.cpsession", turns=2)
    b = record(tmp_path / "b.cpsession", accident="latch", turns=2)
    extra = record(tmp_path / "c.cpsession", turns=2)
    res = run(str(a), str(b), str(extra))
    assert res.exit_code == 2 and "Traceback" not in res.output, res.output
    assert "both sides are recordings" in res.output and "would not be used" in res.output
    assert run(str(a), str(b)).exit_code == 0
    # One recording twice (another spelling of its path too) would count its figures twice.
    res = run("recorded", "window=50000", str(a), str(tmp_path / "." / "a.cpsession"))
    assert res.exit_code == 2 and "is given twice" in res.output, res.output


def test_a_failed_cost_or_tokens_gate_says_its_figures_in_their_units() -> None:
    # "cost:+2%: candidate cost 0.444708 vs baseline 0.238955": no $, where the totals above it say $0.4447.
    demo_b = str(DEMO.with_name("scout-gates-closed.cpsession"))
    failed = run(str(DEMO), demo_b, "--fail-on", "cost:+2%", "--fail-on", "tokens:+2%")
    assert failed.exit_code == 1, failed.output
    said = [line for line in failed.output.splitlines() if "vs baseline" in line]
    assert len(said) == 2, failed.output
    cost, tokens = said
    assert "candidate cost $0.4447 vs baseline $0.2390 (+86.11%)" in cost, cost
    assert "candidate tokens 248,608 vs baseline 182,716 (+36.06%)" in tokens, tokens
