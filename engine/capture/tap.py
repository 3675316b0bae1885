"""A tap for agents that do not use the engine to assemble: wrap an `anthropic` or `openai` client.

    client = tap(anthropic.Anthropic(), record="run.cpsession", serve=True)   # two lines, nothing else changes

Every request the agent sends is journaled as the turn's *actual* assembly, and each response's usage
is fed back. A shadow engine ingests the same messages, so the inspector shows what ContextPipe would
have sent next to what was sent (the engine's plan is a what-if, the request is the truth).
The tap never breaks the agent: if journaling fails, the call still goes through untouched and the
failure is counted in `tap_errors`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine.importers._common import Ctx
from engine.importers.ingest import DEFAULT_WINDOW, ActualRecorder, IngestReport, _Feeder
from engine.importers.model import CallRec, MessageRec, ToolSchemaRec
from engine.importers.proxy_jsonl import (
    _anthropic_request,
    _anthropic_response,
    _openai_request,
    _openai_response,
)
from engine.pipeline import Pipeline


class Tap:
    """The shadow session behind a tapped client."""

    def __init__(
        self,
        wire: str,
        *,
        record: str | Path | None = None,
        serve: bool | None = None,
        window: int = DEFAULT_WINDOW,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.wire = wire  # "anthropic" | "openai"
        self.record, self.serve, self.window, self.clock = record, serve, window, clock
        self.pipe: Pipeline | None = None
        self.feeder: _Feeder | None = None
        self.fed: list[MessageRec] = []
        self.actual: ActualRecorder | None = None
        self.tools_seen: tuple[ToolSchemaRec, ...] = ()
        self.turns = 0
        self.tap_errors = 0
        self.last_error: str | None = None

    def _parse_request(self, body: dict[str, Any]) -> tuple[list[MessageRec], tuple[ToolSchemaRec, ...]]:
        ctx = Ctx(f"{self.wire} request", "<tap>")
        if self.wire == "anthropic":
            return _anthropic_request(body, ctx, "request")
        return _openai_request(body, ctx, "request")

    def before(self, body: dict[str, Any]) -> None:
        msgs, tools = self._parse_request(body)
        model = str(body.get("model", "unknown"))
        if self.pipe is None:
            provider = "anthropic" if self.wire == "anthropic" else "openai"
            self.pipe = Pipeline(
                model, provider, self.window, record=self.record, serve=self.serve, clock=self.clock
            )
            self.feeder = _Feeder(self.pipe, IngestReport())
            self.actual = ActualRecorder(self.pipe)
        assert self.feeder is not None
        if tools != self.tools_seen:
            for t in tools:
                self.pipe.add_tool(t.name, t.description, t.parameters)
            self.tools_seen = tools
        # Feed only what is new since the last call; a rewritten history (the agent compacted) is fed whole.
        start = len(self.fed) if msgs[: len(self.fed)] == self.fed else 0
        for m in msgs[start:]:
            self.feeder.feed(m)
        self.fed = list(msgs)
        call = CallRec(tuple(msgs), None, tools, None, self.clock(), model)
        assert self.actual is not None
        self.actual.record(self.turns, call)
        self.pipe.next_request()

    def after(self, response: Any) -> None:
        assert self.pipe is not None and self.feeder is not None
        data = response.model_dump() if hasattr(response, "model_dump") else dict(response)
        ctx = Ctx(f"{self.wire} response", "<tap>")
        if self.wire == "anthropic":
            msg, usage, _ = _anthropic_response(data, ctx, "response")
        else:
            msg, usage, _ = _openai_response(data, ctx, "response")
        if usage is not None:
            self.pipe.record_usage(
                {
                    "input_tokens": usage.input_tokens,
                    "output_tokens": usage.output_tokens,
                    "cache_read_tokens": usage.cache_read_tokens or 0,
                    "cache_write_tokens": usage.cache_write_tokens or 0,
                }
            )
        if msg is not None:
            self.feeder.feed(msg)
            self.fed.append(msg)
        self.turns += 1

    def failed(self, exc: BaseException) -> None:
        assert self.pipe is not None
        text = str(exc)
        kind = "prompt_too_long" if "too long" in text.lower() or "context_length" in text else "error"
        self.pipe.record_error(kind, text)
        self.turns += 1

    def guard(self, step: Callable[..., None], *args: Any) -> None:
        try:
            step(*args)
        except Exception as exc:  # journaling must never break the agent's call
            self.tap_errors += 1
            self.last_error = f"{type(exc).__name__}: {exc}"

    def close(self) -> None:
        if self.pipe is not None:
            self.pipe.close()


def tap(
    client: Any, *, record: str | Path | None = None, serve: bool | None = None, window: int = DEFAULT_WINDOW
) -> Any:
    """Wrap `client.messages.create` (anthropic) or `client.chat.completions.create` (openai) in place.
    Returns the same client; its `_contextpipe_tap` attribute is the Tap (call `.close()` at exit)."""
    module = type(client).__module__
    if module.startswith("anthropic") and hasattr(client, "messages"):
        resource, wire = client.messages, "anthropic"
    elif hasattr(client, "chat") and hasattr(client.chat, "completions"):
        resource, wire = client.chat.completions, "openai"
    else:
        raise TypeError(
            f"tap() expects an anthropic.Anthropic or openai.OpenAI client, got {type(client).__name__}"
        )
    t = Tap(wire, record=record, serve=serve, window=window)
    original = resource.create

    def create(*args: Any, **kwargs: Any) -> Any:
        streaming = bool(kwargs.get("stream"))
        t.guard(t.before, json.loads(json.dumps(kwargs, default=str)))
        try:
            resp = original(*args, **kwargs)
        except Exception as exc:
            t.guard(t.failed, exc)
            raise
        if not streaming:  # a stream's usage arrives in its last event; the request is still journaled
            t.guard(t.after, resp)
        return resp

    resource.create = create
    client._contextpipe_tap = t
    return client
