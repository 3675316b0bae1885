"""Per-agent figures for a fleet view (`cp-inspect top`): folded from each agent's turn traces as they
arrive. Pure: the caller passes the time a trace arrived, so tests and replays give the same figures."""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.sim.pricing import usage_cost

RECENT_TURNS = 10  # the "last N turns" hit rate
RATE_WINDOW_S = 60.0  # tokens per minute over the last minute of arrivals
# The state of a proxy's conversation whose agent process has exited while the proxy serves on: it read
# "live" for as long as the proxy ran. It can still be attached (the session and its recording stay).
AGENT_GONE = "agent gone"


@dataclass(frozen=True)
class AgentRow:
    """One agent's figures at one moment: what a fleet view shows (immutable, safe to hand across threads)."""

    target: str
    pid: int
    model: str
    provider: str
    command: str
    state: str
    detail: str
    turns: int
    last_turn: int
    pressure: float
    tier: str
    hit_rate_recent: float | None  # None until a call reported usage
    hit_rate: float | None
    cost_usd: float
    priced: bool
    alerts: int
    cache_breaks: int
    tap_errors: int
    tokens_per_min: float


@dataclass
class AgentStats:
    """One row of `cp-inspect top`: an agent (or proxy conversation), its state and its figures."""
    target: str  # PID or PID.SESSION, what `cp-inspect attach` takes
    pid: int
    session: int | None = None
    command: str = ""
    model: str = ""
    provider: str = ""
    # live | no socket (live, its socket file gone: cannot attach) | stopped (its process is, SIGSTOP) |
    # exited | error (did not answer)
    state: str = "live"
    detail: str = ""  # why, when not live
    turns: int = 0
    last_turn: int = -1
    pressure: float = 0.0  # predictive pressure of the newest turn
    tier: str = ""
    input_tokens: int = 0
    cache_read_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    priced: bool = True  # False once a call's model has no price: cost is then a lower bound
    alerts: int = 0
    cache_breaks: int = 0
    tap_errors: int = 0
    # The local process that made a proxy conversation's calls (AgentInfo.client "pid N"), None for an
    # agent of its own or when the proxy could not tell: the watcher sees it exit while the proxy serves on.
    client_pid: int | None = None
    recent: deque[tuple[int, int]] = field(default_factory=lambda: deque(maxlen=RECENT_TURNS))
    arrivals: deque[tuple[float, int]] = field(default_factory=deque)  # (time, tokens) for tokens/min

    def take_trace(self, trace: Mapping[str, Any], now: float) -> None:
        if self.state == AGENT_GONE:  # calls again: another process took the conversation up (its pid unknown)
            self.state, self.detail, self.client_pid = "live", "", None
        self.turns += 1
        self.last_turn = max(self.last_turn, int(trace.get("turn", 0)))
        self.model = str(trace.get("model") or self.model)
        self.provider = str(trace.get("provider") or self.provider)
        self.pressure = float((trace.get("pressure") or {}).get("predictive", 0.0))
        self.tier = str(trace.get("tier") or "")
        self.alerts += len(trace.get("alerts") or [])
        self.cache_breaks += 1 if trace.get("cache_break") else 0
        if isinstance(trace.get("tap_errors"), int):
            self.tap_errors = int(trace["tap_errors"])
        usage = trace.get("usage") or None
        if not usage:
            return
        inp, read = int(usage.get("input_tokens") or 0), int(usage.get("cache_read_tokens") or 0)
        out = int(usage.get("output_tokens") or 0)
        self.input_tokens += inp
        self.cache_read_tokens += read
        self.output_tokens += out
        self.recent.append((inp, read))
        usd = usage_cost(self.model, usage)
        if usd is None:
            self.priced = False
        else:
            self.cost_usd += usd
        self.arrivals.append((now, inp + out))
        self._expire(now)

    def _expire(self, now: float) -> None:
        while self.arrivals and self.arrivals[0][0] < now - RATE_WINDOW_S:
            self.arrivals.popleft()

    def tokens_per_min(self, now: float) -> float:
        self._expire(now)
        if not self.arrivals:
            return 0.0
        return sum(t for _, t in self.arrivals) * 60.0 / RATE_WINDOW_S

    def row(self, now: float) -> AgentRow:
        return AgentRow(
            self.target, self.pid, self.model, self.provider, self.command, self.state, self.detail, self.turns,
            self.last_turn, self.pressure, self.tier, self.hit_rate_recent if self.recent else None,
            self.hit_rate if self.input_tokens else None, self.cost_usd, self.priced, self.alerts,
            self.cache_breaks, self.tap_errors, self.tokens_per_min(now),
        )

    @property
    def hit_rate(self) -> float:
        return self.cache_read_tokens / self.input_tokens if self.input_tokens else 0.0

    @property
    def hit_rate_recent(self) -> float:
        inp = sum(i for i, _ in self.recent)
        return sum(r for _, r in self.recent) / inp if inp else 0.0
