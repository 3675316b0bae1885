"""CONTEXTPIPE_REDACT=1 and the journal kinds capture adds: an agent's `edit` and the `diag` notes (a
retried call, a history the agent rewrote, a tap's error). Before, neither kind was in the probe's
vocabulary (engine/probe/redact.py), so `k` itself was hashed as if it were text and a live inspector
could not tell an edit from any other event; the notes' fields were hashed names. Now the structure
passes (kinds, turns, places, counts, the edited parts as [turn, what, how], blob hashes) and every
text stays hidden: the new text of an edit is only its blob's hash, a tap error's message a digest.

The events are a real session's: an OpenAI client through the proxy whose first call the stand-in
refuses once (the SDK's retry: a `retried` note), whose tool result the agent truncates where it stood
(an `edit` and a `history_rewrite` note), and a tap error journaled by the tap itself.
"""

from __future__ import annotations

import hashlib
import json

import openai

from engine.capture.tap import tap
from engine.probe.redact import redact_event
from tests.capture.conftest import Proxied, events_of
from tests.capture.edited_conversation import BIG, TRUNCATED, openai_truncated_result
from tests.capture.standin import StandIn

SECRET = "API_KEY=hunter2 in /home/alice/.env"


def test_edits_and_diag_notes_keep_their_structure_and_hide_their_text(
    proxied: Proxied, standin: StandIn, tmp_path: object
) -> None:
    standin.failures = [500]  # the first call refused once: the SDK sends it again
    client = openai.OpenAI(base_url=proxied.url + "/v1", api_key="k", max_retries=1)
    openai_truncated_result(client, "Be brief.", standin)
    (path,) = proxied.finish()
    evs = events_of(path)
    (edit,) = [e for e in evs if e["k"] == "edit"]
    diags = {e["kind"]: e for e in evs if e["k"] == "diag"}
    assert set(diags) == {"retried", "history_rewrite"}, diags

    out = redact_event(edit)
    assert out == edit  # nothing in it is text: its kind, turn, message, part and the new text's hash
    assert out["h"] == hashlib.sha256(TRUNCATED.encode()).hexdigest()

    retried = redact_event(diags["retried"])
    assert retried == diags["retried"] and retried["attempts"] == 1
    rewrite = redact_event(diags["history_rewrite"])
    assert rewrite == diags["history_rewrite"]
    assert rewrite["edited_parts"] == [[1, "result", "truncated"]] and rewrite["applied"] == 1

    # no event of the session, redacted, says the texts in clear
    every = json.dumps([redact_event(e) for e in evs])
    assert "build line 3" not in every and "output truncated" not in every and BIG[:40] not in every


def test_a_tap_errors_message_is_hidden_its_count_kept(tmp_path: object, standin: StandIn) -> None:
    from pathlib import Path

    rec = Path(str(tmp_path)) / "t.cpsession"
    standin.script = ["Hello."]
    client = tap(openai.OpenAI(base_url=standin.url + "/v1", api_key="k", max_retries=0), record=rec, serve=False)
    client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "Hi."}])
    client.contextpipe_tap.note_error(f"journal step failed: {SECRET}")
    client.contextpipe_tap.close()
    (diag,) = [e for e in events_of(rec) if e["k"] == "diag"]
    out = redact_event(diag)
    assert out["k"] == "diag" and out["kind"] == "tap_error" and out["turn"] == diag["turn"] and out["count"] == 1
    text = f"journal step failed: {SECRET}".encode()
    assert out["message"] == {"sha256": hashlib.sha256(text).hexdigest(), "size": len(text)}
    assert "hunter2" not in json.dumps(out)
