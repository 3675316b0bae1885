"""Attempts of one task through one proxy, some leaving a reply out of their next request (mini-swe-agent's
format error) and compacting right after. The compacted request holds none of its attempt's replies (the
last one is the one it left out), and its opening is every one-call attempt's history without its reply:
it was journaled into such an attempt's session, as that one's dropped reply. It goes to its own session
now (engine.capture.lineage: the message its last request ended with, which it keeps). Two attempts that
both leave their first reply out ask the same request: filed with the first, and the turn says the other
fits as well (`conversation_ambiguous`). Real openai SDK through the proxy, against the stand-in."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import openai

from engine.recording.journal import trace_of
from tests.capture.conftest import Proxied, errors, events_of, verify_ok
from tests.capture.standin import StandIn

SYSTEM = {"role": "system", "content": "You are a careful coding agent."}
TASK = {"role": "user", "content": "Fix the failing test."}
COMPLAINT = {"role": "user", "content": "Format error: every response must run one command."}


def _ask(client: openai.OpenAI, messages: list[dict[str, Any]]) -> str:
    r = client.chat.completions.create(model="gpt-4o", messages=messages)  # type: ignore[arg-type]
    return r.choices[0].message.content or ""


def _traces(path: Path) -> list[dict[str, Any]]:
    return [trace_of(e) for e in events_of(path) if e["k"] == "turn"]


def test_a_compaction_right_after_a_dropped_reply_stays_in_its_session(
    proxied: Proxied, standin: StandIn
) -> None:
    standin.script = ["B looks around.", "A looks around.", "A answers without a command.", "A goes on."]
    client = openai.OpenAI(base_url=proxied.url + "/v1", api_key="k", max_retries=0)
    _ask(client, [SYSTEM, TASK])  # attempt B: one call, then nothing (best-of-n's slow worker)
    a: list[dict[str, Any]] = [SYSTEM, TASK]
    a += [
        {"role": "assistant", "content": _ask(client, a)},
        {"role": "user", "content": "Run the tests (A)."},
    ]
    _ask(client, a)  # no command: left out of the history, answered with the complaint
    a.append(COMPLAINT)
    # compacted at once: the opening, a summary in place of the first exchange, what followed it
    compacted = [SYSTEM, TASK, {"role": "user", "content": "Summary: A looked around."}, *a[-2:]]
    _ask(client, compacted)
    b, a_path = proxied.finish()
    assert len(_traces(b)) == 1, "attempt A's compaction was journaled into attempt B's session"
    assert len(_traces(a_path)) == 3
    assert _traces(a_path)[0]["conversation_branch"]["kind"] == "same_opening"
    assert "conversation_ambiguous" not in _traces(a_path)[2]
    for p in (b, a_path):
        assert not errors(p)
        verify_ok(p)


def test_two_attempts_that_drop_their_first_reply_say_the_filing_is_ambiguous(
    proxied: Proxied, standin: StandIn
) -> None:
    standin.script = ["One.", "Two.", "Three."]
    client = openai.OpenAI(base_url=proxied.url + "/v1", api_key="k", max_retries=0)
    _ask(client, [SYSTEM, TASK])
    _ask(client, [SYSTEM, TASK])  # a second attempt (same opening)
    _ask(client, [SYSTEM, TASK, COMPLAINT])  # either one's next request: nothing in it says which
    first, second = proxied.finish()
    traces = _traces(first)
    assert len(traces) == 2 and len(_traces(second)) == 1
    said = traces[1]["conversation_ambiguous"]
    assert said["session"] == 1 and said["also"] == [2]
    assert "session 2 fits it as well" in said["note"]
    notes = [n for info, _ in proxied.recorder.sessions.values() for n in info.notes]
    assert sum("fits it as well" in n for n in notes) == 1, notes
    from typer.testing import CliRunner

    from inspector.cli import app

    res = CliRunner().invoke(app, ["explain", str(first), "--turn", "1"])
    assert res.exit_code == 0 and "filed with session 1, but session 2 fits it as well" in res.output, (
        res.output
    )
