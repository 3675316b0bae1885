"""A what-if at another provider on a long replay folds the conversation's call ids once, not per re-plan
(engine/recording/provider_ids.py).

The pipeline keeps its fold of the call ids at another provider on itself, but a replay builds each
re-plan on a fresh copy of its folded state: every what-if at another provider folded the whole
conversation again, reading the part behind the compaction cut back from disk (~0.5 s a re-plan at 12,000
turns, against ~5 ms at the session's own provider). What the tests hold, on a recording generated here
through the real engine with ids each provider treats differently: re-plans at other providers in any
order of turns build byte for byte what a fold from the first message builds, a later re-plan folds no
message again and reads no text back from disk, one further back folds at most the replay's copy
interval, and the first one reads no text back either."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.artifacts import Message
from engine.pipeline import Pipeline
from engine.providers.call_ids import AtProvider
from engine.recording.cpsession import RecordingReader
from engine.recording.history_log import HistoryLog
from engine.recording.journal import unpack_event
from engine.recording.provider_ids import ProviderIds
from engine.recording.replay import Replayer
from engine.whatif import Overrides
from inspector.sources.replaying import shared_counter

TURNS = 160
LONG = "toolu_" + "b" * 44  # Anthropic takes it, OpenAI (40) does not
KIMI = "functions.eval:{}"  # OpenAI takes it, Anthropic and Bedrock do not


def _ids(t: int) -> list[str]:
    if t % 7 == 3:
        return [f"{LONG}{t}", "call_0"]  # a long one and a per-turn number that repeats
    if t % 5 == 1:
        return [KIMI.format(t)]
    return [f"c{t}"]


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("provider_ids") / "long.cpsession"
    pipe = Pipeline(
        "claude-sonnet-4", "anthropic", 6_000, record=path, serve=False, clock=lambda: 1_767_225_600.0
    )
    pipe.identity("You are a synthetic agent.")
    pipe.add_tool("read", "read a file", {"type": "object", "properties": {"path": {"type": "string"}}})
    pipe.user("Read every file.")
    for t in range(TURNS):
        req = pipe.next_request()
        pipe.record_usage({"input_tokens": req.trace["final_tokens"], "output_tokens": 40})
        calls = pipe.assistant(
            f"step {t}",
            [{"id": c, "name": "read", "arguments": json.dumps({"path": f"f{t}"})} for c in _ids(t)],
        )
        for c in calls:
            pipe.tool_result(c.id, f"file f{t} {c.id}: " + "word " * 300)
    pipe.close()
    return path


def _replayer(path: Path, every: int = 32) -> Replayer:
    with RecordingReader.open(path) as r:
        rp = Replayer([unpack_event(e) for e in r.events()], shared_counter(), history_chunk=8)
    rp._provider_ids = ProviderIds(every)
    return rp


def _folded_afresh(rp: Replayer, turn: int, provider: str, window: int) -> tuple[bytes, str]:
    """The re-plan as a copy of the folded state builds it on its own: its fold from the first message."""
    pipe, req = rp.state_before(turn)
    built = pipe.build(req.get("bound", {}), pipe.config.with_overrides(window, None, None, provider))
    return built.serialized.body, json.dumps(built.trace["sections"], sort_keys=True, default=str)


def _replanned(rp: Replayer, turn: int, provider: str, window: int) -> tuple[bytes, str]:
    built = rp.replan(turn, Overrides(window=window, provider=provider))
    return built.serialized.body, json.dumps(built.trace["sections"], sort_keys=True, default=str)


def test_whatifs_at_other_providers_build_what_a_fold_from_the_start_builds(recording: Path) -> None:
    rp, ref = _replayer(recording), _replayer(recording)
    order = [TURNS - 1, 10, 120, 121, 40, TURNS - 1, 0, 77, 150, 3]
    renamed = 0
    for k, turn in enumerate(order):
        for provider in ("openai", "bedrock", "prefix", "anthropic"):
            window = 5_000 + 500 * k
            got = _replanned(rp, turn, provider, window)
            assert got == _folded_afresh(ref, turn, provider, window), (turn, provider)
            renamed += "with another id than the agent gave" in got[1]
    assert renamed > 0  # the session's ids do differ at the other providers
    assert rp.state_before(TURNS - 1)[0].history.on_disk() > 0  # its part behind the cut on disk


def test_a_later_whatif_at_another_provider_folds_nothing_again(
    recording: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folded: list[int] = []
    read_back: list[int] = []
    extend, read_range = AtProvider.extend, HistoryLog._read_range

    def counting_extend(
        self: AtProvider, messages: list[list[tuple[str, str]]], own: list[tuple[int, str, str]]
    ) -> None:
        folded.append(len(messages))
        extend(self, messages, own)

    def counting_read(self: HistoryLog, a: int, b: int) -> list[Message]:
        read_back.append(b - a)
        return read_range(self, a, b)

    monkeypatch.setattr(AtProvider, "extend", counting_extend)
    rp = _replayer(recording)
    last = TURNS - 1
    rp.replan(last)  # the turn's state, as the app's content worker prepares it
    monkeypatch.setattr(HistoryLog, "_read_range", counting_read)
    rp.replan(last, Overrides(window=9_000, provider="openai"))
    messages = len(rp.state_before(last)[0].history)
    assert sum(folded) == messages, folded  # the first folds the conversation once...
    assert sum(read_back) == 0, f"{sum(read_back)} messages read back from disk for their call ids"
    folded.clear()
    for window in (8_000, 7_000, 6_000):
        rp.replan(last, Overrides(window=window, provider="openai"))
    assert sum(folded) == 0, f"later what-ifs folded {folded} messages again"  # ...and later ones not
    rp.replan(TURNS // 2)  # its state (restoring a checkpoint reads its live window back)
    read_back.clear()
    rp.replan(TURNS // 2, Overrides(window=9_000, provider="openai"))
    assert 0 < sum(folded) <= 32, folded  # further back: from the nearest copy before it
    assert sum(read_back) == 0
