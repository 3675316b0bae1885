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
from engine.probe.lean import turn_summary
from engine.recording.journal import trace_of
from engine.recording.replay import Replayer
from engine.whatif import Overrides
from inspector.cli import load_events
from inspector.sources.file import FileSource
from inspector.timeline import summarize
from panels.cache_layout import CacheLayoutPanel
from panels.fmt import tok
from panels.line_panel import Keyed, content_of
from panels.manifest import scale_note
from panels.tier import TierPanel
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
    # with this request's own ratio, the provider's count over the engine's, where the row holds it (the
    # manifest's border says the session's learned one, which does not move every turn)
    assert row.endswith("(80%)  all in the provider's tokens (the engine's ×1.06)"), row
    assert _summary_row(panel, t, 200).endswith(
        "(80%)  all in the provider's tokens: the engine's ×1.06 on this request")
    assert _summary_row(panel, t, 100).endswith("(80%)  all in the provider's tokens")
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


def _panel_rows(panel: object, trace: dict, width: int) -> list[str]:
    panel.set_reactive(type(panel).trace, trace)  # type: ignore[attr-defined]
    return [content_of(line).plain for line in panel.lines(width)]  # type: ignore[attr-defined]


def _strip_axis(strip: TimelineStrip, at: int, width: int = 200) -> str:
    strip.set_reactive(TimelineStrip.current, at)
    return content_of(strip.lines(width)[3]).plain


def _pydicom(tmp_path: Path) -> Path:
    src = TRAJECTORIES / "mini-swe-agent-pr816" / "deepseek_chat_dev__pydicom__pydicom-1413.traj.json"
    if not src.is_file():
        pytest.skip(f"real trajectories not found at {TRAJECTORIES}")
    rec = tmp_path / "pydicom.cpsession"
    pipe, _ = ingest(load(src), rec)
    pipe.close()
    return rec


@pytest.mark.parametrize("which", ["demo", "pydicom"])
def test_timeline_tier_and_cache_layout_give_one_size_of_the_prompt(which: str, tmp_path: Path) -> None:
    # The timeline's "sent" and the tier's "planned → sent" were the engine's count (cl100k), the cache
    # layout's "of" the provider's: "sent 16k" beside "served 18k of 18k" on turn 30 of DeepSeek's
    # pydicom-1413 run, "sent 5.9k" beside "of 6.2k" on the demo's last turn. All three are the provider's
    # count of the prompt now, and the strip and the tier say so.
    rec = DEMO if which == "demo" else _pydicom(tmp_path)
    src = FileSource(rec)
    summaries = src.load_initial()
    strip = TimelineStrip()
    strip.traces = [summarize(s) for s in summaries]
    strip.set_reactive(TimelineStrip.count, len(summaries))
    tier, layout = TierPanel(), CacheLayoutPanel()
    counted = 0
    for i, s in enumerate(summaries):
        t = src.full_trace(s["turn"])
        axis = _strip_axis(strip, i)
        shown_sent = re.search(r"  sent (≈?\S+)  ", axis).group(1)  # type: ignore[union-attr]
        row = next(r for r in _panel_rows(tier, t, 80) if r.startswith("planned"))
        tier_sent = re.search(r"→ sent (≈?\S+) ", row).group(1)  # type: ignore[union-attr]
        assert shown_sent == tier_sent, (t["turn"], axis, row)
        assert row.endswith("provider's tokens"), row
        prompt = (t.get("usage") or {}).get("input_tokens")
        if prompt:
            counted += 1
            of = re.search(r"served \S+ of (\S+) ", _summary_row(layout, t)).group(1)  # type: ignore[union-attr]
            assert shown_sent == of == tok(prompt), (t["turn"], axis, of)
    assert counted == (93 if which == "pydicom" else 40)
    assert "in the provider's tokens" in content_of(strip.lines(200)[4]).plain
    if which == "pydicom":
        t30 = src.full_trace(30)
        assert "sent 18k" in _strip_axis(strip, 30) and t30["final_tokens"] == 15978  # the engine's 16k
        assert "planned ≈18k → sent 18k (+3), 0 actions  provider's tokens" in _panel_rows(tier, t30, 80)


def test_before_the_providers_count_the_timeline_and_tier_use_the_learned_calibration() -> None:
    # A live turn before its reply, or a provider with no prompt count: the size is the engine's count times
    # the calibration the plan used, marked ≈, on the strip and in the tier alike; the strip's hit shade of
    # reads with no prompt count is over that estimate, as the cache layout's hit rate is (it was over the
    # engine's count: 4500 read of 5036 drew 89%, a full block, where the cache layout says 85%).
    t = copy.deepcopy(_traces()[10])
    assert (t["final_tokens"], t["calibration"]) == (5036, 1.0563)
    del t["usage"]
    strip = TimelineStrip()
    strip.traces = [summarize(t)]
    strip.set_reactive(TimelineStrip.count, 1)
    assert "sent ≈5.3k" in _strip_axis(strip, 0)
    assert "planned ≈5.3k → sent ≈5.3k (+4), 2 actions" in next(
        r for r in _panel_rows(TierPanel(), t, 80) if r.startswith("planned"))
    t["usage"] = {"cache_read_tokens": 4500}  # reads only: 4500 of ≈5320 is 85% ("▓"); of the engine's 5036, 89% ("█")
    strip.traces = [summarize(t)]
    strip.restate()
    cols, _ = strip._summary(10)
    assert cols[0][3] == HIT_SHADES[round(4500 / round(5036 * 1.0563) * 4)] == "▓"
    assert "served 4.5k of ≈5.3k (85%)" in _summary_row(CacheLayoutPanel(), t)


def test_the_lean_streams_turn_summary_carries_the_calibration() -> None:
    # A live inspector's timeline is built from the probe's turn summaries: without the calibration a turn
    # with no prompt count could only be drawn on the engine's scale.
    t = _traces()[10]
    assert turn_summary(t)["calibration"] == summarize(t)["calibration"] == summarize(turn_summary(t))["calibration"] == 1.0563


def test_the_section_manifest_says_it_is_on_the_engines_scale() -> None:
    # Budgets are planned in the engine's tokens, so the manifest stays on them; it said nothing of it beside
    # panels that show the provider's count. Its bottom border says so, with what one of its tokens is on the
    # provider's scale as the session has learned it (the calibration the plan used), counted or not: this
    # request's own ratio is the cache layout's to say.
    t = copy.deepcopy(_traces()[10])
    assert (t["calibration"], t["usage"]["input_tokens"], t["final_tokens"]) == (1.0563, 5334, 5036)
    assert scale_note(t, 120) == "the engine's tokens (cl100k), what budgets are planned in; the provider's ≈×1.06, learned"
    assert scale_note(t, 60) == "the engine's tokens (cl100k); the provider's ≈×1.06, learned"
    assert scale_note(t, 32) == "engine's tokens; provider ≈×1.06"
    assert scale_note(t, 31) == "engine's tokens"
    t["calibration"] = 1.0  # counted, but too few replies seen to learn from
    assert scale_note(t, 60) == "the engine's tokens (cl100k); not calibrated yet"
    assert scale_note(t, 31) == "engine's tokens; uncalibrated"
    t["calibration"] = 1.0563
    del t["usage"]
    assert scale_note(t, 60) == "the engine's tokens (cl100k); the provider's ≈×1.06, learned"
    t["calibration"] = 1.0
    assert scale_note(t, 60) == "the engine's tokens (cl100k); no provider count yet"
    assert scale_note(t, 31) == "engine's tokens; uncalibrated"


async def test_the_manifests_border_stays_put_while_the_providers_count_moves() -> None:
    # The border printed this request's ratio ("the provider counted ×1.06", then ×1.11): it changed nearly
    # every turn, and a new border repaints the whole table, ~2 ms of each step at 120x40. Two turns with
    # the same calibration and different provider counts now show the same border, left as it was.
    from textual.app import App, ComposeResult

    from panels.manifest import ManifestPanel

    class One(App[None]):
        def compose(self) -> ComposeResult:
            yield ManifestPanel()

    first = copy.deepcopy(_traces()[10])
    second = copy.deepcopy(first)
    second["usage"]["input_tokens"] = 5600  # ×1.11 of the engine's 5036 where the first was ×1.06
    app = One()
    async with app.run_test(size=(120, 20)) as pilot:
        panel = app.query_one(ManifestPanel)
        panel.show(first)
        await pilot.pause()
        said = panel.border_subtitle
        assert said
        panel.show(second)
        await pilot.pause()
        assert panel.border_subtitle == said
        assert "≈×1.06, learned" in said
    # Across the demo recording the border changes as often as the calibration does (two decimals) or the
    # first count arrives, not on every turn.
    traces = _traces()
    said_each = [scale_note(t, 116) for t in traces]
    changes = sum(a != b for a, b in zip(said_each, said_each[1:], strict=False))
    assert changes <= 3 < len(traces), said_each


def test_the_whatif_comparison_says_its_figures_are_the_engines() -> None:
    # The what-if pane printed "tokens sent 8.8k" (the plan's count, the engine's) under an unlabelled
    # header beside the tier's provider-scale "sent 9.3k", and the window (the provider's) in the same
    # column. A re-plan has no provider count, so its figures stay the plan's, as explain's, and say so.
    events, _, _ = load_events(str(DEMO))
    actual = _traces()[25]
    whatif = Replayer(events).replan(25, Overrides(window=20000)).trace
    lines = compare(actual, whatif).plain.splitlines()
    assert lines[0].split() == ["engine's", "tokens", "actual", "what-if"], lines[0]
    assert lines[2].split() == ["window", "(provider)", "10k", "20k"], lines[2]
    sent_row = next(line for line in lines if line.startswith("tokens sent"))
    assert sent_row.split()[2] == tok(actual["final_tokens"]) == "8.8k"
    assert "sent 9.3k" in next(r for r in _panel_rows(TierPanel(), actual, 80) if r.startswith("planned"))


def test_the_session_wide_whatif_says_which_tokens_it_counts() -> None:
    # Simulate's token columns are the engine's counts scaled by the calibration learned from the recorded
    # usage (1.059 on the demo recording): provider-scale estimates, printed unlabelled beside the tier's
    # provider-scale "sent" and the manifest's engine-scale counts. Said under the rows now.
    import json

    from typer.testing import CliRunner

    from inspector.cli import app
    from panels.whatif_session import session_view

    res = CliRunner().invoke(app, ["simulate", str(DEMO), "--json", "--per-turn"])
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    assert report["calibration"] == 1.059
    rows = session_view(report, width=80).plain.splitlines()
    assert rows[rows.index(next(r for r in rows if r.startswith("cache breaks"))) + 1] == (
        "tokens: ≈ the provider's (the engine's ×1.06, learned)"), rows
    report["calibration"] = 1.0
    assert "tokens: the engine's (cl100k), not calibrated" in session_view(report, width=80).plain


def test_the_help_says_which_panels_show_which_tokens() -> None:
    # `?` described "tokens sent per turn" and the manifest's "tokens" with no word of whose: two counts
    # of one prompt on screen and nothing to say why.
    from inspector.screens.help import PANELS

    text = " ".join(PANELS.split())
    assert "**Token scales**: the tier, the cache layout and the timeline show the provider's tokens" in text
    assert "Its counts are the engine's tokens (cl100k), what budgets are planned in" in text


def test_a_compactions_payback_on_the_timeline_says_its_tokens_are_the_engines() -> None:
    # The axis read "sent 6.2k  compaction: saves 3.1k/turn, re-sends ..." : sent the provider's count, the
    # pay-back's figures the plan's (the engine's) with nothing to tell them apart.
    traces = _traces()
    k = next(i for i, t in enumerate(traces) if (t.get("compaction") or {}).get("decision") == "compacted")
    strip = TimelineStrip()
    strip.traces = [summarize(t) for t in traces]
    strip.set_reactive(TimelineStrip.count, len(traces))
    axis = _strip_axis(strip, k, width=240)
    assert f"compaction: {traces[k]['compaction']['text']} (engine's tokens)" in axis, axis
    assert "(engine's" not in _strip_axis(strip, k, width=100)  # said whole or not at all
