"""Tap litellm-based agents with one line: a litellm CustomLogger that journals every call.

    import litellm
    from engine.capture.litellm import ContextPipeLogger
    litellm.callbacks.append(ContextPipeLogger(record="run.cpsession", serve=True))

or `engine.capture.litellm.install()` (idempotent; record/serve from CONTEXTPIPE_RECORD and
CONTEXTPIPE_SERVE like the Pipeline). litellm hands every callback the request as the agent sent it
(OpenAI-shaped messages and tools, whatever the provider) and the response with litellm's usage
(OpenAI fields plus `cache_creation_input_tokens`/`cache_read_input_tokens` for Anthropic models,
DeepSeek's hit/miss tokens): both go through the tap's journaling path and the one usage normaliser.
Streamed calls are journaled once, from litellm's reassembled `complete_streaming_response`.

The callback never raises into litellm (which would log it and carry on anyway): failures are counted
in `logger.stats` and journaled as diagnostics, like the SDK tap's. Agents you cannot edit (the
`mini` CLI of mini-swe-agent, Claude Code) are inspected with `cp-inspect run -- CMD` instead.

litellm is imported only here, and `LITELLM_LOCAL_MODEL_COST_MAP` is set first (unless the process set
it) so that importing it never reaches for the network.
"""

from __future__ import annotations

import atexit
import os
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

try:  # litellm is an optional dependency (the `test` extra, or the agent's own)
    from litellm.integrations.custom_logger import CustomLogger as _Base
except ImportError:  # pragma: no cover - exercised only without litellm
    _Base = object  # type: ignore[misc,assignment]

from engine.capture.tap import PARAM_KEYS, Tap, TapStats, request_body, server_of
from engine.importers._common import guess_provider
from engine.importers.ingest import DEFAULT_WINDOW

_PROVIDERS = ("anthropic", "openai", "deepseek", "bedrock")


def _request(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The request as the agent gave it to litellm: messages, the model, and the optional params
    litellm separated out (tools, the legacy API's functions, prompt_cache_key)."""
    opt = kwargs.get("optional_params") or {}
    merged: dict[str, Any] = {"model": kwargs.get("model"), "messages": kwargs.get("messages") or []}
    for k in ("tools", "functions", "prompt_cache_key", "max_tokens", "max_completion_tokens", "stream", *PARAM_KEYS):
        v = opt.get(k, kwargs.get(k))
        if v is not None:
            merged[k] = v
    return request_body(merged)


def _seconds(when: Any) -> float | None:
    """litellm's start_time (a datetime; a number in some versions) as epoch seconds, None if neither."""
    try:
        if isinstance(when, (int, float)):
            return float(when)
        return float(when.timestamp()) if when is not None else None
    except Exception:
        return None


class ContextPipeLogger(_Base):  # type: ignore[misc,valid-type]
    """A litellm callback: each completion (sync, async, streamed) becomes one journaled turn."""

    def __init__(
        self,
        record: str | Path | None = None,
        serve: bool | None = None,
        window: int = DEFAULT_WINDOW,
        provider: str | None = None,
        split: bool = True,
    ) -> None:
        if _Base is object:
            raise ImportError("engine.capture.litellm needs litellm: pip install litellm")
        super().__init__()
        self._record, self._serve, self._window, self._provider = record, serve, window, provider
        self._split = split  # (engine.capture.tap.tap's: conversations that share an opening recorded apart)
        self.tap: Tap | None = None
        self.stats = TapStats()

    def _tap_for(self, model: str) -> Tap:
        if self.tap is None:
            provider = self._provider or guess_provider(model)
            self.tap = Tap(
                "openai",  # litellm's own interface is OpenAI-shaped for every provider
                record=self._record,
                serve=self._serve,
                window=self._window,
                provider=provider if provider in _PROVIDERS else "openai",
                split=self._split,
            )
            self.tap.stats = self.stats
            atexit.register(self.tap.close)
        return self.tap

    def _log(self, kwargs: dict[str, Any], response_obj: Any, ok: bool, start_time: Any = None) -> None:
        try:
            if ok and kwargs.get("stream") and kwargs.get("complete_streaming_response") is None:
                return  # a chunk of a stream still under way: the reassembled response comes at its end
            model = str(kwargs.get("model") or "unknown")
            t = self._tap_for(model)
            body = _request(kwargs)
            # litellm hands over request and response together, from several threads (its pool) or
            # tasks at once: both steps under the tap's lock, so another call cannot take this turn.
            with t.lock:
                # Where litellm sent it (its api_base, the provider's default when the agent gave none)
                params = kwargs.get("litellm_params")
                base = (params.get("api_base") if isinstance(params, dict) else None) or kwargs.get("api_base")
                t.server = server_of(base) if base else None
                # litellm logs a call once it has ended: the request is stamped when it was made
                if not t.guard(t.before, body, _seconds(start_time)):
                    return
                if ok:
                    resp = kwargs.get("complete_streaming_response") or response_obj
                    t.guard(t.after, resp)
                else:
                    exc = kwargs.get("exception") or response_obj or "litellm call failed"
                    t.guard(t.failed, exc)
        except Exception as exc:  # nothing may reach litellm or the agent
            self.stats.errors += 1
            self.stats.last_error = f"litellm callback: {type(exc).__name__}: {exc}"
        finally:
            self.stats.calls += 1  # counted when handled, so a caller can wait for the journal to have it

    # litellm's hooks: sync calls run the sync ones (in litellm's thread pool), async calls the async ones
    def log_success_event(self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any) -> None:
        self._log(kwargs, response_obj, True, start_time)

    def log_failure_event(self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any) -> None:
        self._log(kwargs, response_obj, False, start_time)

    async def async_log_success_event(
        self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any
    ) -> None:
        self._log(kwargs, response_obj, True, start_time)

    async def async_log_failure_event(
        self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any
    ) -> None:
        self._log(kwargs, response_obj, False, start_time)

    def close(self) -> None:
        """Finish the recording (also done at interpreter exit by the tap)."""
        if self.tap is not None:
            self.tap.close()


def install(record: str | Path | None = None, serve: bool | None = None) -> ContextPipeLogger:
    """Append a ContextPipeLogger to `litellm.callbacks` unless one is there; returns it."""
    import litellm

    for name in _CALLBACK_LISTS:
        for cb in list(getattr(litellm, name, None) or []):
            if isinstance(cb, ContextPipeLogger):
                return cb
    logger = ContextPipeLogger(record=record, serve=serve)
    litellm.callbacks.append(logger)
    atexit.register(logger.close)
    return logger


_CALLBACK_LISTS = (
    "callbacks",
    "success_callback",
    "_async_success_callback",
    "failure_callback",
    "_async_failure_callback",
)


def uninstall(logger: ContextPipeLogger) -> None:
    """Remove `logger` from litellm (litellm copies a callback from `litellm.callbacks` into its success
    and failure lists on first use, and adds no second logger of the same class while one is there)."""
    import litellm

    for name in _CALLBACK_LISTS:
        lst = getattr(litellm, name, None)
        if isinstance(lst, list):
            lst[:] = [cb for cb in lst if cb is not logger]
