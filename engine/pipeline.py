"""The public API: a Pipeline an agent feeds events to and asks for its next request.

    pipe = Pipeline("claude-sonnet-4", provider="anthropic", window=200_000)
    pipe.identity("You are a careful coding agent.")
    pipe.add_tool("bash", "Run a shell command", {"type": "object", ...})
    pipe.user("Fix the failing test in tests/test_io.py")
    req = pipe.next_request()          # Plan -> Bind -> Optimize -> Execute (serialize)
    resp = client.messages.create(**req.body)
    pipe.record_usage(resp.usage)      # Feedback: the SDK's usage object as it is
    calls = pipe.assistant(text, tool_calls=[b for b in resp.content if b.type == "tool_use"])
    pipe.tool_result(calls[0].id, output)   # every call answered before the next request

Every mutating call becomes a journal event and is applied by `fold`, the same public fold replay,
simulate, ingest and the tap use, so the live state and a replayed state cannot drift apart. Rebuilding
a recorded request from a journal is:

    pipe = Pipeline(model, provider, window, replay=True)   # or Replayer.new_pipeline()
    for ev in events:
        if ev["k"] == "request":
            pipe.begin_request(ev["turn"])          # what folding the request does first
            built = pipe.build(ev.get("bound", {}))  # the same bytes the live pipeline sent
        pipe.fold(ev)
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine import alerts as alert_rules
from engine import pipeline_express as express
from engine.artifacts import Message, Part, ToolCall, ToolSchema
from engine.assembly import Assembly, Measure
from engine.catalog import Binder, EmergentQueue, LatchTable, SourceSpec
from engine.config import DEFAULT_MAX_OUTPUT_TOKENS, PipelineConfig
from engine.errors import (
    ConfigError,
    ContextPipeError,
)
from engine.feedback import finish_reason_of
from engine.hashing import sha256_hex
from engine.optimize import OptimizeLimits, Summarizer
from engine.pipeline_conversation import _NO_HINT, Conversation
from engine.pipeline_guard import (
    _CALLBACK,
    _CallGuard,
    _journals,
    _journals_async,
    _raise_reentrant,
)
from engine.pipeline_registration import _check_output_fits
from engine.pipeline_request import Built as Built
from engine.pipeline_request import Decided as Decided
from engine.pipeline_request import Request as Request
from engine.pipeline_sinks import ENGINE_VERSION as ENGINE_VERSION
from engine.pipeline_sinks import ENV_RECORD as ENV_RECORD
from engine.pipeline_turn_end import _prefix_blocks
from engine.plan import SectionEstimate, Thresholds
from engine.policy.cachecost import CacheRules
from engine.policy.settings import PolicySettings
from engine.policy.state import CompactionState
from engine.probe.optin import redact_requested
from engine.providers import Serializer
from engine.providers.base import Block
from engine.providers.call_ids import RULES as CALL_ID_RULES
from engine.providers.call_ids import CallIds, IdRule
from engine.recording.event_log import KEEP_DEFAULT
from engine.recording.history_log import CHUNK_DEFAULT, HistoryLog
from engine.recording.journal import Journal
from engine.recording.turn_fold import TurnFold
from engine.spill import FileSpill, MemorySpill, SpillBackend
from engine.stats import Statistics
from engine.tokens import TokenCounter, Tokenizer
from engine.trace import check_budget, figures_of, section_shas_of
from engine.trace_lazy import Traces, TurnRecord

if TYPE_CHECKING:
    from engine.bind import BindJob
    from engine.shadow import CandidateConfig, Shadow

TRACE_HISTORY = 32


class Pipeline(Conversation):
    # Inside a public call that journals (see _journals): nested calls leave the flush to the outermost.
    _in_call = False
    # next_request() and assistant() refuse to go on while the newest assistant message has a call with
    # no result (see _check_answered). Importers and taps that rebuild another agent's conversation as
    # it was sent turn it off: they repair pairing their own way (engine/importers/ingest.py _Feeder).
    check_pairing = True
    # user() and assistant() refuse a message the providers reject for being empty (Anthropic: "text
    # content blocks must be non-empty" / "must contain non-whitespace text"; OpenAI: an assistant
    # message with neither content nor tool calls). Importers that rebuild a conversation as it was
    # sent turn it off, with check_pairing.
    check_content = True
    # Set by close(): a journaling call after it raises (see _journals) rather than journal events no
    # recording or probe receives any more.
    _after_close = False

    def __init__(
        self,
        model: str,
        provider: str = "anthropic",
        window: int = 200_000,
        *,
        margin: float = 0.02,
        thresholds: Thresholds | None = None,
        limits: OptimizeLimits | None = None,
        max_output_tokens: int | None = None,
        default_response_reserve: int = 1024,
        thinking_reserve: int = 0,
        schema_reserve: int = 0,
        query_source: str = "main",
        tokenizer: Tokenizer | None = None,
        counter: TokenCounter | None = None,
        spill_dir: str | Path | None = None,
        spill: SpillBackend | None = None,
        summarizer: Summarizer | None = None,
        policy: PolicySettings | str | None = None,
        record: str | Path | None = None,
        serve: bool | None = None,
        redact: bool | None = None,
        otel: bool | None = None,
        clock: Callable[[], float] = time.time,
        replay: bool = False,
        shadow: CandidateConfig | None = None,
        links: dict[str, Any] | None = None,
        journal_keep: int | None = KEEP_DEFAULT,
        history_chunk: int | None = CHUNK_DEFAULT,
    ) -> None:
        """`replay=True` makes a state to fold a recorded journal into: no recorder or probe, and
        summaries come from the journal instead of the summarizer. `journal_keep`: journal events held
        in memory; older ones go to a private temporary file and read back on demand (None: keep all).
        `history_chunk`: messages behind the compaction cut (and their texts) go to a private temporary
        file, at least this many at a time, and are read back on demand (see _release_history; None
        keeps the whole conversation in memory, as does a replay pipeline, whose what-ifs read it all).
        `max_output_tokens` (default 4096): the reply each request asks for (the body's max_tokens);
        a value given must be below `window`."""
        # Only a value the agent chose is held to the window: the default with a small planning window
        # is what what-ifs, importers and tests use, and a replay rebuilds whatever was recorded.
        self._output_chosen = max_output_tokens is not None and not replay
        # What the agent asked of the sinks, for a fork to ask the same (engine/fork.py): a child of a
        # redacted parent must not serve its prompts in the clear, nor an exported parent's go unexported.
        self.sink_choices: dict[str, bool | None] = {"redact": redact, "otel": otel}
        self._guard = _CallGuard()
        if not replay and not isinstance(provider, str):
            # (A replay's provider comes from a recording, whose readers report a wrong type there as
            # a damaged file.)
            raise ConfigError(f"provider must be a str, got {provider!r}; e.g. 'anthropic', 'openai' or 'bedrock'")
        cfg = PipelineConfig(
            model=model,
            provider=provider,
            window=window,
            margin=margin,
            max_output_tokens=DEFAULT_MAX_OUTPUT_TOKENS if max_output_tokens is None else max_output_tokens,
            default_response_reserve=default_response_reserve,
            thinking_reserve=thinking_reserve,
            schema_reserve=schema_reserve,
            query_source=query_source,
            thresholds=thresholds or Thresholds(),
            limits=limits or OptimizeLimits(),
            policy=PolicySettings.parse(policy) if isinstance(policy, str) else (policy or PolicySettings()),
        )
        if self._output_chosen:
            _check_output_fits(cfg)
        if not callable(clock):
            raise ConfigError(f"clock must be a callable returning seconds (e.g. time.time), got {clock!r}")
        if tokenizer is not None and not (
            callable(getattr(tokenizer, "count", None)) and isinstance(getattr(tokenizer, "name", None), str)
        ):
            raise ConfigError(
                f"tokenizer must have a `name` (str) and a `count(text) -> int` method (engine.tokens.Tokenizer), "
                f"got {tokenizer!r}; omit it for cl100k_base"
            )
        self.counter = counter if counter is not None else TokenCounter(tokenizer)  # empty is falsy
        self.measure = Measure(self.counter)
        self.clock = clock
        self.journal = Journal(journal_keep)
        # A turn the journal moves to disk before anything read its trace is written as its marker and
        # rebuilt where it is read (engine/recording/turn_fold.py), with this session's tokenizer.
        self.journal.events.refold = functools.partial(TurnFold, self.counter.tokenizer)
        self.summarizer = summarizer
        if spill is not None:
            self.spill: SpillBackend | None = spill
        elif spill_dir is not None:
            self.spill = FileSpill(spill_dir)
        else:
            self.spill = MemorySpill()
        # State (a fold over the journal)
        self.config = cfg
        self.specs: list[SourceSpec] = []
        self.content: dict[str, str] = {}  # static / last bound text per source
        self.binders: dict[str, Binder] = {}
        self.tools: list[ToolSchema] = []
        self.history = HistoryLog(None if replay else history_chunk)
        # The last whole-conversation history tuple built from a log that only appends (see _assemble_from).
        self._whole: tuple[HistoryLog | None, tuple[Any, ...]] = (None, ())
        # (the log, task end, cut) _release_history last released to: asked again, it returns at once.
        self._released: tuple[HistoryLog, int, int, int] | None = None
        # Each folded part's journal blob (the part's hash -> its text's blob hash), while the history
        # may release messages: a release evicts their texts by these hashes instead of hashing every
        # text again (see _release_history). An entry goes with its message.
        self._blob_of: dict[str, str] | None = None if self.history.chunk is None else {}
        self.pending: list[Part] = []  # tool results / user text not yet closed into a message
        self._pending_msg: Message | None = None  # see _close_pending
        # A running token total of `history` (history only grows): a turn measures only the messages
        # appended since the last one, not the whole session. Counts are a pure function of the
        # tokenizer and the content, so the total is keyed by the tokenizer's name.
        self._hist_counted = 0  # messages of `history` in `_hist_tokens`
        self._hist_tokens = 0
        self._hist_tokenizer = ""
        self._first_assistant: int | None = None  # see _task_end
        # Indices of the history's messages that have nothing a provider takes (no parts, or blank
        # texts only: an import's; Pipeline.user/assistant refuse them): see _empty_note.
        self._empty_msgs: list[int] = []
        self._silent_errors: list[int] = []  # those holding an error result with no output: the same
        # Tool call ids (engine/providers/call_ids.py): every one the session sent, the calls sent with
        # another id than the agent's ((message index, the agent's id, the id sent), in order: see
        # _renamed_note), and for the newest assistant message the agent's id -> the id sent, which
        # tool_result() answers by.
        self._call_ids = CallIds()
        self._renamed: list[tuple[int, str, str]] = []
        self._call_alias: dict[str, str] = {}
        self._id_rule: tuple[str, IdRule] = ("", CALL_ID_RULES["openai"])  # see assistant()
        self._renamed_memo: tuple[int, str] = (0, "")
        self.latches = LatchTable()
        self.emergent = EmergentQueue()
        self.stats = Statistics()
        self.turn = 0
        self.flipped: list[str] = []  # latches that flipped since the last request
        # (turn, the first history index the agent edited in it): the request of that turn breaks the cache
        # there whatever the policy does (cost_aware prices a compaction on that turn accordingly).
        self._edited: tuple[int, int] | None = None
        self._edit_frontier = -1  # the newest history index the agent edited (cost_aware's breakpoint after it)
        self.summaries: dict[str, str] = {}
        self.compaction = CompactionState()  # the compacted history (cost_aware policy), folded
        self._cache_rules: dict[tuple[str, str], CacheRules] = {}
        # Recent traces only: alert rules look back ten turns and the trace compares with the last one.
        # The full history lives in the journal; keeping every trace here would grow without bound.
        # A turn nothing observed holds a TurnRecord here until something reads it (see _finish).
        self.traces = Traces(maxlen=TRACE_HISTORY)
        self._serializers: dict[str, Serializer] = {}
        self._spec_hint: tuple[dict[str, Any], SourceSpec] | None = None  # see fold("source")
        self._call_hint: Mapping[tuple[str, str, str], ToolCall] = _NO_HINT  # see _part("call")
        self._last_blob: tuple[str, str] = ("", "")  # see _blob
        self._sections: dict[Any, Any] = {}  # unchanged source sections across turns (sections.assemble)
        # The sections before the history of the last build, with the version of their inputs (sources,
        # their content, tools, latches) it was made at; fold bumps the version when any of them changes.
        self._sources_version = 0
        self._sources_carry: tuple[int, tuple[Any, ...]] | None = None
        self._estimates: dict[int, tuple[Any, Measure, SectionEstimate]] = {}  # see _estimate
        # Outcomes a build carries to the next one when their inputs did not change (cost_aware.run).
        self._carry: dict[str, Any] = {}
        # False: every build computes everything afresh, carrying nothing from the build before and
        # taking no shortcut (the same bytes, more work; tests compare the two).
        self.fast_path = True
        # The express lane for steady append turns (engine/pipeline_express.py); False: the general path
        # every turn (the reference tests/test_express.py compares it with).
        self.express = True
        self._express: express.Carried | None = None
        self._lane_pause = 0  # turns the lane stands aside (pipeline_express.READ_PAUSE)
        # The class's defaults above, on the instance too: Python 3.11 specializes an attribute read on
        # the instance's own dict, never one that finds a class attribute (the guard reads two on every
        # public call, user() and assistant() the checks: each was the generic look-up, cold a turn).
        self._in_call = False
        self._after_close = False
        self.check_pairing = True
        self.check_content = True
        self._decided_from: tuple[Assembly, int] = ((), 0)
        self._prev: tuple[list[Block], int, str] | None = None  # blocks, prefix block count, model
        self._open: dict[str, Any] | TurnRecord | None = None  # trace of the request awaiting feedback
        # (that trace, what each alert rule said about it at the request): see _outcome_alerts
        self._open_alerts: tuple[dict[str, Any], alert_rules.Outcomes] | None = None
        self._replay = replay
        self._explaining = False  # EXPLAIN only: no journal writes, no summarizer calls
        self.recorder: Any = None
        self.recording_error: Exception | None = None  # why the recording stopped, when a write failed
        self.probe: Any = None
        self.otel: Any = None  # an engine.export.otel.OtelSink when exporting
        self._emit(
            {"k": "session", "config": cfg.to_event(), "engine_version": ENGINE_VERSION, "time": clock()}
        )
        # Sessions linked to this one (a fork's parent, see engine/fork.py): in the header and one `link`
        # event; replay ignores the kind. A session gets an id when it forks or is forked.
        self.session_id: str | None = None
        self.links = dict(links or {})
        if links:
            self.session_id = str(links.get("session_id") or "") or None
            self.journal.append({"k": "link", **links})
        # Shadow rollout (engine/shadow.py): a candidate configuration planned beside this one every turn.
        self._shadow: Shadow | None = None
        if shadow is not None and not replay:
            # Imported only by a pipeline with a shadow candidate: shadow.py and engine/whatif.py with it
            # are ~1.5 ms CPU of every process that imports the engine and never plans one (simulate).
            from engine.shadow import Shadow as _Shadow

            self._shadow = _Shadow.create(shadow)
        if self._shadow is not None:
            self.journal.append(self._shadow.config_event(cfg))
        if not replay:
            self._open_sinks(record, serve, redact)
            self._open_otel(otel, redact_requested(redact))

    def close(self) -> None:
        """Journal the open turn, then close the recording, the probe and the exporter. Closing twice is
        harmless; any other journaling call afterwards raises PipelineClosedError."""
        if _CALLBACK.get() is self:
            _raise_reentrant("close")
        with self._guard.lock:  # after a call another thread is in, not in the middle of it
            self._close()

    def _close(self) -> None:
        if self._after_close:
            return
        self.close_turn()
        self._after_close = True
        if self.recorder is not None:
            recorder, self.recorder = self.recorder, None
            try:
                recorder.close()
            except ContextPipeError as exc:  # the recording's own fault: the probe and exporter still close
                self._recorder_failed(exc)
        if self.probe is not None:
            self.probe.close()
            self.probe = None
        if self.otel is not None:
            self.otel.close()
            self.otel = None

    def __enter__(self) -> Pipeline:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def shadow_candidate(self) -> CandidateConfig | None:
        """The shadow rollout's candidate configuration (shadow=), None without one."""
        return self._shadow.candidate if self._shadow is not None else None

    @property
    def max_output_tokens_given(self) -> bool:
        """Whether the agent gave max_output_tokens (then held below the window), not the default."""
        return self._output_chosen

    # ----------------------------------------------------------------- turns
    def _bind_jobs(self, budgets: dict[str, int]) -> list[BindJob]:
        """One job per bound source. Its budget is what the plan gave the section at its last known
        size; before a first successful bind there is no size yet, so the source's own estimate."""
        # engine.bind (and asyncio with it) is imported only by a pipeline that has sources to bind:
        # asyncio and ssl are ~50 ms CPU of every process that imports the engine (simulate, replay).
        from engine.bind import BindJob

        jobs = []
        for s in self.specs:
            if s.id not in self.binders:
                continue
            budget = budgets.get(s.id, s.estimate) if self.content.get(s.id) else s.estimate
            if s.max_tokens is not None:
                budget = min(budget, s.max_tokens)
            jobs.append(BindJob(s.id, self.binders[s.id], s.timeout_s, budget, s.priority))
        return jobs

    @_journals_async
    async def anext_request(self, explain_only: bool = False) -> Request:
        """Plan -> Bind (concurrent) -> Optimize -> Execute. With explain_only, nothing is journaled."""
        if not explain_only:  # (EXPLAIN may look at the state mid-round: nothing is sent)
            self._check_answered("the next request")
        # Plan first (with each bound source at its last known size) so every binder gets its budget.
        budgets = self._plan(self.config, self._assemble({}))[0].budgets if self.binders else {}
        jobs = self._bind_jobs(budgets)
        from engine.bind import bind_all

        results: dict[str, Any] = {}
        if jobs:
            token = _CALLBACK.set(self)  # the binders' tasks and threads copy this context
            try:
                results = await bind_all(jobs)
            finally:
                _CALLBACK.reset(token)
        bound: dict[str, dict[str, Any]] = {}
        scratch: list[str] = []  # EXPLAIN: bound text is readable for this build only, never journaled
        for sid, r in sorted(results.items()):
            if r.error is not None:
                bound[sid] = {"error": r.error}
            elif explain_only:
                h = sha256_hex(r.text or "")
                if h not in self.journal.blobs:
                    self.journal.blobs[h] = r.text or ""
                    scratch.append(h)
                bound[sid] = {"h": h}
            else:
                bound[sid] = {"h": self._blob(r.text or "")}
        try:
            return self._finish(bound, explain_only)
        finally:
            for h in scratch:
                self.journal.blobs.pop(h, None)

    @_journals
    def next_request(self, explain_only: bool = False) -> Request:
        if not explain_only:  # (EXPLAIN may look at the state mid-round: nothing is sent)
            self._check_answered("the next request")
        if self.binders:
            import asyncio  # only with sources to bind (see _bind_jobs)

            try:
                asyncio.get_running_loop()
            except RuntimeError:
                return asyncio.run(self.anext_request(explain_only))
            raise RuntimeError("next_request() called inside an event loop: use `await pipe.anext_request()`")
        return self._finish({}, explain_only)

    def explain(self) -> dict[str, Any]:
        """EXPLAIN only: the trace of what the next request would be. No journal, no side effects."""
        return self.next_request(explain_only=True).trace

    def _finish(self, bound: dict[str, dict[str, Any]], explain_only: bool) -> Request:
        if explain_only:
            saved_spill, self.spill = self.spill, MemorySpill()
            self._explaining = True
            try:
                built = self.build(bound)
            finally:
                self.spill = saved_spill
                self._explaining = False
            check_budget(built.trace)
            self._attribute(built.trace, built.serialized, built.plan)
            return Request(self.turn, built.serialized, built.trace)
        self._close_turn()
        if self._defers_trace():
            return self._finish_unobserved(bound)
        self._express = None  # the lane extends only the turn just before it
        built = self.build(bound)
        check_budget(built.trace)
        self._attribute(built.trace, built.serialized, built.plan)
        said = alert_rules.evaluate_rules(built.trace, self._recent_traces())
        built.trace["alerts"] = alert_rules.alerts_of(said)
        shadow_ev = self._plan_shadow(bound, built) if self._shadow is not None else None
        self._emit(
            self._request_event(
                built.serialized.request_sha256,
                {sec["id"]: sec["sha256"][:16] for sec in built.trace["sections"]},
                bound,
                built.state,
                built.trace["spill_failures"],
            )
        )
        if shadow_ev is not None:
            self.journal.append(shadow_ev)  # after the request it shadows; fold ignores the kind
        self._prev = (built.serialized.blocks, _prefix_blocks(built.serialized), self.config.model)
        self._open = built.trace
        self._open_alerts = (built.trace, said)
        self.traces.append(built.trace)
        return Request(built.trace["turn"], built.serialized, built.trace)

    def _finish_unobserved(self, bound: dict[str, dict[str, Any]]) -> Request:
        """_finish for a turn nothing observes: the request, the journal's request event and everything
        the next turn reads, as the eager path makes them; the trace (with its cache break and alerts)
        as a TurnRecord, built when read."""
        cfg = self.config
        carried, self._express = self._express, None
        lane = express.eligible(self, cfg) if not bound else None
        if carried is not None and lane is not None:
            req = express.turn(self, carried)
            if req is not None:
                return req
        st = self.compaction
        d = self.decide(bound, cfg, defer_texts=True)
        m = self.measure
        # The prefix hash is left to the trace, its only reader (providers.base.PrefixDigest).
        serializer = self._serializer(cfg.provider)
        ser = serializer.serialize(
            d.res.asm, d.res.markers, cfg.model, cfg.max_output_tokens, m, True, prefix_hash=False
        )
        fig = figures_of(d.before, d.res, ser, m)
        traces = self.traces
        last = traces.raw(-1) if traces else None
        prev_sections = last.section_shas if isinstance(last, TurnRecord) else section_shas_of(last)
        prev = self._prev
        rec = TurnRecord(
            self.turn,
            cfg,
            d.plan,
            d.reserves,
            d.res,
            fig,
            prev_sections,
            list(self.flipped),
            list(d.spill_failures),
            d.ratio,
            d.decision,
            d.finish,
            (prev[0], prev[1]) if prev else None,
            bool(prev and prev[2] != self.config.model),
            traces.views(len(traces), alert_rules.LOOKBACK),
        )
        if rec.final_tokens > rec.ceiling:
            check_budget(rec.trace())  # raises, naming what could not be evicted
        if (
            lane is not None
            and not d.spill_failures
            and d.state is not None
            and express.extendable(d.decision, d.res.actions, d.state is st)
        ):  # a held or compacting turn the next may extend (before the request event closes the pending)
            asm, elided = self._decided_from
            self._express = express.carry(self, cfg, asm, elided, serializer)
        self._emit(
            self._request_event(
                ser.request_sha256,
                {sid: sha[:16] for sid, sha in fig.shas.items()},
                bound,
                d.state,
                list(d.spill_failures),
            )
        )
        got = self._express
        if got is not None and got.state is not self.compaction:
            # A compaction: the state the request event folded in is the one the next turn sees.
            self._express = got._replace(state=self.compaction)
        self._prev = (ser.blocks, _prefix_blocks(ser), self.config.model)
        self._open = rec
        self._open_alerts = None
        traces.append(rec)
        return Request(rec.turn, ser, rec)

    @_journals
    def fork(
        self,
        task: str | None = None,
        *,
        scope: str = "session",
        record: str | Path | None = None,
        serve: bool | None = None,
    ) -> Pipeline:
        """A sub-agent pipeline whose request shares this one's prefix up to `scope` ("global" or
        "session"): same model and settings, tools, global (and session) sections and latches; its own
        conversation starts with `task`. See engine/fork.py; check it with engine.fork.validate_spawn."""
        from engine.fork import fork_pipeline

        return fork_pipeline(self, task, scope=scope, record=record, serve=serve)

    def send(
        self, send_fn: Callable[[dict[str, Any]], Any], usage_of: Callable[[Any], Any] | None = None
    ) -> Any:
        """Execute: build the next request, hand it to `send_fn`, feed usage or the error back."""
        # Not a _journals call itself: the probe would hold the request's events through the model call.
        req = self.next_request()
        try:
            resp = send_fn(req.body)
        except Exception as exc:
            kind = (
                "prompt_too_long"
                if "prompt is too long" in str(exc) or "context_length" in str(exc)
                else "error"
            )
            self.record_error(kind, str(exc))
            raise
        usage = (
            usage_of(resp)
            if usage_of
            else getattr(resp, "usage", None) or (resp.get("usage") if isinstance(resp, dict) else None)
        )
        if usage is not None:
            self.record_usage(usage, finish_reason=finish_reason_of(resp))
        return resp
