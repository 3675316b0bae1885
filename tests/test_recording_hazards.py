"""Recordings against what a shared file or a failing disk does to them: files that are not files (a FIFO,
a link to a device), small files that decode into far more than their budget (tiny events, many blobs),
a long-lived reader re-reading the same chunks, and a writer whose disk fills mid-session (real
RLIMIT_FSIZE in a child process: writes fail with EFBIG, as on a full disk with ENOSPC)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from engine.recording.cpsession import RecordingError, RecordingReader, RecordingWriter
from inspector.cli import app

from . import attacks
from .test_recording import HEADER
from .test_recording_v2 import _peak_rss_mb

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "demo_sessions" / "scout-anthropic.cpsession"


def _cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "inspector.cli", *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT
    )


# ------------------------------------------------------------------------------ not a regular file
def test_a_fifo_or_a_device_is_refused_at_once_not_waited_on(tmp_path: Path) -> None:
    fifo = tmp_path / "shared.cpsession"
    os.mkfifo(fifo)
    zero = tmp_path / "zero.cpsession"
    zero.symlink_to("/dev/zero")
    # A FIFO nobody writes used to block open() forever; /dev/zero was reported as an empty recording.
    for path, kind in ((fifo, "FIFO"), (zero, "character device")):
        for cmd in (["verify", str(path)], ["salvage", str(path), "-o", str(tmp_path / "out.cpsession")]):
            res = _cli(*cmd, timeout=30)
            assert res.returncode == 1, res
            assert kind in res.stderr and "not a recording file" in res.stderr and "Traceback" not in res.stderr
        with pytest.raises(RecordingError, match=kind):
            RecordingReader.open(path)
    # The writer too: overwriting or resuming a FIFO must not wait for a reader to open it.
    with pytest.raises(RecordingError, match="FIFO"):
        RecordingWriter(fifo, HEADER, overwrite=True)
    with pytest.raises(RecordingError, match="FIFO"):
        RecordingWriter.resume(fifo)


def test_a_missing_directory_is_a_recording_error_saying_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(RecordingError, match="cannot create recording .*No such file or directory.*directory"):
        RecordingWriter(tmp_path / "nowhere" / "run.cpsession", HEADER)


# --------------------------------------------------------------------------------- inflate budget
def test_stepping_back_and_forth_never_runs_out_of_budget() -> None:
    """The budget bounds what a file holds, not how often it is read: the TUI re-decodes a stream from
    its start for each step back, and after ~800 such steps an honest demo recording was refused as a
    'decompression bomb'."""
    r = RecordingReader.open(DEMO)
    nums = r.turn_numbers()
    for n in nums:
        r.turn(n)
    once = r._inflated  # every chunk decoded: what the file holds
    for i in range(1500):  # backwards: each step re-decodes its stream from the start up to that turn
        r.turn(nums[-1 - i % len(nums)])
    assert r._inflated == once < r._budget


@pytest.mark.parametrize(
    "make",
    [
        attacks.v2_tiny_events,
        attacks.v1_many_blobs,
        attacks.v2_empty_containers,
        attacks.v1_container_trace,
        attacks.v2_short_strings,
        attacks.v1_string_trace,
    ],
    ids=[
        "v2-tiny-events",
        "v1-many-blobs",
        "v2-empty-containers",
        "v1-container-trace",
        "v2-short-strings",
        "v1-string-trace",
    ],
)
def test_a_small_file_that_decodes_into_gigabytes_is_refused_in_bounded_memory(
    tmp_path: Path, make: object
) -> None:
    """A ~5 KB chunk of 9-byte frames (5 million events, 1.1 GB of Python objects), a 1.3 MB version-1
    file of many blobs each under the per-blob limit (1.4 GB), and a 2 KB chunk or a 50 KB v1 trace of
    50 million empty arrays (3.6 GB, 22 s) or a 5 KB chunk (or 60 KB v1 trace) of 20 million 2-byte
    strings (1.5 GB) were read whole."""
    p = tmp_path / "bomb.cpsession"
    make(p)  # type: ignore[operator]
    code, err, rss = _peak_rss_mb(["verify", str(p)])
    assert code == 1 and "decompression bomb" in err and "Traceback" not in err, err
    assert rss < 400, f"peak RSS {rss:.0f} MB"


# ---------------------------------------------------------------------------------- a full disk
_AGENT = textwrap.dedent(
    """
    import json, os, resource, signal, sys, warnings
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past the limit fail with EFBIG instead
    path, limit, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    from engine import Pipeline
    pipe = Pipeline("claude-sonnet-4", provider="anthropic", window=200_000, record=path)
    pipe.identity("You are a careful coding agent.")
    pipe.add_tool("bash", "Run a shell command", {"type": "object", "properties": {"cmd": {"type": "string"}}})
    pipe.user("The test fails, please fix it.")
    caught = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for i in range(12):
            if i == 6:  # the disk fills: this turn's tool output does not fit
                resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
            if i == 8 and mode == "freed":  # space is freed again
                resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
            req = pipe.next_request()
            pipe.record_usage({"input_tokens": req.trace["final_tokens"], "output_tokens": 40})
            calls = pipe.assistant(f"Step {i}.", tool_calls=[{"id": f"c{i}", "name": "bash", "arguments": "{}"}])
            out = os.urandom(30000).hex() if i == 6 else f"small output {i}"
            pipe.tool_result(calls[0].id, out)
        try:
            pipe.close()
            closed = "ok"
        except BaseException as exc:
            closed = f"{type(exc).__name__}: {exc}"
    print(json.dumps({"closed": closed, "turns": 12, "sink_errors": pipe.journal.sink_errors,
                      "warnings": [str(w.message) for w in caught if "recording" in str(w.message)]}))
    """
)


def _agent(path: Path, mode: str) -> dict[str, object]:
    size_before_turn_6 = 6000  # the six small turns take ~4 KB; turn 6's 60 KB output cannot fit
    res = subprocess.run(
        [sys.executable, "-c", _AGENT, str(path), str(size_before_turn_6), mode],
        capture_output=True, text=True, timeout=120, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout.splitlines()[-1])  # type: ignore[no-any-return]


@pytest.mark.parametrize("mode", ["freed", "full"])
def test_a_disk_filling_mid_session_costs_the_agent_nothing_and_keeps_a_clean_prefix(
    tmp_path: Path, mode: str
) -> None:
    """The write of turn 6's chunk fails part-way (EFBIG). Before: the writer cut the file back but left
    its offset past the cut, so once space was freed the next chunk landed after a hole of zeros (a
    recording every command called corrupt), and it went on writing turns that name blobs the lost chunk
    held; with the disk still full, pipe.close() raised, skipping the probe's and exporter's close. Now
    the recording stops at the failure, says so once, and keeps every turn before it, whole."""
    path = tmp_path / "run.cpsession"
    got = _agent(path, mode)
    assert got["closed"] == "ok", got
    assert len(got["warnings"]) == 1 and "recording stopped" in got["warnings"][0], got  # type: ignore[arg-type]
    r = RecordingReader.open(path)
    assert r.damage is None and not r.finished
    # Turn 6's trace is journaled before its tool output (at the next request): the chunk lost is turn 7's.
    assert r.turn_numbers() == list(range(7))
    res = CliRunner().invoke(app, ["verify", str(path)])
    assert res.exit_code == 0 and "7 turns replayed, every request hash matches" in res.output, res.output
    assert "not closed" in res.output


_WRITER = textwrap.dedent(
    """
    import os, resource, signal, sys
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    from engine.recording.cpsession import RecordingError, RecordingWriter
    path = sys.argv[1]
    w = RecordingWriter(path, {"model": "m", "provider": "anthropic"})
    w.append({"k": "blob", "h": "a" * 64, "data": "hello"})
    w.append({"k": "turn", "turn": 0, "trace": {}})
    resource.setrlimit(resource.RLIMIT_FSIZE, (os.path.getsize(path) + 10, resource.RLIM_INFINITY))
    errors = []
    for t in (1, 2):
        try:
            w.append({"k": "blob", "h": str(t) * 64, "data": os.urandom(4000).hex()})
            w.append({"k": "turn", "turn": t, "trace": {}})
        except RecordingError as exc:
            errors.append(str(exc))
    try:
        w.close()
    except RecordingError as exc:
        errors.append(str(exc))
    # The lock dies with the descriptor: resuming right away works only if close() released it.
    resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    r = RecordingWriter.resume(path)
    r.append({"k": "turn", "turn": 3, "trace": {}})
    r.close()
    print(len(errors), all("keeps every complete turn" in e for e in errors))
    """
)


def test_a_writer_stops_at_a_failed_write_and_close_still_releases_the_file(tmp_path: Path) -> None:
    path = tmp_path / "w.cpsession"
    res = subprocess.run(
        [sys.executable, "-c", _WRITER, str(path)],
        capture_output=True, text=True, timeout=60, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["3", "True"]  # turn 1's write, turn 2's append, close: each says so
    r = RecordingReader.open(path)
    assert r.finished and r.turn_numbers() == [0, 3]


def test_a_recording_that_was_never_closed_is_verified_with_a_note(tmp_path: Path) -> None:
    with RecordingReader.open(DEMO) as r:
        data_end, turns = r._end, r.turn_count
    p = tmp_path / "open.cpsession"
    p.write_bytes(DEMO.read_bytes()[:data_end])  # as a killed agent leaves it: every turn, no footer
    res = CliRunner().invoke(app, ["verify", str(p)])
    assert res.exit_code == 0 and f"{turns} turns replayed" in res.output and "not closed" in res.output, res.output
    res = CliRunner().invoke(app, ["verify", str(DEMO)])
    assert res.exit_code == 0 and "not closed" not in res.output


def test_verify_of_a_cut_off_recording_passes_and_says_how_to_salvage_it(tmp_path: Path) -> None:
    """A writer killed mid-write: the whole turns before the cut verify (exit 0, as every command reads such
    a file), and verify says the file is damaged after them and names the command that keeps them closed."""
    data = DEMO.read_bytes()
    p = tmp_path / "cut.cpsession"
    p.write_bytes(data[: len(data) * 2 // 3])
    with RecordingReader.open(p) as r:
        assert r.damage is not None and "incomplete" in r.damage.message
        turns = r.turn_count
    res = CliRunner().invoke(app, ["verify", str(p)])
    assert res.exit_code == 0 and f"{turns} turns replayed, every request hash matches" in res.output, res.output
    assert "damaged after the turns above" in res.output, res.output
    assert f"cp-inspect salvage {p} -o FIXED.cpsession" in res.output, res.output
    assert "not closed" not in res.output  # one note, the one that says what to do


# ------------------------------------------------------------------------------ CLI messages
def test_simulate_and_report_name_a_damaged_file_once(tmp_path: Path) -> None:
    p = tmp_path / "bad.cpsession"
    data = bytearray(DEMO.read_bytes())
    data[len(data) // 2] ^= 0xFF  # inside a chunk: the file opens by its footer, the read finds it
    p.write_bytes(bytes(data))
    for cmd in (["simulate", str(p)], ["report", str(p)]):
        res = CliRunner().invoke(app, cmd)
        assert res.exit_code == 1 and res.output.count(str(p)) == 2, res.output  # the error, the salvage hint


# ------------------------------------------------------------------ hostile contents, CRC-valid
def _mutated(tmp_path: Path, kind: str, path: tuple[object, ...], value: object) -> Path:
    """The demo recording with one field of the first `kind` event set to `value` (frames CRC-valid)."""
    events = list(RecordingReader.open(DEMO).events())
    ev = next(e for e in events if e.get("k") == kind)
    target = ev
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    out = tmp_path / f"{kind}-{'.'.join(map(str, path))}.cpsession"
    attacks.crafted_v2(out, events)
    return out


@pytest.mark.parametrize(
    ("kind", "path", "value", "commands"),
    [
        ("request", ("sha",), 1.5, ["verify"]),
        ("session", ("config", "provider"), {"a": 1}, ["verify", "simulate", "diff", "report"]),
        ("source", ("spec", "priority"), {}, ["simulate", "diff", "report"]),
        ("tool", ("description",), None, ["simulate", "diff", "report"]),
    ],
    ids=["request-sha", "session-provider", "source-priority", "tool-description"],
)
def test_an_event_of_the_wrong_shape_is_one_line_naming_the_file(
    tmp_path: Path, kind: str, path: tuple[object, ...], value: object, commands: list[str]
) -> None:
    """Found by mutating one field of the demo's events: verify printed a Mismatch whose hash was a
    float (TypeError) and built a pipeline from a config map of the wrong shape outside its checks;
    simulate, diff and report rebuilt requests from events with no check at all (tracebacks)."""
    p = _mutated(tmp_path, kind, path, value)
    argv = {
        "verify": ["verify", str(p)],
        "simulate": ["simulate", str(p)],
        "diff": ["diff", "recorded", "window=5000", str(p)],
        "report": ["report", str(p)],
    }
    for cmd in commands:
        res = CliRunner().invoke(app, argv[cmd])
        assert isinstance(res.exception, SystemExit) and res.exit_code != 0, (cmd, res.exception, res.output)
        assert str(p) in res.output and "not what the engine writes" in res.output, (cmd, res.output)


def test_an_event_too_large_for_a_frame_stops_the_recording_instead_of_leaving_a_hole(tmp_path: Path) -> None:
    """A 73 MB tool output is over the 64 MiB frame limit. Before: its blob was silently left out and
    the recording went on, so every later turn named a text the file lacks and verify called the whole
    file damaged ('event 27 (part) ... KeyError'). Now the recording stops there, says so once, and what
    it holds verifies."""
    from engine import Pipeline

    path = tmp_path / "big.cpsession"
    with pytest.warns(RuntimeWarning, match="recording stopped.*too large to record") as caught:
        pipe = Pipeline("claude-sonnet-4", provider="anthropic", window=200_000, record=path)
        pipe.identity("You are a careful coding agent.")
        pipe.add_tool("bash", "Run a shell command", {"type": "object", "properties": {}})
        pipe.user("The test fails, please fix it.")
        for i in range(5):
            req = pipe.next_request()
            pipe.record_usage({"input_tokens": req.trace["final_tokens"], "output_tokens": 40})
            calls = pipe.assistant(f"Step {i}.", tool_calls=[{"id": f"c{i}", "name": "bash", "arguments": "{}"}])
            pipe.tool_result(calls[0].id, "a line of log output\n" * 3_500_000 if i == 2 else f"small {i}")
        pipe.close()
    assert sum("recording stopped" in str(w.message) for w in caught) == 1
    res = CliRunner().invoke(app, ["verify", str(path)])
    assert res.exit_code == 0 and "3 turns replayed, every request hash matches" in res.output, res.output


def test_replay_of_a_recording_without_a_turn_says_so_instead_of_loading_forever(tmp_path: Path) -> None:
    """A header-only recording (an agent stopped before its first turn) opened the TUI on "loading…"
    for good: without --follow nothing more is ever read."""
    import typer

    from inspector import replay_command, startup_gc

    with RecordingReader.open(DEMO) as r:
        start = r._start
    p = tmp_path / "header-only.cpsession"
    p.write_bytes(DEMO.read_bytes()[:start])
    with pytest.raises(typer.Exit) as exc:
        replay_command.replay_app(p)
    assert exc.value.exit_code == 1
    try:
        app = replay_command.replay_app(p, follow=True)  # following: its turns may yet come
        assert app is not None
    finally:
        startup_gc.release(freeze=False)  # replay_app holds the collector off for the app it returns


@pytest.mark.parametrize("offset", [-5, 2**63 - 1])
def test_a_blob_index_pointing_outside_the_events_is_a_recording_error(tmp_path: Path, offset: int) -> None:
    """A version-1 footer whose blob map (CRC-valid) names an offset outside the file: blob() raised a
    bare OSError (EINVAL from pread) for a negative or huge one."""
    from engine.hashing import sha256_hex
    from engine.recording.cpsession import K_BLOBS, K_INDEX
    from engine.recording.cpsession_format import _trailer
    from engine.recording.frames import encode_frame

    p = tmp_path / "v1.cpsession"
    h = sha256_hex("hello")
    with RecordingWriter(p, HEADER, version=1) as w:
        w.append({"k": "blob", "h": h, "data": "hello"})
        w.append({"k": "turn", "turn": 0, "trace": {}})
    with RecordingReader.open(p) as r:
        blobs_at, end, nums, offs = r._blobs_at, r._end, r._turn_nums, r._turn_offs
    assert blobs_at is not None
    blobs = encode_frame({"k": K_BLOBS, "blobs": {h: offset}})
    index = encode_frame({"k": K_INDEX, "data_end": end, "blobs_at": blobs_at, "turns": nums, "offsets": offs})
    p.write_bytes(p.read_bytes()[:blobs_at] + blobs + index + _trailer(blobs_at + len(blobs)))
    with RecordingReader.open(p) as r, pytest.raises(RecordingError, match="blob index unreadable"):
        r.blob(h)


def test_a_chunk_that_compresses_past_the_frame_limit_stops_the_recording(tmp_path: Path) -> None:
    """An event just under the frame limit whose bytes do not compress makes a chunk frame just over it.
    Before: that chunk (and the blob in it) was dropped and the writer went on, so turn 1 named a blob
    the file lacks; now the writer stops there, as for any write it cannot make."""
    from engine.recording.frames import MAX_FRAME_BYTES

    p = tmp_path / "big.cpsession"
    w = RecordingWriter(p, HEADER)
    w.append({"k": "turn", "turn": 0, "trace": {}})
    w.append({"k": "blob", "h": "b" * 64, "data": os.urandom(MAX_FRAME_BYTES - 200)})
    with pytest.raises(RecordingError, match="too large to record"):
        w.append({"k": "turn", "turn": 1, "trace": {}})  # flushes the blob's chunk first
    with pytest.raises(RecordingError, match="keeps every complete turn"):
        w.append({"k": "turn", "turn": 2, "trace": {}})
    with pytest.raises(RecordingError):
        w.close()
    assert RecordingReader.open(p).turn_numbers() == [0]


def test_attach_record_refuses_a_path_it_could_not_save_to_before_attaching(tmp_path: Path) -> None:
    """attach --record saves when the inspector exits: an existing file or a missing directory was only
    found then, as a traceback, and the session's capture was lost."""
    existing = tmp_path / "kept.cpsession"
    existing.write_bytes(b"a recording someone keeps")
    for record, says in (
        (existing, "already exists"),
        (tmp_path / "nowhere" / "s.cpsession", "does not exist"),
        (tmp_path, "is a directory"),
    ):
        # A pid with no agent: the path is checked first, so no agent is needed to see it refused.
        res = CliRunner().invoke(app, ["attach", "999999", "--record", str(record)])
        assert res.exit_code == 2 and says in res.output, res.output
    assert existing.read_bytes() == b"a recording someone keeps"


def test_an_import_the_disk_cuts_short_is_an_error_and_leaves_nothing(tmp_path: Path) -> None:
    """The pipeline now keeps going when its recording fails (an agent must), so import, whose only
    product is the recording, checks: a disk that filled half way printed 'wrote OUT: 2 turns' over a
    file holding fewer."""
    script = textwrap.dedent(
        """
        import resource, signal, sys
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (2500, 2500))  # room for the first turn only
        sys.argv = ["cp-inspect", *sys.argv[1:]]
        from inspector.cli import app
        app()
        """
    )
    out = tmp_path / "imported.cpsession"
    src = ROOT / "tests" / "fixtures" / "synthetic" / "proxy_anthropic.jsonl"
    res = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", script, "import", "auto", str(src), "-o", str(out)],
        capture_output=True, text=True, timeout=120, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert res.returncode == 1, (res.stdout, res.stderr)
    assert f"cannot write {out} (File too large): nothing was imported" in res.stderr, res.stderr
    assert list(tmp_path.iterdir()) == []  # neither OUT nor the partial file beside it


def test_a_small_file_holding_one_large_repetitive_text_still_reads(tmp_path: Path) -> None:
    """The other side of the bounds above: 40 MB of `yes` output compresses ~10,000x, far past 64x the
    file's size, and is honest. It holds a few values, so it is read."""
    p = tmp_path / "yes.cpsession"
    text = "y\n" * (20 << 20)
    with RecordingWriter(p, HEADER) as w:
        w.append({"k": "blob", "h": "c" * 64, "data": text})
        w.append({"k": "turn", "turn": 0, "trace": {}})
    assert p.stat().st_size < 64 << 10
    with RecordingReader.open(p) as r:
        assert r.blob("c" * 64) == text and r.turn(0)["trace"] == {}


def test_a_header_only_recording_is_called_empty_not_foreign(tmp_path: Path) -> None:
    """An agent killed before its first chunk leaves a header alone. verify and simulate said 'the
    journal has no session event: it was not written by the ContextPipe engine'."""
    with RecordingReader.open(DEMO) as r:
        start = r._start
    p = tmp_path / "header-only.cpsession"
    p.write_bytes(DEMO.read_bytes()[:start])
    for cmd in (["verify", str(p)], ["simulate", str(p)]):
        res = CliRunner().invoke(app, cmd)
        assert res.exit_code != 0 and "holds no events" in res.output, res.output
        assert "not written by the ContextPipe engine" not in res.output


# ------------------------------------------------------------- short values in normal chunks
def _short_strings(n: int, seed: int) -> list[str]:
    import random

    rnd = random.Random(seed)
    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    return [rnd.choice(alphabet) + rnd.choice(alphabet) for _ in range(n)]


def test_what_a_reader_counts_covers_the_short_strings_it_builds(tmp_path: Path) -> None:
    """A chunk's strings were counted by their bytes only, and only past 64x the file's size: a 2-byte
    string is a ~51-byte str object, so a normally compressed recording of them built ~20x what the
    reader counted, and its budget bounded nothing. Old reader: counted ~1 MB for ~12 MB built."""
    import tracemalloc

    p = tmp_path / "short.cpsession"
    with RecordingWriter(p, HEADER) as w:
        for t in range(4):
            w.append({"k": "note", "v": _short_strings(50_000, t)})
            w.append({"k": "turn", "turn": t, "trace": {}})
    tracemalloc.start()
    try:
        with RecordingReader.open(p) as r:
            events = list(r.events())
            built = tracemalloc.get_traced_memory()[0]
            counted = r._inflated
    finally:
        tracemalloc.stop()
    assert sum(len(e.get("v", ())) for e in events) == 200_000
    assert counted >= built, (counted, built)


def test_a_small_file_of_short_strings_past_its_budget_is_refused_before_building_them(tmp_path: Path) -> None:
    """~20 KB on disk, 2 million 2-byte strings: ~120 MB of str objects, past the 64 MiB + 64x budget.
    Old reader: built them all (the value count ran only past 64x the file's size, 1.3 MB here)."""
    import tracemalloc

    p = tmp_path / "strings.cpsession"
    cycle = _short_strings(97, 0)
    with RecordingWriter(p, HEADER) as w:
        for t in range(20):
            w.append({"k": "note", "v": cycle * 1031})  # ~100,000 strings, compressed ~1000x
            w.append({"k": "turn", "turn": t, "trace": {}})
    assert p.stat().st_size < 64 << 10
    tracemalloc.start()
    try:
        with RecordingReader.open(p) as r, pytest.raises(RecordingError, match="inflates past|bomb"):
            kept = list(r.events())  # noqa: F841 (held, as verify and replay hold them)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 80 << 20, peak


def test_verify_holds_no_events_so_a_large_v1_file_of_tiny_events_stays_small(tmp_path: Path) -> None:
    """verify read every event into a list before replaying: a version-1 file (frames not compressed, so
    nothing the inflate budget refuses) of tiny events took ~20x its size (26 MB: 550 MB). It now reads
    the file twice and holds none. A real v1 recording with 600,000 tiny events after it: still ok."""
    src = ROOT / "tests" / "fixtures" / "v1_recordings" / "scout-openai.cpsession"
    with RecordingReader.open(src) as r:
        end = r._end
    p = tmp_path / "tiny-v1.cpsession"
    tiny = attacks.encode_frame({"k": "x"})
    p.write_bytes(src.read_bytes()[:end] + tiny * 600_000)  # no footer: read as a file never closed
    code, out, base = _peak_rss_mb(["verify", str(src)])
    assert code == 0, out
    code, out, peak = _peak_rss_mb(["verify", str(p)])
    assert code == 0 and "every request hash matches" in out, out
    assert peak < base + 40, (peak, base)  # held, 600,000 events were ~130 MB more
