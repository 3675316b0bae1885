"""One figure, one value: what the TUI's panels show of a turn agrees with what explain, simulate, `top`
and the exported spans say of the same turn of the same recording."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest

from engine.export.spans import turn_span
from engine.importers import load
from engine.importers.ingest import ingest
from engine.recording.journal import trace_of
from engine.recording.replay import Replayer
from engine.whatif import Overrides
from inspector.cli import load_events
from inspector.sources.file import FileSource
from inspector.timeline import summarize
from panels.cache_layout import CacheLayoutPanel
from panels.fmt import tok
from panels.line_panel import Keyed, content_of
from panels.timeline_strip import HIT_SHADES, TimelineStrip
from panels.whatif_compare import compare
from tests.conftest import TRAJECTORIES

DEMO = Path(__file__).resolve().parents[2] / "demo_sessions" / "scout-anthropic.cpsession"


def _traces() -> list[dict]:
    events, _, _ = load_events(str(DEMO))
    return [trace_of(e) for e in events if e.get("k") == "turn"]


def test_timeline_hit_shades_are_the_exported_hit_rate() -> None:
    # The strip's cache-hit row divided the reads by the engine's estimate of the prompt (final_tokens),
    # the cache layout, `top`, simulate and the spans by the provider's count of it (input_tokens): on
    # this recording the provider counts ~6% more, so a turn the span calls a 83.5% hit (turn 5) had a
    # full block, as if everything had been served from cache.
    traces = _traces()
    strip = TimelineStrip()
    strip.traces = [summarize(t) for t in traces]
    strip.set_reactive(TimelineStrip.count, len(traces))
    cols, _ = strip._summary(len(traces))  # one column per turn
    assert [len(rng) for rng, *_ in cols] == [1] * len(traces)
    shown = [hit for _, _, _, hit, _, _ in cols]
    exported = []
    for t in traces:
        rate = turn_span(t, 1, start_s=0.0).attributes.get("contextpipe.cache_hit_rate", 0.0)
        exported.append(HIT_SHADES[round(min(float(rate), 1.0) * (len(HIT_SHADES) - 1))])
    assert shown == exported
    assert shown[5] == "▓"  # 2430 read of 2909: 84%, not the 88% of the engine's 2748


def test_cache_layout_served_line_covers_the_hit_rate_it_prints() -> None:
    # The served line was drawn to the provider's count of cache reads on an axis of the engine's tokens,
    # so it ran past the hit rate printed under it (turn 5: 89 of 100 columns beside "84%").
    width = 100
    panel = CacheLayoutPanel()
    for t in _traces():
        if not t.get("usage"):
            continue
        panel.set_reactive(CacheLayoutPanel.trace, t)
        key = next(line.key for line in panel.lines(width) if isinstance(line, Keyed) and line.key[0] == "cache")
        served = key[2]
        rate = turn_span(t, 1, start_s=0.0).attributes["contextpipe.cache_hit_rate"]
        assert abs(served - float(rate) * width) <= 1, (t["turn"], served, rate)


def test_whatif_tokens_saved_is_what_the_steps_saved() -> None:
    # The what-if pane's "tokens saved" row was estimated_tokens - final_tokens: under the cost_aware
    # policy the plan is of what its steps left, so the row read -3 (the framing) on every turn, here
    # beside a spill that kept 82k out of the request, which explain prints as "(saved 81626)".
    events, _, _ = load_events(str(DEMO))
    actual = _traces()[25]
    whatif = Replayer(events).replan(25, Overrides(window=6000)).trace
    rows = {line.split("  ")[0].strip(): line for line in compare(actual, whatif).plain.splitlines()}
    cells = rows["tokens saved"].split()
    explained = [sum(int(a.get("tokens_saved") or 0) for a in t["actions"]) for t in (actual, whatif)]
    assert explained == [81626, 6055]
    assert cells[2:4] == [tok(n) for n in explained] == ["82k", "6.1k"]


def _summary_row(panel: CacheLayoutPanel, trace: dict, width: int = 120) -> str:
    panel.set_reactive(CacheLayoutPanel.trace, trace)
    return next(content_of(line).plain for line in panel.lines(width)
                if isinstance(line, Keyed) and line.key[0] == "summary")


def test_cache_layout_prints_served_and_prefix_on_one_scale() -> None:
    # "prefix 33k ━ served 37k (98%)": the prefix was the engine's count, served the provider's, so the
    # part read larger than the whole. Then both were the engine's, the provider's counts beside them
    # ("prefix 5.0k ━ served 4.0k (80%)  provider counts 4.3k of 5.3k"): two scales in one row. Now every
    # figure is the provider's (what the cache is billed in), the prefix, which it does not count,
    # estimated on its scale as its share of the prompt the provider counted, marked ≈, the scale said.
    panel = CacheLayoutPanel()
    rows = {t["turn"]: (t, _summary_row(panel, t)) for t in _traces() if t.get("usage")}
    t, row = rows[10]
    usage = t["usage"]
    total = sum(s["tokens"] for s in t["sections"])
    read, prompt = usage["cache_read_tokens"], usage["input_tokens"]
    assert (t["cacheable_prefix_tokens"], total, read, prompt) == (5033, 5033, 4265, 5334)
    assert "prefix ≈5.3k  ━ served 4.3k of 5.3k (80%)  all in the provider's tokens" in row, row
    for _, row in rows.values():
        _assert_one_scale(row)


def _assert_one_scale(row: str) -> None:
    """The row's figures read as parts of one whole: the prefix no larger than the prompt it is part of,
    served no larger than the prefix unless the row says the provider read past it."""
    prefix, served, prompt = re.search(r"prefix ≈?(\S+) .* served (\S+) of (\S+) ", row).groups()  # type: ignore[union-attr]
    assert _count(prefix) <= _count(prompt), row
    assert _count(served) <= _count(prefix) or "read past the marked prefix" in row, row


def test_cache_layout_says_why_served_runs_past_the_prefix() -> None:
    # OpenAI caches the previous request's prefix on its own, past what the engine marked cacheable (an
    # imported mini-swe-agent run's first turn: prefix 57, 320 of 1,575 read): the row says so.
    t = copy.deepcopy(_traces()[10])
    t["cacheable_prefix_tokens"] = 1000
    row = _summary_row(CacheLayoutPanel(), t)
    assert "prefix ≈1.1k  ━ served 4.3k of 5.3k (80%)  read past the marked prefix  all in the provider's tokens" in row, row
    # too narrow for the note whole: left out, never cut; the break's cause is not pushed out by it
    t["cache_break"] = {"section": "history", "cause": "history changed"}
    row = _summary_row(CacheLayoutPanel(), t, width=60)
    assert "past" not in row and row.endswith("✖ broke at history: history changed"), row


def test_cache_layout_before_the_providers_count_uses_the_learned_calibration() -> None:
    # A live turn before its reply (or a provider that gives no prompt count): the prefix is the engine's
    # count times the session's learned calibration (the ratio the plan used), said as such, on the scale
    # the row has once the count arrives. It was the engine's count, unlabelled.
    t = copy.deepcopy(_traces()[10])
    assert t["calibration"] == 1.0563
    del t["usage"]
    row = _summary_row(CacheLayoutPanel(), t)
    assert "prefix ≈5.3k  ━ served 0 (n/a)  ≈ the provider's tokens: the engine's ×1.06, learned" in row, row
    t["calibration"] = 1.0  # fewer than three replies seen: nothing learned yet
    row = _summary_row(CacheLayoutPanel(), t)
    assert "prefix ≈5.0k  ━ served 0 (n/a)  ≈ the provider's tokens: the engine's, not calibrated yet" in row, row
    # reads counted but no prompt: the hit rate is over the calibrated estimate of the prompt, marked ≈
    t["calibration"], t["usage"] = 1.0563, {"cache_read_tokens": 4265}
    row = _summary_row(CacheLayoutPanel(), t)
    assert "prefix ≈5.3k  ━ served 4.3k of ≈5.3k (80%)" in row, row


def test_cache_layout_on_a_real_import_reads_as_one_whole(tmp_path: Path) -> None:
    # DeepSeek's own counts (mini-swe-agent, pydicom-1413): the session's calibration (a running average)
    # beside this request's counts printed a prefix larger than the prompt, or served past it while the
    # hit rate said it was not, on 2 of 93 turns; the prefix's share of the prompt never does.
    src = TRAJECTORIES / "mini-swe-agent-pr816" / "deepseek_chat_dev__pydicom__pydicom-1413.traj.json"
    if not src.is_file():
        pytest.skip(f"real trajectories not found at {TRAJECTORIES}")
    rec = tmp_path / "pydicom.cpsession"
    pipe, _ = ingest(load(src), rec)
    pipe.close()
    panel = CacheLayoutPanel()
    traces = [t for t in FileSource(rec).load_initial() if t.get("usage")]
    assert len(traces) == 93
    for summary in traces:
        _assert_one_scale(_summary_row(panel, FileSource(rec).full_trace(summary["turn"])))


def _count(shown: str) -> float:
    return float(shown[:-1]) * {"k": 1e3, "M": 1e6}[shown[-1]] if shown[-1] in "kM" else float(shown)
