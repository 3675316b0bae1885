"""Long recordings on the CLI paths that need one turn at a time: memory that does not grow with the file.

Each test copies a real recording (a demo session) with every turn's trace made heavy (a field no reader
of the trace looks at), so that holding every event costs far more than holding the few a path needs.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from engine.recording.cpsession import RecordingReader, RecordingWriter

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "demo_sessions" / "scout-anthropic.cpsession"
PAD = 1 << 20  # bytes of hex added to each turn's trace: 40 turns, ~40 MB held if every trace is kept
# `cp-inspect` as installed (the console script; `python -m inspector.cli` built typer's app first, ~0.1 s
# of CPU a run). Both sides of each memory comparison run it alike.
CP_INSPECT = "import sys; sys.argv[0] = 'cp-inspect'; from inspector.entry import main; main()"


# The padded copies, made once for the module (each ~40 MB of random pad written and compressed): the
# tests only read them.
@pytest.fixture(scope="module")
def heavy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return heavy_copy(tmp_path_factory.mktemp("heavy") / "heavy.cpsession")


@pytest.fixture(scope="module")
def plain_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return unpadded_copy(tmp_path_factory.mktemp("plain") / "plain.cpsession")


@pytest.fixture(scope="module")
def padded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return padded_requests(tmp_path_factory.mktemp("padded") / "padded.cpsession")


def heavy_copy(dst: Path, src: Path = DEMO) -> Path:
    """`src` rewritten with a random (incompressible, so no reader takes it for a bomb) pad in each trace."""
    with RecordingReader.open(src) as r:
        header = {k: v for k, v in r.header.items() if k not in ("format", "version")}
        with RecordingWriter(dst, header) as w:
            for ev in r.events():
                if ev.get("k") == "turn":
                    ev = {**ev, "trace": {**ev["trace"], "pad": os.urandom(PAD // 2).hex()}}
                w.append(ev)
    return dst


def unpadded_copy(dst: Path, src: Path = DEMO) -> Path:
    """`src` rewritten as heavy_copy and padded_requests rewrite it, without the pads: like them, with no
    token-count table, so explain tokenizes as it does on them (the table spares loading the encoder,
    ~35 MB: the demo itself is no baseline for a copy without one)."""
    with RecordingReader.open(src) as r:
        header = {k: v for k, v in r.header.items() if k not in ("format", "version")}
        with RecordingWriter(dst, header) as w:
            for ev in r.events():
                w.append(ev)
    return dst


def peak_rss_mb(args: list[str]) -> tuple[int, str, float]:
    """Run `cp-inspect ARGS` in a child: (exit code, its stdout and stderr, its peak RSS in MB)."""
    probe = (
        "import resource, subprocess, sys\n"
        "p = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
        "print(p.returncode); print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
        "sys.stderr.write(p.stdout + p.stderr)\n"
    )
    res = subprocess.run(
        [sys.executable, "-c", probe, sys.executable, "-c", CP_INSPECT, *args],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )
    code, rss = res.stdout.split()
    return int(code), res.stderr, int(rss) / 1024


def test_explain_of_the_last_turn_holds_only_the_traces_a_replay_folds(heavy: Path, plain_copy: Path) -> None:
    """explain read every event whole (each turn's trace included) to rebuild one turn: its memory grew
    with the recording (a 10,000-turn, 6 MB file: 266 MB). It now reads up to the turn asked for and keeps
    the traces of only the turns a replay folds. Old explain: ~40 MB of pads held here."""
    p = heavy
    code, out, base = peak_rss_mb(["explain", str(plain_copy), "--format", "json"])
    assert code == 0, out
    code, out, peak = peak_rss_mb(["explain", str(p), "--format", "json"])
    assert code == 0 and '"turn": 39' in out, out[-2000:]
    # The turn shown keeps its pad (printed in the JSON: a str and its encoding, ~3 MB), and the turns
    # before it are rebuilt from theirs: a few MB, not forty.
    assert peak < base + 20, (peak, base)


def test_explain_of_an_early_turn_reads_no_further(heavy: Path, plain_copy: Path) -> None:
    p = heavy
    code, out, base = peak_rss_mb(["explain", str(plain_copy), "--turn", "3"])
    assert code == 0, out
    code, out, peak = peak_rss_mb(["explain", str(p), "--turn", "3"])
    assert code == 0 and "EXPLAIN turn 3" in out, out[-2000:]
    assert peak < base + 12, (peak, base)


def test_report_reads_only_the_trace_fields_its_simulation_uses(heavy: Path) -> None:
    """report decoded every trace whole (as export needs them), though its simulation reads only the
    sections, as `simulate` reads them. Old report: the 40 MB of pads held."""
    p = heavy
    code, out, base = peak_rss_mb(["report", str(DEMO), "--json"])
    assert code == 0, out
    code, out, peak = peak_rss_mb(["report", str(p), "--json"])
    assert code == 0 and str(p) in out, out[-2000:]
    assert peak < base + 15, (peak, base)


def test_export_sends_one_event_at_a_time(heavy: Path) -> None:
    """export read a session's events into a list before sending any span. Old export: the pads held."""
    from tests.fleet.otlp_receiver import OtlpReceiver

    p = heavy
    with OtlpReceiver() as rx:
        code, out, base = peak_rss_mb(["export", str(DEMO), "--otlp", rx.url])
        assert code == 0, out
        code, out, peak = peak_rss_mb(["export", str(p), "--otlp", rx.url])
        assert code == 0 and "exported 40 model-call spans" in out, out[-2000:]
    assert peak < base + 15, (peak, base)


# ------------------------------------------------------------------------------------- damaged files
def corrupt_copy(dst: Path, turn: int = 20) -> tuple[Path, int]:
    """DEMO with one flipped byte inside turn `turn`'s chunk (its CRC then fails): (path, that offset)."""
    with RecordingReader.open(DEMO) as r:
        at = r._turn_offs[r.turn_numbers().index(turn)]
    data = bytearray(DEMO.read_bytes())
    data[at + 30] ^= 0xFF
    dst.write_bytes(bytes(data))
    return dst, at


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", CP_INSPECT, *args], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)


def test_explain_shows_the_turns_before_damage_and_names_them_past_it(tmp_path: Path) -> None:
    """Old explain read every event first: one flipped byte at turn 20 made every turn unexplainable."""
    p, at = corrupt_copy(tmp_path / "corrupt.cpsession")
    for turn in ("5", "19"):
        res = cli("explain", str(p), "--turn", turn)
        assert res.returncode == 0 and f"EXPLAIN turn {turn}" in res.stdout, res.stderr
    assert f"offset {at}" in cli("explain", str(p), "--turn", "19").stderr  # what follows it is lost: said
    res = cli("explain", str(p))
    assert res.returncode == 1 and "Traceback" not in res.stderr
    # What was wrong and where, what to do, and what can still be read.
    assert f"at offset {at}" in res.stderr and "cp-inspect salvage" in res.stderr, res.stderr
    assert "turns 0..19 precede the damage" in res.stderr and "--turn 19" in res.stderr, res.stderr


def test_export_of_a_damaged_recording_sends_what_precedes_the_damage(tmp_path: Path) -> None:
    """Old export skipped the whole session ('none of the 1 recording(s) could be read', exit 1)."""
    from tests.fleet.otlp_receiver import OtlpReceiver

    p, at = corrupt_copy(tmp_path / "corrupt.cpsession")
    with OtlpReceiver() as rx:
        res = cli("export", str(p), "--otlp", rx.url)
        assert res.returncode == 0, res.stderr
        assert "exported 20 model-call spans" in res.stdout, res.stdout
        calls = len(rx.calls)
    assert calls == 20
    assert f"at offset {at}" in res.stderr and "the 20 model calls before the damage" in res.stderr, res.stderr


def padded_requests(dst: Path, src: Path = DEMO) -> Path:
    """`src` with a random pad in each request event (a field no fold reads), so holding events costs."""
    with RecordingReader.open(src) as r:
        header = {k: v for k, v in r.header.items() if k not in ("format", "version")}
        with RecordingWriter(dst, header) as w:
            for ev in r.events():
                if ev.get("k") == "request":
                    ev = {**ev, "pad": os.urandom(PAD // 2).hex()}
                w.append(ev)
    return dst


def test_explain_folds_as_it_reads_and_holds_no_event(padded: Path, plain_copy: Path) -> None:
    """explain held every event it read up to the turn asked for (the replayer keeps its journal for
    random access): ~18x the file for the last turn of a long recording. It now folds them as they are
    read (Replayer.for_turns) and keeps the state before turns n-1 and n only. Old explain: the forty
    1 MB pads of the request events held (+40 MB); the output is the same bytes."""
    p, unpadded = padded, plain_copy
    for extra in ([], ["--gate", "drop_rounds=off", "--budget", "20000"]):
        code, plain, base = peak_rss_mb(["explain", str(unpadded), "--format", "json", *extra])
        assert code == 0, plain
        code, out, peak = peak_rss_mb(["explain", str(p), "--format", "json", *extra])
        assert code == 0 and out == plain, out[-2000:]
        assert peak < base + 15, (peak, base)


def test_for_turns_replans_its_turns_as_a_whole_replay_does() -> None:
    from engine.recording.replay import Replayer, ReplayError
    from engine.whatif import Overrides

    with RecordingReader.open(DEMO) as r:
        events = list(r.events())
    whole = Replayer(events)
    ov = Overrides(20000, None, {"drop_rounds": False}, None)
    for t in range(1, whole.turns):
        lean = Replayer.for_turns(iter(events), {t - 1, t})
        for turn in (t - 1, t):
            assert lean.replan(turn).serialized.request_sha256 == whole.replan(turn).serialized.request_sha256
        assert lean.replan(t, ov).serialized.request_sha256 == whole.replan(t, ov).serialized.request_sha256
        assert lean.events == events[:1]  # the session event; nothing else held
    with pytest.raises(ReplayError, match="not kept"):
        lean.replan(0)


def test_diff_reads_each_recording_again_instead_of_holding_it(tmp_path: Path, padded: Path) -> None:
    """diff held both sides' journals whole (each trace included) while it rebuilt them in lockstep: its
    memory grew with the recordings. Each is now read again for the builds (a first read gathers the
    index, output tokens and failed turns, with no trace built), one read for both sides when both are
    the same file. Old diff: the forty 1 MB request pads held (+40 MB); the figures are the same. (Not
    trace pads: a fold keeps the last 32 traces, as the engine does.)"""
    p = padded
    plain = tmp_path / "plain.cpsession"
    plain.write_bytes(DEMO.read_bytes())
    for sides in (["recorded", "window=20000"], [str(plain), "gate.drop_rounds=off"]):
        code, want, base = peak_rss_mb(["diff", *sides, str(plain), "--json"])
        assert code == 0, want
        code, out, peak = peak_rss_mb(["diff", *sides, str(p), "--json"])
        assert code == 0 and out.replace(str(p), str(plain)) == want, out[-2000:]
        # Old: +42 MB. Now +10 (two files) and +20 (one file read once for both sides: itertools.tee
        # frees its buffer in blocks of 57 events, a few padded turns), the reader's chunk cache included.
        assert peak < base + 27, (peak, base)


def test_simulate_and_report_read_a_big_recording_again_instead_of_holding_it(tmp_path: Path, padded: Path) -> None:
    """simulate and report held a recording's events whole while they folded and priced it (2.7 GB for a
    126 MB, 100,000-turn file). A recording bigger than HOLD_EVENTS_BYTES is now read again for each pass
    (engine.sim.simulate.simulate_stream: an index pass, then the fold). Old simulate and report: the
    forty 1 MB request pads held (+40 MB); the figures are the same."""
    from engine.sim.simulate_read import HOLD_EVENTS_BYTES

    p = padded
    assert p.stat().st_size > HOLD_EVENTS_BYTES  # read as a big one
    plain = tmp_path / "plain.cpsession"
    plain.write_bytes(DEMO.read_bytes())
    for args in (["simulate", "--json", "--per-turn"], ["simulate", "--policies", "all", "--window", "20000"],
                 ["report", "--json"]):
        code, want, base = peak_rss_mb([*args, str(plain)])
        assert code == 0, want
        code, out, peak = peak_rss_mb([*args, str(p)])
        norm = re.sub(r'"elapsed_s": [0-9.e-]+|\(\d+ ms\)', "T", out.replace(str(p), str(plain)))
        assert code == 0 and norm == re.sub(r'"elapsed_s": [0-9.e-]+|\(\d+ ms\)', "T", want), out[-2000:]
        assert peak < base + 15, (args, peak, base)
