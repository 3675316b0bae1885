"""The lean stream: what a client that asks for it (`{"k": "hello", "lean": true}`) gets for a turn.

A turn's trace is ~300 objects (~2.6 KB encoded): msgpack-encoding it on the I/O thread, cold, was
half of the probe's cost on a 1-2 ms turn. An inspector needs every turn's summary (the timeline
strip, sparkline, alerts, stepping) but a whole trace only for the turn the person looks at, the one
a re-plan folds from, or a save. So, for a lean client, within what one pass sends:

* the newest `turn` event goes out whole (follow mode shows it at once, no round trip);
* every other `turn` event goes out as `{"k": "turn_summary", "turn": N, "summary": {...}}`: the
  fields `inspector.timeline.summarize` reads, ~20 objects of the trace's ~300;
* the client may ask for whole traces: `{"k": "fetch", "turns": [N, ...]}` (at most FETCH_MAX a
  frame, FETCH_QUEUE queued per client); each is answered, in order and within the CPU budget, with
  `{"k": "trace", "turn": N, "trace": {...}}`, or `"trace": None` when the journal has no such turn.

Everything else in the stream is unchanged, the snapshot included (it is a one-off on attach, and a
client reconnecting after `dropped` needs whole traces of what it missed). A turn the agent has
already encoded (a recording agent hands its frame to `publish`) is sent whole: copying it is cheaper
than summarizing it. Recordings are untouched: this is only the wire. A client that also asks for the
elided stream is sent fewer events still, and reads the journal by position (see `elide`).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from operator import itemgetter
from typing import Any

# Turns one fetch frame may ask for, and turns a client may have waiting (a fetch beyond that is
# answered "trace": None at once, so a client asking too much learns it instead of waiting).
FETCH_MAX = 64
FETCH_QUEUE = 256
# How far back from the newest published event the newest turn is looked for (a burst of ordinary
# turns has one every ~6 events; past this the turns in it are all summarized).
LAST_TURN_SCAN = 256
# Events scanned forward from a bisection point for one that carries a turn number.
_SCAN = 64


# The trace's fields a summary holds (besides tap_errors and a compaction, when there are any).
_SUMMARY_KEYS = ("turn", "final_tokens", "error", "tier", "cache_break", "alerts", "pressure", "usage", "actions")
_summary_values = itemgetter(*_SUMMARY_KEYS)


def turn_summary(trace: dict[str, Any]) -> dict[str, Any]:
    """What the inspector's timeline reads of a trace: `inspector.timeline.summarize` of this is the
    same as of the trace (tests hold them together). The values are the trace's own objects, not
    reduced copies: on the probe's thread, out of CPU cache, every dict or list built here cost more
    (7 us hot, 18 us cold for the reduced form) than encoding the few extra fields (the rest of
    pressure and usage, whole actions and alerts) does (1.7 us hot for this one)."""
    try:
        # One C-level pass over the trace's keys (every engine trace has them all), into a dict display:
        # dict(zip(keys, values)) cost 1.7 us a turn against 0.85 us for this, hot (4.6 against 6.3 us cold).
        turn, final_tokens, error, tier, cache_break, alerts, pressure, usage, actions = _summary_values(trace)
        out = {
            "turn": turn,
            "final_tokens": final_tokens,
            "error": error,
            "tier": tier,
            "cache_break": cache_break,
            "alerts": alerts,
            "pressure": pressure,
            "usage": usage,
            "actions": actions,
        }
    except KeyError:
        out = {k: trace.get(k) for k in _SUMMARY_KEYS}
    if "tap_errors" in trace:
        out["tap_errors"] = trace["tap_errors"]
    # The plan's calibration (one float): the inspector's timeline puts the engine's count on the provider's
    # scale with it (its bars, and the hit rate of a turn whose usage has no prompt count).
    out["calibration"] = trace.get("calibration")
    # The compaction record (~23 objects, as many as the rest of the summary's sub-objects) is read
    # by the timeline only for a turn that compacted (the strip shows its pay-back); a turn that held,
    # the common case, leaves it out: every object here is one the I/O thread touches cold.
    comp = trace.get("compaction")
    if type(comp) is dict and comp.get("decision") == "compacted":
        out["compaction"] = comp
    return out


def summary_event(ev: dict[str, Any]) -> dict[str, Any]:
    """A `turn` event's `turn_summary` event, or the event itself if it is not a trace the engine built."""
    try:
        return {"k": "turn_summary", "turn": ev["turn"], "summary": turn_summary(ev["trace"])}
    except Exception:
        return ev


def is_turn(ev: Any) -> bool:
    return type(ev) is dict and ev.get("k") == "turn"


def _turn_at(src: Sequence[Any], i: int, n: int) -> int | None:
    """The turn number of the first event at or after i (within _SCAN events) that carries one."""
    # (A journal's `peek`: a turn on disk unbuilt stays its marker, which carries the number.)
    peek = getattr(src, "peek", src.__getitem__)
    for j in range(i, min(n, i + _SCAN)):
        ev = peek(j)
        if type(ev) is dict:
            t = ev.get("turn")
            if type(t) is int:
                return t
    return None


def find_turn(src: Sequence[Any], turn: int) -> dict[str, Any] | None:
    """Turn `turn`'s `turn` event in a journal, or None. Events carrying a turn number (request, turn,
    usage, ...) come in turn order, so this bisects (a few reads, even of a journal on disk) and then
    looks at the events from the first of that turn on."""
    n = len(src)

    class _Turns:  # bisect over event positions, keyed by the turn number found there
        def __len__(self) -> int:
            return n

        def __getitem__(self, i: int) -> float:
            t = _turn_at(src, i, n)
            return float("inf") if t is None else t

    lo = bisect_left(_Turns(), turn)  # type: ignore[arg-type]
    peek = getattr(src, "peek", src.__getitem__)
    for j in range(lo, min(n, lo + 4 * _SCAN)):
        ev = peek(j)
        if type(ev) is dict:
            t = ev.get("turn")
            if ev.get("k") == "turn_deferred" and t == turn:
                ev = src[j]  # rebuilt (the only one this lookup builds), or the marker again if it cannot be
            if ev.get("k") == "turn" and t == turn:
                return ev
            if type(t) is int and t > turn:
                break
    return None
