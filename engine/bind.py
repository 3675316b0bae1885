"""Bind: run every per-turn source's binder concurrently, each with its timeout and budget.

A failing or slow binder degrades its own section (traced) instead of aborting the turn, unless
the section is Never-priority: then the turn cannot be assembled honestly and BindError is raised.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from engine.errors import BindError
from engine.types import Priority


@dataclass(frozen=True)
class BindJob:
    """One source to bind this turn: its binder, timeout, token budget and priority."""
    source_id: str
    binder: Callable[..., Any]
    timeout_s: float
    budget: int
    priority: Priority


@dataclass(frozen=True)
class BindResult:
    """What one binder returned (its text, or the error that replaced it) and how long it took."""
    source_id: str
    text: str | None
    error: str | None
    elapsed_ms: float


def _wants_budget(fn: Callable[..., Any]) -> bool:
    """A binder gets its token budget when it has a required positional parameter. Parameters with
    defaults are left alone, so the usual `lambda k=k: ...` closure keeps its bound value."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(
        p.default is inspect.Parameter.empty
        and p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        for p in params
    )


async def _run(job: BindJob) -> BindResult:
    t0 = time.perf_counter()
    try:
        args = (job.budget,) if _wants_budget(job.binder) else ()

        async def call() -> Any:
            if inspect.iscoroutinefunction(job.binder):
                return await job.binder(*args)
            v = await asyncio.to_thread(job.binder, *args)
            # A plain callable may return an awaitable (a lambda or partial around an async function).
            return await v if inspect.isawaitable(v) else v

        value = await asyncio.wait_for(call(), job.timeout_s)
        if not isinstance(value, str):
            raise TypeError(f"binder returned {type(value).__name__}, expected str")
        return BindResult(job.source_id, value, None, (time.perf_counter() - t0) * 1000)
    except TimeoutError:
        err = f"timed out after {job.timeout_s:g}s"
    except Exception as exc:  # any binder failure is contained to its section
        err = f"{type(exc).__name__}: {exc}"
    return BindResult(job.source_id, None, err, (time.perf_counter() - t0) * 1000)


async def bind_all(jobs: list[BindJob]) -> dict[str, BindResult]:
    results = await asyncio.gather(*(_run(j) for j in jobs))
    out = {r.source_id: r for r in results}
    for j in jobs:
        r = out[j.source_id]
        if r.error is not None and j.priority == Priority.NEVER:
            raise BindError(
                f"source {j.source_id!r} is Never-priority and its binder failed ({r.error}); "
                "fix the binder or lower the source's priority so the turn can degrade instead"
            )
    return out
