"""The turn trace's shape, as types: the one definition `engine.trace.build_trace` fills, the panels read,
and docs/TRACE_SCHEMA.md describes (tests/test_trace_schema.py keeps the three in step).

A trace travels as a plain dict (msgpack/JSON), so these are TypedDicts: no conversion at the boundary,
and mypy checks every key a panel reads. Keys a later phase adds (usage once the call returns, alerts,
calibration, what-if extras) are `NotRequired`."""

from typing import Any, NotRequired, TypedDict


class Pressure(TypedDict):
    raw: float
    predictive: float
    raw_history: NotRequired[float]  # over the whole raw history, beside pressure over what is sent


class ReservesInfo(TypedDict):
    response: int
    thinking: int
    schema: int
    percentile: int


class TierReason(TypedDict):
    raw: str
    predictive: str
    recovery: bool
    text: str


class TraceSection(TypedDict):
    id: str
    name: str
    kind: str
    scope: str  # global | session | none
    priority: str  # never | last_resort | normal | first
    budget: int
    planned: int
    tokens: int
    form: str  # full | trimmed | cleared | spilled | dropped | degraded | summarized ...
    omitted: int
    sha256: str
    changed: bool
    items: int
    note: str


class Step(TypedDict, total=False):
    step: str
    status: str  # applied | skipped | not_needed
    detail: str
    reason: str
    tokens_saved: int


class Marker(TypedDict):
    index: int
    section: str
    scope: str
    offset_tokens: int


class Usage(TypedDict, total=False):
    """engine.feedback.Usage.to_dict(): `input_tokens` is the whole prompt, cached parts included."""

    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    cache_write_1h_tokens: int  # of cache_write_tokens, billed at the 1-hour rate
    cache_miss_reason: str  # cache diagnostics, when the response or request carried them
    cache_missed_input_tokens: int
    prompt_cache_key: str


class CacheBreak(TypedDict, total=False):
    section: str
    cause: str


class Alert(TypedDict, total=False):
    rule: str
    severity: str  # info | warning | error
    message: str
    turn: int


class Trace(TypedDict):
    turn: int
    model: str
    provider: str
    limit: int
    usable: int
    pressure: Pressure
    reserves: ReservesInfo
    thresholds: dict[str, float]
    tier: str  # Normal | TrimSchemas | CompactHistory | AggressivePrune
    tier_reason: TierReason
    estimated_tokens: int
    final_tokens: int
    ceiling: int
    sections: list[TraceSection]
    steps: list[Step]
    actions: list[Step]
    skipped: list[Step]
    markers: list[Marker]
    cacheable_prefix_tokens: int
    request_sha256: str
    prefix_sha256: str
    usage: Usage | None
    cache_break: CacheBreak | None
    alerts: list[Alert]
    latch_flips: list[str]
    spill_failures: list[str]
    error: str | None
    calibration: NotRequired[float]
    compaction: NotRequired[dict[str, Any]]  # the compaction policy's decision (taken or skipped, pay-back)
    # Captured agents only (engine/capture/tap_steps.py sets them on the call's turn; docs/TRACE_SCHEMA.md says what each holds):
    history_rewrite: NotRequired[dict[str, int]]  # the agent's request rewrote its own history (it compacted)
    conversation_branch: NotRequired[dict[str, Any]]  # a session's first turn: the session it branched from
    conversation_ambiguous: NotRequired[dict[str, Any]]  # other sessions fit the request as well (lineage)
    request_params: NotRequired[dict[str, Any]]  # the settings the agent's request set (max_tokens, temperature...)
    server: NotRequired[dict[str, Any]]  # where the call went: address, port
    response_meta: NotRequired[dict[str, Any]]  # the reply's id, model, finish_reason
    image_tokens: NotRequired[list[dict[str, Any]]]  # images its new messages carry, each counted (an estimate)
    retries: NotRequired[list[dict[str, Any]]]  # the proxy: failed attempts the agent sent this call after
