"""Work a held turn no longer repeats (the sixteenth turn session), each checked against what it replaced.

- cost_aware keeps its remembered cut and lineage under hash((limits, settings)), hashed once per build
  (and not again while the build is under the very same objects): looking the memos up by the pair ran
  the two frozen dataclasses' generated __hash__ eight times a held turn. A colliding number must never
  give a wrong answer: a lineage keeps its pair and is used only under an equal one, a remembered cut
  holds only by its own checks (tested with every pair forced onto one number, against the reference
  pipeline that carries nothing).
- The body hash's mark (where the last message ends, for the next body to resume from) is found from
  the last body's envelope tail, not by searching backwards over it every request; any mark gives the
  same digest.
- A folded tool result or user text takes its text from the blob just journaled, not from the journal's
  store (two Python calls each).

The counting tests fail on 73b6938 (the pair hashed 8 times a turn; rfind every request; the store read
for every result and text)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from engine.optimize import OptimizeLimits
from engine.pipeline import Pipeline
from engine.policy import cost_aware
from engine.policy.settings import PolicySettings
from engine.providers import request_body
from engine.providers.base import Serializer
from engine.providers.policy import OPENAI
from engine.providers.request_body import _messages_end
from engine.recording.blob_store import BlobStore
from engine.tokens import TiktokenTokenizer
from tests.support.counting import count_calls
from tests.test_turn_carry import _pipe, reuses_counted
from tests.test_turn_lineage import _feed


def _start(pipe: Pipeline) -> None:
    pipe.identity("You are a careful coding agent.")
    pipe.add_tool("bash", "Run", {"type": "object", "properties": {"n": {"type": "integer"}}})
    pipe.user("Fix the bug.")


def _turn(pipe: Pipeline, t: int) -> Any:
    _feed(pipe, "round", t, t)
    req = pipe.next_request()
    pipe.record_usage({"input_tokens": req.trace["final_tokens"] + t % 7, "output_tokens": 30 + t % 50})
    return req


def _compacted(window: int = 4_001) -> tuple[Pipeline, int]:
    pipe = _pipe(window, "cost_aware", False, True)
    _start(pipe)
    t = 0
    while pipe.compaction.compactions == 0:
        _turn(pipe, t)
        t += 1
        assert t < 200
    return pipe, t


def _count_hashes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    n = [0]
    for cls in (OptimizeLimits, PolicySettings):
        real = cls.__hash__

        def counted(self: Any, real: Any = real) -> int:
            n[0] += 1
            return int(real(self))

        monkeypatch.setattr(cls, "__hash__", counted)
    return n


def test_a_held_turn_hashes_its_limits_and_settings_once_per_config(monkeypatch: pytest.MonkeyPatch) -> None:
    """20 held turns after a compaction under one config: the pair is hashed for the first of them only
    (73b6938: 201 generated __hash__ calls in these 20 turns)."""
    pipe, t = _compacted()
    n = _count_hashes(monkeypatch)
    # (A build that does not extend the one before it, one that compacts, keys the stable rules' carry
    # by the limits: a look-up and a store, at most.)
    keyed = count_calls(monkeypatch, cost_aware, "_stable_key")
    for k in range(20):
        _turn(pipe, t + k)
    assert keyed[0] < 10  # most of these turns were held
    assert n[0] <= 2 + 2 * keyed[0]
    # A new config (set_window folds a config event: new, equal limits and settings objects) is hashed
    # again once, then not.
    pipe.set_window(pipe.config.window + 150)
    before, keyed_before = n[0], keyed[0]
    for k in range(10):
        _turn(pipe, t + 20 + k)
    assert n[0] - before <= 2 + 2 * (keyed[0] - keyed_before)
    pipe.close()


def _other(pipe: Pipeline) -> Any:
    """A what-if's config (simulate's second column): another revision and other limits, the same window."""
    cfg = pipe.config
    return replace(
        cfg,
        policy=PolicySettings.parse("cost_aware:revision=1"),
        limits=replace(cfg.limits, spill_threshold=cfg.limits.spill_threshold + 7),
    )


def _two_columns(pipe: Pipeline, turns: int, big: bool = True) -> list[tuple[bytes, bytes, str]]:
    """Each turn a what-if build under another config, then the live request: every output kept. `big`:
    now and then a tool output over the spill threshold (the stable rules spill it, every build after)."""
    _start(pipe)
    other = _other(pipe)
    out = []
    for t in range(turns):
        _feed(pipe, "round", t, t)
        if big and t % 9 == 5:
            _feed(pipe, "big", t, t)
        what_if = pipe.build({}, config=other)
        req = pipe.next_request()
        out.append((what_if.serialized.body, req.bytes, json.dumps(req.trace, sort_keys=True, default=repr)))
        pipe.record_usage(
            {"input_tokens": int(req.trace["final_tokens"] * 1.1), "output_tokens": 40 + t % 90}
        )
    return out


@settings(max_examples=12, deadline=None)
@given(window=st.sampled_from((2_401, 3_001, 4_001, 6_001)), turns=st.integers(20, 60))
def test_colliding_slots_never_give_a_wrong_answer(window: int, turns: int) -> None:
    """Every (limits, settings) pair forced onto one number: the live column and a what-if column under
    another revision and other limits overwrite each other's lineage and share the remembered cuts, and
    every request is still the reference's (a pipeline that carries nothing)."""
    real = cost_aware._slot_key
    cost_aware._slot_key = lambda carry, limits, settings: 0  # type: ignore[assignment]
    try:
        fast = _pipe(window, "cost_aware", False, True)
        got = _two_columns(fast, turns)
    finally:
        cost_aware._slot_key = real  # type: ignore[assignment]
    slow = _pipe(window, "cost_aware", False, False)
    assert got == _two_columns(slow, turns)
    assert fast.compaction == slow.compaction
    assert list(fast.journal.events) == list(slow.journal.events)
    fast.close()
    slow.close()


def _extended(window: int, turns: int, collide: bool) -> int:
    """Builds of _two_columns that extended the build before them (of their own column)."""
    real = cost_aware._slot_key
    if collide:
        cost_aware._slot_key = lambda carry, limits, settings: 0  # type: ignore[assignment]
    try:
        with reuses_counted(cost_aware, "_extended_stable") as hits:
            _two_columns(_pipe(window, "cost_aware", False, True), turns, big=False)
    finally:
        cost_aware._slot_key = real  # type: ignore[assignment]
    return hits[0]


def test_two_columns_keep_their_own_slots() -> None:
    """Without collisions the live column and the what-if keep a lineage each, and most of 40 turns'
    80 builds extend their column's last one; forced onto one slot, each build finds the other column's
    lineage and extends nothing (what the collision test's outputs were compared through)."""
    apart, together = _extended(4_001, 40, False), _extended(4_001, 40, True)
    assert apart >= 60
    assert together == 0


def test_the_body_mark_is_found_without_searching(monkeypatch: pytest.MonkeyPatch) -> None:
    """30 appending turns search for the last message's end at most once (73b6938: 30 times)."""
    pipe, t = _compacted(4_001)  # (an odd window: the OpenAI serializer, its tools after the messages)
    searched = count_calls(monkeypatch, request_body, "_messages_end")
    for k in range(30):
        _turn(pipe, t + k)
    assert searched[0] <= 1
    pipe.close()


frag = st.binary(min_size=1, max_size=12)


@settings(max_examples=300, deadline=None)
@example(
    bodies=[([b"\x00"], b"\x01"), ([b"\x01", b"\x01"], b"")]
)  # the shortcut stopping short (found once in ~10 runs)
@given(
    bodies=st.lists(
        st.tuples(st.lists(frag, min_size=0, max_size=5), st.binary(max_size=10)), min_size=1, max_size=6
    )
)
def test_the_body_mark_is_where_the_last_message_ends(bodies: list[tuple[list[bytes], bytes]]) -> None:
    """Whatever the bodies (messages then a tail, tails repeated or not, fragments found in the tail):
    the mark is 0 without messages, else the end of an occurrence of the last fragment: right before
    the last body's tail when this body ends with it and the fragment lies there (the shortcut), else
    the search's own answer whenever the search would not find the fragment inside the tail; the digest
    resumed from any mark is the body's sha256. (The shortcut can stop short of the messages' end when
    the last tail is also a suffix of this body's messages, e.g. tail b"\x01" then messages ending
    b"\x01\x01" with no tail: an earlier mark re-hashes more next turn, never a wrong digest.)"""
    ser = Serializer(OPENAI, *[None] * 4)  # type: ignore[arg-type]  (the hooks are not called)
    for msgs, tail in bodies:
        body = b"[" + b"".join(msgs) + tail
        remembered = ser._tail
        mark = ser._messages_end_of(body, msgs)
        if not msgs:
            assert mark == 0
        else:
            last = msgs[-1]
            assert mark == 0 or body[mark - len(last) : mark] == last
            found = _messages_end(body, msgs)
            before = len(body) - len(remembered) if remembered is not None else -1
            shortcut = (
                remembered is not None
                and body.endswith(remembered)
                and before >= len(last)
                and body.startswith(last, before - len(last))
            )
            if shortcut:
                assert mark == before
            elif body.rfind(last) + len(last) <= len(body) - len(tail):  # not found inside the tail
                assert mark == found
        assert ser._body_hash.hexdigest(body, mark) == hashlib.sha256(body).hexdigest()


def test_a_folded_result_or_text_is_not_read_back_from_the_store(monkeypatch: pytest.MonkeyPatch) -> None:
    """The text folded into a part is the one journaled under its hash: an assistant message's text (its
    calls come from the call hint) and a tool result's (73b6938 read both back: 40 reads in 20 rounds)."""
    pipe, t = _compacted()
    reads = count_calls(monkeypatch, BlobStore, "__getitem__")
    for k in range(20):
        _turn(pipe, t + k)
    assert reads[0] == 0
    for m in pipe.history.since(0):
        for p in m.parts:
            text = getattr(p, "text", None) if hasattr(p, "text") else getattr(p, "content", None)
            if isinstance(text, str) and text:
                assert text in dict(pipe.journal.blobs.items()).values()
    pipe.close()


def test_the_tokenizer_counts_through_its_counter_once_loaded() -> None:
    """After the first count, `count` is the loaded counter itself (one Python call a count fewer), and
    counts what the method counted."""
    tok = TiktokenTokenizer()
    texts = ["hello world", "def f():\n\treturn 0  \n", "naïve café 中文", ""]
    first = [TiktokenTokenizer.count(tok, x) for x in texts]
    assert tok.count is tok._encode
    assert [tok.count(x) for x in texts] == first == [TiktokenTokenizer().count(x) for x in texts]
