"""ForkPrefix: a sub-agent that reuses its parent's cached prefix, and `validate_spawn` to prove it does.

    child = pipe.fork("Find every caller of parse_header.", scope="session", record="child.cpsession")
    report = validate_spawn(parent_req, child.next_request())     # report.ok, report.divergence

The engine orders a request tools -> global sections -> session sections -> the rest (cache alignment),
so a child that has the parent's tools, global and session sections (and latches, which are session
scope) byte for byte, and its own conversation after them, sends a request whose prefix up to the
scope boundary is the parent's: the provider's cache serves it (Anthropic: both requests carry a
breakpoint on the boundary block; OpenAI/DeepSeek: automatic prefix caching). `scope="global"` shares
only the tools and global sections.

The two sessions are linked in their journals: the parent gets a `fork` event (its session id, the
child's, the scope, the turn, the child's recording path), the child a `link` event and header fields
(`session_id`, `parent_session`, `fork_turn`, `fork_scope`). Replay ignores both kinds.

A child asks its sinks what its parent asked (redact=, otel=), and plans its parent's shadow candidate
beside each of its own turns (engine/shadow.py). Under CONTEXTPIPE_RECORD a child given no
`record=` records beside the parent's file, as `NAME.fork-CHILDID.cpsession`; served while its parent is,
it has its own probe socket (`cp-inspect ps` lists it as PID.N).
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.errors import ConfigError
from engine.request_diff import ParsedRequest, RequestDiff, diff_parsed, parse_request
from engine.types import CacheScope
from engine.wording import counted

if TYPE_CHECKING:
    from engine.pipeline import Pipeline

SCOPES = {"global": (CacheScope.GLOBAL,), "session": (CacheScope.GLOBAL, CacheScope.SESSION)}


def _scopes(scope: str) -> tuple[CacheScope, ...]:
    if scope not in SCOPES:
        raise ConfigError(f"fork scope {scope!r}: choose 'global' (tools + global sections) or 'session'")
    return SCOPES[scope]


def fork_pipeline(
    parent: Pipeline,
    task: str | None = None,
    *,
    scope: str = "session",
    record: str | Path | None = None,
    serve: bool | None = None,
) -> Pipeline:
    from engine.pipeline import ENV_RECORD, Pipeline

    allowed = _scopes(scope)
    if parent.session_id is None:
        parent.session_id = uuid.uuid4().hex[:16]
    child_id = uuid.uuid4().hex[:16]
    if record is None and os.environ.get(ENV_RECORD):
        # CONTEXTPIPE_RECORD names one file and the parent holds it: the child would have opened the same
        # path and failed ("already exists"). It records beside it instead, where `cp-inspect forks` finds
        # it (the fork event names it).
        base = Path(parent.recorder.path if parent.recorder is not None else os.environ[ENV_RECORD])
        record = base.with_name(f"{base.stem}.fork-{child_id}{base.suffix or '.cpsession'}")
    cfg = parent.config
    links = {
        "session_id": child_id,
        "parent_session": parent.session_id,
        "fork_turn": parent.turn,
        "fork_scope": scope,
    }
    child = Pipeline(
        cfg.model,
        cfg.provider,
        cfg.window,
        margin=cfg.margin,
        thresholds=cfg.thresholds,
        limits=cfg.limits,
        # The parent's own: held to the window only if the parent's was (a default 4096 over a small
        # planning window is inherited as the default).
        max_output_tokens=cfg.max_output_tokens if parent.max_output_tokens_given else None,
        default_response_reserve=cfg.default_response_reserve,
        thinking_reserve=cfg.thinking_reserve,
        schema_reserve=cfg.schema_reserve,
        query_source=cfg.query_source,
        counter=parent.counter,
        summarizer=parent.summarizer,
        policy=cfg.policy,
        record=record,
        serve=serve,
        redact=parent.sink_choices.get("redact"),
        otel=parent.sink_choices.get("otel"),
        # A shadow rollout is a setting of the parent's too: its sub-agents' turns are the candidate's
        # to plan as well, or its running delta would leave out all the work done in them.
        shadow=parent.shadow_candidate,
        clock=parent.clock,
        links=links,
    )
    # Sources in registration order (the assembly orders them by kind, then by registration).
    for spec in parent.specs:
        if spec.scope not in allowed:
            continue
        child.add_source(
            spec.id,
            spec.kind,
            text=parent.content.get(spec.id),
            binder=parent.binders.get(spec.id),
            scope=spec.scope,
            priority=spec.priority,
            lifecycle=spec.lifecycle,
            estimate=spec.estimate,
            max_tokens=spec.max_tokens,
            timeout_s=spec.timeout_s,
            name=spec.name,
        )
    # The parent's tools as it holds them: an imported or tapped parent keeps another agent's tool names
    # unchecked (check_content off), and its child carries them over the same way.
    checks, child.check_content = child.check_content, parent.check_content
    for t in parent.tools:  # the tools section is global scope: always shared, in the parent's order
        child.add_tool(t.name, t.description, t.parameters())
    child.check_content = checks
    if CacheScope.SESSION in allowed:
        for name in sorted(parent.latches.latches):
            child.latch(name, parent.latches.latches[name].value)
    parent.journal.append(
        {
            "k": "fork",
            "session_id": parent.session_id,
            "child": child_id,
            "scope": scope,
            "turn": parent.turn,
            "record": str(record) if record is not None else None,
        }
    )
    if task:
        child.user(task)
    return child


# ------------------------------------------------------------------------------------------ validate_spawn


@dataclass(frozen=True)
class SpawnReport:
    """Whether a sub-agent's request can reuse its parent's cached prefix, and where they diverge if not."""
    ok: bool
    shared_units: int  # units (tools, system blocks) of the parent's request the child must repeat
    shared_bytes: int  # their length in the prefix stream (engine.request_diff)
    shared_tokens: int | None  # their tokens, when the requests are the engine's
    cache_readable: bool | None  # the provider can serve the shared prefix from the parent's cache
    divergence: RequestDiff | None  # the first difference inside the shared prefix (None when ok)
    message: str

    def __bool__(self) -> bool:
        return self.ok

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "shared_units": self.shared_units,
            "shared_bytes": self.shared_bytes,
            "shared_tokens": self.shared_tokens,
            "cache_readable": self.cache_readable,
            "divergence": None if self.divergence is None else self.divergence.to_json(),
            "message": self.message,
        }


def _serialized(req: Any) -> Any:
    return req.serialized if hasattr(req, "serialized") else req


def validate_spawn(
    parent_request: Any,
    child_request: Any,
    *,
    scope: str = "session",
    shared_units: int | None = None,
    provider: str | None = None,
) -> SpawnReport:
    """Prove that `child_request` repeats `parent_request`'s prefix byte for byte up to the scope
    boundary, and say where it first diverges if not.

    Requests may be the engine's (`Request`, `SerializedRequest`: the boundary comes from the sections'
    scopes) or raw provider bodies (bytes, JSON text, dicts: the shared prefix is the tools and the
    system prompt, or the first `shared_units` units)."""
    allowed = {s.label for s in _scopes(scope)}
    trace = getattr(parent_request, "trace", None)
    ser = _serialized(parent_request)
    pa, pb = parse_request(ser), parse_request(_serialized(child_request))
    if shared_units is None:
        scope_of = {"tools": "global"}
        if isinstance(trace, dict):
            scope_of.update({s["id"]: s["scope"] for s in trace.get("sections", ())})
        n = 0
        for u in pa.units:
            if u.segment == "messages":
                break
            if trace is not None and scope_of.get(u.section) not in allowed:
                break
            n += 1
        shared_units = n
    if isinstance(shared_units, bool) or not isinstance(shared_units, int) or shared_units < 0:
        # (-1 sliced off the parent's last unit and reported "the first -1 unit(s)")
        raise ConfigError(f"shared_units must be a number of units >= 0, got {shared_units!r}")
    n = min(shared_units, len(pa.units))  # no more than the parent's request has
    shared_bytes = sum(len(u.content) + 1 for u in pa.units[:n])
    blocks = getattr(ser, "blocks", None)
    tokens = sum(b.tokens for b in blocks[:n]) if blocks is not None and len(blocks) >= n else None
    d = diff_parsed(pa, pb)
    ok = d.cause != "model_changed" and (d.offset >= shared_bytes or d.identical)
    readable = _readable(pa, pb, n, provider or getattr(ser, "provider", None), tokens) if ok else False
    if ok:
        msg = f"ok: the child repeats the parent's first {counted(n, 'unit')} ({shared_bytes} bytes"
        msg += f", {tokens} tokens)" if tokens is not None else ")"
        if readable is False:
            msg += "; but the provider cannot serve it from the parent's cache (no breakpoint on the boundary"
            msg += " block, or below the provider's minimum)"
        return SpawnReport(True, n, shared_bytes, tokens, readable, None, msg)
    return SpawnReport(
        False,
        n,
        shared_bytes,
        tokens,
        False,
        d,
        f"the child's prefix diverges at byte {d.offset} of {shared_bytes}: {d.summary()}",
    )


def _readable(
    pa: ParsedRequest, pb: ParsedRequest, n: int, provider: str | None, tokens: int | None
) -> bool | None:
    if n == 0:
        return False
    from engine.providers import POLICIES, canonical_provider

    policy = POLICIES.get(canonical_provider(provider)) if provider else None
    if policy is not None and tokens is not None and tokens < policy.min_cacheable_tokens:
        return False
    marked = any(u.marker for u in pa.units) or any(u.marker for u in pb.units)
    if marked or (policy is not None and policy.supports_markers):
        # Explicit breakpoints: the child must write/read at a breakpoint inside the shared prefix, and the
        # parent must have written one at the same block.
        return any(pa.units[i].marker and pb.units[i].marker for i in range(min(n, len(pb.units))))
    return True if policy is not None else None
