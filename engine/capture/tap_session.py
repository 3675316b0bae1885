"""The shadow session behind a tapped client (`Tap`; also the proxy's journaling path): each call the
agent makes (`TapCall`) journaled as a turn's actual request, in the order the calls started; the
shadow engine fed the same messages; a history the agent rewrote itself (`rewritten`); conversations
that share an opening recorded apart; and what the tap saw (`TapStats`). Wrapping an SDK client so its
calls reach a Tap is `tap`'s.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.capture.lineage import (
    AMBIGUOUS_KEY,
    BRANCH_KEY,
    Lineage,
    Placement,
    ambiguous_note,
    branch_note,
    digests,
)
from engine.capture.tap_request import Parsed, parse_request, request_params
from engine.capture.tap_streams import (
    Accumulator,
    plain,
)
from engine.errors import BudgetExceededError, ContextPipeError
from engine.feedback import normalize_usage, reply_diagnostics
from engine.importers._common import Ctx
from engine.importers.ingest import DEFAULT_WINDOW, ActualRecorder, IngestReport, _Feeder
from engine.importers.model import CallRec, MessageRec, ToolSchemaRec
from engine.importers.proxy_jsonl import (
    _anthropic_response,
    _openai_response,
)
from engine.pipeline import Pipeline
from engine.wording import counted

REQUEST_PARAMS_KEY = "request_params"  # trace keys the tap annotates a call's turn with (see Tap._before,
SERVER_KEY = "server"  # Tap.after); the OpenTelemetry export reads them (engine.export.spans.turn_span)
RESPONSE_KEY = "response_meta"
DIAG_KIND = "tap_error"
# Finished calls held behind an open one before the open one is given up on (closed without its
# outcome, journaled late if it comes): an agent thread that leaves a stream open and unread must not
# hold every other thread's turns out of the live view for long.
MAX_HELD = 8
# How many times the shadow plan's window may double to fit an agent's request (see Tap._plan): from
# 128k tokens to 32M, past any model's window; a request that needs more is refused by the model anyway.
_GROW_WINDOW = 8


def _error_kind(text: str) -> str:
    low = text.lower()
    if "too long" in low or "context_length" in low:
        return "prompt_too_long"
    if text.startswith("incomplete_stream"):
        return "incomplete_stream"
    if text.startswith("unobserved"):  # a call that went through but whose response the tap could not see
        return "unobserved"
    return "error"


REWRITE_KEY = "history_rewrite"  # the trace key of a turn whose request rewrote the agent's own history


def rewritten(fed: list[MessageRec], msgs: list[MessageRec]) -> tuple[int, dict[str, int]]:
    """A request whose history does not extend the last one fed: the agent rewrote its own history (it
    compacted: dropped or summarized older turns, or edited old tool outputs). (Where the messages new
    to the engine begin in `msgs`, what the rewrite did.)

    The new messages are those after the last message the engine was already told of (the last reply,
    usually, which a compaction keeps with the turns around it): before it lies the agent's own version
    of the past (its summary, its edits), which the engine already holds in the original and keeps, as
    it keeps every message it was told of (its own policy decides what to send of it). Re-fed whole,
    the shadow history held every earlier message twice, and a summary besides. Messages after that
    point are fed even when unknown (a summary placed after the last message it kept is, for all the
    engine can tell, new), and the system prompt is never one of them: fed again it became user text."""
    last_at = {m: i for i, m in enumerate(msgs)}  # messages are frozen, hashable: each one's last place
    start = next((last_at[m] + 1 for m in reversed(fed) if m in last_at), 0)
    known, present = set(fed), set(msgs)
    if start == 0:
        # Nothing of the old history is left, the system prompt included: only a new system prompt is
        # not new conversation (fed, it would be user text); every other message is.
        while start < len(msgs) and msgs[start].role == "system":
            start += 1
    before = msgs[:start]
    note = {
        "messages": len(msgs),  # in the rewritten request
        "kept": sum(1 for m in before if m in known),  # of them, messages the engine already had
        "replaced": sum(1 for m in before if m not in known),  # the agent's own summaries and edits
        "dropped": sum(1 for m in fed if m not in present),  # of the last request and reply, left out
        "new": len(msgs) - start,  # fed to the engine as the turn's new messages
    }
    return start, note


def gave_up(exc: BaseException) -> BaseException | str:
    """What a failed call journals: its exception; for a cancellation (a task's, asyncio.wait_for's
    timeout) or an interrupt, which say nothing themselves, that the agent stopped waiting. Either way
    the call ends, so the calls of other threads and tasks held behind it are journaled at once."""
    if isinstance(exc, Exception):
        # An API error's Retry-After (429, 529): how long the SDK was told to wait, as the proxy records it
        headers = getattr(getattr(exc, "response", None), "headers", None)
        try:
            wait = headers.get("retry-after") if headers is not None else None
        except Exception:  # a response object of another shape: the exception alone
            wait = None
        return f"{exc} (retry-after: {str(wait)[:100]})" if wait else exc
    return f"cancelled: the agent stopped waiting for the call ({type(exc).__name__})"


class TapError(ContextPipeError):
    """Something the tap could not journal (never raised into the agent: counted and journaled)."""


@dataclass
class TapStats:
    """What the tap saw, public: `client.contextpipe_stats` (also `Tap.stats`)."""

    calls: int = 0  # requests the agent made through the tapped client
    journaled: int = 0  # of them, journaled as a turn's actual request
    errors: int = 0  # tap failures (each journaled as a `diag` event); the agent never saw them
    last_error: str | None = None
    streams_without_usage: int = 0  # streams that ended without usage (chat without include_usage)
    unobserved: int = 0  # responses the tap could not see (with_streaming_response, raw streams)
    notes: list[str] = field(default_factory=list)


def _caller() -> object:
    """Who made a call: the asyncio task (the calls of one `gather` are separate tasks), else the thread."""
    try:
        task = asyncio.current_task()
    except RuntimeError:  # no running event loop: a sync client
        task = None
    return task if task is not None else threading.get_ident()


@dataclass(eq=False)
class TapCall:
    """One agent call as the tap follows it: its request body (read when the call started, so later
    edits of the agent's message list do not leak in), its turn once journaled, its outcome once known."""

    body: dict[str, Any]
    caller: object
    sent_at: float | None = None  # when the agent made the call (it may be journaled later)
    turn: int | None = None
    outcome: tuple[str, Any] | None = None  # ("after", response) or ("failed", problem)
    ended_at: float | None = None  # when its outcome came (it may be journaled later, held behind another)
    # waiting -> open -> done; superseded: its turn was closed before its outcome came (journaled late);
    # dropped: its request could not be journaled (the tap error is counted), so neither is its outcome
    state: str = "waiting"
    conversation: int = 1  # which of the tap's conversations its turn is in (Tap._route)


# The tap's state that is one conversation's (Tap._enter swaps it)
CONVERSATION_STATE = (
    "pipe",
    "feeder",
    "fed",
    "reply_fed",
    "actual",
    "tools_seen",
    "prompt_cache_key",
    "last_response_id",
    "record",
)
# Conversations of one tapped client kept at once (restarts, attempts, forks: Tap._route); past this the
# least recently started one's recording is finished. As the proxy's MAX_KEPT_SESSIONS.
MAX_CONVERSATIONS = 256


@dataclass
class _Conversation:
    """A tapped conversation that is not the current one, with its saved state."""

    number: int
    state: dict[str, Any]  # its CONVERSATION_STATE while another is current


class Tap:
    """The shadow session behind a tapped client (also the proxy's journaling path)."""

    def __init__(
        self,
        wire: str,
        *,
        record: str | Path | None = None,
        serve: bool | None = None,
        window: int = DEFAULT_WINDOW,
        clock: Callable[[], float] = time.time,
        provider: str | None = None,
        split: bool = True,
    ) -> None:
        self.wire = wire  # "anthropic" | "openai" (chat completions; Responses bodies are converted)
        # The engine policy of the shadow plan; by default the wire's (litellm passes the model's own).
        self.provider = provider or ("anthropic" if wire == "anthropic" else "openai")
        self.record, self.serve, self.window, self.clock = record, serve, window, clock
        self.pipe: Pipeline | None = None
        self.feeder: _Feeder | None = None
        self.fed: list[MessageRec] = []
        self.reply_fed = False  # the last of `fed` is a reply (after()), not a message the agent sent
        self.actual: ActualRecorder | None = None
        self.tools_seen: tuple[ToolSchemaRec, ...] = ()
        self.stats = TapStats()
        self.prompt_cache_key: str | None = None
        # Steps of concurrent calls (threads, asyncio tasks) must not interleave inside the journal.
        self.lock = threading.RLock()
        self._open_call: TapCall | None = None  # the call whose turn is open in the journal
        self._waiting: deque[TapCall] = deque()  # started calls not journaled yet, in start order
        # While a request is journaled: when it was sent; while an outcome is (journal_at): when it came.
        self._sent_at: float | None = None
        # The id of the last response journaled: a Responses request that names it as its
        # previous_response_id continues this conversation from the server's copy (see _parse_request).
        self.last_response_id: str | None = None
        # Background Responses calls (`background: true`) whose reply was only `queued`, by response id,
        # with the status last seen: their outcome comes with a later responses.retrieve (see follow).
        self.background: dict[str, tuple[TapCall, str]] = {}
        # Where the calls go ({"address", "port"}: the SDK client's base URL, the proxy's upstream), for
        # each turn's trace (SERVER_KEY); None when not known.
        self.server: dict[str, Any] | None = None
        # The next request's body already parsed (the proxy's recorder parses it to place it in a session)
        self.parsed: tuple[dict[str, Any], Parsed] | None = None
        # What the next journaled turn's trace says of where this conversation branched from
        # (engine.capture.lineage.BRANCH_KEY: a new session for a restart, another attempt or a fork)
        self.branch: dict[str, Any] | None = None
        # What it says when other conversations fit the request as well (lineage.AMBIGUOUS_KEY)
        self.ambiguous: dict[str, Any] | None = None
        # The conversations of this client (see _route): the state above (CONVERSATION_STATE) is the
        # current one's; the others' is kept in their _Conversation. The proxy routes itself (one ProxyTap
        # a session) and turns this off.
        self.routes = split
        self._record_first, self._numbered = record, 1
        self._conv = _Conversation(1, {})
        self._convs: dict[int, _Conversation] = {1: self._conv}
        self._lineage = Lineage()
        self._asked: tuple[int, int, list[MessageRec], list[int]] | None = None  # (conversation, turn, ...)

    @contextmanager
    def journal_at(self, when: float | None) -> Iterator[None]:
        """Steps journaled within are stamped `when` (None: now): the proxy journals an exchange on its
        recorder's thread, after the answer ended, and a span's end (the OpenTelemetry export) and the
        gaps simulate prices are the call's own, not the recorder's lag behind it."""
        self._sent_at = when
        try:
            yield
        finally:
            self._sent_at = None

    def now(self) -> float:
        """The journal's clock: while a request is journaled, the time it was sent. A request is journaled
        after the call it waited behind ended, or (the proxy) after its own answer ended, but simulate
        prices the as-sent cache by the gaps between the requests' times, so those must be send times."""
        return self._sent_at if self._sent_at is not None else self.clock()

    # Compatibility names (the proxy's recorder reads them)
    @property
    def tap_errors(self) -> int:
        return self.stats.errors

    @property
    def last_error(self) -> str | None:
        return self.stats.last_error

    @property
    def turns(self) -> int:
        return self.pipe.turn if self.pipe is not None else 0

    # ------------------------------------------------------------------ steps

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

    def _route(self, body: dict[str, Any]) -> tuple[list[MessageRec], list[int]] | None:
        """Make the conversation this request belongs to the current one, as the proxy files sessions
        (engine.capture.lineage): one whose known history it extends; a new one when it is a restart,
        another attempt or a fork (recorded next to the first: RUN-sN.cpsession); else (the agent's own
        compaction) the current one. (Its messages and digests, for the index once it is journaled.)"""
        prev = body.get("previous_response_id")
        if prev is not None:  # continues a Responses conversation from the server's copy: that one's
            for conv in self._convs.values():
                held = self.last_response_id if conv is self._conv else conv.state.get("last_response_id")
                if held == prev:
                    self._enter(conv)
                    return None
        parsed = parse_request(self.wire, body)
        msgs = parsed[0]
        chain = digests("", msgs)
        self.parsed = (body, parsed)
        if self.pipe is None and len(self._convs) == 1:
            return msgs, chain  # the first request
        where = self._lineage.place("", msgs, chain)
        if where.session is not None and where.session in self._convs:
            self._enter(self._convs[where.session])
        elif where.branch is not None:
            self._branch_off(where.branch)
        if where.ambiguous:
            self.ambiguous = self.filed_ambiguously(where, self._conv.number, self.stats.notes)
        return msgs, chain

    @staticmethod
    def filed_ambiguously(where: Placement, number: int, notes: list[str]) -> dict[str, Any]:
        """The trace's AMBIGUOUS_KEY for a request filed with `number` that other conversations fit as
        well; said in `notes` once per conversation (every later turn of it is in its trace)."""
        said = ambiguous_note(where, number)
        if not any(n.startswith(f"conversation {number}: filed with") for n in notes[-50:]):
            notes.append(f"conversation {number}: {said}")
        return {"session": number, "also": list(where.ambiguous), "note": said}

    def _branch_off(self, branch: dict[str, Any]) -> None:
        number = self._numbered = self._numbered + 1
        record: str | Path | None = None
        if self._record_first is not None:
            first = Path(self._record_first)
            record = first.with_name(f"{first.stem}-s{number}{first.suffix}")
        fresh: dict[str, Any] = {
            "pipe": None,
            "feeder": None,
            "fed": [],
            "reply_fed": False,
            "actual": None,
            "tools_seen": (),
            "prompt_cache_key": None,
            "last_response_id": None,
            "record": record,
        }
        conv = _Conversation(number, fresh)
        self._convs[number] = conv
        self._enter(conv)
        self.branch = branch
        self.stats.notes.append(
            f"conversation {number}: {branch_note(branch)}"
            + (f"; recorded to {record}" if record is not None else "")
        )
        while len(self._convs) > MAX_CONVERSATIONS:  # the proxy's bound on the sessions it keeps
            self._retire(next(n for n in self._convs if n != self._conv.number))

    def _retire(self, number: int) -> None:
        """Finish a conversation that was least recently started (see MAX_CONVERSATIONS)."""
        conv = self._convs.pop(number)
        self._lineage.forget(number)
        pipe = conv.state.get("pipe")
        if pipe is not None:
            pipe.close()
        conv.state = {}

    def _enter_number(self, number: int) -> None:
        conv = self._convs.get(number)
        if conv is None:
            raise TapError(f"conversation {number} was finished (more than {MAX_CONVERSATIONS} since)")
        self._enter(conv)

    def _enter(self, conv: _Conversation) -> None:
        """Make `conv` the current conversation (its state the tap's attributes)."""
        if conv is self._conv:
            return
        self._conv.state = {k: getattr(self, k) for k in CONVERSATION_STATE}
        for k, v in conv.state.items():
            setattr(self, k, v)
        self._conv = conv

    def _before(self, body: dict[str, Any]) -> None:
        params = request_params(body)
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
        rewrite: dict[str, int] | None = None
        if msgs[:n] == self.fed:
            start = n
        elif self.reply_fed and msgs[: n - 1] == self.fed[:-1]:
            # The agent left the last reply out of its history (mini-swe-agent drops a reply without a
            # tool call and answers it with a format error): the rest continues what was fed. The engine
            # keeps the reply, as it keeps every reply it is told of; fed whole, every message was twice.
            start = n - 1
        else:
            start, rewrite = rewritten(self.fed, msgs)
        for m in msgs[start:]:
            self.feeder.feed(m)
        self.feeder.before_request()
        self.fed = list(msgs)
        self.reply_fed = False
        key = body.get("prompt_cache_key")
        self.prompt_cache_key = key if isinstance(key, str) else None
        call = CallRec(tuple(msgs), None, tools, None, self.now(), model, cache_marks=marks)
        # The turn this request becomes: the pipeline's own counter, so a call whose response never
        # came back (an abandoned stream) cannot file the next one under its number.
        self.actual.record(self.pipe.turn, call)
        self._plan()
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
        # What the agent asked of the model (its max_tokens, temperature...: the shadow plan's own are the
        # engine's) and where the call went, for the OpenTelemetry export; journaled with the turn.
        self.pipe.annotate(REQUEST_PARAMS_KEY, params)
        if self.server is not None:
            self.pipe.annotate(SERVER_KEY, self.server)
        if self.stats.errors:
            self.pipe.annotate("tap_errors", self.stats.errors)
        self.stats.journaled += 1

    def _plan(self) -> None:
        """The shadow plan of the request just journaled. One that cannot fit the window the tap was given
        (DEFAULT_WINDOW, 128k, when the model's own is 200k, 400k or 1M) even with all history evicted
        (a single tool output of 150k tokens) was accepted by a model with a larger window: the plan's
        window is doubled until it fits, journaled as a `config` event. The turn was lost otherwise: not
        journaled, its outcome with it, and the recording held only a tap error."""
        assert self.pipe is not None
        for _ in range(_GROW_WINDOW):
            try:
                self.pipe.next_request()
                return
            except BudgetExceededError:
                self.pipe.set_window(self.pipe.config.window * 2)
        self.pipe.next_request()

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
                    f"unobserved: the background response {data.get('id')} was {data.get('status')} when "
                    "create() returned; its outcome was not seen (fetch it with responses.retrieve, or "
                    "record through the proxy)",
                )
                return
            if data.get("status") == "failed":
                # A non-streamed failed reply comes with HTTP 200 (the SDK raises nothing): the model's
                # own failure, journaled in the API's words (its error's code and message) as the
                # streamed `response.failed` is, not as the bare error object. Usage first, if billed.
                if raw_usage is not None:
                    self._usage(raw_usage, data)
                self.pipe.record_error("error", why_failed(data))
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
        if msg is not None:
            self.feeder.feed(msg)
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

    # ------------------------------------------------------------ per-call sequencing

    def begin(self, body_of: Callable[[], dict[str, Any]]) -> TapCall | None:
        """A call starts: read its request (None if the tap cannot: counted, the call goes on untapped)
        and journal it now, or as soon as the call whose turn is open has its outcome."""
        try:
            call = TapCall(body_of(), _caller(), self.clock())
        except Exception as exc:
            self.note_error(f"before: {type(exc).__name__}: {exc}")
            return None
        try:
            with self.lock:
                cur = self._open_call
                if cur is not None and cur.caller == call.caller:
                    # The same thread/task calls again while its own call is unfinished: that stream
                    # was abandoned (or is read interleaved); waiting for it would stall the journal.
                    cur.state = "superseded"
                    self._open_call = None
                self._waiting.append(call)
                self._drain()
        except Exception as exc:
            self.note_error(f"begin: {type(exc).__name__}: {exc}")
        return call

    def end(self, call: TapCall | None, response: Any = None, problem: Any = None) -> None:
        """A call's outcome: its response, or `problem` (an exception or text) when it failed."""
        if call is None:
            return
        try:
            with self.lock:
                if call.outcome is not None or call.state in ("done", "dropped"):
                    return
                call.outcome = ("after", response) if problem is None else ("failed", problem)
                call.ended_at = self.clock()
                if call.state == "open":
                    self._settle(call)
                    self._open_call = None
                    self._drain()
                elif call.state == "superseded":
                    call.state = "done"
                    self.guard(self.late, call)
                else:  # waiting behind the open call: journaled in turn by _drain
                    held = sum(1 for c in self._waiting if c.outcome is not None)
                    if held >= MAX_HELD and self._open_call is not None:
                        self._open_call.state = "superseded"
                        self._open_call = None
                        self._drain()
        except Exception as exc:
            self.note_error(f"end: {type(exc).__name__}: {exc}")

    def _drain(self) -> None:
        """Journal waiting calls in start order until one is still in flight (its turn stays open)."""
        while self._open_call is None and self._waiting:
            c = self._waiting.popleft()
            if not self.guard(self.before, c.body, c.sent_at) or self.pipe is None:
                c.state = "dropped"
                continue
            c.turn, c.state, c.conversation = self.pipe.turn - 1, "open", self._conv.number
            self._open_call = c
            if c.outcome is not None:
                self._settle(c)
                self._open_call = None

    def _settle(self, c: TapCall) -> None:
        assert c.outcome is not None
        kind, payload = c.outcome
        c.state = "done"
        self._enter_number(c.conversation)
        # Stamped when the outcome came: a call held behind another's turn is journaled only when that
        # one ends, and its span (the OpenTelemetry export) ended there, after its own answer.
        with self.journal_at(c.ended_at):
            self.guard(self.after if kind == "after" else self.failed, payload)

    def late(self, call: TapCall) -> None:
        """The outcome of a call whose turn is already closed: a `usage` (or `error`) event under the
        call's own turn number, folded like the pipeline's own. The reply is not fed to the shadow
        history (later requests of that conversation carry it anyway)."""
        self._enter_number(call.conversation)
        assert self.pipe is not None and call.outcome is not None and call.turn is not None
        kind, payload = call.outcome
        ev: dict[str, Any]
        if kind == "failed":
            text = str(payload)
            ev = {
                "k": "error",
                "turn": call.turn,
                "kind": _error_kind(text),
                "message": text[:2000],
                "time": self.clock(),
            }
        else:
            data = plain(payload) if not isinstance(payload, dict) else payload
            if not isinstance(data, dict):
                raise TapError(f"response is {type(data).__name__}, not an object")
            if self.actual is not None:
                self.actual.served_by(call.turn, data.get("system_fingerprint"))
            if data.get("usage") is None:
                self.stats.streams_without_usage += 1
                return
            key = call.body.get("prompt_cache_key")
            u = normalize_usage(data["usage"]).with_extra(
                prompt_cache_key=key if isinstance(key, str) else None, **reply_diagnostics(data)
            )
            ev = {"k": "usage", "turn": call.turn, "usage": u.to_dict(), "estimated": 0, "time": self.clock()}
        self.pipe.fold(ev)
        self.pipe.journal.append(ev)

    def failed(self, exc: BaseException | str) -> None:
        assert self.pipe is not None
        text = str(exc)
        self.pipe.record_error(_error_kind(text), text)

    def guard(self, step: Callable[..., None], *args: Any) -> bool:
        """Run one tap step; a failure is counted and journaled, never raised. True if it worked."""
        try:
            with self.lock:
                step(*args)
            return True
        except Exception as exc:
            self.note_error(f"{getattr(step, '__name__', 'step')}: {type(exc).__name__}: {exc}")
            return False

    def note_error(self, text: str) -> None:
        try:
            self.stats.errors += 1
            self.stats.last_error = text[:500]
            if self.pipe is not None:
                with self.lock:
                    self.pipe.annotate("tap_errors", self.stats.errors)
                    self.pipe.journal.append(
                        {
                            "k": "diag",
                            "kind": DIAG_KIND,
                            "turn": max(0, self.pipe.turn - 1),
                            "message": text[:500],
                            "count": self.stats.errors,
                        }
                    )
        except Exception:  # the diagnostic itself must not fail the agent either
            pass

    def finish_stream(
        self, call: TapCall | None, acc: Accumulator, problem: str | None, background: bool = False
    ) -> None:
        """A streamed call ended (or was abandoned): journal its message and usage, or why not. A
        background call's stream that ended before the response did (it broke off, or the agent stopped
        reading) is not the call's end: the response goes on on the server and the agent resumes it
        (responses.retrieve with stream=True and starting_after) or polls it, so its call waits for that."""
        rid = getattr(acc, "rid", None)
        if (
            background
            and call is not None
            and isinstance(rid, str)
            and acc.result() is None
            and getattr(acc, "failure", None) is None
        ):
            with self.lock:
                self.background[rid] = (call, "in_progress")
                self.last_response_id = rid  # what a next request's previous_response_id names
            return
        if problem is None and not acc.complete:
            failure = getattr(acc, "failure", None)  # the API ended it (Responses: response.failed, error)
            stopped = f"the agent stopped reading after {counted(acc.events, 'event')}"
            problem = f"incomplete_stream: {failure or stopped}"
        elif problem is not None and not problem.startswith("incomplete_stream"):
            problem = f"incomplete_stream: {problem}"
        result = acc.result()
        if problem is None and result is not None:
            self.end(call, result)
        else:
            self.end(call, problem=problem or "incomplete_stream: no message")

    def defer(self, call: TapCall, resp: Any, kwargs: dict[str, Any]) -> bool:
        """A background call's `queued` reply: not its outcome, which a later retrieve brings (follow).
        True if the call is left waiting for it."""
        if kwargs.get("background") is not True:
            return False
        data = plain(resp) if not isinstance(resp, dict) else resp
        if not isinstance(data, dict) or data.get("status") not in ("queued", "in_progress"):
            return False
        rid = data.get("id")
        if not isinstance(rid, str):
            return False
        with self.lock:
            self.background[rid] = (call, str(data["status"]))
            self.last_response_id = rid
        return True

    def follow(self, resp: Any) -> None:
        """A responses.retrieve or cancel result: the outcome of a background call, if it is one's and
        it has ended (completed, incomplete, failed, cancelled)."""
        data = plain(resp) if not isinstance(resp, dict) else resp
        if not isinstance(data, dict) or not isinstance(data.get("id"), str):
            return
        rid, status = data["id"], data.get("status")
        with self.lock:
            pending = self.background.get(rid)
            if pending is None:
                return
            if status in ("queued", "in_progress"):
                self.background[rid] = (pending[0], str(status))
                return
            del self.background[rid]
        if status == "cancelled":
            self.end(pending[0], problem=f"the background response {rid} was cancelled")
        else:
            self.end(pending[0], data)

    def follow_stream(self, rid: str, acc: Accumulator, problem: str | None) -> None:
        """A resumed background stream (responses.retrieve with stream=True) ended: its final event's
        response is the call's outcome; an `error` event ends the call as an incomplete stream; a stream
        that broke off again, or that the agent stopped reading, leaves the call pending (the agent may
        resume or poll again; if it never does, close() says so)."""
        with self.lock:
            pending = self.background.get(rid)
        if pending is None:
            return
        result = acc.result()
        if result is not None:
            self.follow(result)  # completed, incomplete, failed: as a polled retrieve's outcome
            return
        failure = getattr(acc, "failure", None)
        if failure is not None:
            with self.lock:
                self.background.pop(rid, None)
            self.end(pending[0], problem=f"incomplete_stream: {failure}")
        elif problem is not None:
            self.stats.notes.append(f"background response {rid}: a resumed stream ended early ({problem})")

    def close(self) -> None:
        """Finish the recording (idempotent; also run at interpreter exit). Calls still in flight are
        journaled as such: the recording says what it does not know."""
        try:
            with self.lock:
                for rid, (c, status) in list(self.background.items()):
                    self.end(
                        c,
                        problem=f"unobserved: the background response {rid} was still {status} when the "
                        "recording closed (its outcome was not fetched with responses.retrieve)",
                    )
                self.background.clear()
                unfinished = "unobserved: still in flight when the recording was closed"
                for c in self._waiting:
                    if c.outcome is None:
                        c.outcome = ("failed", unfinished)
                if self._open_call is not None:
                    self.end(self._open_call, problem=unfinished)
                self._drain()
                for conv in list(self._convs.values()):
                    self._enter(conv)
                    if self.pipe is not None:
                        self.pipe.close()
        except Exception as exc:
            self.stats.errors += 1
            self.stats.last_error = f"close: {type(exc).__name__}: {exc}"
