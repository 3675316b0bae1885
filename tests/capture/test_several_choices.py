"""A chat call that asks for several choices (`n` > 1: best-of-n, self-consistency) and an agent that keeps
one of them, not always the first. The tap (and the proxy, which journals through it) fed the first choice
to the engine as the reply; the next request held the one the agent kept, so the engine's history had
both, every turn: two assistant messages in a row, one of them never sent, and the engine's plan ("what
ContextPipe would send") larger than what the agent sent by a reply a turn. Now a reply of several choices
is not fed: the next request says which one was kept, and that one is fed, once.
Real openai SDK (streamed and not) through the proxy and through the tap, against the stand-in, which
answers `n` with that many choices."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import openai
import pytest

from engine.capture.tap import tap
from engine.importers.history_edits import REWRITE_KEY
from engine.recording.replay import Replayer
from tests.capture.conftest import Proxied, errors, events_of, usages, verify_ok
from tests.capture.standin import USAGE_OPENAI, StandIn

TURNS = 4
KEPT = 2  # the choice the agent keeps (not the first)


def _best_of_three(client: openai.OpenAI, stream: bool) -> list[dict[str, Any]]:
    """An agent that asks for three choices a call and keeps the third; the messages it last sent."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a careful coding agent."},
        {"role": "user", "content": "Pick the best plan."},
    ]
    for t in range(TURNS):
        if stream:
            chunks = list(
                client.chat.completions.create(
                    model="gpt-4o",
                    messages=messages,
                    n=3,
                    stream=True,  # type: ignore[arg-type]
                    stream_options={"include_usage": True},
                )
            )
            texts = ["", "", ""]
            for c in chunks:
                for ch in c.choices:
                    texts[ch.index] += ch.delta.content or ""
        else:
            r = client.chat.completions.create(model="gpt-4o", messages=messages, n=3)  # type: ignore[arg-type]
            texts = [c.message.content or "" for c in r.choices]
        assert len(set(texts)) == 3, texts  # three different answers
        messages += [
            {"role": "assistant", "content": texts[KEPT]},
            {"role": "user", "content": f"Go on ({t})."},
        ]
    return messages


def _only_the_kept_replies(path: Path, sent: list[dict[str, Any]]) -> None:
    """The engine's plan of the last turn holds the agent's history as it sent it (each kept reply once,
    no other choice), no turn is taken for a rewrite of the agent's history, the usage of every call."""
    evs = events_of(path)
    assert not errors(path)
    assert verify_ok(path) == TURNS
    assert not any(REWRITE_KEY in json.dumps(e.get("trace") or {}) for e in evs if e["k"] == "turn")
    body = json.loads(Replayer(evs).replan(TURNS - 1).serialized.body)
    planned = [(m["role"], m["content"]) for m in body["messages"]]
    assert planned == [(m["role"], m["content"]) for m in sent[:-2]]  # (the last two: after the last call)
    kept = [c for role, c in planned if role == "assistant"]
    assert kept and all(c.endswith(f"Choice {KEPT}.") for c in kept), kept
    us = usages(path)
    assert len(us) == TURNS and all(u["input_tokens"] == USAGE_OPENAI["prompt_tokens"] for u in us), us


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_the_kept_choice_alone_is_fed_through_the_proxy(proxied: Proxied, stream: bool) -> None:
    client = openai.OpenAI(base_url=proxied.url + "/v1", api_key="sk-test", max_retries=0)
    sent = _best_of_three(client, stream)
    paths = proxied.finish()
    assert len(paths) == 1, "one conversation, one session"
    _only_the_kept_replies(paths[0], sent)


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_the_kept_choice_alone_is_fed_through_the_tap(standin: StandIn, tmp_path: Path, stream: bool) -> None:
    rec = tmp_path / "t.cpsession"
    client = tap(openai.OpenAI(base_url=standin.url + "/v1", api_key="sk-test", max_retries=0), record=rec)
    sent = _best_of_three(client, stream)
    client.contextpipe_tap.close()  # type: ignore[attr-defined]
    assert client.contextpipe_stats.errors == 0, client.contextpipe_stats.last_error  # type: ignore[attr-defined]
    _only_the_kept_replies(rec, sent)
