"""The steps that journal one call (`TapSteps`, a part of `engine.capture.tap_session.Tap`): its
request as the turn's actual assembly, fed to the shadow engine and planned (`before`), and its
outcome (`after`): the reply, its usage, what the trace keys say of the call.
"""

from __future__ import annotations

from typing import Any

from engine.capture.lineage import AMBIGUOUS_KEY, BRANCH_KEY
from engine.capture.tap_call import TapError
from engine.capture.tap_conversations import TapConversations
from engine.capture.tap_request import parse_request, request_params
from engine.capture.tap_rewrite import rewritten
from engine.capture.tap_streams import plain
from engine.errors import BudgetExceededError, ContextPipeError
from engine.feedback import normalize_usage, reply_diagnostics
from engine.importers._common import Ctx
from engine.importers.history_edits import (
    REWRITE_KEY,
    Placed,
    apply_edits,
    feed_placed,
    in_place,
    name_edit_break,
    rewrite_event,
)
from engine.importers.ingest import ActualRecorder, IngestReport, _Feeder
from engine.importers.model import CallRec, MessageRec, ToolSchemaRec
from engine.importers.wire_bodies import _anthropic_response, _openai_response
from engine.pipeline import Pipeline

REQUEST_PARAMS_KEY = "request_params"  # trace keys the tap annotates a call's turn with (see Tap._before,
SERVER_KEY = "server"  # Tap.after); the OpenTelemetry export reads them (engine.export.spans.turn_span)
RESPONSE_KEY = "response_meta"
# How many times the shadow plan's window may double to fit an agent's request (see Tap._plan): from
# 128k tokens to 32M, past any model's window; a request that needs more is refused by the model anyway.
_GROW_WINDOW = 8


class TapSteps(TapConversations):
    """Journaling a request and its outcome."""

    def _parse_request(
        self, body: dict[str, Any]
    ) -> tuple[list[MessageRec], tuple[ToolSchemaRec, ...], tuple[tuple[str, int, str], ...] | None]:
        """(messages, tools, the request's cache breakpoints or None: see CallRec.cache_marks)."""
        given, self.parsed = self.parsed, None
        if given is not None and given[0] is body:  # the proxy parsed it already to place it (lineage)
            msgs, tools, marks = given[1]
        else:
            msgs, tools, marks = parse_request(self.wire, body)
        prev = body.get("previous_response_id")
        if self.wire != "anthropic" and prev is not None and prev == self.last_response_id and self.fed:
            # The Responses API's server-side state: the request carries only what is new, the model
            # reads the conversation so far (its last reply included) before it, and is billed for it.
            # Its instructions are not carried over: the request's own system message leads.
            system = [m for m in msgs if m.role == "system"]
            held = [m for m in self.fed if m.role != "system"]
            msgs = system + held + [m for m in msgs if m.role != "system"]
        return msgs, tools, marks

    def _open(self, model: str) -> None:
        self.pipe = Pipeline(
            model, self.provider, self.window, record=self.record, serve=self.serve, clock=self.now
        )
        self.feeder = _Feeder(self.pipe, IngestReport())
        self.actual = ActualRecorder(self.pipe)

    def before(self, body: dict[str, Any], sent_at: float | None = None) -> None:
        """Journal a request as the turn's actual assembly; `sent_at` is when it was sent (default: now)."""
        self._sent_at = sent_at
        self._asked = None
        try:
            placed = self._route(body) if self.routes else None
            self._before(body)
            if placed is not None and self.pipe is not None:
                msgs, chain = placed
                turn = self.pipe.turn - 1
                self._lineage.journaled(self._conv.number, "", turn, msgs, chain, self.fed, False)
                self._asked = (self._conv.number, turn, msgs, chain)
        finally:
            self._sent_at = None
            self.parsed = None

    def _before(self, body: dict[str, Any]) -> None:
        params = request_params(body)
        # Several choices asked (`n` > 1): which one the agent keeps, only its next request says
        self.choices_asked = int(params.get("choice_count", 1))
        msgs, tools, marks = self._parse_request(body)
        model = str(body.get("model", "unknown"))
        if self.pipe is None:
            self._open(model)
        assert self.pipe is not None and self.feeder is not None and self.actual is not None
        if tools != self.tools_seen:
            for t in tools:
                self.pipe.add_tool(t.name, t.description, t.parameters)
            self.tools_seen = tools
        # Feed only what is new since the last call.
        n = len(self.fed)
        rewrite: dict[str, Any] | None = None
        # (Compared once: the tap parses each request afresh, so this compares every message of the
        # history field by field, not by identity.)
        extends = msgs[:n] == self.fed
        edits = None if extends else in_place(self.fed, msgs)
        at = self.fed_at[:n]
        if extends or edits == 0:
            # (edits == 0: the history as fed but for the replies' reasoning, which DeepSeek's reasoner
            # refuses back: fed again from the last reply on, every reply was in the history twice)
            start = n
        elif edits is None and self.reply_fed and msgs[: n - 1] == self.fed[:-1]:
            # The agent left the last reply out of its history (mini-swe-agent drops a reply without a
            # tool call and answers it with a format error): the rest continues what was fed. The engine
            # keeps the reply, as it keeps every reply it is told of; fed whole, every message was twice.
            start = n - 1
            at = at[:start]
        else:
            start, rewrite = rewritten(self.fed, msgs)
            if edits:  # messages edited where they stood: the engine's history takes each edit it can
                rewrite.update(apply_edits(self.pipe, self.fed, self.fed_at, msgs))
            else:  # (a compaction: the agent's own messages before `start`, none of them the engine's)
                at = [None] * start
        for m in msgs[start:]:
            at.append(self._feed(m, None))
        self.feeder.before_request()
        self.fed, self.fed_at = list(msgs), at
        self.reply_fed = False
        key = body.get("prompt_cache_key")
        self.prompt_cache_key = key if isinstance(key, str) else None
        call = CallRec(tuple(msgs), None, tools, None, self.now(), model, cache_marks=marks)
        # The turn this request becomes: the pipeline's own counter, so a call whose response never
        # came back (an abandoned stream) cannot file the next one under its number.
        self.actual.record(self.pipe.turn, call)
        req = self._plan()
        if rewrite is not None and rewrite.get("applied"):
            name_edit_break(self.pipe, req, rewrite)
        self.feeder.note_media()  # the images of its new messages, and on what each count rests
        if self.branch is not None:
            self.pipe.annotate(BRANCH_KEY, self.branch)
            self.branch = None
        if self.ambiguous is not None:
            self.pipe.annotate(AMBIGUOUS_KEY, self.ambiguous)
            self.ambiguous = None
        if rewrite is not None:
            # On the turn's trace (cp-inspect explain, the probe): the as-sent side of this turn is a new
            # base (its `actual` event lists the whole request), the shadow took only the new tail.
            self.pipe.annotate(REWRITE_KEY, rewrite)
            # and for simulate's index, which names the cache break it made without opening traces
            self.pipe.journal.append(rewrite_event(self.pipe.turn - 1, rewrite))
        # What the agent asked of the model (its max_tokens, temperature...: the shadow plan's own are the
        # engine's) and where the call went, for the OpenTelemetry export; journaled with the turn.
        self.pipe.annotate(REQUEST_PARAMS_KEY, params)
        if self.server is not None:
            self.pipe.annotate(SERVER_KEY, self.server)
        if self.stats.errors:
            self.pipe.annotate("tap_errors", self.stats.errors)
        self.stats.journaled += 1

    def _feed(self, m: MessageRec, turn: int | None) -> Placed | None:
        """Feed `m` to the engine; where it went (history_edits.feed_placed), for an edit of it later."""
        assert self.pipe is not None and self.feeder is not None
        return feed_placed(self.pipe, self.feeder, m, turn)

    def _plan(self) -> Any:
        """The shadow plan of the request just journaled. One that cannot fit the window the tap was given
        (DEFAULT_WINDOW, 128k, when the model's own is 200k, 400k or 1M) even with all history evicted
        (a single tool output of 150k tokens) was accepted by a model with a larger window: the plan's
        window is doubled until it fits, journaled as a `config` event. The turn was lost otherwise: not
        journaled, its outcome with it, and the recording held only a tap error."""
        assert self.pipe is not None
        for _ in range(_GROW_WINDOW):
            try:
                return self.pipe.next_request()
            except BudgetExceededError:
                self.pipe.set_window(self.pipe.config.window * 2)
        return self.pipe.next_request()

    def after(self, response: Any) -> None:
        assert self.pipe is not None and self.feeder is not None
        data = plain(response) if not isinstance(response, dict) else response
        if not isinstance(data, dict):
            raise TapError(f"response is {type(data).__name__}, not an object")
        raw_usage = data.get("usage")
        if self.wire != "anthropic" and "output" in data and "choices" not in data:
            from engine.capture.proxy.responses_api import response_to_chat, why_failed

            if data.get("status") in ("queued", "in_progress"):
                # background: true, and the outcome was not followed (a raw response the tap does not
                # wait on): this is not the reply, only its ticket, so the turn says its outcome is unseen.
                self.pipe.record_error(
                    "unobserved",
                    f"the background response {data.get('id')} was {data.get('status')} when "
                    "create() returned; its outcome was not seen (fetch it with responses.retrieve, or "
                    "record through the proxy)",
                )
                return
            if data.get("status") == "failed":
                # A non-streamed failed reply comes with HTTP 200 (the SDK raises nothing): the model's
                # own failure, journaled in the API's words (its error's code and message) as the
                # streamed `response.failed` is, not as the bare error object. Then its usage, if billed
                # (after: the turn's trace takes the first outcome, and its failure must be what it says).
                self.pipe.record_error("error", why_failed(data))
                if raw_usage is not None:
                    self._usage(raw_usage, data)
                return
            data = response_to_chat(data)
        rid = data.get("id")
        self.last_response_id = rid if isinstance(rid, str) else None
        ctx = Ctx(f"{self.wire} response", "<tap>")
        try:
            if self.wire == "anthropic":
                msg, _, err = _anthropic_response({**data, "usage": None}, ctx, "response")
            else:
                msg, _, err = _openai_response({**data, "usage": None}, ctx, "response")
        except ContextPipeError:
            # A reply the journal cannot read (no choices: a content filter's answer) was still billed:
            # its usage goes to its turn, then the guard counts and journals the failure.
            if raw_usage is not None:
                self._usage(raw_usage, data)
            raise
        if err is not None:
            self.pipe.record_error("error", err)
            return
        if self.actual is not None:
            # The build that served it (OpenAI/DeepSeek `system_fingerprint`), known only now: the request's
            # `actual` event was journaled when it was sent. Before the usage, which closes the turn.
            self.actual.served_by(self.pipe.turn - 1, data.get("system_fingerprint"))
        meta = {k: v for k in ("id", "model") if isinstance(v := data.get(k), str) and v}
        reason = reply_diagnostics(data).get("finish_reason")
        if reason:  # also here: a stream without usage (chat without include_usage) has no usage event
            meta["finish_reason"] = str(reason)
        if meta:  # (before the usage, which closes the turn; a stream without usage: the next request)
            self.pipe.annotate(RESPONSE_KEY, meta)
        if raw_usage is not None:
            self._usage(raw_usage, data)
        else:
            self.stats.streams_without_usage += 1
        choices = data.get("choices")
        several = self.choices_asked > 1 or (isinstance(choices, list) and len(choices) > 1)
        if msg is not None and not several:
            # (Of several choices the agent keeps one, any one: fed the first, the engine's history held
            # it and, from the next request, the one kept, every turn. The next request brings it.)
            # (where it is in the engine's history, and the turn it answered: an edit of it is told so)
            self.fed_at.append(self._feed(msg, self.pipe.turn - 1))
            self.fed.append(msg)
            self.reply_fed = True
            asked = self._asked
            if asked is not None and asked[0] == self._conv.number and len(self.fed) == len(asked[2]) + 1:
                self._lineage.journaled(asked[0], "", asked[1], asked[2], asked[3], self.fed, True)

    def _usage(self, raw_usage: Any, data: dict[str, Any]) -> None:
        assert self.pipe is not None
        # The one normaliser (engine.feedback): cache reads, 5m/1h writes, Responses and DeepSeek fields
        u = normalize_usage(raw_usage).with_extra(
            prompt_cache_key=self.prompt_cache_key, **reply_diagnostics(data)
        )
        self.pipe.record_usage(u)
