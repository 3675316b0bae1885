"""A session's journal events folded into OpenTelemetry spans (`SessionFold`): one span per model call
from its request, usage or error and turn events, then the session's invoke_agent span (their parent);
with content export, the messages and the texts they name (`FoldTexts`, bounded). Used by the live sink
(`otel.OtelSink`, on its export thread) and by the export of a recording (`otel.export_events`).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from engine.export.spans import (
    CONTENT_CAP,
    MessagesFold,
    SpanData,
    agent_span,
    finish_reason,
    session_trace_id,
    turn_span,
)

# Set on a span whose times are not the model call's own (absent on every span of a live session or a
# recording made since probeotel23): "no_end", it starts at the request but the journal kept no end, so
# it is drawn zero-length; "no_times", the request had no time either (an import of a log without per-event
# times), so it sits at the newest time the journal had before it. On the invoke_agent span, with
# `contextpipe.timing.calls`, how many of its calls were such.
TIMING_ATTR = "contextpipe.timing"
TIMING_NO_END = "no_end"
TIMING_NO_TIMES = "no_times"


# The texts a content export's fold keeps for the events that may name them again, in characters. An
# event names a text by its hash; each text is journaled once per session, so one a later message repeats
# (a file read twice, a tool's same answer) must still be at hand then. Every text of the session was
# kept: exporting a long recording with --content held all its prompt text in memory at once.
MAX_FOLD_TEXT = 4 * 2**20


class FoldTexts(Mapping[str, str]):
    """Blob texts by hash for the content fold (MessagesFold), bounded: at most MAX_FOLD_TEXT characters,
    the least recently used let go first, each text only as far as a span can carry it (CONTENT_CAP:
    fit_messages never sends more of any one text). A text let go and named again is read back through
    `lookup` (a recording's own blob index, by hash), when there is one: without (a live sink), that part
    is left out of the span's messages."""

    def __init__(self, lookup: Callable[[str], str | None] | None = None, limit: int | None = None) -> None:
        self.lookup = lookup
        self.limit = MAX_FOLD_TEXT if limit is None else limit
        self._texts: OrderedDict[str, str] = OrderedDict()
        self.size = 0  # characters held

    def add(self, h: str, text: str) -> None:
        text = text[:CONTENT_CAP]
        old = self._texts.pop(h, None)
        if old is not None:
            self.size -= len(old)
        self._texts[h] = text
        self.size += len(text)
        while self.size > self.limit and len(self._texts) > 1:
            _, gone = self._texts.popitem(last=False)
            self.size -= len(gone)

    def __getitem__(self, h: str) -> str:
        text = self._texts.get(h)
        if text is not None:
            self._texts.move_to_end(h)
            return text
        found = None
        if self.lookup is not None:
            try:
                found = self.lookup(h)
            except Exception:  # a damaged or vanished file: the part is left out, as if never journaled
                found = None
        if found is None:
            raise KeyError(h)
        self.add(h, found)
        return self._texts[h]

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._texts))  # (reading an item moves it: a live view would change under it)

    def __len__(self) -> int:
        return len(self._texts)


class SessionFold:
    """Folds one session's journal events into spans: request times, usage, then the turn's trace; and,
    once the session is over (`agent()`), its invoke_agent span.

    A live sink passes `at`, a monotonic reading of when each event was journaled: a turn's span then
    ends when its outcome (usage or error) arrived, so its duration is the model call's. A recording has
    the outcome's wall time in its usage or error event (journaled since probeotel23); one from before
    that keeps no end, so its spans end where they start, and say so (TIMING_ATTR)."""

    def __init__(
        self,
        provider: str | None = None,
        content: bool = False,
        redact: bool = False,
        model: str | None = None,
        blob_lookup: Callable[[str], str | None] | None = None,
    ) -> None:
        self.provider = provider
        self.model = model or ""
        self.content = content and not redact  # redaction wins: prompt text never leaves
        self.redact = redact
        self.trace_id: int | None = None
        self.times: dict[int, tuple[float, float | None]] = {}  # turn -> (request time, monotonic)
        self.ended: dict[int, float] = {}  # turn -> monotonic reading of its outcome
        self.ended_wall: dict[int, float] = {}  # turn -> the outcome's journaled wall time (recordings)
        self.last_time: float | None = None  # the newest journaled wall time (session, requests)
        self.usage: dict[int, Mapping[str, Any]] = {}
        self.blobs = FoldTexts(blob_lookup)  # (content export only) bounded; see FoldTexts
        self.messages = MessagesFold()  # gen_ai.input.messages, when content is exported
        # For the invoke_agent span: the session's start, its calls, their summed usage, the last end.
        self.started: float | None = None
        self.calls = 0
        self.totals: dict[str, int] = {}
        self.last_end: float | None = None
        self.last_reason: str | None = None
        self.last_error: str | None = None
        self.untimed = 0  # calls whose span carries TIMING_ATTR
        self.first_start: float | None = None  # the earliest call's request time
        # The engine's own requests ask for the session's max_output_tokens (their body's max_tokens). A
        # captured session's requests are the agent's (their trace's request_params say what they set):
        # its `actual` events tell it apart in a recording made before the traces said so.
        self.max_output: int | None = None
        self.captured = False

    def _config(self, config: Any) -> None:
        value = config.get("max_output_tokens") if isinstance(config, Mapping) else None
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            self.max_output = value

    def take(self, ev: Mapping[str, Any], at: float | None = None) -> SpanData | None:
        k = ev.get("k")
        if k == "session" and self.trace_id is None:
            self.trace_id = session_trace_id(ev)
            self.started = _wall(ev.get("time"))
            self.last_time = self.started or self.last_time
            config = ev.get("config")
            if not self.model and isinstance(config, Mapping):
                self.model = str(config.get("model") or "")
            if not self.provider and isinstance(config, Mapping):
                self.provider = str(config.get("provider") or "") or None
            self._config(config)
        elif k == "config":
            self._config(ev.get("config"))
        elif k == "actual":
            self.captured = True
        elif k == "request":
            when = _wall(ev.get("time"))
            if when is not None:
                self.last_time = when
                self.times[int(ev["turn"])] = (when, at)
        elif k == "usage":
            turn = int(ev["turn"])
            self.usage[turn] = ev.get("usage") or {}
            if at is not None:
                self.ended[turn] = at
            when = _wall(ev.get("time"))
            if when is not None:
                self.ended_wall[turn] = when
        elif k == "error":
            if ev.get("turn") is not None:
                if at is not None:
                    self.ended.setdefault(int(ev["turn"]), at)
                when = _wall(ev.get("time"))
                if when is not None:
                    self.ended_wall.setdefault(int(ev["turn"]), when)
        elif k == "blob" and self.content:
            data = ev.get("data")
            if isinstance(data, bytes | bytearray):
                data = bytes(data).decode("utf-8", "replace")
            if isinstance(data, str):
                self.blobs.add(str(ev.get("h")), data)
        elif k in ("msg", "part", "source", "content") and self.content:
            self.messages.take(ev, self.blobs)
        elif k == "turn" and self.trace_id is not None:
            from engine.recording.journal import trace_of

            trace = trace_of(dict(ev))
            turn = int(trace.get("turn", ev.get("turn", 0)))
            start, started_at = self.times.pop(turn, (None, None))
            ended_at = self.ended.pop(turn, None)
            ended_wall = self.ended_wall.pop(turn, None)
            # What the span's times rest on, said when it is not the call itself (TIMING_ATTR): a trace
            # viewer draws a zero-length span as a call that took no time, which is a lie when the
            # journal simply did not keep the call's end (an old recording, an import of a log that
            # has no per-event time).
            timing: str | None = None
            if start is None:
                # Its request event was never seen (a sink queue that overflowed), or had no time (an
                # import): the newest journaled time, rather than 0, which put the span at 1970 where
                # backends drop or hide it.
                start = self.last_time
                timing = TIMING_NO_TIMES
            end = start
            # The call's duration by the live clock (when its request and its outcome were journaled) and
            # by the journaled wall times (when it was sent, when its outcome came): the longer. The proxy
            # journals an exchange, request and outcome together, once its answer has ended, and the tap
            # a call held behind another's turn: by the live clock alone such a call took no time at all.
            took: float | None = None
            if start is not None and started_at is not None and ended_at is not None:
                took = max(0.0, ended_at - started_at)
            if start is not None and ended_wall is not None and timing is None:
                took = max(took or 0.0, ended_wall - start)
            if start is not None and took is not None:
                end = start + took
            elif timing is None:
                timing = TIMING_NO_END
            if start is not None and timing is None:
                first = self.first_start
                self.first_start = start if first is None else min(first, start)
            content = self.messages if self.content else None
            usage = self.usage.pop(turn, None)
            own = None
            if "request_params" not in trace and not self.captured and self.max_output is not None:
                own = {"max_tokens": self.max_output}
            data = turn_span(
                trace,
                self.trace_id,
                start_s=start,
                end_s=end,
                usage=usage,
                provider=self.provider,
                content=content,
                request_params=own,
            )
            if timing is not None:
                data.attributes[TIMING_ATTR] = timing
                self.untimed += 1
            if self.redact:
                _redact(data)
            self._count(usage if usage is not None else trace.get("usage"), end, data.error)
            return data
        return None

    def _count(self, usage: Any, end: float | None, error: str | None) -> None:
        self.calls += 1
        if isinstance(usage, Mapping):
            for key in (
                "input_tokens",
                "output_tokens",
                "cache_read_tokens",
                "cache_write_tokens",
                "reasoning_tokens",
            ):
                value = usage.get(key)
                if isinstance(value, int) and not isinstance(value, bool):
                    self.totals[key] = self.totals.get(key, 0) + value
            self.last_reason = finish_reason(usage)
        else:
            self.last_reason = None
        if end is not None:
            self.last_end = end if self.last_end is None else max(self.last_end, end)
        self.last_error = error

    def agent(self) -> SpanData | None:
        """The session's invoke_agent span, from its start to its last call's end; None before a call.
        Its status is the last call's: an agent whose final call failed ended in that error."""
        if self.trace_id is None or not self.calls:
            return None
        begin = self.started or self.last_end
        if self.first_start is not None and (begin is None or self.first_start < begin):
            # A call sent before the session's first event (the proxy opens the session when it journals
            # the first exchange, once that call's answer has ended): the session began with it.
            begin = self.first_start
        data = agent_span(
            self.trace_id,
            start_s=begin,
            end_s=self.last_end,
            model=self.model,
            provider=self.provider,
            calls=self.calls,
            usage=self.totals,
            last_reason=self.last_reason,
            error=self.last_error,
        )
        if self.untimed:
            # Its end is its last call's, which is only the call's start when that call's end is unknown.
            data.attributes[TIMING_ATTR] = TIMING_NO_END if self.started else TIMING_NO_TIMES
            data.attributes[f"{TIMING_ATTR}.calls"] = self.untimed
        return data


def _wall(value: Any) -> float | None:
    """A journaled wall-clock time, None when absent or not a positive number."""
    return (
        float(value) if isinstance(value, int | float) and not isinstance(value, bool) and value > 0 else None
    )


def _redact(data: SpanData) -> None:
    """Allow-list under CONTEXTPIPE_REDACT: counts, hashes, tiers and section ids stay; free text goes."""
    for key in (
        "contextpipe.cache_break.cause",
        "contextpipe.usage.cache_miss_reason",
        "contextpipe.usage.prompt_cache_key",
        "gen_ai.request.stop_sequences",
    ):
        data.attributes.pop(key, None)
    data.events = [
        (name, when, {k: v for k, v in attrs.items() if k != "message"}) for name, when, attrs in data.events
    ]
    if data.error:
        data.error = data.error.split(":", 1)[0]
