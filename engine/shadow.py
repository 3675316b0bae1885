"""Shadow rollout: a candidate configuration planned beside the live one on every turn; it never sends.

    pipe = Pipeline("claude-sonnet-4", shadow=Overrides(gates={"drop_rounds": False}))
    # or shadow=PipelineConfig(...) for a whole candidate configuration

After each request the pipeline builds the same turn again under the candidate (its own chain of
compaction states, a scratch spill, no summarizer calls: the candidate must never cost the agent a model
call or a file) and journals one `shadow` event next to the `request` event:

    {"k": "shadow", "turn", "sha", "tokens", "live_tokens", "prefix_sha", "markers", "schema_hash",
     "first_diff": {cause, segment, section, unit} | None,   # candidate vs live request, block level
     "cache_break": {section, cause} | None,                  # candidate vs its own previous request
     "est": {"live": [read, write], "shadow": [read, write]}} # expected cache reads/writes (tokens)

and one `shadow_config` event when the shadow starts. Replay, verify and every older reader ignore kinds
they do not know (`Pipeline.fold` has no case for them), so recordings stay verifiable; the candidate's
requests can be rebuilt exactly from the journal by replaying it under the `shadow_config`.

The expected reads are an online estimate (no clock, no TTL): the longest block prefix shared with the
previous request of the same side, up to the previous request's last cache marker (or its whole
cacheable prefix for automatic prefix caching), if that reaches the provider's minimum. Writes: the
tokens up to this request's last marker past what was read. `cp-inspect diff` prices both sides with
the full cache simulator; these figures are for the live running delta.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine.common_prefix import common_prefix_len
from engine.config import PipelineConfig
from engine.errors import ConfigError
from engine.feedback import attribute_cache_break
from engine.hashing import content_hash
from engine.policy.state import CompactionState
from engine.providers import POLICIES, SerializedRequest, canonical_provider
from engine.providers.base import Block
from engine.whatif import Overrides, gate_key, threshold_key
from engine.wording import counted

if TYPE_CHECKING:
    from engine.pipeline import Built
    from engine.pipeline_build import Building


CandidateConfig = Overrides | PipelineConfig


def prefix_count(ser: SerializedRequest) -> int:
    """Blocks in the prefix the next request can read from the cache (mirrors the pipeline's rule)."""
    marks = [i for i, b in enumerate(ser.blocks) if b.marker]
    if marks:
        return marks[-1] + 1
    return max(0, len(ser.blocks) - 1) if ser.provider in ("openai", "prefix") else 0


def _shas(ser: SerializedRequest) -> list[str]:
    return [b.sha for b in ser.blocks]


def estimate_cache(
    prev: SerializedRequest | None,
    cur: SerializedRequest,
    shas: tuple[list[str], list[str]] | None = None,
) -> tuple[int, int]:
    """(expected cache-read tokens, expected cache-write tokens) of `cur` after `prev` (see module doc).
    `shas`: the two requests' block hashes, when the caller has them already."""
    policy = POLICIES[cur.provider]
    blocks: Sequence[Block] = cur.blocks
    read = 0
    if prev is not None and prev.provider == cur.provider:
        pb = prev.blocks
        sa, sb = shas if shas is not None else (_shas(prev), _shas(cur))
        n = min(prefix_count(prev), len(pb), len(blocks))
        k = common_prefix_len(sa[:n], sb[:n])
        if policy.supports_markers:
            # Served only up to a breakpoint the previous request wrote, wholly inside the match.
            k = max((i + 1 for i in range(k) if pb[i].marker), default=0)
        read = sum(b.tokens for b in blocks[:k])
        if read < policy.min_cacheable_tokens:
            read = 0
    write = 0
    if policy.supports_markers:
        upto = prefix_count(cur)
        written = sum(b.tokens for b in blocks[:upto])
        if written >= policy.min_cacheable_tokens:
            write = max(0, written - read)
    return read, write


def first_block_diff(a: SerializedRequest, b: SerializedRequest) -> dict[str, Any] | None:
    """Where the candidate's request first differs from the live one, at block level (cheap: hashes)."""
    if a.request_sha256 == b.request_sha256:
        return None
    if a.provider != b.provider:
        # Blocks hash their content, not its wire form: under another provider they can all match while
        # every byte sent differs, and no cache is shared. ("request parameters differ" said otherwise.)
        return {
            "unit": None,
            "segment": "envelope",
            "section": "(provider)",
            "cause": f"provider {a.provider} -> {b.provider}: another request format, no cache shared",
        }
    start = common_prefix_len(_shas(a), _shas(b))
    for i, (x, y) in enumerate(zip(a.blocks[start:], b.blocks[start:], strict=False), start):
        if x.sha != y.sha:
            cause = "tools differ" if "tools" in (x.segment, y.segment) else f"section {y.section} differs"
            return {"unit": i, "segment": y.segment, "section": y.section, "cause": cause}
        if x.marker != y.marker:
            return {"unit": i, "segment": y.segment, "section": y.section, "cause": "cache marker moved"}
    if len(a.blocks) != len(b.blocks):
        i = min(len(a.blocks), len(b.blocks))
        longer = a.blocks if len(a.blocks) > len(b.blocks) else b.blocks
        who = "live" if longer is a.blocks else "candidate"
        return {
            "unit": i,
            "segment": longer[i].segment,
            "section": longer[i].section,
            "cause": f"the {who} request has {counted(abs(len(a.blocks) - len(b.blocks)), 'more block')}",
        }
    if a.request_sha256 != b.request_sha256:
        return {
            "unit": None,
            "segment": "envelope",
            "section": "(envelope)",
            "cause": "request parameters differ",
        }
    return None


@dataclass
class Shadow:
    """The candidate side's running state inside a live pipeline."""

    candidate: CandidateConfig
    state: CompactionState
    prev: SerializedRequest | None = None
    prev_live: SerializedRequest | None = None
    prev_shas: list[str] | None = None
    prev_live_shas: list[str] | None = None

    @classmethod
    def create(cls, candidate: Any) -> Shadow:
        if not isinstance(candidate, Overrides | PipelineConfig):
            raise ConfigError(
                f"shadow= takes an engine.whatif.Overrides or an engine.config.PipelineConfig, "
                f"got {type(candidate).__name__}"
            )
        if isinstance(candidate, Overrides):
            candidate = _checked(candidate)
        return cls(candidate, CompactionState())

    def config_for(self, live: PipelineConfig) -> PipelineConfig:
        c = self.candidate
        if isinstance(c, PipelineConfig):
            return c
        return live.with_overrides(c.window, c.thresholds, c.gates, c.provider)

    def config_event(self, live: PipelineConfig) -> dict[str, Any]:
        """The `shadow_config` event; a candidate that makes no valid configuration on top of `live`
        (a window out of range, say) is a ConfigError here, when the pipeline is made, naming the shadow."""
        try:
            return self._config_event(live)
        except (ConfigError, TypeError, ValueError) as exc:
            raise ConfigError(f"shadow= candidate: {exc}") from exc

    def _config_event(self, live: PipelineConfig) -> dict[str, Any]:
        c = self.candidate
        if isinstance(c, PipelineConfig):
            return {"k": "shadow_config", "config": c.to_event()}
        return {
            "k": "shadow_config",
            "overrides": {
                "window": c.window,
                "thresholds": c.thresholds,
                "gates": c.gates,
                "provider": c.provider,
            },
            "config": self.config_for(live).to_event(),
        }

    def plan(self, pipe: Building, bound: dict[str, dict[str, Any]], live: Built) -> dict[str, Any]:
        """Build this turn under the candidate and return its `shadow` event (not yet journaled)."""
        cfg = self.config_for(pipe.config)
        built = pipe.shadow_build(bound, cfg, self.state)
        self.state = built.state or self.state
        ser = built.serialized
        prev = self.prev
        brk = attribute_cache_break(
            prev.blocks if prev else None,
            ser.blocks,
            prefix_count(prev) if prev else 0,
            model_changed=bool(prev and prev.provider != ser.provider),
            flipped_latches=built.trace["latch_flips"],
            actions=built.trace["actions"],
        )
        shas, live_shas = _shas(ser), _shas(live.serialized)
        est_live = estimate_cache(
            self.prev_live, live.serialized, (self.prev_live_shas, live_shas) if self.prev_live_shas else None
        )
        est = estimate_cache(prev, ser, (self.prev_shas, shas) if self.prev_shas else None)
        ev = {
            "k": "shadow",
            "turn": built.trace["turn"],
            "sha": ser.request_sha256,
            "tokens": built.trace["final_tokens"],
            # The live request's, here too: its turn event is journaled only when the turn closes (its
            # usage, the next request), so a reader of the open turn (an attached inspector) had none.
            "live_tokens": live.trace["final_tokens"],
            "tier": built.trace["tier"],
            "prefix_sha": ser.prefix_sha256,
            "markers": [f"{m['section']}@{m['offset_tokens']}" for m in built.trace["markers"]],
            "schema_hash": content_hash(list(ser.tool_shas.items()))[:12],
            "first_diff": first_block_diff(live.serialized, ser),
            "cache_break": brk,
            "est": {"live": list(est_live), "shadow": list(est)},
        }
        self.prev, self.prev_live = ser, live.serialized
        self.prev_shas, self.prev_live_shas = shas, live_shas
        return ev

    def failed(self, live: Built, turn: int, exc: BaseException) -> dict[str, Any]:
        """The `shadow` event of a turn the candidate could not be planned on. The live request is still
        the previous one for the next turn's estimate (else the live side's expected reads would be
        measured against a request two turns back); the candidate has none, so its next estimate reads
        nothing."""
        self.prev_live, self.prev_live_shas = live.serialized, _shas(live.serialized)
        self.prev, self.prev_shas = None, None
        return {"k": "shadow", "turn": turn, "error": f"{type(exc).__name__}: {exc}"[:500]}


def _checked(c: Overrides) -> Overrides:
    """`c` with its names checked and the short threshold names (trim, compact, prune) spelled out, as
    every other what-if takes them: an unknown name was a TypeError from deep inside the config (or a
    gate error that did not say it came from shadow=) when the pipeline was made."""
    where = "shadow=Overrides(...)"
    thresholds = None
    if c.thresholds:
        thresholds = {}
        for name, value in c.thresholds.items():
            try:
                key = threshold_key(str(name))
            except ValueError as exc:
                raise ConfigError(f"{where}: {exc}") from exc
            try:
                thresholds[key] = float(value)
            except (TypeError, ValueError) as exc:
                raise ConfigError(f"{where}: threshold {name!r} must be a number, got {value!r}") from exc
    if c.gates:
        for name in c.gates:
            try:
                gate_key(str(name))
            except ValueError as exc:
                raise ConfigError(f"{where}: {exc}") from exc
    if c.provider:
        try:
            canonical_provider(str(c.provider))
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from exc
    if c.window is not None and (
        isinstance(c.window, bool) or not isinstance(c.window, int) or c.window <= 0
    ):
        raise ConfigError(f"{where}: window must be a positive number of tokens, got {c.window!r}")
    return Overrides(c.window, thresholds, dict(c.gates) if c.gates else None, c.provider)


# ------------------------------------------------------------------------------------------ reading


def shadow_summary(events: Sequence[dict[str, Any]], model: str | None = None) -> dict[str, Any] | None:
    """Running totals of a session's shadow events: per turn both sides' tokens, expected reads and cost,
    and the running cost and hit-rate delta. None when the session has no shadow."""
    from engine.sim.cachesim import CallCache
    from engine.sim.pricing import UnknownModelError, cost

    cfg = next((e for e in events if e.get("k") == "shadow_config"), None)
    if cfg is None:
        return None
    session = next((e for e in events if e.get("k") == "session"), None)
    live_model = model or (str(session["config"]["model"]) if session else "")
    shadow_model = str(cfg.get("config", {}).get("model") or live_model)
    outputs = {
        int(e["turn"]): int((e.get("usage") or {}).get("output_tokens") or 0)
        for e in events
        if e.get("k") == "usage"
    }
    live_tokens: dict[int, int] = {}
    for e in events:
        if e.get("k") == "turn":
            from engine.recording.journal import trace_of

            live_tokens[int(e["turn"])] = int(trace_of(e).get("final_tokens") or 0)
    rows: list[dict[str, Any]] = []
    failed = 0
    tot = {"live": [0, 0, 0, 0.0], "shadow": [0, 0, 0, 0.0]}  # prompt, read, write, cost
    priced = {"live": True, "shadow": True}  # per side: the candidate may be another model
    for e in events:
        if e.get("k") != "shadow":
            continue
        t = int(e["turn"])
        row: dict[str, Any] = {
            "turn": t,
            "first_diff": e.get("first_diff"),
            "cache_break": e.get("cache_break"),
        }
        if "error" in e or "est" not in e:
            # A turn the candidate could not be planned on (Pipeline._plan_shadow journals why): shown as
            # such, and left out of both sides' totals so the delta compares the same turns.
            row["error"] = str(e.get("error") or "the shadow event has no plan")
            rows.append(row)
            failed += 1
            continue
        known = e.get("live_tokens", live_tokens.get(t))
        if known is None:
            # A recording from before shadow events carried it, cut off in this turn: the live side's
            # size is unknown, so the turn is left out of both sides' totals (it was counted as 0 tokens,
            # which made the live hit rate run past 99%).
            rows.append(row)
            continue
        for side, m, tokens in (
            ("live", live_model, int(known)),
            ("shadow", shadow_model, int(e["tokens"])),
        ):
            read, write = (int(x) for x in e["est"][side])
            c = 0.0
            try:
                c = cost(m, CallCache(tokens, read, write, max(0, tokens - read - write)), outputs.get(t, 0))
            except UnknownModelError:
                priced[side] = False
            acc = tot[side]
            acc[0] += tokens
            acc[1] += read
            acc[2] += write
            acc[3] += c
            row[side] = {"tokens": tokens, "read": read, "write": write, "cost_usd": round(c, 8)}
        rows.append(row)
    live, shadow = tot["live"], tot["shadow"]
    hit = [round(x[1] / x[0], 6) if x[0] else 0.0 for x in (live, shadow)]
    return {
        "config": cfg.get("overrides") or cfg.get("config"),
        "turns": rows,
        "cost_usd": [round(float(live[3]), 8), round(float(shadow[3]), 8)],
        "cost_delta_usd": round(float(shadow[3] - live[3]), 8),
        "hit_rate": hit,
        "hit_rate_delta": round(hit[1] - hit[0], 6),
        "tokens": [int(live[0]), int(shadow[0])],
        "priced": priced["live"] and priced["shadow"],
        "priced_sides": [priced["live"], priced["shadow"]],
        "models": [live_model, shadow_model],
        "failed_turns": failed,  # turns the candidate could not be planned on (rows with "error")
    }
