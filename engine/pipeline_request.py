"""What a pass of the pipeline hands back: `Request` (next_request's: the provider body, its bytes and the
turn's trace), `Built` (one Plan+Bind+Optimize+Execute pass, also what a what-if re-plan returns) and
`Decided` (Pipeline.decide's plan and optimized assembly). `engine.pipeline` re-exports all three.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any, NamedTuple

from engine.assembly import Assembly
from engine.optimize import OptimizeResult
from engine.plan import Plan, Reserves
from engine.policy.state import CompactionState
from engine.providers import SerializedRequest
from engine.trace_lazy import TurnRecord


class Request:
    """What Execute hands back: the provider body, its canonical bytes, and the turn's trace.

    The trace of a turn nothing observes as it happens (no recorder, probe or exporter on the journal)
    is built when first read (engine/trace_lazy.py): `ceiling` and `final_tokens` read without building it."""

    def __init__(self, turn: int, serialized: SerializedRequest, trace: dict[str, Any] | TurnRecord) -> None:
        self.turn = turn
        self.serialized = serialized
        self._trace = trace

    @property
    def trace(self) -> dict[str, Any]:
        t = self._trace
        return t.trace() if isinstance(t, TurnRecord) else t

    @property
    def ceiling(self) -> int:
        """trace["ceiling"]: the most tokens this request may hold."""
        t = self._trace
        return t.ceiling if isinstance(t, TurnRecord) else t["ceiling"]

    @property
    def final_tokens(self) -> int:
        """trace["final_tokens"]: the tokens it holds, as the engine counts them."""
        t = self._trace
        return t.final_tokens if isinstance(t, TurnRecord) else t["final_tokens"]

    def __repr__(self) -> str:
        return f"Request(turn={self.turn}, {len(self.serialized.body)} bytes)"

    @cached_property
    def body(self) -> dict[str, Any]:
        """The body as a dict for `client.create(**req.body)`, parsed from `bytes` on first use (an agent
        that sends the canonical bytes itself never pays for it)."""
        return self.serialized.json()  # type: ignore[no-any-return]

    @property
    def bytes(self) -> bytes:
        return self.serialized.body


@dataclass
class Built:
    """Everything one Plan+Bind+Optimize+Execute pass produced (also what a what-if re-plan returns)."""

    plan: Plan
    asm: Assembly
    serialized: SerializedRequest
    trace: dict[str, Any]
    state: CompactionState | None = None  # the compaction state after this request (cost_aware policy)


class Decided(NamedTuple):
    """Pipeline.decide's result: the plan and the optimized assembly, with what the trace reports."""

    plan: Plan
    reserves: Reserves
    ratio: float  # calibration: provider tokens per engine token
    before: Assembly  # the assembly before optimize
    res: OptimizeResult
    spill_failures: list[str]
    state: CompactionState | None  # the compaction state after this request (cost_aware policy)
    decision: dict[str, Any] | None  # cost_aware's compaction record for the trace
    # decide(defer_texts=True): completes `decision` and the compaction step for the trace (cost_aware's
    # Outcome.finish); call it once before reading either. None: complete already.
    finish: Callable[[], None] | None = None
