"""Shadow rollout: Pipeline(shadow=...) plans every turn under a candidate configuration too, journals it
as `shadow` events that replay ignores, never writes the candidate's spills, and the inspector shows the
two side by side."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from engine import Pipeline
from engine.config import PipelineConfig
from engine.errors import ConfigError
from engine.recording.replay import Replayer
from engine.shadow import estimate_cache, shadow_summary
from engine.sim.session_diff import side_builds
from engine.sim.simulate_read import load_recording_events
from engine.tokens import TokenCounter
from engine.whatif import Overrides
from inspector.app import InspectorApp
from inspector.cli import app as cli
from inspector.sources.file import FileSource
from panels.shadow import ShadowPanel
from tests.tui.conftest import settle

PARAMS = {"type": "object", "properties": {"cmd": {"type": "string"}}}
CANDIDATE = Overrides(gates={"drop_rounds": False, "clear_tool_results": False})


def agent(path: Path | None, shadow: object, turns: int = 20, **kw: object) -> Pipeline:
    clock = iter(range(10_000))
    p = Pipeline("claude-sonnet-4", window=6000, record=path, shadow=shadow, clock=lambda: next(clock), **kw)  # type: ignore[arg-type]
    p.identity("You are a careful coding agent. " * 200)
    p.add_tool("bash", "Run a shell command", PARAMS)
    p.user("Fix the failing test.")
    for t in range(turns):
        req = p.next_request()
        p.record_usage({"input_tokens": req.trace["final_tokens"], "output_tokens": 30})
        calls = p.assistant(f"step {t}", tool_calls=[{"id": f"c{t}", "name": "bash", "arguments": "{}"}])
        p.tool_result(calls[0].id, f"output line {t}\n" * 60)
    p.close()
    return p


def test_shadow_is_journaled_verifiable_and_rebuildable(tmp_path: Path) -> None:
    path = tmp_path / "s.cpsession"
    agent(path, CANDIDATE)
    events, _ = load_recording_events(path)
    shadows = [e for e in events if e.get("k") == "shadow"]
    assert len(shadows) == 20 and not any("error" in e for e in shadows)
    assert sum(1 for e in events if e.get("k") == "shadow_config") == 1
    # Old readers ignore the new kinds: replay verifies, and `cp-inspect verify` agrees.
    assert Replayer(events).verify().ok
    res = CliRunner().invoke(cli, ["verify", str(path)])
    assert res.exit_code == 0 and res.stdout.startswith("ok:")
    # The candidate's requests are exactly what replaying the journal under its configuration builds.
    rebuilt = {t: b.serialized.request_sha256 for t, _, b in side_builds(events, CANDIDATE, TokenCounter())}
    assert {e["turn"]: e["sha"] for e in shadows} == rebuilt
    # This candidate keeps every round on a small window: it differs, sends more, and says where.
    s = shadow_summary(events)
    assert s is not None and s["tokens"][1] > s["tokens"][0]
    assert any(r["first_diff"] and r["first_diff"]["section"] == "history" for r in s["turns"])
    assert s["cost_usd"][1] > 0 and s["priced"]


def test_the_candidate_never_writes_the_agents_spills(tmp_path: Path) -> None:
    spill = tmp_path / "spill"
    live = Overrides(gates={"spill": False})
    p = Pipeline(
        "claude-sonnet-4",
        window=60_000,
        spill_dir=spill,
        limits=PipelineConfig("m").limits.with_gates({"spill": False}),
        shadow=Overrides(gates={"spill": True}),
    )
    p.identity("You are careful.")
    p.add_tool("bash", "Run", PARAMS)
    p.user("go")
    p.next_request()
    p.record_usage({"input_tokens": 10, "output_tokens": 1})
    c = p.assistant("", tool_calls=[{"id": "c0", "name": "bash", "arguments": "{}"}])
    p.tool_result(c[0].id, "a large log line that goes on\n" * 3000)
    p.next_request()
    ev = [e for e in p.journal.events if e.get("k") == "shadow"]
    assert ev[-1]["tokens"] < p.traces[-1]["final_tokens"]  # the candidate spilled the big result...
    assert not spill.exists() or not any(spill.iterdir())  # ...to a scratch store, not the agent's dir
    assert live.gates == {"spill": False}


def test_shadow_rejects_a_wrong_type() -> None:
    import pytest

    from engine.errors import ConfigError

    with pytest.raises(ConfigError, match="shadow= takes"):
        Pipeline("claude-sonnet-4", shadow={"window": 1000})


@pytest.mark.parametrize(
    ("candidate", "says"),
    [
        (Overrides(gates={"bogus": False}), "unknown optimizer gate 'bogus'"),
        (Overrides(thresholds={"bogus": 0.5}), "unknown threshold 'bogus'"),  # was a TypeError
        (Overrides(thresholds={"trim": "high"}), "threshold 'trim' must be a number"),
        (Overrides(provider="nonsense"), "unknown provider 'nonsense'"),
        (Overrides(window=-5), "window must be a positive number"),
        (Overrides(window=10**9), "budget limit"),  # valid alone, out of range as a configuration
    ],
)
def test_a_bad_shadow_candidate_is_a_config_error_naming_the_shadow(candidate: Overrides, says: str) -> None:
    with pytest.raises(ConfigError, match="shadow=") as err:
        Pipeline("claude-sonnet-4", shadow=candidate)
    assert says in str(err.value)


def test_shadow_takes_the_short_threshold_names_like_every_what_if() -> None:
    p = Pipeline("claude-sonnet-4", shadow=Overrides(thresholds={"trim": 0.5, "compact": 0.7}))
    cfg = next(e for e in p.journal.events if e.get("k") == "shadow_config")
    assert cfg["overrides"]["thresholds"] == {"trim_schemas": 0.5, "compact_history": 0.7}
    assert cfg["config"]["thresholds"]["trim_schemas"] == 0.5
    p.identity("You are terse.")
    p.user("hi")
    p.next_request()
    assert "error" not in [e for e in p.journal.events if e.get("k") == "shadow"][-1]


async def test_inspector_shows_the_shadow_side_by_side(tmp_path: Path) -> None:
    path = tmp_path / "s.cpsession"
    agent(path, CANDIDATE)
    app = InspectorApp(FileSource(path), start_turn=15)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await pilot.press("r")
        await settle(pilot)
        panel = app.query_one("#shadow", ShadowPanel)
        assert panel.summary is not None and panel.turn == 15
        svg = app.export_screenshot().replace("&#160;", " ")
        assert "running delta" in svg and "candidate" in svg and "hit rate so far" in svg


def test_shadow_summary_is_none_without_a_shadow(tmp_path: Path) -> None:
    path = tmp_path / "n.cpsession"
    agent(path, None, turns=3)
    events, _ = load_recording_events(path)
    assert shadow_summary(events) is None
    assert json.dumps(shadow_summary(events)) == "null"


def test_a_recording_without_a_shadow_says_so_without_reading_its_journal(tmp_path: Path) -> None:
    """The app asks for the shadow summary when a recording opens: without a shadow_config before the
    first turn the answer is None at once, not after reading and decoding every event of the file."""
    path = tmp_path / "n.cpsession"
    agent(path, None, turns=40)
    src = FileSource(path)
    assert src.shadow_summary() is None
    assert src.events == []  # nothing of the journal was read into the source (all of it before)
    shadowed = tmp_path / "s.cpsession"
    agent(shadowed, CANDIDATE, turns=40)
    src = FileSource(shadowed)
    events, _ = load_recording_events(shadowed)
    assert src.shadow_summary() == shadow_summary(events) is not None


def failing_agent(path: Path, turns: int = 6, broken: tuple[int, ...] = (2, 3)) -> list[object]:
    """A recorded session whose candidate cannot be planned on the turns in `broken`: a real
    PipelineConfig put in a state its plan fails on (no optimizer limits), then given them back."""
    clock = iter(range(10_000))
    cand = dataclasses.replace(Pipeline("claude-sonnet-4").config, window=6000)
    limits = cand.limits
    p = Pipeline("claude-sonnet-4", window=6000, record=path, shadow=cand, clock=lambda: next(clock))
    p.identity("You are a careful coding agent. " * 200)
    p.add_tool("bash", "Run a shell command", PARAMS)
    p.user("Fix the failing test.")
    reqs = []
    for t in range(turns):
        object.__setattr__(cand, "limits", None if t in broken else limits)
        req = p.next_request()
        reqs.append(req)
        p.record_usage({"input_tokens": req.trace["final_tokens"], "output_tokens": 30})
        calls = p.assistant(f"step {t}", tool_calls=[{"id": f"c{t}", "name": "bash", "arguments": "{}"}])
        p.tool_result(calls[0].id, f"output line {t}\n" * 20)
    p.close()
    return reqs


def test_a_candidate_that_fails_to_plan_is_shown_and_the_rest_still_summed(tmp_path: Path) -> None:
    path = tmp_path / "f.cpsession"
    reqs = failing_agent(path)
    events, _ = load_recording_events(path)
    shadows = {e["turn"]: e for e in events if e.get("k") == "shadow"}
    assert sorted(shadows) == list(range(6))
    assert {t for t, e in shadows.items() if "error" in e} == {2, 3}
    assert "AttributeError" in shadows[2]["error"]
    assert Replayer(events).verify().ok  # the agent's own requests were not touched
    # The summary reads the failed turns instead of raising (the TUI then showed no shadow at all).
    s = shadow_summary(events)
    assert s is not None and s["failed_turns"] == 2
    rows = {r["turn"]: r for r in s["turns"]}
    assert "error" in rows[2] and "live" not in rows[2] and "live" in rows[4]
    assert s["tokens"][0] == sum(r["live"]["tokens"] for r in s["turns"] if "live" in r)
    # The live side's expected reads on the turn after a failure are measured against the request just
    # before it (turn 3), not the last one the candidate planned beside (turn 1).
    prev, cur = reqs[3].serialized, reqs[4].serialized  # type: ignore[attr-defined]
    assert shadows[4]["est"]["live"] == list(estimate_cache(prev, cur))


async def test_inspector_shows_a_turn_the_candidate_failed_on(tmp_path: Path) -> None:
    path = tmp_path / "f.cpsession"
    failing_agent(path)
    app = InspectorApp(FileSource(path), start_turn=3)
    async with app.run_test(size=(400, 60)) as pilot:
        await settle(pilot)
        await pilot.press("r")
        await settle(pilot)
        panel = app.query_one("#shadow", ShadowPanel)
        assert panel.summary is not None and panel.turn == 3
        svg = app.export_screenshot().replace("&#160;", " ")
        assert "the candidate could not be planned on this turn: AttributeError" in svg
        assert "could not be planned on 2 turns so far" in svg and "running delta" in svg  # "2 turn(s)"
        await pilot.press("left")  # turn 2, the first that failed: one so far
        await settle(pilot)
        svg = app.export_screenshot().replace("&#160;", " ")
        assert "could not be planned on 1 turn so far" in svg, svg
        await pilot.press("right")
        await settle(pilot)
        await pilot.press("right")  # turn 4: planned again
        await settle(pilot)
        svg = app.export_screenshot().replace("&#160;", " ")
        assert panel.turn == 4 and "first difference" in svg and "on this turn" not in svg


def test_a_candidate_on_another_provider_is_told_as_such(tmp_path: Path) -> None:
    """Block hashes are of content, not wire form: under provider=openai every block matched the live
    Anthropic request's, and the first difference read "request parameters differ"."""
    path = tmp_path / "p.cpsession"
    agent(path, Overrides(provider="openai"), turns=3)
    events, _ = load_recording_events(path)
    shadows = [e for e in events if e.get("k") == "shadow"]
    assert len(shadows) == 3
    for e in shadows:
        assert (
            e["first_diff"]["cause"]
            == "provider anthropic -> openai: another request format, no cache shared"
        )
    rows = shadow_summary(events)["turns"]  # type: ignore[index]
    assert rows[0]["first_diff"]["section"] == "(provider)"


def test_the_open_turn_counts_the_live_requests_tokens() -> None:
    """Between a request and its usage the turn event is not journaled yet: the summary counted the live
    side of that turn as 0 tokens, so an inspector attached to a running agent showed a live hit rate
    near 100% (reads over almost nothing) and half the live tokens."""
    p = Pipeline("claude-sonnet-4", shadow=Overrides(provider="openai"))
    p.identity("You are a careful coding agent. " * 300)
    p.user("Fix the failing test.")
    sent = []
    for t in range(2):
        req = p.next_request()
        sent.append(req.trace["final_tokens"])
        s = shadow_summary(list(p.journal.events))  # the open turn: no turn event yet
        assert s is not None and s["tokens"][0] == sum(sent)
        assert s["turns"][-1]["live"]["tokens"] == sent[-1]
        assert 0.0 <= s["hit_rate"][0] < 0.6
        p.record_usage({"input_tokens": sent[-1], "output_tokens": 5})
        p.user(f"and then {t}")
    p.close()
    # A journal from before the field: a turn whose live size is nowhere is left out, not counted as 0.
    events = [{k: v for k, v in e.items() if k != "live_tokens"} for e in p.journal.events]
    events = [e for e in events if not (e.get("k") == "turn" and e["turn"] == 1)]
    s = shadow_summary(events)
    assert s is not None and s["tokens"] == [sent[0], s["turns"][0]["shadow"]["tokens"]]
    assert "live" not in s["turns"][1] and s["turns"][1]["first_diff"] is not None


async def test_a_candidate_model_without_a_price_is_not_shown_as_free(tmp_path: Path) -> None:
    """A whole candidate configuration on a model the price table lacks was priced at $0 per turn: the
    tab showed it free and a running delta of -100%."""
    path = tmp_path / "u.cpsession"
    live_cfg = Pipeline("claude-sonnet-4", window=6000).config
    agent(path, dataclasses.replace(live_cfg, model="acme-unpriced-1"), turns=4)
    events, _ = load_recording_events(path)
    s = shadow_summary(events)
    assert s is not None and s["priced_sides"] == [True, False] and not s["priced"]
    assert s["models"] == ["claude-sonnet-4", "acme-unpriced-1"]
    app = InspectorApp(FileSource(path), start_turn=3)
    async with app.run_test(size=(400, 60)) as pilot:
        await settle(pilot)
        await pilot.press("r")
        await settle(pilot)
        svg = app.export_screenshot().replace("&#160;", " ")
        assert "cost n/a (no price for acme-unpriced-1)" in svg
        assert "-100.0%" not in svg and "n/a" in svg
