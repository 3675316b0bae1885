"""The append-only journal: every input and decision as an event; sinks (recorder, probe) subscribe.

Content is stored once by hash (`blob` events); other events refer to blobs by hash, so a session's
journal grows with new content, not with turns x context size. Its older events live on disk
(`event_log.EventLog`), so a long session's journal does not grow its memory.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engine.errors import ContextPipeError
from engine.hashing import new_sha256
from engine.recording.blob_store import BlobStore
from engine.recording.event_log import KEEP_DEFAULT, Deferred, EventLog

Event = dict[str, Any]
Sink = Callable[[Event], None]


class Journal:
    def __init__(self, keep: int | None = KEEP_DEFAULT) -> None:
        """`keep`: events held in memory; older ones are written to a private temporary file and read
        back on demand (see event_log). None keeps every event in memory."""
        self.events = EventLog(keep)
        # Texts of messages behind the compaction cut move to disk (see blob_store, Pipeline._release).
        self.blobs = BlobStore()
        self._sinks: list[Sink] = []
        self.sink_errors = 0
        # While nothing subscribes, journaling an event is appending it to the log: `append` is the log's
        # own (a turn journals some five events, each one call instead of two). The first subscriber
        # brings the method back.
        self.append = self.events.append  # type: ignore[method-assign]

    def subscribe(self, sink: Sink) -> None:
        self._sinks.append(sink)
        self.__dict__.pop("append", None)  # every event goes to the sinks too: Journal.append

    def append(self, event: Event) -> None:
        self.events.append(event)
        for sink in self._sinks:
            try:
                sink(event)
            except Exception:  # an observer must never break the agent
                self.sink_errors += 1

    @property
    def observed(self) -> bool:
        """Whether anything is handed each event as it is journaled (a recorder, a probe, an exporter)."""
        return bool(self._sinks)

    def observed_only_by(self, sink: Sink) -> bool:
        """Whether `sink` is the one subscriber (equal bound methods of one object count as one)."""
        return len(self._sinks) == 1 and self._sinks[0] == sink

    def append_deferred(self, event: Deferred, wanted: Callable[[], bool] | None = None) -> None:
        """Journal an event kept as a recipe until read (see event_log.Deferred); a subscriber gets it
        built, now. `wanted`, if given, says whether the subscribers want it now, asked once the event
        is in the log: if not, it stays a recipe there and they get its `marker()` (a subscriber that wants events later reads them
        from the log, where reading builds it: the live probe's snapshot of a client that attaches)."""
        if not self._sinks:
            self.events.append(event)
        elif wanted is None:
            self.append(event.resolve())
        else:
            self.events.append(event)
            # Not wanted now, the subscribers get its marker, if it has one, in its place (a live
            # probe's fold clients, which build what it stands for themselves, keep their positions).
            ev = event.resolve() if wanted() else event.marker()  # (resolve: the log's own dict)
            if ev is not None:
                for sink in self._sinks:
                    try:
                        sink(ev)
                    except Exception:  # an observer must never break the agent
                        self.sink_errors += 1

    def blob(self, text: str) -> str:
        hasher = new_sha256()  # sha256_hex(text), without its frame (every text journaled)
        hasher.update(text.encode())
        h = hasher.hexdigest()
        if self.blobs.add(h, text):
            self.append({"k": "blob", "h": h, "data": text})
        return h

    def snapshot(self) -> list[Event]:
        return list(self.events)


# A preset zlib dictionary for turn traces. Traces are small (1-3 KB) and repeat the same keys and
# enum values every turn, which plain zlib cannot exploit within one frame; priming it with a template
# trace makes each one ~4x smaller. Format v1 depends on these exact bytes: never edit, add a v2.
_STEP_NAMES = (
    "reorder",
    "trim_schemas",
    "clear_tool_results",
    "spill",
    "llm_summary",
    "drop_rounds",
    "trim_sections",
    "place_markers",
)
_TEMPLATE_V1: dict[str, Any] = {
    "turn": 0,
    "model": "",
    "provider": "anthropic",
    "limit": 0,
    "usable": 0,
    "pressure": {"raw": 0.0, "predictive": 0.0},
    "reserves": {"response": 0, "thinking": 0, "schema": 0, "percentile": 75},
    "thresholds": {"trim_schemas": 0.6, "compact_history": 0.8, "aggressive_prune": 0.9},
    "tier": "Normal",
    "tier_reason": {
        "raw": "Normal",
        "predictive": "Normal",
        "recovery": False,
        "text": "raw pressure 0.15 -> Normal",
    },
    "estimated_tokens": 0,
    "final_tokens": 0,
    "ceiling": 0,
    "sections": [
        {
            "id": sid,
            "name": sid.title(),
            "kind": sid,
            "scope": scope,
            "priority": prio,
            "budget": 0,
            "planned": 0,
            "tokens": 0,
            "form": "full",
            "omitted": 0,
            "sha256": "",
            "changed": False,
            "items": 1,
            "note": "",
        }
        for sid, scope, prio in (
            ("tools", "global", "last_resort"),
            ("identity", "global", "never"),
            ("constraints", "global", "never"),
            ("latches", "session", "never"),
            ("goal", "session", "never"),
            ("history", "none", "normal"),
        )
    ],
    "steps": [
        {"step": n, "status": "not_needed", "reason": "tier Normal < CompactHistory"} for n in _STEP_NAMES
    ]
    + [
        {"step": "reorder", "status": "not_needed", "reason": "already cache-aligned"},
        {"step": "spill", "status": "not_needed", "reason": "nothing over 10000 tokens"},
        {"step": "trim_sections", "status": "not_needed", "reason": "every section within budget"},
        {"step": "place_markers", "status": "applied", "detail": "caches prefixes automatically: no markers"},
    ],
    "actions": [{"step": "clear_tool_results", "detail": "cleared 4 oldest tool results", "tokens_saved": 0}],
    "skipped": [{"step": "spill", "reason": "gate spill is off", "tokens_saved": 0}],
    "markers": [{"index": 0, "section": "history", "scope": "none", "offset_tokens": 0}],
    "cacheable_prefix_tokens": 0,
    "request_sha256": "",
    "prefix_sha256": "",
    "usage": {"input_tokens": 0, "output_tokens": 0, "cache_read_tokens": 0, "cache_write_tokens": 0},
    "cache_break": {"section": "history", "cause": "history rewritten by clear_tool_results"},
    "alerts": [{"rule": "cache_break", "severity": "warning", "message": "cache broke at", "turn": 0}],
    "latch_flips": [],
    "spill_failures": [],
    "error": None,
}
_ZDICT: dict[int, bytes] = {}


def _zdict(version: int) -> bytes:
    import msgpack

    if version != 1:
        raise ValueError(f"unknown trace dictionary version {version}")
    if 1 not in _ZDICT:
        _ZDICT[1] = msgpack.packb(_TEMPLATE_V1)
    return _ZDICT[1]


class InflateError(ContextPipeError, ValueError):
    """A compressed blob or trace is corrupt or inflates past MAX_INFLATE (a decompression bomb)."""


# No honest blob or trace inflates past a frame's size limit (the writer never compresses a larger one).
MAX_INFLATE = 64 * 1024 * 1024


def inflate(data: Any, zdict: bytes | None = None, limit: int = MAX_INFLATE) -> bytes:
    """zlib-decompress at most `limit` bytes; refuse more before allocating it (bombs) or corrupt input."""
    import zlib

    if not isinstance(data, bytes):
        raise InflateError(f"compressed data is a {type(data).__name__}, not bytes")
    d = zlib.decompressobj(zdict=zdict) if zdict is not None else zlib.decompressobj()
    try:
        out = d.decompress(data, limit)
        if d.unconsumed_tail:
            raise InflateError(f"compressed data inflates past {limit} bytes (a decompression bomb?)")
        out += d.flush()
    except zlib.error as exc:
        raise InflateError(f"compressed data is corrupt ({exc})") from None
    if not d.eof:
        raise InflateError("compressed data is cut off")
    return out


BLOB_COMPRESS_MIN = 128  # bytes; smaller blobs do not shrink enough to pay for the zlib header


def pack_event(event: Event) -> Event:
    """The on-disk form of an event: turn traces are zlib-compressed with the preset dictionary above,
    and text blobs of at least BLOB_COMPRESS_MIN bytes are zlib-compressed when that saves a fifth."""
    import zlib

    import msgpack

    k = event.get("k")
    if k == "turn" and "trace" in event:
        c = zlib.compressobj(9, zdict=_zdict(1))
        data = c.compress(msgpack.packb(event["trace"])) + c.flush()
        return {"k": "turn", "turn": event["turn"], "tz": data, "zd": 1}
    if k == "blob" and isinstance(event.get("data"), str) and len(event["data"]) >= BLOB_COMPRESS_MIN:
        raw = event["data"].encode("utf-8")
        if len(raw) > MAX_INFLATE:
            return event  # a reader would refuse to inflate it; the frame limit then applies
        z = zlib.compress(raw, 9)
        if len(z) < len(raw) * 0.8:
            return {"k": "blob", "h": event["h"], "z": z}
    return event


def trace_of(
    event: Event,
    limit: int = MAX_INFLATE,
    sizes: list[int] | None = None,
    counter: Any = None,
    check: Callable[[bytes], object] | None = None,
) -> dict[str, Any]:
    """The trace of a `turn` event, whether stored plain or packed. A packed one may inflate to at most
    `limit` bytes; `sizes`, if given, gets how many it did, `counter` (frames.ObjectCounter) counts the
    maps and arrays it decodes to, and `check` sees the inflated bytes before they are decoded (a
    reader's bounds, see cpsession)."""
    if "trace" in event:
        return event["trace"]  # type: ignore[no-any-return]
    import msgpack

    zd = event.get("zd", 1)
    if zd != 1:
        raise InflateError(f"turn trace uses unknown dictionary {zd!r}")
    raw = inflate(event.get("tz"), _zdict(1), limit)
    if sizes is not None:
        sizes.append(len(raw))
    if check is not None:
        check(raw)
    hooks = {} if counter is None else {"object_hook": counter.map_hook, "list_hook": counter.list_hook}
    try:
        trace = msgpack.unpackb(raw, raw=False, strict_map_key=False, **hooks)
    except Exception as exc:  # msgpack raises several unrelated types
        if counter is not None and counter.used > counter.left:
            raise  # the counter's own refusal (FrameCountError): the reader says it is over its budget
        raise InflateError(f"turn trace is not valid msgpack ({type(exc).__name__})") from None
    if not isinstance(trace, dict):
        raise InflateError(f"turn trace is a {type(trace).__name__}, expected a map")
    return trace


def unpack_event(
    event: Event,
    limit: int = MAX_INFLATE,
    sizes: list[int] | None = None,
    counter: Any = None,
    check: Callable[[bytes], object] | None = None,
) -> Event:
    """The in-memory form of an event read from disk (inverse of pack_event). `limit`, `sizes`,
    `counter` and `check`: see trace_of."""
    k = event.get("k")
    if k == "turn" and "tz" in event:
        return {"k": "turn", "turn": event.get("turn"), "trace": trace_of(event, limit, sizes, counter, check)}
    if k == "blob" and "z" in event:
        raw = inflate(event["z"], None, limit)
        if sizes is not None:
            sizes.append(len(raw))
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise InflateError("compressed blob is not UTF-8 text") from None
        return {"k": "blob", "h": event.get("h"), "data": text}
    return event
