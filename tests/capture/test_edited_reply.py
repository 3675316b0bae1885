"""A reply the agent (or its user) edits before sending the conversation again is not fed twice.

The real openai and anthropic SDKs through the proxy: the second request carries the first reply
reworded where it stood. That request did not extend the last one, and the edited reply came after the
last message the engine knew, so it was fed as new: the engine's history held the original reply and
the edited one both (and a reply left out, as mini-swe-agent leaves one, was the other reading of the
same request). Now an edit in place is a rewrite of the history: the as-sent request is journaled as
sent (the edit in it), the engine's history holds the reply once, as edited (an `edit` event of the
message fed as it came: tests/capture/test_edited_reply_history.py), takes only what follows, and the
turn's trace and `explain` say which messages were edited.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anthropic
import openai
from typer.testing import CliRunner

from engine.recording.journal import trace_of
from inspector.cli import app
from tests.capture.conftest import Proxied, errors, events_of, verify_ok
from tests.capture.edited_conversation import EDITED, FIRST, openai_edited_reply
from tests.capture.standin import StandIn

SYSTEM = "You are a careful coding agent."


def _fed_texts(path: Path) -> list[str]:
    """Every text fed to the engine's history (user text, tool results, replies), in order."""
    evs = events_of(path)
    blobs = {e["h"]: e["data"] for e in evs if e["k"] == "blob"}
    out = []
    for e in evs:
        parts = [e["part"]] if e["k"] == "part" else e.get("parts") or [] if e["k"] == "msg" else []
        out += [blobs[p["h"]] for p in parts if p.get("t") in ("text", "result") and p.get("h") in blobs]
    return out


def _sent_texts(path: Path, turn: int) -> list[str]:
    """The texts the request the agent sent at `turn` added to the one before (its `actual` event)."""
    evs = events_of(path)
    blobs = {e["h"]: e["data"] for e in evs if e["k"] == "blob"}
    (act,) = [e for e in evs if e["k"] == "actual" and e["turn"] == turn]
    return [blobs.get(json.loads(blobs[h]).get("content_h", ""), "") for h in act["add"]]


def _check(path: Path, reply_texts: list[str]) -> None:
    fed = _fed_texts(path)
    # the reply fed once as it came, the edit not fed again (it is an `edit` of that message)
    assert fed.count(FIRST) == 1 and EDITED not in fed, fed
    assert len([e for e in events_of(path) if e["k"] == "edit"]) == 1
    for t in reply_texts:
        assert fed.count(t) == 1, (t, fed)
    assert EDITED in _sent_texts(path, 1)  # what the agent sent is the edited history
    traces = {e["turn"]: trace_of(e) for e in events_of(path) if e["k"] == "turn"}
    assert sorted(traces) == [0, 1, 2]
    rw = traces[1]["history_rewrite"]
    assert rw["edited"] == 1 and rw["replaced"] == 1 and rw["dropped"] == 1 and rw["new"] == 1, rw
    assert "history_rewrite" not in traces[2]  # the next request extends the edited one
    assert not errors(path)
    verify_ok(path)
    res = CliRunner().invoke(app, ["explain", str(path), "--turn", "1"])
    assert res.exit_code == 0, res.output
    assert "(1 earlier message edited in place: the engine's history holds 1 edit (the replies of turns 0)" in res.stdout


def test_an_edited_reply_through_the_proxy_openai(proxied: Proxied, standin: StandIn) -> None:
    standin.script = [FIRST, "Second answer.", "Third answer."]
    client = openai.OpenAI(base_url=proxied.url + "/v1", api_key="k", max_retries=0)
    assert openai_edited_reply(client, SYSTEM) == FIRST
    paths = proxied.finish()
    assert len(paths) == 1, "one conversation, edited, is one session"
    _check(paths[0], ["Start.", "Go on.", "End.", "Second answer."])


def test_an_edited_reply_with_a_tool_call_through_the_proxy_anthropic(proxied: Proxied, standin: StandIn) -> None:
    """The reply's text edited, its tool call kept (same id): an edit; its result then answers it."""
    standin.script = [FIRST, "Second answer.", "Third answer."]
    client = anthropic.Anthropic(base_url=proxied.url, api_key="k", max_retries=0)
    common: dict[str, Any] = {"model": "claude-sonnet-4", "max_tokens": 64, "system": SYSTEM}
    msgs: list[Any] = [{"role": "user", "content": "Start."}]
    r = client.messages.create(messages=msgs, **common)
    blocks = [b.model_dump(exclude_none=True) for b in r.content]
    assert blocks[0]["text"] == FIRST and blocks[1]["type"] == "tool_use"
    blocks[0]["text"] = EDITED
    msgs += [
        {"role": "assistant", "content": blocks},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": blocks[1]["id"], "content": "ok"}]},
    ]
    r = client.messages.create(messages=msgs, **common)
    msgs += [{"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in r.content]},
             {"role": "user", "content": [{"type": "tool_result", "tool_use_id": r.content[1].id, "content": "ok 2"}]}]  # type: ignore[union-attr]
    client.messages.create(messages=msgs, **common)
    paths = proxied.finish()
    assert len(paths) == 1
    _check(paths[0], ["Start.", "Second answer."])


def test_deepseek_reasoner_replies_sent_back_without_reasoning_are_fed_once(
    proxied: Proxied, standin: StandIn
) -> None:
    """DeepSeek's reasoner refuses its reasoning_content sent back, so every request carries the replies
    without it: read as the last reply left out, each reply was fed again and held twice."""
    standin.script = [f"Step {i}." for i in range(3)]
    client = openai.OpenAI(base_url=proxied.url + "/deepseek", api_key="k", max_retries=0)
    msgs: list[Any] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Start."}]
    for t in range(3):
        r = client.chat.completions.create(model="deepseek-reasoner", messages=msgs)
        assert getattr(r.choices[0].message, "reasoning_content", None)  # the stand-in reasons, as DeepSeek
        msgs += [{"role": "assistant", "content": r.choices[0].message.content}, {"role": "user", "content": f"out {t}"}]
    (path,) = proxied.finish()
    fed = _fed_texts(path)
    assert [t for t in fed if t.startswith("Step")] == ["Step 0.", "Step 1.", "Step 2."], fed
    traces = {e["turn"]: trace_of(e) for e in events_of(path) if e["k"] == "turn"}
    assert sorted(traces) == [0, 1, 2] and not any("history_rewrite" in t for t in traces.values())
    verify_ok(path)
