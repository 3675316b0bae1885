"""Content search over a live agent (`/` while attached, `cp-inspect find PID TEXT`): the turns received
are read in one pass (content_search.JournalStream: a fold of the journal as received, each request built
in place), going on from where it stopped as turns arrive, and every turn's counts are the ones the
source's own turn-by-turn reading (a re-plan a turn) gives."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from inspector.content_search import ContentScan, JournalStream, stream_for
from tests.support.probe_agent import T, one_turn, serving_pipeline
from tests.support.stream_builds import record_builds

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")


def _turns(pipe: Any, first: int, last: int) -> None:
    for t in range(first, last):
        # A text sent first at turn 6 (the result of step 5), again at 10, and a marker in every turn's result from 12 on.
        result = (
            f"output of step {t}" + (" NEEDLE" if t in (5, 9) else "") + (" tail-mark" if t >= 12 else "")
        )
        one_turn(pipe, t, result)


def _received(src: Any, turn: int) -> None:
    give_up = time.monotonic() + T
    while src._seen_turns < turn:
        assert time.monotonic() < give_up, f"turn {turn} never arrived ({src._seen_turns})"
        time.sleep(0.02)


class _Builds(list[int]):
    """A 1 for each request built by a pipeline other than the agent's (its probe answers from the
    journal: the builds are the inspector's), until `stop`."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, agent: Any) -> None:
        super().__init__()
        from engine.pipeline import Pipeline

        self.monkeypatch, self.real = monkeypatch, Pipeline.build
        real = self.real

        def counted(pipe: Any, *a: Any, **kw: Any) -> Any:
            if pipe is not agent:
                self.append(1)
            return real(pipe, *a, **kw)

        monkeypatch.setattr(Pipeline, "build", counted)

    def stop(self) -> None:
        from engine.pipeline import Pipeline

        self.monkeypatch.setattr(Pipeline, "build", self.real)


def _stepped(text: str, src: Any, turns: list[int]) -> ContentScan:
    scan = ContentScan(text, src)  # no stream: the source's random access, turn by turn
    scan.scan_to(turns, lambda: False)
    return scan


def _as_stepped(got: ContentScan, text: str, src: Any, turns: int) -> None:
    """`got`, a scan of `text` over the first `turns` turns, counts and changes as a scan turn by turn
    does (the source's random access), and found `text` in some turn, every turn read."""
    want = _stepped(text, src, list(range(turns)))
    assert got.counts == want.counts and got.changes == want.changes, text
    assert any(got.counts) and got.unreadable == 0, text


@pytest.mark.parametrize("fold", [True, False])
def test_live_search_reads_the_journal_once_and_keeps_up(
    monkeypatch: pytest.MonkeyPatch, rtdir: Path, fold: bool
) -> None:
    from inspector.sources.live import LiveSource

    pipe = serving_pipeline(monkeypatch, rtdir)
    pipe.probe.fold_coalesce = 0.0
    _turns(pipe, 0, 2)
    src = LiveSource(os.getpid(), timeout=T, backfill_idle=None, fold=fold)
    reader = threading.Thread(target=lambda: [None for _ in src.follow()], daemon=True)
    reader.start()
    try:
        _turns(pipe, 2, 14)
        _received(src, 13)
        stream = stream_for(src)
        assert isinstance(stream, JournalStream)
        scan = ContentScan("needle", src, stream)
        scan.scan_to(list(range(14)), lambda: False)
        assert [(c.turn, c.kind, c.count) for c in scan.changes] == [(6, "enters", 1), (10, "enters", 2)]
        folded = stream.at
        assert folded > 0 and stream.past == 13
        # Turns arrive; the next jump goes on from where the stream stopped, not from the first event.
        # On the fold stream the source's fold builds each arriving turn for its trace, and hands the
        # build to the stream (LiveFoldStream.index_builds): the stream builds none of them again (it
        # built each a second time: 0.7 ms a turn at 1,000 turns).
        builds = _Builds(monkeypatch, pipe)
        _turns(pipe, 14, 20)
        _received(src, 19)
        scan.scan_to(list(range(20)), lambda: False)
        assert scan.scanned == 20
        if fold:
            assert stream.past == 13 and stream.at == folded, "the fold's builds, not the stream's"
            assert sorted(stream.turns) == list(range(20))
            assert len(builds) == 6, (len(builds), "one build a turn: the fold's")
        else:
            assert stream.at > folded and stream.past == 19
        builds.stop()
        for text, got in (("needle", scan), ("tail-mark", None), ("## user", None), ("step 3", None)):
            if got is None:
                got = ContentScan(text, src, JournalStream(src))
                got.scan_to(list(range(20)), lambda: False)
            _as_stepped(got, text, src, 20)
    finally:
        src.close()
        pipe.close()
        reader.join(T)


def test_the_first_search_after_attach_builds_no_turn(monkeypatch: pytest.MonkeyPatch, rtdir: Path) -> None:
    """Attached as `cp-inspect attach` attaches (open_live: the fold stream), the turns the source's fold
    builds for their traces are indexed as they arrive (content_search.arrival_index): the first `/`
    builds none of them again (it built every turn received in a pipeline of its own: ~0.6 ms a turn),
    nor does a second query or one after Esc (the index is the source's, kept); counts as turn by turn."""
    from inspector.sources.live_recording import open_live

    pipe = serving_pipeline(monkeypatch, rtdir)
    pipe.probe.fold_coalesce = 0.0
    _turns(pipe, 0, 2)
    src, why = open_live(os.getpid(), timeout=T, backfill_idle=None)
    assert why is None and src.search_index is not None
    reader = threading.Thread(target=lambda: [None for _ in src.follow()], daemon=True)
    reader.start()
    try:
        _turns(pipe, 2, 14)
        _received(src, 13)
        give_up = time.monotonic() + T
        while sorted(src.search_index.turns) != list(range(14)):  # (the fold's builds, as they come)
            assert time.monotonic() < give_up, sorted(src.search_index.turns)
            time.sleep(0.02)
        builds = _Builds(monkeypatch, pipe)
        scan = ContentScan("needle", src)
        scan.open_for(src)
        assert scan.stream is src.search_index
        scan.scan_to(list(range(14)), lambda: False)
        assert [(c.turn, c.kind, c.count) for c in scan.changes] == [(6, "enters", 1), (10, "enters", 2)]
        scan.close()  # (Esc: the source's index stays, and goes on taking the fold's builds)
        _turns(pipe, 14, 20)
        _received(src, 19)
        again = ContentScan("tail-mark", src)
        again.open_for(src)
        again.scan_to(list(range(20)), lambda: False)
        assert len(builds) == 6, (len(builds), "one build a turn, the fold's: none for the searches")
        builds.stop()
        for text, got in (("needle", None), ("tail-mark", again)):
            if got is None:
                got = ContentScan(text, src)
                got.open_for(src)
                got.scan_to(list(range(20)), lambda: False)
            _as_stepped(got, text, src, 20)
    finally:
        src.close()
        pipe.close()
        reader.join(T)


def test_find_takes_a_running_agents_pid(monkeypatch: pytest.MonkeyPatch, rtdir: Path) -> None:
    """`cp-inspect find PID TEXT`: the agent's turns so far, through its probe (the agent is this test
    process), listed as for a recording; exit 1 when no turn sent it, as for a recording."""
    import json

    from typer.testing import CliRunner

    from inspector.cli import app

    pipe = serving_pipeline(monkeypatch, rtdir)
    try:
        _turns(pipe, 0, 14)
        runner = CliRunner()
        r = runner.invoke(app, ["find", str(os.getpid()), "Needle"])
        assert r.exit_code == 0, r.output
        lines = r.output.splitlines()
        assert (
            lines[0]
            == f"'Needle' in what agent {os.getpid()} sent (14 turns): it enters or leaves the prompt on 2 turns"
        )
        assert lines[1].startswith("  turn  6  enters  history  (1 match)") and "NEEDLE" in lines[1], lines
        assert lines[2].startswith("  turn 10  again   history  (1 -> 2)"), lines
        got = json.loads(runner.invoke(app, ["find", str(os.getpid()), "tail-mark", "--json"]).output)
        assert got["turns"] == 14 and [(c["turn"], c["kind"]) for c in got["changes"]] == [(13, "enters")]
        r = runner.invoke(app, ["find", str(os.getpid()), "zqxjw"])
        assert r.exit_code == 1 and "is in none of the 14 turns" in r.output, r.output
    finally:
        pipe.close()


async def test_slash_while_attached_reads_the_journal_once(
    monkeypatch: pytest.MonkeyPatch, rtdir: Path
) -> None:
    """`/` in the inspector attached to a running agent: the worker's scan streams the journal received
    (JournalStream), finds where the text came in, and `f` after more turns goes on from there."""
    from textual.widgets import Input

    from inspector.app import InspectorApp
    from inspector.screens import SearchScreen
    from inspector.sources.live import LiveSource
    from panels.markup_line import MarkupLine

    pipe = serving_pipeline(monkeypatch, rtdir)
    pipe.probe.fold_coalesce = 0.0
    _turns(pipe, 0, 8)
    src = LiveSource(os.getpid(), timeout=T, fold=True)
    app = InspectorApp(src, theme="cp-dark")

    def bar() -> str:
        line = app.query_one("#search-bar", MarkupLine)
        return str(line._content.plain) if line.display else ""

    async def until(pilot: Any, done: Any) -> None:
        give_up = time.monotonic() + T
        while not done() and time.monotonic() < give_up:
            await pilot.pause(0.05)

    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await until(pilot, lambda: len(app.timeline) == 8 and app.index >= 0)
            await pilot.press("home")
            await pilot.pause(0.2)  # (not settle: the reader's worker follows the agent until the end)
            await pilot.press("slash")
            await pilot.pause()
            assert isinstance(app.screen, SearchScreen)
            app.screen.query_one("#search-input", Input).value = "needle"
            await pilot.press("enter")
            await until(pilot, lambda: "enters" in bar())
            assert "turn 6: 'needle' enters the prompt in history" in bar(), bar()
            scan = app.search.scan
            assert scan is not None
            assert isinstance(scan.stream, JournalStream) and scan.stream.past >= 6
            _turns(pipe, 8, 12)
            await until(pilot, lambda: len(app.timeline) == 12)
            await pilot.press("f")
            await until(pilot, lambda: "comes again" in bar())
            assert "turn 10: 'needle' comes again in history (1 -> 2 matches)" in bar(), bar()
            assert scan.stream is not None and scan.unreadable == 0
            # The turns that came after the first jump are the source's fold's builds (it builds each
            # for its trace), not built again by the stream (LiveFoldStream.index_builds).
            assert scan.stream.past < 8 and set(range(8, 12)) <= set(scan.stream.turns)
            assert src.on_build is not None
            await pilot.press("escape")  # (the search bar cleared: the fold no longer hands its builds)
            await until(pilot, lambda: app.search.scan is None)
            assert src.on_build is None
    finally:
        pipe.close()


def test_a_followed_recording_is_read_in_one_pass_too() -> None:
    """`replay FILE --follow` (a recording another process still writes): its journal as read so far,
    streamed as a live agent's is (it was read turn by turn, a re-plan a turn), counts equal."""
    from inspector.sources.file import FileSource

    demo = Path(__file__).resolve().parents[1] / "demo_sessions" / "scout-anthropic.cpsession"
    src = FileSource(demo, follow=True)
    try:
        turns = [t["turn"] for chunk in src.load_chunks() for t in chunk.traces]
        assert len(turns) == 40
        for text in ("latch", "list_files", "## user"):
            stream = stream_for(src)
            assert isinstance(stream, JournalStream)
            got = ContentScan(text, src, stream)
            got.scan_to(turns, lambda: False)
            want = _stepped(text, src, turns)
            assert got.counts == want.counts and got.changes == want.changes and any(got.counts), text
            assert stream.past == turns[-1]
    finally:
        src.close()


@pytest.mark.parametrize("follow", [False, True])
def test_a_new_query_goes_on_with_the_last_ones_pass(follow: bool) -> None:
    """A new text searched after another went over the session from turn 0 again, building every turn
    again. Now it takes the earlier query's stream (ContentScan.take_stream): the turns that one built are
    counted from the items the stream kept, none built twice, and the counts are the turn-by-turn
    reading's, for texts within an item, across a section's items (a line break) and sent nowhere."""
    from inspector.content_search import SentStream
    from inspector.sources.file import FileSource

    demo = Path(__file__).resolve().parents[1] / "demo_sessions" / "scout-anthropic.cpsession"
    src = FileSource(demo, follow=follow)
    try:
        turns = [t["turn"] for chunk in src.load_chunks() for t in chunk.traces]
        first = ContentScan("latch", src)
        first.open_for(src)
        stream = first.stream
        assert isinstance(stream, JournalStream if follow else SentStream)
        built = record_builds(stream)
        first.scan_to(turns[:25], lambda: False)
        assert built == turns[:25]
        earlier = first
        for text in ("list_files", "## user\n\n", "zqxjw", "latch"):
            scan = ContentScan(text, src)
            scan.take_stream(earlier)
            earlier.close()  # (the app closes the last query's scan: the stream is the new one's now)
            scan.scan_to(turns, lambda: False)
            want = _stepped(text, src, turns)
            assert scan.counts == want.counts and scan.changes == want.changes, text
            earlier = scan
        assert built == turns, "every turn built once, over five queries"
        assert any(earlier.counts) and earlier.stream is stream
        earlier.close()
    finally:
        src.close()


class _FailsOn:
    """A spill backend whose writes of a text holding `marker` fail (a full disk, for some writes)."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def put(self, key: str, data: str) -> str:
        if self.marker in data:
            raise OSError("no space left on the spill volume")
        return f"spill://{key[:16]}"

    def get(self, key: str) -> str:
        raise KeyError(key)


def test_a_spill_failure_arriving_later_does_not_rebuild_the_pass(
    monkeypatch: pytest.MonkeyPatch, rtdir: Path
) -> None:
    """`/` while attached, then the agent goes on and one of its spill writes fails: the stream's pipeline
    was made again from the first event (every turn built again, 2x a long session's pass on each such
    failure). Now it fails that write from the turn that lists it, and goes on; the counts are the
    turn-by-turn reading's (the replayer's, which fails it from the first turn on)."""
    from engine.optimize import OptimizeLimits
    from engine.pipeline import Pipeline
    from inspector.sources.live import LiveSource

    pipe = serving_pipeline(
        monkeypatch, rtdir, spill=_FailsOn("DISKFULL"), limits=OptimizeLimits(spill_threshold=200)
    )
    pipe.probe.fold_coalesce = 0.0

    def turns(first: int, last: int) -> None:
        for t in range(first, last):
            # Large outputs are spilled (NEEDLE, past the reference's preview, is then not sent); the one
            # of step 12 cannot be written: sent whole, NEEDLE with it.
            big = f"output of step {t}\n" + "a line of the build log\n" * 120
            one_turn(pipe, t, big + (" DISKFULL" if t == 12 else "") + (" NEEDLE" if t in (4, 12) else ""))

    turns(0, 2)
    src = LiveSource(os.getpid(), timeout=T, backfill_idle=None, fold=True)
    reader = threading.Thread(target=lambda: [None for _ in src.follow()], daemon=True)
    reader.start()
    try:
        turns(2, 10)
        _received(src, 9)
        # The stream's own builds (stream_for's would take the source fold's for the turns to come:
        # test_live_search_reads_the_journal_once_and_keeps_up).
        stream = JournalStream(src)
        scan = ContentScan("needle", src, stream)
        scan.scan_to(list(range(10)), lambda: False)
        assert scan.changes == [] and stream.fail_keys == frozenset()  # step 4's NEEDLE went out spilled
        made = stream.pipe
        turns(10, 20)
        _received(src, 19)
        assert src.replayer(19).fail_keys, "the agent's journal lists the failed write"
        builds: list[int] = []
        real_build = Pipeline.build

        def counted(self: Any, *a: Any, **kw: Any) -> Any:
            builds.append(1)
            return real_build(self, *a, **kw)

        monkeypatch.setattr(Pipeline, "build", counted)
        scan.scan_to(list(range(20)), lambda: False)
        monkeypatch.setattr(Pipeline, "build", real_build)
        assert stream.pipe is made and len(builds) == 10, (len(builds), "turns 10-19, each built once")
        assert [(c.turn, c.kind) for c in scan.changes] == [(13, "enters")]
        want = _stepped("needle", src, list(range(20)))
        assert scan.counts == want.counts and scan.changes == want.changes
    finally:
        src.close()
        pipe.close()
        reader.join(T)


def test_a_section_that_only_grew_is_not_walked_again() -> None:
    """The history is the last turn's items and the new ones: each turn's sections were walked item by item
    from the first (a pass over N turns O(N^2) Python steps: ~25% of a 2,000-turn scan). Only what is new
    is looked at now, and a section that changed otherwise (compacted) is walked whole; counts as before."""
    from inspector.content_search import SentStream
    from inspector.sources.file import FileSource

    demo = Path(__file__).resolve().parents[1] / "demo_sessions" / "scout-anthropic.cpsession"

    class Looked(dict[int, int]):
        looks = 0

        def get(self, key: int, default: Any = None) -> Any:
            Looked.looks += 1
            return super().get(key, default)

    stream = SentStream(demo)
    stream.numbers = Looked()
    src = FileSource(demo)
    try:
        turns = src.reader.turn_numbers()
        scan = ContentScan("latch", src, stream)
        scan.scan_to(turns, lambda: False)
        sent = sum(length for t in turns for _, _, length in stream.turns[t])
        assert Looked.looks < sent / 3, (Looked.looks, sent)
        want = _stepped("latch", src, turns)
        assert scan.counts == want.counts and scan.changes == want.changes and scan.changes
    finally:
        stream.close()
        src.close()


def _journal_pass(src: Any, text: str, turns: list[int]) -> list[tuple[int, str, str, int, int, str]]:
    """What `find` listed before it read the fold's builds: a one-pass stream of its own over the journal
    received (JournalStream), each snippet from the source's re-plan of the turn."""
    from inspector.content_search import LEAVES, snippet

    scan = ContentScan(text, src, JournalStream(src))
    scan.scan_to(turns, lambda: False)
    return [
        (
            c.turn,
            c.kind,
            c.section,
            c.count,
            c.before,
            "" if c.kind == LEAVES else snippet(src.section_content(c.turn, c.section), scan.needle, last=True),
        )
        for c in scan.changes
    ]


def test_find_pid_builds_each_turn_once(monkeypatch: pytest.MonkeyPatch, rtdir: Path) -> None:
    """`cp-inspect find PID TEXT` read the agent's journal through the live fold (a build a request, for
    its trace), searched it with a one-pass stream of its own (every request built again) and re-planned
    each listed turn for its snippet: 2 builds a turn and more (2,000 turns: 4,039 builds). It reads the
    fold's builds now (content_search.FoldIndex): one a turn, and the listing is the one the stream's
    gave, snippets and all."""
    import json

    from typer.testing import CliRunner

    from engine.pipeline import Pipeline
    from inspector.cli import app
    from inspector.sources.live import LiveSource

    pipe = serving_pipeline(monkeypatch, rtdir)
    try:
        _turns(pipe, 0, 14)
        builds: list[int] = []
        real_build = Pipeline.build

        def counted(self: Any, *a: Any, **kw: Any) -> Any:
            if self is not pipe:  # (the agent builds nothing meanwhile; its probe answers from the journal)
                builds.append(1)
            return real_build(self, *a, **kw)

        monkeypatch.setattr(Pipeline, "build", counted)
        r = CliRunner().invoke(app, ["find", str(os.getpid()), "Needle", "--json"])
        monkeypatch.setattr(Pipeline, "build", real_build)
        assert r.exit_code == 0, r.output
        assert len(builds) == 14, (len(builds), "one build a turn")
        got = json.loads(r.output)["changes"]
        src = LiveSource(os.getpid(), timeout=T, backfill_idle=None, fold=True)
        try:
            src.replayer()
            want = _journal_pass(src, "Needle", list(range(14)))
        finally:
            src.close()
        assert [
            (c["turn"], c["kind"], c["section"], c["matches"], c["before"], c["snippet"]) for c in got
        ] == want
        assert [w[:2] for w in want] == [(6, "enters"), (10, "enters")] and "NEEDLE" in want[0][5]
    finally:
        pipe.close()


def test_the_live_fold_fails_the_spill_writes_the_agent_failed(
    monkeypatch: pytest.MonkeyPatch, rtdir: Path
) -> None:
    """A spill write that failed in the agent's run kept that content in its requests; the inspector's
    fold spilled it, so every request from there was rebuilt to another hash (a mismatch a turn, each
    turn's trace asked of the agent, and `find PID` searched requests that were not sent). The fold fails
    that write too from the request that lists it: no mismatch, and `find PID`'s index (the fold's
    builds) counts what the one-pass stream counts."""
    from engine.optimize import OptimizeLimits
    from inspector.content_search import FoldIndex
    from inspector.sources.live import LiveSource

    pipe = serving_pipeline(
        monkeypatch, rtdir, spill=_FailsOn("DISKFULL"), limits=OptimizeLimits(spill_threshold=200)
    )
    try:
        for t in range(16):
            big = f"output of step {t}\n" + "a line of the build log\n" * 120
            one_turn(pipe, t, big + (" DISKFULL" if t == 8 else "") + (" NEEDLE" if t in (4, 8) else ""))
        index = FoldIndex()
        src = LiveSource(os.getpid(), timeout=T, backfill_idle=None, fold=True, on_build=index.add)
        try:
            assert src.replayer().fail_keys, "the agent's journal lists the failed write"
            assert src._tf is not None and src._tf.rebuilt + len(src._tf.mismatches) > 0
            assert src._tf.mismatches == [], "rebuilt to the hash the agent sent"
            assert sorted(index.turns) == list(range(16))
            scan = ContentScan("needle", src, index)
            scan.scan_to(list(range(16)), lambda: False)
            want = ContentScan("needle", src, JournalStream(src))
            want.scan_to(list(range(16)), lambda: False)
            assert scan.counts == want.counts and scan.changes == want.changes
            assert [(c.turn, c.kind) for c in scan.changes] == [(9, "enters")]
        finally:
            src.close()
    finally:
        pipe.close()
