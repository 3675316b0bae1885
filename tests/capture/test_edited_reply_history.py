"""A reply the agent edits where it stood is edited in the engine's history too: one `edit` event.

The real openai and anthropic SDKs through the proxy, and a tapped client: the second request carries
the first reply reworded. The engine used to keep the original (its plan and simulate sent the reply
the agent never sent again, and their cache figures were of a conversation that was not the agent's).
Now the tap journals the edit (Pipeline.edit_text), the engine's next requests hold the edited reply and
not the original, a replay and `verify` fold the same event to the same request hashes, the engine's
cache break at that turn is named for it ("history rewritten by the agent: turn 0's reply edited"),
and explain says it. A request that edits nothing journals no edit (the other capture tests, and the
identity benchmarks, hold every other request byte for byte).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anthropic
import openai
from typer.testing import CliRunner

from engine.capture.tap import tap
from engine.recording.journal import trace_of
from engine.recording.replay import Replayer
from engine.sim.simulate import simulate_file
from inspector.cli import app
from tests.capture.conftest import Proxied, errors, events_of, verify_ok
from tests.capture.edited_conversation import EDITED, FIRST, openai_edited_reply
from tests.capture.standin import StandIn

SYSTEM = "You are a careful coding agent. " * 300  # over the 1,024 tokens a cached prefix needs


def _engine_bodies(path: Path) -> list[bytes]:
    """The request the engine planned at each turn, rebuilt by a replay of the recording."""
    rep = Replayer(events_of(path))
    return [rep.replan(t).serialized.body for t in range(rep.turns)]


def _check(path: Path, at: int = 1) -> dict[int, dict[str, Any]]:
    """The edit of turn 0's reply, sent at turn `at`, in the recording of 3 turns; their traces."""
    evs = events_of(path)
    (edit,) = [e for e in evs if e["k"] == "edit"]
    assert edit["turn"] == at
    bodies = _engine_bodies(path)
    for b in bodies[1:at]:  # the original, while the agent sent it
        assert FIRST.encode() in b and EDITED.encode() not in b, b[-600:]
    for b in bodies[at:]:  # from the edit on, the engine sends what the agent sends: the edited reply
        assert EDITED.encode() in b and FIRST.encode() not in b, b[-600:]
    traces = {e["turn"]: trace_of(e) for e in evs if e["k"] == "turn"}
    rw = traces[at]["history_rewrite"]
    assert rw["edited"] == 1 and rw["applied"] == 1 and rw["edited_turns"] == [0], rw
    assert verify_ok(path) == 3  # a replay folds the edit to the very requests recorded
    assert not errors(path)
    res = CliRunner().invoke(app, ["explain", str(path), "--turn", str(at)])
    assert res.exit_code == 0, res.output
    assert (
        "(1 earlier message edited in place: the engine's history holds 1 edit (the replies of turns 0)"
        in res.stdout
    )
    report = simulate_file(path)
    assert report.simulated_turns == 3
    return traces


def test_an_edited_reply_is_edited_in_the_engines_history_openai(proxied: Proxied, standin: StandIn) -> None:
    standin.script = [FIRST, "Second answer.", "Third answer."]
    client = openai.OpenAI(base_url=proxied.url + "/v1", api_key="k", max_retries=0)
    assert openai_edited_reply(client, SYSTEM) == FIRST
    (path,) = proxied.finish()
    _check(path)


def test_an_edited_reply_with_its_tool_call_anthropic_tapped(tmp_path: Path, standin: StandIn) -> None:
    """Turn 0's reply, sent back as it came at turn 1, then with its text edited at turn 2 (its tool call
    kept: same id, same input): the engine's reply keeps its call with the edited text, and the cache
    break at turn 2 (the reply was in turn 1's cached prefix) is the agent's, said so."""
    standin.script = [FIRST, "Second answer.", "Third answer."]
    rec = tmp_path / "t.cpsession"
    client = tap(
        anthropic.Anthropic(base_url=standin.url, api_key="k", max_retries=0), record=rec, serve=False
    )
    common: dict[str, Any] = {
        "model": "claude-sonnet-4",
        "max_tokens": 64,
        "system": [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}],
    }
    msgs: list[Any] = [{"role": "user", "content": "Start."}]
    r = client.messages.create(messages=msgs, **common)
    blocks = [b.model_dump(exclude_none=True) for b in r.content]
    assert blocks[0]["text"] == FIRST and blocks[1]["type"] == "tool_use"
    msgs += [
        {"role": "assistant", "content": blocks},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": blocks[1]["id"], "content": "ok"}],
        },
    ]
    r = client.messages.create(messages=msgs, **common)
    blocks[0]["text"] = EDITED  # (the list sent at turn 1 holds the block itself: edited in place)
    msgs += [
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in r.content]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": r.content[1].id, "content": "ok 2"}],
        },
    ]  # type: ignore[union-attr]
    client.messages.create(messages=msgs, **common)
    client.contextpipe_tap.close()
    traces = _check(rec, at=2)
    bodies = _engine_bodies(rec)
    assert (
        bodies[2].count(f'"{blocks[1]["id"]}"'.encode()) == 2
    )  # the call and its result, as before the edit
    brk = traces[2]["cache_break"]
    assert brk is not None and brk["cause"] == "history rewritten by the agent: turn 0's reply edited", brk
    assert traces[1].get("cache_break") is None  # turn 1 extended turn 0's request
    # simulate (and report, from it) names the engine's break the same way, from the tap's diag event
    pipeline = simulate_file(rec).policies["pipeline"]
    assert pipeline is not None
    assert pipeline.cache_break_causes == {"history rewritten by the agent: turn 0's reply edited": 1}


def _edited_first_reply(proxied: Proxied, standin: StandIn, change: dict[str, Any]) -> Path:
    """Two calls through the proxy (Anthropic): turn 0's reply sent back with its text EDITED and its
    tool_use block changed by `change`. The recording."""
    standin.script = [FIRST, "Second answer.", "Third answer."]
    client = anthropic.Anthropic(base_url=proxied.url, api_key="k", max_retries=0)
    common: dict[str, Any] = {"model": "claude-sonnet-4", "max_tokens": 64, "system": "Be brief."}
    msgs: list[Any] = [{"role": "user", "content": "Start."}]
    r = client.messages.create(messages=msgs, **common)
    blocks = [b.model_dump(exclude_none=True) for b in r.content]
    blocks[0]["text"] = EDITED
    blocks[1].update(change)
    msgs += [
        {"role": "assistant", "content": blocks},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": blocks[1]["id"], "content": "ok"}],
        },
    ]
    client.messages.create(messages=msgs, **common)
    (path,) = proxied.finish()
    return path


def test_a_reply_whose_text_and_call_changed_takes_both(proxied: Proxied, standin: StandIn) -> None:
    """The reply's text and its call's arguments rewritten: two edits, each taken, each said."""
    path = _edited_first_reply(proxied, standin, {"input": {"command": "rm -rf build"}})
    assert [e.get("part") for e in events_of(path) if e["k"] == "edit"] == [None, 1]
    rw = {e["turn"]: trace_of(e) for e in events_of(path) if e["k"] == "turn"}[1]["history_rewrite"]
    assert rw["edited"] == 1 and rw["applied"] == 2, rw
    assert rw["edited_parts"] == [[0, "call", "edited"], [0, "reply", "edited"]], rw
    body = _engine_bodies(path)[1]
    assert b"rm -rf build" in body and EDITED.encode() in body and b"ls -la" not in body
    res = CliRunner().invoke(app, ["explain", str(path), "--turn", "1"])
    assert "holds 2 edits (turn 0's tool call edited, turn 0's reply edited" in res.stdout, res.stdout
    verify_ok(path)


def test_a_reply_whose_call_was_renamed_keeps_the_original(proxied: Proxied, standin: StandIn) -> None:
    """An edit of more than text (a call's tool renamed) is not taken: the original stays, said as before."""
    path = _edited_first_reply(proxied, standin, {"name": "sh"})
    assert not [e for e in events_of(path) if e["k"] == "edit"]
    rw = {e["turn"]: trace_of(e) for e in events_of(path) if e["k"] == "turn"}[1]["history_rewrite"]
    assert rw["edited"] == 1 and rw["applied"] == 0
    res = CliRunner().invoke(app, ["explain", str(path), "--turn", "1"])
    assert "the engine keeps the originals, not both" in res.stdout
    verify_ok(path)


def _tapped_run(rec: Path, standin: StandIn, edit: bool) -> None:
    """Three calls of a tapped OpenAI client; `edit`: the first reply is sent back edited, else the
    stand-in answers the edited text in the first place (the same conversation, never edited)."""
    standin.script = [FIRST if edit else EDITED, "Second answer.", "Third answer."]
    client = tap(
        openai.OpenAI(base_url=standin.url + "/v1", api_key="k", max_retries=0), record=rec, serve=False
    )
    openai_edited_reply(client, SYSTEM)
    client.contextpipe_tap.close()


def test_simulate_reads_the_edit_back_in_every_column(tmp_path: Path, standin: StandIn) -> None:
    """simulate over the edited recording gives every column (the engine's policies and the peers') the
    figures of the same conversation never edited: each replays the edit, none keeps the original."""
    from engine.sim.simulate_settings import SimSettings

    edited, plain = tmp_path / "edited.cpsession", tmp_path / "plain.cpsession"
    _tapped_run(edited, standin, edit=True)
    _tapped_run(plain, standin, edit=False)
    assert [e["k"] for e in events_of(edited)].count("edit") == 1
    assert [e["k"] for e in events_of(plain)].count("edit") == 0
    settings = SimSettings(policies=("all",), calibrate=False)
    a, b = simulate_file(edited, settings), simulate_file(plain, settings)
    assert sorted(a.policies) == sorted(b.policies) and len(a.policies) > 3
    for name, col in a.policies.items():
        other = b.policies[name]
        assert col is not None and other is not None
        got = [t.to_json()["prompt_tokens"] for t in col.turns]
        want = [t.to_json()["prompt_tokens"] for t in other.turns]
        assert got == want, (name, got, want)


def test_an_agents_own_rewrites_named_in_what_it_sent(tmp_path: Path, standin: StandIn) -> None:
    """simulate's as-sent column (and report's breaks, read from it): a break where the agent's request
    rewrote its history is named for the agent, an edit or its own compaction, not a bare "history
    rewritten". OpenAI caches prefixes itself (1,024 tokens and more): the long task is the prefix. A
    tapped client recording one conversation (split=False: the compacted request opens otherwise)."""
    standin.script = [FIRST, "Second answer.", "Third answer.", "Fourth answer.", "Fifth answer."]
    rec = tmp_path / "o.cpsession"
    client = tap(
        openai.OpenAI(base_url=standin.url + "/v1", api_key="k", max_retries=0),
        record=rec,
        serve=False,
        split=False,
    )
    long_task = "Fix the failing test. " + "Context line. " * 600
    msgs: list[Any] = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": long_task}]
    client.chat.completions.create(model="gpt-4o", messages=msgs)
    msgs += [{"role": "assistant", "content": FIRST}, {"role": "user", "content": "Go on."}]
    client.chat.completions.create(model="gpt-4o", messages=msgs)
    msgs[2] = {"role": "assistant", "content": EDITED}  # turn 0's reply edited, after it was sent back
    msgs += [{"role": "assistant", "content": "Second answer."}, {"role": "user", "content": "Next."}]
    client.chat.completions.create(model="gpt-4o", messages=msgs)
    # then it summarizes its long task where it stood (an edit of its own message, taken as a reply's
    # is), and then compacts: the summary kept, the first turns dropped
    msgs[1] = {"role": "user", "content": "Summary: fix the test."}
    msgs += [{"role": "assistant", "content": "Third answer."}, {"role": "user", "content": "Then?"}]
    client.chat.completions.create(model="gpt-4o", messages=msgs)
    msgs = [
        *msgs[:2],
        *msgs[4:],
        {"role": "assistant", "content": "Fourth answer."},
        {"role": "user", "content": "End."},
    ]
    client.chat.completions.create(model="gpt-4o", messages=msgs)
    client.contextpipe_tap.close()
    sent = simulate_file(rec).policies["as_sent"]
    assert sent is not None
    assert sent.cache_break_causes == {
        "history rewritten by the agent: turn 0's reply edited": 1,
        "history rewritten by the agent: turn 0's user message edited": 1,
        "history rewritten by the agent: its own compaction": 1,
    }, sent.cache_break_causes
