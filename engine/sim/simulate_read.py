"""A recording's events as a session-wide what-if reads them: held when the file is small, else read afresh
for each pass (`recording_events`), with only the trace fields simulate reads (`TRACE_FIELDS`); the
recording's token-count table (`read_counts`); every event at once (`load_recording_events`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from engine.recording.counts import CountTable, CountTableError
from engine.recording.journal import Event

# What simulate reads of the recorded turn traces: their sections (the token-count check,
# _recorded_sections). A reader asked for only these builds nothing else of a trace
# (RecordingReader.events(trace_fields=...)): ~2/3 of decoding a long recording's events.
TRACE_FIELDS = ("sections",)


def replayer_blobs(events: Iterable[Event]) -> dict[str, str]:
    out: dict[str, str] = {}
    for e in events:
        if e.get("k") == "blob":
            d = e["data"]
            out[e["h"]] = d if isinstance(d, str) else d.decode()
    return out


def load_recording_events(path: str | Path) -> tuple[list[Event], dict[str, Any]]:
    from engine.recording.cpsession import RecordingReader

    with RecordingReader.open(path) as r:  # its descriptor goes back now, not when the reader is collected
        return list(r.events()), dict(r.header)  # in their in-memory form already (RecordingReader's doc)


def read_counts(reader: Any) -> tuple[CountTable | None, str | None]:
    """A RecordingReader's token-count table, or (None, why) when it has one that cannot be used."""
    try:
        return reader.token_counts(), None
    except CountTableError as exc:
        return None, f"token counts: {exc}; counted afresh"


# A recording whose events (from data_start to data_end) take at most this many bytes on disk is read
# once and its events held (~16x the file in memory: ~100 MB at this size); a larger one is read again
# for each pass of simulate_stream, so its memory does not grow with its events. Each extra read
# decodes the whole file again (~5% of a simulate's CPU on a long session, more on a short one), which
# is worth it only where the events would not fit comfortably.
HOLD_EVENTS_BYTES = 6 << 20


def recording_events(
    reader: Any,
    trace_fields: Sequence[str] | None = TRACE_FIELDS,
    hold_bytes: int | None = None,
    convert: Callable[[Event], Event] | None = None,
) -> Callable[[], Iterable[Event]]:
    """The `read` simulate_stream takes, for an open RecordingReader: its events, held when the file is
    small (HOLD_EVENTS_BYTES, or `hold_bytes`), else read afresh from the file on each call (damage is
    a RecordingError from the iteration, as from reader.events()). `trace_fields` as reader.events';
    `convert`, when given, is applied to each event read."""
    limit = HOLD_EVENTS_BYTES if hold_bytes is None else hold_bytes

    def fresh() -> Iterable[Event]:
        got = reader.events(trace_fields=trace_fields)
        return got if convert is None else map(convert, got)

    if reader.data_end - reader.data_start <= limit:
        # A chunk's events a list at a time (RecordingReader.event_list): list(fresh()) resumed two
        # generators per event.
        event_list = getattr(reader, "event_list", None)
        events = list(fresh()) if convert is not None or event_list is None else event_list(trace_fields)
        return lambda: events
    return fresh
