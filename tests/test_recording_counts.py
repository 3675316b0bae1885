"""The engine's token counts carried in a recording (engine/recording/counts.py) and simulate's use of them.

What must hold: a recording stores the counts its agent made, and they equal what a fresh tokenizer
computes; a recording without a table (every file written before it) simulates exactly as before; a
table that is corrupt, counted by another tokenizer, or wrong for some text is caught and not used,
with a note, and the figures stay the same.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engine.pipeline import Pipeline
from engine.recording.counts import (
    K_COUNTS,
    KEY_BYTES,
    CarriedCounter,
    CountTable,
    CountTableError,
    decode_table,
    encode_table,
)
from engine.recording.cpsession import RecordingReader, RecordingWriter
from engine.recording.journal import unpack_event
from engine.sim.simulate import SimSettings, simulate_events, simulate_file
from engine.tokens import TokenCounter

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "synthetic"
# Recordings made before the count table existed (the first engine's demo sessions).
V1 = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "v1_recordings"


def _record(path: Path, counter: TokenCounter, turns: int = 12) -> None:
    """A coding-agent loop recorded by the real engine (fixed clock: the same events every time)."""
    now = [1000.0]
    pipe = Pipeline(
        "deepseek-chat", "deepseek", 16_000, record=path, serve=False, counter=counter, clock=lambda: now[0]
    )
    pipe.identity("You are a careful coding agent.")
    pipe.add_tool("bash", "Run a shell command", {"type": "object", "properties": {"cmd": {"type": "string"}}})
    pipe.user("Fix the failing test in tests/test_io.py.")
    for t in range(turns):
        req = pipe.next_request()
        pipe.record_usage({"prompt_tokens": req.trace["final_tokens"], "completion_tokens": 30})
        now[0] += 5
        calls = pipe.assistant(f"Step {t}.", [{"id": f"c{t}", "name": "bash", "arguments": {"cmd": f"cat {t}"}}])
        body = "".join(f"line {t}.{i}: value = compute(x_{i}, y_{t})\n" for i in range(40 + 30 * (t % 3)))
        pipe.tool_result(calls[0].id, body)
    pipe.close()


def _events(path: Path) -> list[dict[str, Any]]:
    with RecordingReader.open(path) as r:
        return [unpack_event(e) for e in r.events()]


def _without_counts(src: Path, dst: Path) -> None:
    """The same events written as every recording before the table was (no counter given)."""
    with RecordingReader.open(src) as r, RecordingWriter(dst, dict(r.header)) as w:
        for ev in r.events():
            w.append(ev)


def _figures(report: Any) -> str:
    j = report.to_json(per_turn=True)
    j.pop("elapsed_s")
    j.pop("notes")
    j.pop("source")
    return json.dumps(j, sort_keys=True)


@pytest.fixture(scope="module")
def rec(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, TokenCounter]:
    counter = TokenCounter()
    path = tmp_path_factory.mktemp("counts") / "s.cpsession"
    _record(path, counter)
    return path, counter


def test_recording_carries_every_count_its_agent_made(rec: tuple[Path, TokenCounter]) -> None:
    path, counter = rec
    with RecordingReader.open(path) as r:
        table = r.token_counts()
    assert table is not None and table.tokenizer == counter.tokenizer.name
    made = {bytes.fromhex(sha[: 2 * KEY_BYTES]): n for (_, sha), n in counter._cache.items()}
    assert len(made) > 20
    assert dict(table.counts) == made


def test_carried_counts_equal_counts_a_fresh_tokenizer_computes(rec: tuple[Path, TokenCounter]) -> None:
    path, _ = rec
    with RecordingReader.open(path) as r:
        table = r.token_counts()
    assert table is not None
    fresh = TokenCounter()
    plain = simulate_events(_events(path), SimSettings(), counter=fresh)
    checked = 0
    for (_, sha), n in fresh._cache.items():
        carried = table.counts.get(bytes.fromhex(sha[: 2 * KEY_BYTES]))
        if carried is not None:
            assert carried == n, sha
            checked += 1
    assert checked > 20
    carried_counter = CarriedCounter(table)
    via_table = simulate_events(_events(path), SimSettings(), counter=carried_counter)
    assert _figures(via_table) == _figures(plain)
    assert carried_counter.carried > 20
    assert carried_counter.misses < carried_counter.carried  # only what-if texts are tokenized


def test_old_recording_without_counts_simulates_identically(
    rec: tuple[Path, TokenCounter], tmp_path: Path
) -> None:
    path, _ = rec
    old = tmp_path / "old.cpsession"
    _without_counts(path, old)
    with RecordingReader.open(old) as r:
        assert r.token_counts() is None
        assert r.finished
    assert _events(old) == _events(path)
    others = (SimSettings(window=8000), SimSettings(provider="anthropic", model="claude-sonnet-4"))
    for settings in (SimSettings(), *others):
        a, b = simulate_file(old, settings), simulate_file(path, settings)
        assert _figures(a) == _figures(b)
        assert a.notes == b.notes  # a table in use adds no note: the output is the same
    for demo in sorted(V1.glob("*.cpsession")):
        with RecordingReader.open(demo) as r:
            assert r.token_counts() is None


def test_corrupt_count_table_is_detected_and_not_used(rec: tuple[Path, TokenCounter], tmp_path: Path) -> None:
    path, _ = rec
    bad = tmp_path / "bad.cpsession"
    data = bytearray(path.read_bytes())
    with RecordingReader.open(path) as r:
        at = r._counts_at
    assert at is not None
    data[at + 40] ^= 0x55  # a payload byte of the @counts frame: its crc no longer matches
    bad.write_bytes(bytes(data))
    with RecordingReader.open(bad) as r:
        assert r.finished  # the events and the index are intact
        with pytest.raises(CountTableError, match="unreadable"):
            r.token_counts()
    report = simulate_file(bad, SimSettings())
    assert any("token counts" in n and "counted afresh" in n for n in report.notes)
    assert _figures(report) == _figures(simulate_file(path, SimSettings()))


@pytest.mark.parametrize("settings", [SimSettings(), SimSettings(window=8000)], ids=["recorded", "what-if"])
def test_a_wrong_count_is_caught_by_the_recorded_traces(
    rec: tuple[Path, TokenCounter], settings: SimSettings
) -> None:
    path, counter = rec
    with RecordingReader.open(path) as r:
        table = r.token_counts()
    assert table is not None
    # The first text counted (the identity, in every request) and one from the middle of the session:
    # one count off by one must be noticed.
    keys = [bytes.fromhex(sha[: 2 * KEY_BYTES]) for (_, sha) in counter._cache]
    plain = simulate_events(_events(path), settings, counter=TokenCounter())
    for key in (keys[0], keys[len(keys) // 2]):
        wrong = CountTable(table.tokenizer, {**table.counts, key: table.counts[key] + 1})
        report = simulate_events(_events(path), settings, counts=wrong)
        assert any("disagrees with its own traces" in n for n in report.notes), key
        assert _figures(report) == _figures(plain)


def test_a_table_from_another_tokenizer_is_not_used(rec: tuple[Path, TokenCounter]) -> None:
    path, _ = rec
    with RecordingReader.open(path) as r:
        table = r.token_counts()
    assert table is not None
    other = CountTable("chars/4", table.counts)
    report = simulate_events(_events(path), SimSettings(), counts=other)
    assert any("chars/4" in n and "counted afresh" in n for n in report.notes)
    assert _figures(report) == _figures(simulate_events(_events(path), SimSettings(), counter=TokenCounter()))


def test_an_import_under_a_what_if_checks_the_table_too(tmp_path: Path) -> None:
    # An import has `actual` events, so no column is built under the recorded settings at a what-if
    # window: the check builds the recorded settings on a sample of turns (here every turn).
    from engine.importers import load
    from engine.importers.ingest import ingest

    path = tmp_path / "imp.cpsession"
    pipe, _ = ingest(load(FIXTURES / "proxy_openai.jsonl"), path)
    pipe.close()
    with RecordingReader.open(path) as r:
        table = r.token_counts()
    assert table is not None
    events = _events(path)
    settings = SimSettings(window=4000, gates={"clear_tool_results": False})
    plain = simulate_events(events, settings, counter=TokenCounter())
    assert _figures(simulate_events(events, settings, counts=table)) == _figures(plain)
    for key in list(table.counts):
        wrong = CountTable(table.tokenizer, {**table.counts, key: table.counts[key] + 7})
        report = simulate_events(events, settings, counts=wrong)
        assert _figures(report) == _figures(plain)
        if any("disagrees" in n for n in report.notes):
            break
    else:
        pytest.fail("no wrong count in the table was caught")


def test_decode_table_refuses_what_the_writer_never_makes() -> None:
    good = {"k": K_COUNTS, "tokenizer": "cl100k_base", "keys": b"a" * 8 + b"b" * 8, "counts": [3, 4]}
    assert len(decode_table(good)) == 2
    bad: list[dict[str, Any]] = [
        {**good, "k": "@blobs"},
        {**good, "keys": b"a" * 15},
        {**good, "counts": [3]},
        {**good, "counts": [3, -1]},
        {**good, "counts": [3, "4"]},
        {**good, "counts": [3, True]},
        {**good, "keys": b"a" * 16},  # one hash listed twice
        {**good, "tokenizer": None},
    ]
    for obj in bad:
        with pytest.raises(CountTableError):
            decode_table(obj)


def test_a_shared_counter_carries_only_what_was_counted_after_the_writer_opened(tmp_path: Path) -> None:
    counter = TokenCounter()
    counter.count("text counted for another session before this recording started")
    before = encode_table(counter)
    assert before is not None and len(before["counts"]) == 1
    path = tmp_path / "s.cpsession"
    _record(path, counter, turns=3)
    with RecordingReader.open(path) as r:
        table = r.token_counts()
    assert table is not None
    assert before["keys"] not in table.counts
    assert len(table) == len(counter) - 1


def test_resumed_recording_has_no_table(rec: tuple[Path, TokenCounter], tmp_path: Path) -> None:
    path, _ = rec
    copy = tmp_path / "r.cpsession"
    copy.write_bytes(path.read_bytes())
    w = RecordingWriter.resume(copy)
    w.append({"k": "note", "text": "appended after a resume"})
    w.close()
    with RecordingReader.open(copy) as r:
        assert r.finished and r.token_counts() is None
        assert list(r.events())[-1]["k"] == "note"


def test_a_session_with_every_gate_closed_is_built_once_per_turn(tmp_path: Path) -> None:
    # Its pipeline column is its gates-closed column: the same build of the same inputs, so simulate
    # builds it once per turn, and both columns show the same figures.
    from engine.optimize.context import OptimizeLimits

    now = [1000.0]
    pipe = Pipeline(
        "deepseek-chat", "deepseek", 6_000, limits=OptimizeLimits.all_closed(), counter=TokenCounter(),
        clock=lambda: now[0],
    )
    pipe.identity("You are a careful coding agent.")
    pipe.user("Fix the failing test.")
    for t in range(10):
        pipe.next_request()
        now[0] += 5
        pipe.assistant(f"Step {t}.", [{"id": f"c{t}", "name": "bash", "arguments": {"cmd": f"cat {t}"}}])
        pipe.tool_result(f"c{t}", "".join(f"line {t}.{i}: x = f({i})\n" for i in range(80)))
    events = list(pipe.journal.events)
    builds = [0]
    # simulate builds every turn of every column through SimBuilder.build (a gates-closed build there
    # does not go through Pipeline.decide: engine/sim/blocks.py's closed_uncut): counted there.
    from engine.sim.blocks import SimBuilder

    real = SimBuilder.build

    def counting(self: SimBuilder, *a: Any, **k: Any) -> Any:
        builds[0] += 1
        return real(self, *a, **k)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(SimBuilder, "build", counting)
        report = simulate_events(events, SimSettings(), counter=TokenCounter())
        assert builds[0] == report.turns
        builds[0] = 0
        opened = simulate_events(events, SimSettings(gates={"drop_rounds": True}), counter=TokenCounter())
        # The what-if differs from gates closed and from the recorded settings: built three times.
        assert builds[0] == 3 * report.turns
    p, c = report.policies["pipeline"], report.policies["gates_closed"]
    assert p is not None and c is not None
    assert p.to_json(per_turn=True) == c.to_json(per_turn=True)
    assert (p.compactions or 0) == 0 and (c.cache_breaks or 0) > 0  # the budget trim ran in both
    oc = opened.policies["gates_closed"]
    assert oc is not None and oc.to_json(per_turn=True) == c.to_json(per_turn=True)


def test_each_distinct_build_is_checked_once(rec: tuple[Path, TokenCounter]) -> None:
    """At the recorded settings the recorded column is the pipeline column's own build: the count check
    holds that build against the trace once, not once per column that shows it (each turn: the
    pipeline build and the gates-closed one; three checks before, two of them of one object)."""
    from engine.sim.blocks import SimBuilt

    path, _ = rec
    checked: list[int] = []
    real = SimBuilt.check_counts

    def counting(self: SimBuilt, *a: Any, **k: Any) -> Any:
        checked.append(id(self))
        return real(self, *a, **k)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(SimBuilt, "check_counts", counting)
        report = simulate_file(path, SimSettings())
    assert report.turns > 0 and len(checked) == 2 * report.turns


def _explained(path: Path, fmt: str, ov: Any, monkeypatch: pytest.MonkeyPatch) -> tuple[str | None, int]:
    """`explain PATH` of the last turn as the command makes it (inspector.cli._explain_streamed), and how
    many characters were tokenized for it (TokenCounter._compute, the real one, is what tokenizes)."""
    import inspector.cli as cli

    seen = [0]
    real = TokenCounter._compute

    def compute(self: TokenCounter, text: str, sha: str) -> int:
        seen[0] += len(text)
        return real(self, text, sha)

    with monkeypatch.context() as m:
        m.setattr(TokenCounter, "_compute", compute)
        with RecordingReader.open(path) as r:
            out = cli._explain_streamed(r, r.turn_numbers()[-1], ov, fmt)
    return out, seen[0]


def test_explain_counts_from_the_recordings_table(
    rec: tuple[Path, TokenCounter], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """explain rebuilt turns n-1 and n with every text tokenized afresh: the whole folded history, ~90%
    of explaining the last turn of a long session (~70 of ~80 s CPU on a 1 GB, 27,000-turn one). It now
    counts from the recording's table, as simulate does; the output is the same bytes. Old explain:
    every character of the history tokenized here too."""
    from engine.whatif import Overrides

    path, _ = rec
    old = tmp_path / "old.cpsession"
    _without_counts(path, old)
    for fmt, ov in (("text", Overrides()), ("json", Overrides()), ("json", Overrides(6000, None, {"drop_rounds": False}, None))):
        want, fresh = _explained(old, fmt, ov, monkeypatch)
        got, carried = _explained(path, fmt, ov, monkeypatch)
        assert want is not None and got == want
        assert fresh > 5000 and carried < fresh / 10, (fmt, carried, fresh)


def test_explain_with_a_wrong_count_tokenizes_afresh(rec: tuple[Path, TokenCounter]) -> None:
    """A table that disagrees with the recorded traces of the turns explained is not used: the turn is
    explained again with every text tokenized (the same output as a recording without a table)."""
    import inspector.cli as cli
    from engine.sim.few_texts import FewTextsTokenizer
    from engine.whatif import Overrides

    path, counter = rec
    with RecordingReader.open(path) as r:
        table = r.token_counts()
        n = r.turn_numbers()[-1]
        assert table is not None
        fresh = cli._explain_once(r, n, Overrides(), "json", None)
        assert fresh is not None and cli._explain_once(r, n, Overrides(), "json", CarriedCounter(table)) == fresh
        key = bytes.fromhex(next(iter(counter._cache))[1][: 2 * KEY_BYTES])  # the identity: in every request
        wrong = CountTable(table.tokenizer, {**table.counts, key: table.counts[key] + 1})
        assert cli._explain_once(r, n, Overrides(), "json", CarriedCounter(wrong, FewTextsTokenizer())) is cli._DISAGREE
