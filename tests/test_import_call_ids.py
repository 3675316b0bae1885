"""Imported sessions whose tool-call ids repeat (in one message, across messages) or whose results come
late, early, twice or never: every request the engine rebuilds keeps tool-call/result pairing (each
result answers a call of the assistant message right before it, each call gets its result right after),
at OpenAI and at Anthropic, and the recording verifies. Repeated ids are said in the import's notes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.importers import load
from engine.importers.ingest import ingest
from engine.recording.cpsession import RecordingReader
from engine.recording.journal import unpack_event
from engine.recording.replay import Replayer
from tests.test_engine_properties import check_pairing
from tests.test_import_hostile import _call, _openhands

_IDS = st.sampled_from(["c1", "c2", "c1~1"])  # c1~1: what the importer names a repeated c1
_ROUND = st.tuples(
    st.lists(_IDS, max_size=3),  # the reply's call ids
    st.lists(st.one_of(_IDS, st.none()), max_size=4),  # the results that follow, by call id
    st.booleans(),  # a user message after them
)


def _messages(rounds: list[tuple[list[str], list[str | None], bool]]) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for k, (ids, results, user) in enumerate(rounds):
        calls = [_call(cid, f"cmd {k}.{j}") for j, cid in enumerate(ids)]
        msgs.append({"role": "assistant", "content": f"step {k}", **({"tool_calls": calls} if calls else {})})
        for j, cid in enumerate(results):
            msgs.append({"role": "tool", "tool_call_id": cid, "content": f"out {k}.{j}"})
        if user:
            msgs.append({"role": "user", "content": f"and then {k}"})
    msgs.append({"role": "assistant", "content": "done"})
    return msgs


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rounds=st.lists(_ROUND, min_size=1, max_size=4), provider=st.sampled_from(["openai", "anthropic"]))
def test_repeated_call_ids_keep_pairing_in_every_request(
    tmp_path: Path, rounds: list[tuple[list[str], list[str | None], bool]], provider: str
) -> None:
    msgs = _messages(rounds)
    src = _openhands(tmp_path, msgs)
    rec = tmp_path / f"{provider}.cpsession"
    rec.unlink(missing_ok=True)
    pipe, report = ingest(load(src), rec, provider=provider)
    turns = pipe.turn
    pipe.close()
    events = [unpack_event(e) for e in RecordingReader.open(rec).events()]
    replayer = Replayer(events)
    assert replayer.verify().ok
    for t in range(turns):
        check_pairing(json.loads(replayer.replan(t).serialized.body), provider)
    # Every id an earlier reply used again is said (once per repeat), named as the importer names a
    # repeat inside one reply (its second c1 is c1~1).
    seen: set[str] = set()
    repeats = 0
    for ids, _results, _user in rounds:
        used: set[str] = set()
        names = []
        for cid in ids:
            name = cid if cid not in used else f"{cid}~{len(used)}"
            used.add(name)
            names.append(name)
        repeats += sum(n in seen for n in names)
        seen.update(names)
    assert sum("was used by an earlier assistant message too" in n for n in report.notes) == repeats
