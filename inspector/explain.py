"""EXPLAIN output: a turn's trace as text (reads like EXPLAIN ANALYZE) or JSON, with a diff against
what actually happened when the turn was re-planned under overrides."""

from __future__ import annotations

from typing import Any

from engine.marker_note import note_of as marker_note
from engine.whatif import carried_cut
from engine.wording import counted

JSON_KEYS = (
    "turn",
    "pressure",
    "tier",
    "tier_reason",
    "reserves",
    "estimated_tokens",
    "final_tokens",
    "sections",
    "markers",
    "actions",
    "skipped",
    "alerts",
    "request_sha256",
    "prefix_sha256",
    "usage",
    "error",
    "cache_break",
    "history_rewrite",
    "conversation_branch",
    "retries",
    # the cost_aware policy's decision, taken or held, and the cut the history carries (TRACE_SCHEMA.md):
    # left out, a script asking why a turn did not compact had no answer
    "compaction",
)


def to_json(
    trace: dict[str, Any], actual: dict[str, Any] | None = None, why: dict[str, Any] | None = None
) -> dict[str, Any]:
    out = {k: trace.get(k) for k in JSON_KEYS}
    if why is not None:
        out["why_cache_missed"] = why
    out["sections"] = [
        {
            k: s.get(k)
            for k in (
                "id",
                "name",
                "kind",
                "scope",
                "priority",
                "budget",
                "planned",
                "tokens",
                "form",
                "omitted",
                "sha256",
                "changed",
                "note",
            )
        }
        for s in trace["sections"]
    ]
    if actual is not None:
        out["diff"] = diff(actual, trace)
    floor = over_ceiling(trace)
    if floor is not None:
        out["over_ceiling"] = floor
    return out


def over_ceiling(trace: dict[str, Any]) -> dict[str, Any] | None:
    """What a turn planned into a window too small for what the engine never evicts (its anchors, the goal,
    Never sections, the newest round: engine.trace.check_budget's list) still needs, and the least window
    whose ceiling holds it; None when the request is within its ceiling. A live pipeline raises
    BudgetExceededError there; `explain --budget 10` re-plans past it, and said nothing of it."""
    need, ceiling = trace["final_tokens"], trace.get("ceiling")
    if not isinstance(ceiling, int) or need <= ceiling:
        return None
    kept = {
        s["id"]: s["tokens"]
        for s in trace["sections"]
        if s["tokens"] and (s["priority"] == "never" or s["kind"] in ("identity", "constraints", "goal", "history"))
    }
    return {"needs": need, "ceiling": ceiling, "never_evicted": kept, "least_window": _least_window(trace)}


def _least_window(trace: dict[str, Any]) -> int:
    """The smallest window whose ceiling, planned as the turn's was (the window less its margin, over the
    calibration, less the reserves but at most half: engine.plan.ceiling_for), holds the request."""
    from engine.config import PipelineConfig
    from engine.plan import ceiling_for

    need, limit, usable = trace["final_tokens"], trace["limit"], trace.get("usable", trace["limit"])
    ratio = float(trace.get("calibration") or 1.0)
    reserve = sum(int(trace["reserves"].get(k, 0)) for k in ("response", "thinking", "schema"))
    # The margin is not in the trace: read back from a window large enough to show it, else the default.
    margin = round(1 - usable / limit, 3) if limit >= 1000 else PipelineConfig.margin

    def holds(window: int) -> bool:
        return ceiling_for(int(int(window * (1 - margin)) / ratio), reserve) >= need

    lo, hi = 1, 100_000_000  # engine.tokens.Budget's range
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if holds(mid) else (mid + 1, hi)
    return lo


def diff(actual: dict[str, Any], whatif: dict[str, Any]) -> dict[str, Any]:
    a = {s["id"]: s for s in actual["sections"]}
    w = {s["id"]: s for s in whatif["sections"]}
    sections = {}
    for sid in list(a) + [k for k in w if k not in a]:
        sa, sw = a.get(sid), w.get(sid)
        ta, tw = (sa or {}).get("tokens", 0), (sw or {}).get("tokens", 0)
        fa, fw = (sa or {}).get("form", "absent"), (sw or {}).get("form", "absent")
        if ta != tw or fa != fw:
            sections[sid] = {"tokens": [ta, tw], "form": [fa, fw]}
    return {
        "tier": [actual["tier"], whatif["tier"]],
        "final_tokens": [actual["final_tokens"], whatif["final_tokens"]],
        "tokens_saved": actual["final_tokens"] - whatif["final_tokens"],
        "sections": sections,
        "markers": [[m["section"] for m in actual["markers"]], [m["section"] for m in whatif["markers"]]],
        "request_changed": actual["request_sha256"] != whatif["request_sha256"],
    }


def to_text(
    trace: dict[str, Any], actual: dict[str, Any] | None = None, why: dict[str, Any] | None = None
) -> str:
    t = trace
    p = t["pressure"]
    r = t["reserves"]
    lines = [
        f"EXPLAIN turn {t['turn']}  model={t['model']} provider={t['provider']} window={t['limit']}",
        f"  pressure: raw {p['raw']:.3f}  predictive {p['predictive']:.3f}   (reserves: response {r['response']}"
        f" p{r.get('percentile', 75)}, thinking {r['thinking']}, schema {r['schema']})",
        f"  tier: {t['tier']}  -- {t['tier_reason']['text']}",
        f"  tokens: estimated {t['estimated_tokens']} -> sent {t['final_tokens']} (ceiling {t.get('ceiling', '?')};"
        f" provider/estimate calibration {t.get('calibration', 1.0):.3f})",
        *_over_ceiling_lines(t),
        "",
        f"  {'section':<16}{'scope':<9}{'priority':<13}{'budget':>8}{'planned':>9}{'tokens':>8}  form",
    ]
    for s in t["sections"]:
        form = s["form"] + (f" (-{s['omitted']})" if s.get("omitted") else "")
        lines.append(
            f"  {s['id']:<16}{s['scope']:<9}{s['priority']:<13}{s['budget']:>8}{s['planned']:>9}{s['tokens']:>8}  {form}"
        )
        if s.get("note"):  # why the section was sent as it was (a degraded binder, empty messages Bedrock got as text)
            lines.append(f"    note: {s['note']}")
    lines.append("")
    mk = ", ".join(f"{m['section']}@{m['offset_tokens']}" for m in t["markers"]) or "none"
    lines.append(f"  cache markers: {mk}; cacheable prefix {t['cacheable_prefix_tokens']} tokens")
    note = marker_note(t.get("steps") or [])
    if note:  # why fewer than the provider allows (a flipped latch, prefixes under the model's minimum)
        lines.append(f"    markers left out: {note}")
    for a in t["actions"]:
        lines.append(f"  -> {a['step']}: {a.get('detail', '')} (saved {a.get('tokens_saved', 0)})")
    comp = t.get("compaction")
    if isinstance(comp, dict) and comp.get("decision") == "held" and comp.get("reason"):
        # Why the history was not compacted this turn (a compaction taken is the compact_history line)
        lines.append(f"  -- compaction held: {comp['reason']}")
    for s in t["skipped"]:
        lines.append(f"  -- skipped {s['step']}: {s['reason']} (would save {s.get('tokens_saved', 0)})")
    if t.get("cache_break"):
        lines.append(f"  cache break: {t['cache_break']['section']}: {t['cache_break']['cause']}")
    u = t.get("usage")
    if u:
        lines.append(
            f"  actual usage: input {u['input_tokens']} (cache read {u['cache_read_tokens']}, write "
            f"{u['cache_write_tokens']}), output {u['output_tokens']}"
        )
    rw = t.get("history_rewrite")
    if rw:  # a captured agent compacted its own history (engine.capture.tap_rewrite.rewritten)
        lines.append(
            f"  history rewritten by the agent: its request holds {counted(rw['messages'], 'message')}, {rw['kept']} the "
            f"engine had and {rw['replaced']} of the agent's own (summaries, edits) in place of {rw['dropped']} "
            f"it dropped, then {rw['new']} new; the engine kept its whole history and took the new ones"
        )
        if rw.get("applied"):  # messages edited where they stood, taken by the engine (Pipeline.edit_text, edit_part)
            turns = [t for t in rw.get("edited_turns", ()) if t >= 0]
            parts = rw.get("edited_parts") or []
            which = f" (the replies of turns {', '.join(map(str, turns))})" if turns else ""
            if any(p[1] != "reply" for p in parts):  # (a call, a user message, a result: each said)
                from engine.importers.history_edits import edits_said

                which = f" ({edits_said(parts)})"
            lines.append(
                f"  ({counted(rw['edited'], 'earlier message')} edited in place: the engine's history holds "
                f"{counted(rw['applied'], 'edit')}{which}, as the request sent them)"
            )
        elif rw.get("edited"):  # messages edited where they stood (engine.capture.tap_rewrite)
            lines.append(
                f"  ({counted(rw['edited'], 'earlier message')} edited in place: the request sent the edits, the "
                "engine keeps the originals, not both)"
            )
    branch = t.get("conversation_branch")
    if branch:  # a captured conversation that shares another's opening (engine.capture.lineage)
        from engine.capture.lineage import branch_note

        lines.append(f"  {branch_note(branch)}")
    unsure = t.get("conversation_ambiguous")
    if isinstance(unsure, dict) and unsure.get("note"):  # other captured sessions fit this request as well
        lines.append(f"  {unsure['note']}")
    tried = t.get("retries")
    if isinstance(tried, list) and tried:  # failed attempts the agent sent again (engine/capture/proxy/retries.py)
        from engine.capture.proxy.retries import retried_summary

        lines.append(f"  retried: {retried_summary(tried)}")
    if t.get("error"):  # the call got no answer (an upstream error, a cut stream): said, as usage is
        lines.append(f"  call failed: {t['error']}")
    for al in t.get("alerts", []):
        lines.append(f"  ! {al['severity']}: {al['rule']}: {al['message']}")
    lines.append(f"  request sha256 {t['request_sha256']}")
    if why is not None:
        from engine.recording.why import describe

        lines += ["", "  why the cache missed (this request against the previous one):"]
        lines += [f"    {x}" for x in describe(why)]
    if actual is not None:
        d = diff(actual, trace)
        lines += [
            "",
            "  what-if vs actual:",
            f"    tier {d['tier'][0]} -> {d['tier'][1]}; tokens {d['final_tokens'][0]} -> {d['final_tokens'][1]}"
            f" ({_delta(d['tokens_saved'])})",
        ]
        for sid, ch in d["sections"].items():
            lines.append(
                f"    {sid}: {ch['tokens'][0]} -> {ch['tokens'][1]} tokens, {ch['form'][0]} -> {ch['form'][1]}"
            )
        if d["markers"][0] != d["markers"][1]:
            lines.append(f"    markers {d['markers'][0]} -> {d['markers'][1]}")
        carried = carried_cut(actual, trace)
        if carried is not None:  # a wider window leaves the tokens unchanged: why, and what would not
            lines.append(
                f"    history stays compacted: a cut made before this turn ({carried} tokens left out) is the "
                f"session's state, which a re-plan of one turn keeps; `cp-inspect simulate FILE --window "
                f"{trace['limit']}` re-runs the session from its start under this window"
            )
    return "\n".join(lines)


def _over_ceiling_lines(t: dict[str, Any]) -> list[str]:
    floor = over_ceiling(t)
    if floor is None:
        return []
    kept = ", ".join(f"{k} {v}" for k, v in floor["never_evicted"].items())
    return [
        f"  over the ceiling: the request still needs {floor['needs']} tokens after every optimization, what "
        f"is never evicted ({kept}); window {t['limit']} cannot hold it: give a window of at least "
        f"{floor['least_window']} (--budget {floor['least_window']})"
    ]


def _delta(saved: int) -> str:
    return f"saves {saved}" if saved >= 0 else f"sends {-saved} more"
