"""Counts in the engine's own texts (fork checks, shadow differences, the store's reasons, the diff's
gates, import and settings errors) read right at one and at many: "1 unit", "2 units", where they read
"1 unit(s)", "1 more block(s)", "referenced by 1 item(s)", "unknown gate(s) ['x']"."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from engine import Pipeline
from engine.errors import ConfigError
from engine.fork import validate_spawn
from engine.optimize.context import OptimizeLimits
from engine.shadow import first_block_diff
from engine.sim.session_diff import DiffError, parse_side
from engine.store.items import Kind, LinkKind
from engine.store.store import ContextStore


def _openai(*texts: str) -> dict[str, Any]:
    return {"model": "gpt-4o", "messages": [{"role": "user", "content": t} for t in texts]}


@pytest.mark.parametrize("n,units", [(1, "1 unit"), (2, "2 units")])
def test_a_spawn_check_counts_the_units_the_child_repeats(n: int, units: str) -> None:
    rep = validate_spawn(_openai("a", "b", "c"), _openai("a", "b", "c", "d"), shared_units=n)
    assert rep.ok and rep.message.startswith(f"ok: the child repeats the parent's first {units} ("), (
        rep.message
    )


@pytest.mark.parametrize("users,blocks", [(0, "1 more block"), (1, "2 more blocks")])
def test_the_shadow_counts_the_blocks_one_request_has_more(users: int, blocks: str) -> None:
    p = Pipeline("gpt-4o", provider="openai", serve=False)
    p.identity("You are careful.")
    p.user("first")
    a = p.next_request()
    p.record_usage({"input_tokens": 10, "output_tokens": 1})
    p.assistant("answer")
    for k in range(users):
        p.user(f"more {k}")
    b = p.next_request()
    p.close()
    d = first_block_diff(a.serialized, b.serialized)
    assert d is not None and d["cause"] == f"the candidate request has {blocks}", d


@pytest.mark.parametrize("n,items", [(1, "1 item"), (2, "2 items")])
def test_the_stores_reason_counts_the_items_that_reference_one(tmp_path: Path, n: int, items: str) -> None:
    store = ContextStore(tmp_path / "run.db")
    try:
        a = store.add("alpha " * 30, Kind.TOOL_RESULT)
        for k in range(n):
            store.link(store.add(f"uses alpha {k}", Kind.ASSISTANT), a, LinkKind.CITES)
        entry = store.context_get(100_000, sticky=False).entry(a)
        assert entry is not None and f"referenced by {items}" in entry.reasons, entry.reasons
    finally:
        store.close()


def test_unknown_settings_gates_and_thresholds_are_counted() -> None:
    with pytest.raises(ConfigError, match=r"unknown optimizer gate \['bogus'\]; known gates: "):
        OptimizeLimits().with_gates({"bogus": True})
    with pytest.raises(ConfigError, match=r"unknown optimizer gates \['a', 'b'\]; known gates: "):
        OptimizeLimits().with_gates({"a": True, "b": False})
    for spec, said in [
        ("gate.bogus=on", "unknown gate ['bogus']; known gates: "),
        ("threshold.bogus=0.5", "unknown threshold ['bogus']; known: "),
    ]:
        with pytest.raises(DiffError) as exc:
            parse_side(spec)
        assert said in str(exc.value), str(exc.value)


def test_simulate_counts_the_unknown_thresholds() -> None:
    from engine.sim.simulate_settings import SimulateError, _check_thresholds

    with pytest.raises(SimulateError, match=r"^unknown threshold \['bogus'\]; known thresholds: "):
        _check_thresholds({"bogus": 0.5})
    with pytest.raises(SimulateError, match=r"^unknown thresholds \['a', 'b'\]; known thresholds: "):
        _check_thresholds({"a": 0.5, "b": 0.6})
    with pytest.raises(DiffError, match=r"unknown gates \['a', 'b'\]; known gates: "):
        parse_side("gate.a=on,gate.b=off")


def test_a_proxy_log_of_one_conversation_says_so(tmp_path: Path) -> None:
    from engine.importers import NoSuchConversation, load
    from tests.test_import_proxy_conversations import _run, _write

    log = _write(tmp_path, [_run("a", 0), _run("a", 1)])
    with pytest.raises(NoSuchConversation, match=r"has 1 conversation; conversation 2 does not exist"):
        load(log, conversation=2)


def test_the_note_on_a_blank_system_text_counts_it() -> None:
    # A section holds one text through the public API ("1 text(s) of whitespace only" before).
    p = Pipeline("claude-sonnet-4-5", "anthropic", 200_000, serve=False)
    p.identity("You are terse.")
    p.add_source("notes", "memory", binder=lambda budget: " \n", estimate=100)
    p.user("List the files.")
    notes = {s["id"]: s["note"] for s in p.next_request().trace["sections"]}
    p.close()
    assert notes["notes"].startswith("1 text of whitespace only: sent to Anthropic as "), notes["notes"]


@pytest.mark.parametrize(
    "ids,said", [(["c1"], "tool call ['c1'] has"), (["c1", "c2"], "tool calls ['c1', 'c2'] have")]
)
def test_unanswered_calls_are_counted(ids: list[str], said: str) -> None:
    from engine.errors import UnpairedToolResultError

    p = Pipeline("claude-sonnet-4", "anthropic", serve=False)
    p.identity("You are a careful coding agent.")
    p.user("List the files.")
    p.next_request()
    p.assistant("Let me look.", tool_calls=[{"id": c, "name": "bash", "arguments": "{}"} for c in ids])
    with pytest.raises(UnpairedToolResultError) as exc:
        p.next_request()
    p.close()
    assert f"the assistant's {said} no result before the next request" in str(exc.value), str(exc.value)


@pytest.mark.parametrize("turns,said", [(2, "1 tool call of"), (3, "2 tool calls of")])
def test_the_note_on_renamed_calls_counts_them(turns: int, said: str) -> None:
    # An agent that numbers its calls per turn sends "toolu_1" each turn: each after the first is renamed.
    p = Pipeline("claude-sonnet-4", "anthropic", serve=False)
    p.identity("You are a careful coding agent.")
    p.user("List the files.")
    for t in range(turns):
        p.next_request()
        p.record_usage({"input_tokens": 10, "output_tokens": 1})
        calls = p.assistant("Let me look.", tool_calls=[{"id": "toolu_1", "name": "bash", "arguments": "{}"}])
        p.tool_result(calls[0].id, f"listing {t}")
    trace = p.next_request().trace
    p.close()
    note = str(next(s for s in trace["sections"] if s["kind"] == "history").get("note", ""))
    assert note.startswith(
        f"{said} the conversation sent to Anthropic with another id than the agent gave"
    ), note


def test_the_note_on_calls_renamed_at_another_provider_counts_them(tmp_path: Path) -> None:
    # A what-if at OpenAI of an Anthropic session with one id too long for OpenAI (two: test_whatif_call_ids).
    from engine.whatif import Overrides
    from tests.test_whatif_call_ids import LONG, _history_note, _replayer, _session

    rp = _replayer(_session(tmp_path, "anthropic", [[LONG], ["call_1"]]))
    note = _history_note(rp.replan(rp.turns - 1, Overrides(provider="openai")).trace)
    assert note.startswith("1 tool call of the conversation sent to OpenAI with another id"), note
