"""Reading a recording's events for a command (every event, or what `explain` needs of one turn), with
each frame's offset for the one-line errors; no typer, so that the typer-free command paths
(cli_argv.py) use it as the typer commands do (cli_common.py re-exports it)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from .recording_open import fail, warn

if TYPE_CHECKING:
    from engine.recording.cpsession import RecordingReader


def event_frames(r: RecordingReader) -> Iterator[tuple[int, dict[str, Any]]]:
    """(offset of its frame, event) of every event of a recording, read lazily: RecordingError and
    OSError come from the iteration, for the caller to say as one line."""
    return r.event_frames()


def read_events(r: RecordingReader) -> tuple[list[dict[str, Any]], list[int]]:
    """Every event of a recording with the file offset of the frame holding it. Events are read lazily
    by the reader, so the read happens here, inside the error handling: damage is one line, not a
    traceback."""
    from engine.recording.cpsession import RecordingError

    events: list[dict[str, Any]] = []
    offsets: list[int] = []
    try:
        for pos, ev in r.event_frames():
            events.append(ev)
            offsets.append(pos)
    except RecordingError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"cannot read {r.path}: {exc.strerror or exc}")
    return events, offsets


def read_events_for_turn(r: RecordingReader, n: int) -> tuple[list[dict[str, Any]], list[int], dict[str, Any]]:
    """What `explain` needs of a recording to rebuild turn `n` and the turn before it (iter_events_for_turn),
    with each event's frame offset, and turn n's event. Turn events the replay never folds keep no trace:
    a replay folds only the turn event just before a stop or a checkpoint
    (engine.recording.replay.state_before), and traces are most of a recording's memory.

    RecordingError and OSError, and a malformed turn event, are the caller's to say (the event's index
    and the offsets read so far are in `MalformedTurn`)."""
    from engine.recording.replay import CHECKPOINT_EVERY

    events: list[dict[str, Any]] = []
    offsets: list[int] = []
    pending = -1  # the last turn event kept whole, until the request after it says whether a fold reads it
    target: dict[str, Any] | None = None
    try:
        for pos, ev in iter_events_for_turn(r, n, warn):
            k = ev.get("k")
            if k == "request":
                t = ev.get("turn")
                if pending >= 0 and not (type(t) is int and (t % CHECKPOINT_EVERY == 0 or t >= n - 1)):
                    events[pending] = _traceless(events[pending])
                pending = -1
            elif k == "turn":
                if pending >= 0:  # a later turn event before any request: the replay never folds this one
                    events[pending] = _traceless(events[pending])
                pending = len(events)
                if ev.get("turn") == n:
                    target = ev
            events.append(ev)
            offsets.append(pos)
    except MalformedTurn as exc:
        raise MalformedTurn(str(exc), exc.index, [*offsets, *exc.offsets]) from None
    assert target is not None  # iter_events_for_turn raised MalformedTurn otherwise
    return events, offsets, target


def iter_events_for_turn(
    r: RecordingReader, n: int, on_damage: Callable[[str], None]
) -> Iterator[tuple[int, dict[str, Any]]]:
    """(frame offset, event) of what `explain` reads to rebuild turn `n` and the turn before it: up to the
    first request after turn n's turn event (its usage and as-sent events come before that), through the
    reader's index; later events are not read. Explaining the last turn of a 10,000-turn recording held
    every event whole (266 MB for a 6 MB file).

    Each turn event is checked (MalformedTurn: its index, and its own offset only; a caller that keeps
    the offsets read before adds them). RecordingError and OSError are the caller's to say, except damage
    after turn n's event: that ends the events, and `on_damage` gets the warning to say."""
    from engine.recording.cpsession import RecordingError

    found = False
    index = 0
    frames = r.event_frames()
    while True:
        try:
            pos, ev = next(frames)
        except StopIteration:
            break
        except RecordingError as exc:
            if not found:
                raise
            # Only what follows turn n's event is lost (on disk, the next turn's chunk): explain it.
            on_damage(f"{exc}; turn {n} precedes the damage and is explained from what comes before it")
            break
        k = ev.get("k")
        if k == "request":
            if found:
                break
        elif k == "turn":
            check_turn_event(ev, index, [], pos)
            if ev.get("turn") == n:
                found = True
        yield pos, ev
        index += 1
    if not found:
        raise MalformedTurn(f"turn {n}'s turn event is not where the recording's index says", index, [])


def _traceless(ev: dict[str, Any]) -> dict[str, Any]:
    return {"k": "turn", "turn": ev.get("turn")}


class MalformedTurn(Exception):
    """A turn event `explain` cannot read: `index` is the event's, `offsets` those read so far."""

    def __init__(self, message: str, index: int, offsets: list[int]) -> None:
        super().__init__(message)
        self.index, self.offsets = index, offsets


def check_turn_event(ev: dict[str, Any], index: int, offsets: list[int], pos: int) -> dict[str, Any]:
    """The trace of a turn event, or MalformedTurn saying what is wrong with it."""
    from engine.errors import ContextPipeError
    from engine.recording.journal import trace_of

    try:
        trace = trace_of(ev)
        if type(ev.get("turn")) is not int or not isinstance(trace, dict):
            raise ValueError("turn event without an int turn number and a trace map")
    except (ContextPipeError, ValueError, KeyError, TypeError) as exc:
        raise MalformedTurn(f"turn event {index} is malformed ({exc})", index, [*offsets, pos]) from None
    return trace


def event_offset(offsets: list[int], index: int | None) -> str:
    if index is None or not 0 <= index < len(offsets):
        return ""
    return f" (the frame at offset {offsets[index]})"
