"""The state a Pipeline's stages read, declared once for the type checker.

A Pipeline is one class made of its stages, each a base class in a module named for it. The chain, from
the bottom (tests/test_pipeline_stages.py holds it to Pipeline's MRO):

    pipeline_sinks.Sinks                  the recording, the probe, the OpenTelemetry export
    pipeline_assembly.Assembling          a turn's window before it is planned
    pipeline_fold.Folding                 journal events applied to the state
    pipeline_plan.Planning                Plan
    pipeline_build.Building               Optimize and serialize: decide, build
    pipeline_feedback.Feedback            a turn's outcome (record_usage, record_error), alerts, the turn journaled
    pipeline_turn_end.TurnEnd             a turn's request event; a recorded turn rebuilt
    pipeline_registration.Registration    sources, tools, latches, the window
    pipeline_conversation.Conversation    user, assistant, tool_result
    pipeline.Pipeline                     construction and close, the request's path, fork, send

The stages read and set the attributes below; Pipeline.__init__ sets every one of them and says what
each holds.
These are annotations only: nothing here exists at run time but the class, and no attribute lookup
passes through it (a Pipeline's attributes are in its instance dict).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engine import alerts as alert_rules
    from engine import pipeline_express as express
    from engine.artifacts import Message, Part, ToolCall, ToolSchema
    from engine.assembly import Assembly, Measure
    from engine.catalog import Binder, EmergentQueue, LatchTable, SourceSpec
    from engine.config import PipelineConfig
    from engine.optimize import Summarizer
    from engine.pipeline_guard import _CallGuard
    from engine.plan import SectionEstimate
    from engine.policy.cachecost import CacheRules
    from engine.policy.state import CompactionState
    from engine.providers import Serializer
    from engine.providers.base import Block
    from engine.providers.call_ids import CallIds, IdRule
    from engine.recording.history_log import HistoryLog
    from engine.recording.journal import Journal
    from engine.shadow import Shadow
    from engine.spill import SpillBackend
    from engine.stats import Statistics
    from engine.tokens import TokenCounter
    from engine.trace_lazy import Traces, TurnRecord


class PipelineState:
    """The attributes a Pipeline's stages share (set by Pipeline.__init__; see there for each)."""

    # The configuration, the sources, the conversation
    config: PipelineConfig
    counter: TokenCounter
    measure: Measure
    clock: Callable[[], float]
    journal: Journal
    summarizer: Summarizer | None
    spill: SpillBackend | None
    specs: list[SourceSpec]
    content: dict[str, str]
    binders: dict[str, Binder]
    tools: list[ToolSchema]
    history: HistoryLog
    pending: list[Part]
    latches: LatchTable
    emergent: EmergentQueue
    stats: Statistics
    turn: int
    flipped: list[str]
    _edited: tuple[int, int] | None
    _edit_frontier: int
    _lane_pause: int
    summaries: dict[str, str]
    compaction: CompactionState
    traces: Traces
    links: dict[str, Any]
    fast_path: bool
    check_pairing: bool  # (class attributes of Pipeline: see there)
    check_content: bool
    _output_chosen: bool  # max_output_tokens given by the agent (held to the window)
    # A public call's guards (engine/pipeline_guard.py)
    _guard: _CallGuard
    _after_close: bool
    _in_call: bool
    # The sinks
    recorder: Any
    recording_error: Exception | None
    probe: Any
    otel: Any
    # The fold's bookkeeping
    _whole: tuple[HistoryLog | None, tuple[Any, ...]]
    _released: tuple[HistoryLog, int, int, int] | None
    _blob_of: dict[str, str] | None
    _pending_msg: Message | None
    _hist_counted: int
    _hist_tokens: int
    _hist_tokenizer: str
    _first_assistant: int | None
    _empty_msgs: list[int]
    _silent_errors: list[int]
    _call_ids: CallIds
    _renamed: list[tuple[int, str, str]]
    _call_alias: dict[str, str]
    _renamed_memo: tuple[int, str]
    _id_rule: tuple[str, IdRule]
    _spec_hint: tuple[dict[str, Any], SourceSpec] | None
    _call_hint: Mapping[tuple[str, str, str], ToolCall]
    _last_blob: tuple[str, str]
    _replay: bool
    _explaining: bool
    # What a build carries to the next
    _cache_rules: dict[tuple[str, str], CacheRules]
    _serializers: dict[str, Serializer]
    _sections: dict[Any, Any]
    _sources_version: int
    _sources_carry: tuple[int, tuple[Any, ...]] | None
    _estimates: dict[int, tuple[Any, Measure, SectionEstimate]]
    _carry: dict[str, Any]
    _express: express.Carried | None
    _decided_from: tuple[Assembly, int]
    _prev: tuple[list[Block], int, str] | None
    _open: dict[str, Any] | TurnRecord | None
    _open_alerts: tuple[dict[str, Any], alert_rules.Outcomes] | None
    _shadow: Shadow | None
