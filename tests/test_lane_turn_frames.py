"""A steady express-lane turn's fixed work, counted in Python frames (issue 12: a steady turn's cost is
mostly a few hundred small calls, each run cold once a turn).

- The lane makes a steady turn's request in its own pass (lane_request: the history's run extended and
  the body spliced in one frame, not Serializer.grown -> _appended, request_of and _spliced, nor
  _section's two walks of the section's runs), and its pairing check reads the pairing memo in line (no
  _info frame); the lane's history tuple is not passed through typing.cast (a Python call).
- record_usage reads an OpenAI usage's details without a _nested frame and, outside a recovery, does not
  call turn_succeeded; a reply folded with nothing pending does not call _close_pending.
- Serializer.grown gives what _section gives, also when the run it is told about is no longer the
  section's most recent one (it then goes through _section).
"""

from __future__ import annotations

from typing import Any

from engine.artifacts import Message, Text
from engine.assembly import Measure
from engine.providers.openai import serializer
from engine.sections import history_section
from engine.tokens import CharTokenizer, TokenCounter
from tests.support.turn_work import python_frames, steady_pipe, steady_turn


def _usage(t: int) -> Any:
    from openai.types import CompletionUsage
    from openai.types.completion_usage import PromptTokensDetails

    return CompletionUsage(
        prompt_tokens=900 + t,
        completion_tokens=40,
        total_tokens=940 + t,
        prompt_tokens_details=PromptTokensDetails(cached_tokens=800),
    )


def test_a_steady_lane_turn_skips_the_dispatch_and_helper_frames() -> None:
    pipe = steady_pipe(_usage)
    seen = python_frames(steady_turn(pipe, _usage(99)), basename=True)
    # The lane made this turn's request in its own pass (engine/providers/lane_request.py), not through
    # the serializer's general steps (grown -> _appended, request_of, _spliced).
    assert seen[("pipeline_express.py", "turn")] == 1 and seen[("lane_request.py", "lane_request")] == 1, seen
    avoided = {
        ("typing.py", "cast"),
        ("section_runs.py", "_section"),
        ("section_runs.py", "grown"),
        ("section_runs.py", "_appended"),
        ("request_body.py", "request_of"),
        ("request_body.py", "_spliced"),
        ("tool_pairing.py", "_info"),
        ("feedback.py", "_nested"),
        ("stats.py", "turn_succeeded"),
        ("pipeline_fold.py", "_close_pending"),  # (the reply's fold; the request's closes the results)
    }
    ran = {k: n for k, n in seen.items() if k in avoided and not (k[1] == "_close_pending" and n == 1)}
    assert not ran, ran
    pipe.close()


def _hist(n: int) -> tuple[Message, ...]:
    return tuple(Message("user" if i % 2 else "assistant", (Text(f"message {i}"),)) for i in range(n))


def test_grown_is_section_also_when_its_run_is_not_the_newest() -> None:
    m = Measure(TokenCounter(CharTokenizer()))
    tok = m.counter.tokenizer.name
    base = _hist(20)
    a, b = serializer(), serializer()
    prev_a = a._section(history_section(base, ()), frozenset(), tok, m, True)
    prev_b = b._section(history_section(base, ()), frozenset(), tok, m, True)
    # Another history of the same section serialized in between: prev is no longer the newest run.
    other = _hist(5)
    a._section(history_section(other, ()), frozenset(), tok, m, True)
    b._section(history_section(other, ()), frozenset(), tok, m, True)
    longer = history_section((*base, *_hist(23)[20:]), ())
    got = a.grown(longer, prev_a, frozenset(), tok, m)
    want = b._section(longer, frozenset(), tok, m, True)
    assert (got.frags, got.shas, got.keys, got.sha) == (want.frags, want.shas, want.keys, want.sha)
    # And as the lane uses it: the newest run extended in place.
    more = history_section((*longer.items, *_hist(25)[23:]), ())
    got2 = a.grown(more, got, frozenset(), tok, m)
    want2 = b._section(more, frozenset(), tok, m, True)
    assert (got2.frags, got2.shas, got2.sha) == (want2.frags, want2.shas, want2.sha)
    assert prev_b.sha == prev_a.sha


def test_a_steady_lane_turn_journals_its_events_without_the_helper_frames() -> None:
    # The agent's per-turn calls (tool_result, assistant, record_usage) and the lane's request event fold
    # and journal in line, not through Pipeline._emit; a journaled text is hashed and stored in
    # Pipeline._blob, not through Journal.blob; the lane asks the emergent list for due items only when
    # it holds any. Of the four events only the reply's goes through fold's dispatch: the tool result's
    # part, the lane's request and the usage run their fold branches directly (the usage's as
    # _learn_usage, with the Usage record_usage normalized); test_steady_turns_fold_as_a_replay_does holds
    # the state they leave to be what folding the journal gives.
    pipe = steady_pipe(_usage)
    seen = python_frames(steady_turn(pipe, _usage(99)), basename=True)
    assert seen[("pipeline_express.py", "turn")] == 1, seen
    assert seen[("pipeline_fold.py", "fold")] == 1, seen
    assert seen[("pipeline_fold.py", "_learn_usage")] == 1, seen
    assert ("feedback.py", "normalize_usage") in seen and seen[("feedback.py", "normalize_usage")] == 1, seen
    avoided = {("pipeline_fold.py", "_emit"), ("journal.py", "blob"), ("catalog.py", "due")}
    ran = {k: n for k, n in seen.items() if k in avoided}
    assert not ran, ran
    pipe.close()


def test_a_blob_journaled_in_line_is_the_journals_own() -> None:
    # Pipeline._blob hashes and stores the text as Journal.blob does: the same hash, one blob event for
    # a text journaled twice, and the text readable by its hash (through set_content, which journals
    # its text by Pipeline._blob).
    from engine.hashing import sha256_hex
    from engine.pipeline import Pipeline
    from engine.types import SectionKind

    pipe = Pipeline("gpt-4o", "openai", 200_000, counter=TokenCounter(CharTokenizer()), serve=False)
    pipe.add_source("env", SectionKind.CONTEXT, text="first")
    pipe.set_content("env", "some tool output")
    (ev,) = [e for e in pipe.journal.events if e["k"] == "content"]
    h = ev["h"]
    assert h == sha256_hex("some tool output") == pipe.journal.blob("some tool output")
    pipe.set_content("env", "some tool output")
    blobs = [ev for ev in pipe.journal.events if ev["k"] == "blob" and ev["h"] == h]
    assert blobs == [{"k": "blob", "h": h, "data": "some tool output"}]
    assert pipe.journal.blobs[h] == "some tool output"
    pipe.close()


def test_tail_moved_compares_the_sections_before_the_history_by_identity() -> None:
    # The lane carries the last placement's markers only when every section but the history is the very
    # object of the turn that placed them: an equal copy is not enough (the rule is run then).
    from types import SimpleNamespace

    from engine import pipeline_express_marks as ex
    from engine.assembly import Section
    from engine.types import CacheScope, Priority, SectionKind

    def sec(sid: str, kind: SectionKind, items: tuple[Any, ...]) -> Section:
        return Section(sid, sid, kind, CacheScope.NONE, Priority.NORMAL, items)

    ident = sec("identity", SectionKind.IDENTITY, (Text("you are an agent"),))
    hist = sec("history", SectionKind.HISTORY, _hist(6))
    prev = (ident, sec("history", SectionKind.HISTORY, _hist(4)))
    policy = SimpleNamespace(min_cacheable_tokens=1)
    entry = SimpleNamespace(cum_before=5, policy=policy, task_marker=False, task_fits=True, task=None)
    m = SimpleNamespace(placed=[entry], section=lambda s: 100)
    k = ex._Marks(entry, False, prev, frozenset(), [], ())
    assert ex._tail_moved(k, (ident, hist), 1, m, True)
    copy = sec("identity", SectionKind.IDENTITY, (Text("you are an agent"),))
    assert copy == ident and copy is not ident
    assert not ex._tail_moved(k, (copy, hist), 1, m, True)
    # A section after the history (none in the lane's assemblies) is held to the same rule.
    tail = sec("notes", SectionKind.IDENTITY, ())
    k2 = ex._Marks(entry, False, (*prev, tail), frozenset(), [], ())
    assert ex._tail_moved(k2, (ident, hist, tail), 1, m, True)
    assert not ex._tail_moved(k2, (ident, hist, sec("notes", SectionKind.IDENTITY, ())), 1, m, True)
