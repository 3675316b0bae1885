"""What a session-wide what-if needs of the whole journal besides its fold, gathered without keeping its
events (`_Index`): `actual` events and DeepSeek builds, each turn's usage and failed calls, request
times; which failed calls were not billed (`unbilled`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from engine.recording.journal import Event


class _Index:
    """What simulate needs of the whole journal before (or besides) its fold, gathered in the index pass
    (Replayer.index_stream's `visit`) so that no event is kept: whether there are `actual` events, the
    DeepSeek builds that served the calls, each turn's usage and failed calls, each request's time.
    Gathering stops at the first event it cannot read (`broken`): simulate then raises what it raised
    when it held the events, from the same place (see `usages`)."""

    def __init__(self) -> None:
        self.has_actual = False
        self.fingerprints: dict[str, None] = {}  # in order of first appearance
        self.last_fingerprint: str | None = None
        self.failed: set[int] = set()
        self.own: dict[int, dict[str, Any]] = {}  # `usage` events' usage by turn
        self.actual_usages: dict[int, dict[str, Any]] = {}
        self.req_times: dict[int, float] = {}
        # Failed attempts sent again before a turn's call, by turn (the proxy's `diag` events of kind
        # "retried": engine/capture/proxy/retries.py); never billed, so in no column
        self.retried: dict[int, int] = {}
        # Turns whose request rewrote the agent's own history, with what the tap noted (its `diag`
        # events of kind "history_rewrite": engine/capture/tap_rewrite.py): a cache break there is its
        self.rewrites: dict[int, dict[str, Any]] = {}
        self.broken = False

    def visit(self, e: Event) -> None:
        k = e.get("k")
        if k == "actual":
            self.has_actual = True
        if k in ("actual", "build") and e.get("system_fingerprint"):
            fp = str(e["system_fingerprint"])
            self.fingerprints.setdefault(fp, None)
            self.last_fingerprint = fp
        if self.broken:
            return
        try:
            if k == "usage":
                self.own[int(e["turn"])] = dict(e["usage"])
            elif k == "error":
                self.failed.add(int(e["turn"]))
            elif k == "actual":
                if e.get("usage"):
                    self.actual_usages[int(e["turn"])] = dict(e["usage"])
            elif k == "request" and isinstance(e.get("turn"), int):
                self.req_times[e["turn"]] = float(e.get("time") or 0.0)
            elif k == "diag" and e.get("kind") == "retried":
                self.retried[int(e["turn"])] = int(e.get("attempts") or 0)
            elif k == "diag" and e.get("kind") == "history_rewrite":
                self.rewrites[int(e["turn"])] = dict(e)
        except Exception:  # noqa: BLE001 - raised again where simulate raised it (usages)
            self.broken = True

    def usages(self, read: Callable[[], Iterable[Event]]) -> tuple[set[int], dict[int, dict[str, Any]]]:
        """_failed_and_usages of the journal (its figures, or its error: read again to raise it)."""
        if self.broken:
            events = list(read())
            return _failed_and_usages(events, [e for e in events if e.get("k") == "actual"])
        usages = dict(self.actual_usages)
        usages.update(self.own)  # the engine's own feedback record wins (a new turn's is added at the end)
        return set(self.failed), usages

    def times(self, read: Callable[[], Iterable[Event]]) -> dict[int, float]:
        if self.broken:
            return {
                e["turn"]: float(e.get("time") or 0.0)
                for e in read()
                if e.get("k") == "request" and isinstance(e.get("turn"), int)
            }
        return self.req_times


def unbilled(failed: Iterable[int], usages: Mapping[int, object]) -> set[int]:
    """Of the turns whose call failed (an `error` event), those the provider did not bill: the ones with no
    usage. A call that failed before the provider read its prompt (a server error, a prompt too long) has
    none; one cut after the provider reported its usage (a stream closed early, an error event mid-stream:
    Anthropic's message_start carries the input and cache figures) was billed and wrote the cache, so it
    counts in every column as any other call (report's cost then agrees with `top`'s)."""
    return {t for t in failed if t not in usages}


def _failed_and_usages(
    events: list[Event], actual: list[Event]
) -> tuple[set[int], dict[int, dict[str, Any]]]:
    """The turns whose call failed (`error` events), and each turn's usage: an `actual` event's (of
    `actual`, the recording's), overridden by the engine's own `usage` event for the turn.

    One pass over the events for both (a long session's events are cold in the cache by now: each pass
    costs what touching every event costs). A malformed event raises what the separate passes this
    replaced raised, in their order: on any error the passes run again, one after the other."""
    failed: set[int] = set()
    own: dict[int, dict[str, Any]] = {}
    try:
        for e in events:
            k = e.get("k")
            if k == "usage":
                own[int(e["turn"])] = dict(e["usage"])
            elif k == "error":
                failed.add(int(e["turn"]))
        usages = {int(e["turn"]): dict(e["usage"]) for e in actual if e.get("usage")}
    except Exception:
        failed = {int(e["turn"]) for e in events if e.get("k") == "error"}  # raises as before (below too)
        usages = {}
        for e in events:
            if e.get("k") == "actual" and e.get("usage"):
                usages[int(e["turn"])] = dict(e["usage"])
        for e in events:
            if e.get("k") == "usage":
                usages[int(e["turn"])] = dict(e["usage"])
        raise  # (not reached: the passes do what the one pass did)
    usages.update(own)  # the engine's own feedback record wins (a new turn's is added at the end)
    return failed, usages
