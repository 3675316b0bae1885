"""Turn an imported session (engine.importers) into an engine journal and a `.cpsession` recording.

Each model call becomes one engine turn. The engine assembles its own request from the same
originals (a shadow of what ContextPipe would have sent); what the agent actually sent is kept too,
as `actual` events holding message hashes (each message stored once as a blob, delta-encoded
against the previous call), and the provider's real usage is fed back as usage.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from engine.errors import ConfigError
from engine.hashing import canonical_json
from engine.importers.history_edits import (
    REWRITE_KEY,
    Placed,
    apply_edits,
    feed_placed,
    in_place,
    in_place_note,
    name_edit_break,
    rewrite_event,
)
from engine.importers.model import CallRec, ImportedSession, MessageRec, ThinkingRec
from engine.pipeline import Pipeline
from engine.providers import canonical_provider
from engine.providers.call_ids import RULES as CALL_ID_RULES
from engine.providers.call_ids import CallIds, IdRule
from engine.recording.actual import actual_requests as actual_requests  # re-exported: its old home
from engine.tokens import TokenCounter

DEFAULT_WINDOW = 128_000
NO_RESULT = "[no result recorded in the source for this call]"
_LAST_TIME = 253_402_300_799.0  # 9999-12-31T23:59:59Z, the last time a datetime can show


@dataclass
class IngestReport:
    """What an import produced: the turns written and notes on what it could not carry over."""
    turns: int = 0
    notes: list[str] = field(default_factory=list)


MEDIA_KEY = "image_tokens"  # the trace key of a turn whose new messages carry images (their counted tokens)


def message_dict(m: MessageRec, blob: Any = None) -> dict[str, Any]:
    """The message as sent. With `blob`, text is stored by content hash (`*_h` keys) so the actual
    request costs a few hashes per message on disk, not a second copy of its content."""
    if blob is None:
        d: dict[str, Any] = {"role": m.role, "content": m.content}
    else:
        d = {"role": m.role, "content_h": blob(m.content)}
    if m.tool_calls:
        d["tool_calls"] = [
            {
                "id": c.id,
                "name": c.name,
                **({"arguments": c.arguments} if blob is None else {"arguments_h": blob(c.arguments)}),
            }
            for c in m.tool_calls
        ]
    if m.tool_call_id is not None:
        d["tool_call_id"] = m.tool_call_id
    if m.thinking:
        # DeepSeek reasoner's `reasoning_content` (and kept thinking blocks) go back to the provider with
        # the history: they are prompt tokens of every later call, so the actual request keeps them.
        if blob is None:
            d["thinking"] = m.thinking
        else:
            d["thinking_h"] = blob(m.thinking)
    if m.thinking_blocks:
        # Anthropic's blocks as they went back, each with what the API checks it by (a signature, a
        # redacted block's data): the joined text above cannot be sent again, and the as-sent view of
        # the request showed thinking that read as unsigned.
        d["thinking_blocks"] = [_thinking_block(b, blob) for b in m.thinking_blocks]
    if m.media:
        # Its images as counted (engine.importers.image_tokens): what the as-sent column adds for them
        d["media"] = [
            {"media_type": x.media_type, "ref": x.ref, "size": x.size, "tokens": x.tokens, "how": x.how}
            for x in m.media
        ]
    return d


def _thinking_block(b: ThinkingRec, blob: Any) -> dict[str, str]:
    if b.redacted:
        data = {"data": b.text} if blob is None else {"data_h": blob(b.text)}
        return {"type": "redacted_thinking", **data}
    text = {"thinking": b.text} if blob is None else {"thinking_h": blob(b.text)}
    return {"type": "thinking", **text, "signature": b.signature}


class _Feeder:
    """Feeds source messages into a pipeline, repairing what the provider would reject."""

    def __init__(self, pipe: Pipeline, report: IngestReport) -> None:
        # A recorded conversation is rebuilt as it was sent, a request with an unanswered call included
        # (an agent's call the API refused is still its turn); the feeder closes calls its own way.
        pipe.check_pairing = False
        pipe.check_content = False  # an empty message the agent sent is kept as it was sent
        self.pipe = pipe
        self.report = report
        self.open_calls: list[str] = []
        self.answered: set[str] = set()
        self.seen_system = False
        # Tool results that answer no open call, kept as user text once the open calls are answered:
        # a user message between a call and its result (or its placeholder) is a request no provider
        # takes, and the engine refused to build it (a traceback-free but fatal pairing error).
        self.stray: list[str] = []
        self.alias: dict[str, list[str]] = {}  # a call id as the source has it -> the ids sent for it
        self.first_turn: dict[str, int] = {}  # each source call id so far -> the turn of its first message
        # The ids the session has sent, by the rule of the provider it is imported for (call_ids.py): the
        # pipeline's own, mirrored (both fold the same ids in the same order).
        self.rule: IdRule = CALL_ID_RULES[canonical_provider(pipe.config.provider)]
        self.ids = CallIds()
        # The images fed since the last request, each with what its count rests on (note_media)
        self.media_notes: list[dict[str, Any]] = []

    def note_media(self) -> None:
        """On the turn just opened: the images its new messages carry and how each was counted (every
        image's count is an estimate: MEDIA_KEY in the trace says so, and on what it rests)."""
        if self.media_notes:
            self.pipe.annotate(MEDIA_KEY, self.media_notes)
            self.media_notes = []

    def _sendable(self, own: list[str]) -> list[str]:
        """The ids one message's calls (their ids in the source, `own`) are sent with, by the provider's
        rule as a live pipeline gives them (engine/providers/call_ids.py: the source's own id unless the
        provider refuses it or a call of the session had it). A call id must be unique in the whole
        request (Anthropic: "tool_use ids must be unique", across messages as well as in one; OpenAI:
        "Duplicate value for 'tool_call_id'"; Bedrock the same), so an id an earlier message used is
        renamed, the later call's: the earlier request went with it as it was, and its bytes stay. The
        pipeline then takes them as they are (each acceptable and new to the session). Unlike a live
        agent's, a source may repeat an id inside one message: the second of it is renamed the same way."""
        firsts = list(dict.fromkeys(own))
        given = dict(zip(firsts, self.ids.assign(self.rule, firsts), strict=True))
        for sid in given.values():
            self.ids.add(sid)
        out: list[str] = []
        placed: set[str] = set()
        for cid in own:
            sid = given[cid]
            if sid in placed:  # the same id again in this message
                sid = self.ids.assign(self.rule, [cid])[0]
                self.ids.add(sid)
            placed.add(sid)
            out.append(sid)
        return out

    def _renamed(self, cid: str, sent: str, twice: bool) -> str:
        """The import's note for a call whose id _sendable changed."""
        turn = self.pipe.turn
        rule = self.rule
        if not cid:
            return f"turn {turn}: a call without an id; sent as {sent!r} ({rule.name} refuses an empty id)"
        if cid in self.first_turn:
            return (
                f"turn {turn}: call id {cid!r} was used by an earlier assistant message too (turn "
                f"{self.first_turn[cid]}); sent as {sent!r} (Anthropic, OpenAI and Bedrock refuse a request "
                "that repeats a tool call id)"
            )
        if twice:
            return f"turn {turn}: call id {cid!r} used twice in one message; the second is {sent!r}"
        if rule.max_len and len(cid) > rule.max_len:
            return (
                f"turn {turn}: call id {cid!r} is {len(cid)} characters, longer than {rule.name} takes "
                f"({rule.max_len}); sent as {sent!r}"
            )
        if rule.refused is not None and rule.refused.search(cid):
            return (
                f"turn {turn}: call id {cid!r} holds characters {rule.name} refuses (letters, digits, '_' and "
                f"'-' only); sent as {sent!r}"
            )
        return (
            f"turn {turn}: call id {cid!r} is an id an earlier call was sent with; sent as {sent!r} (Anthropic, "
            "OpenAI and Bedrock refuse a request that repeats a tool call id)"
        )

    def _close_calls(self) -> None:
        for cid in self.open_calls:
            if cid not in self.answered:
                self.pipe.tool_result(cid, NO_RESULT)
                self.report.notes.append(
                    f"turn {self.pipe.turn}: call {cid} had no result; placeholder added"
                )
        self.open_calls, self.answered, self.alias = [], set(), {}
        for text in self.stray:
            self.pipe.user(text)
        self.stray = []

    def before_request(self) -> None:
        """Before the request is built: stray results held back are placed (after the open calls'
        results and placeholders), so the request holds all the source's call prompt did. A reply whose
        calls the prompt answered only in part gets placeholders for the rest: a request may end in
        calls without results (the agent's own turn), but a user message answering some of its calls
        and not the others breaks pairing, and the engine refused to build it (the import stopped on
        an UnpairedToolResultError)."""
        if self.stray or (self.answered and any(c not in self.answered for c in self.open_calls)):
            self._close_calls()

    def feed(self, m: MessageRec) -> None:
        p = self.pipe
        if m.role == "system":
            if not self.seen_system:
                p.identity(m.content)
                self.seen_system = True
            else:
                p.user(m.content)
            return
        if m.role == "assistant":
            self._close_calls()
            calls = []
            own = [c.id for c in m.tool_calls]
            seen: set[str] = set()
            for c, cid in zip(m.tool_calls, self._sendable(own) if own else (), strict=True):
                if cid != c.id:
                    self.report.notes.append(self._renamed(c.id, cid, c.id in seen))
                seen.add(c.id)
                # The source's results name the source's id: the k-th result for it answers the k-th call
                self.alias.setdefault(c.id, []).append(cid)
                calls.append({"id": cid, "name": c.name, "arguments": c.arguments})
            thinking = [b.block() for b in m.thinking_blocks] if m.thinking_blocks else m.thinking
            p.assistant(m.content, calls, thinking=thinking)
            for cid in own:
                self.first_turn.setdefault(cid, p.turn)
            self.open_calls = [c["id"] for c in calls]
            return
        if m.role == "tool":
            cid = m.tool_call_id or ""
            eid = next(
                (e for e in self.alias.get(cid, [cid]) if e in self.open_calls and e not in self.answered),
                None,
            )
            if eid is not None:
                p.tool_result(eid, m.content)
                self._media(m)
                self.answered.add(eid)
            else:
                text = f"[tool result for call {cid or '?'} with no matching call]\n{m.content}"
                if any(c not in self.answered for c in self.open_calls):
                    self.stray.append(text)
                else:
                    p.user(text)
                why = "without a call id" if not cid else f"{cid!r}"
                self.report.notes.append(f"turn {p.turn}: unpaired tool result {why} kept as user text")
            return
        self._close_calls()
        p.user(m.content)
        self._media(m)

    def _media(self, m: MessageRec) -> None:
        """The images a message carries, each a media part counted as its provider bills it; what each
        count rests on is kept for the turn's trace (MEDIA_KEY: every image count is an estimate)."""
        for x in m.media:
            self.pipe.media(x.media_type, x.ref, x.size, x.tokens)
            self.media_notes.append({"ref": x.ref, "tokens": x.tokens, "how": x.how})


def ingest(
    imp: ImportedSession,
    record: str | Path | None = None,
    *,
    window: int | None = None,
    provider: str | None = None,
    model: str | None = None,
    counter: TokenCounter | None = None,
) -> tuple[Pipeline, IngestReport]:
    if not imp.calls:
        why = "; ".join(str(n) for n in imp.meta.get("notes") or ()) or "the file holds no model reply"
        raise ConfigError(f"{imp.source}: the session has no model calls to import ({why})")
    now = [imp.calls[0].timestamp or 0.0]
    peak = max((c.usage.input_tokens for c in imp.calls if c.usage), default=0)
    win = window or max(DEFAULT_WINDOW, int(peak * 1.25))
    prov = provider or imp.provider or "openai"
    try:
        canonical_provider(prov)
    except ConfigError:
        prov = "openai"  # the source did not say; its messages are OpenAI-shaped
    pipe = Pipeline(
        model or imp.model or "unknown",
        prov,
        win,
        record=record,
        serve=False,
        counter=counter,
        clock=lambda: now[0],
    )
    report = IngestReport()
    feeder = _Feeder(pipe, report)
    for t in imp.calls[0].tools:
        pipe.add_tool(t.name, t.description, t.parameters)
    fed = 0
    # The messages fed so far (the last call's and its reply) and where each went in the engine's history
    fed_msgs: tuple[MessageRec, ...] = ()
    fed_at: list[Placed | None] = []
    actual = ActualRecorder(pipe)
    last: float | None = None
    for k, call in enumerate(imp.calls):
        if call.timestamp is not None and not 0 <= call.timestamp <= _LAST_TIME:
            # Not a time (inf, nan, before 1970 or after 9999): one such value would have become the
            # time of every later call.
            report.notes.append(f"turn {k}: its timestamp {call.timestamp!r} is not a time; left out")
            call = replace(call, timestamp=None)
        if call.timestamp is not None and last is not None and call.timestamp < last:
            # Out of order (clocks of two machines, an edited file): kept at the previous call's time, so
            # the gaps between calls, which decide what the cache simulation lets expire, are never
            # negative, and said.
            report.notes.append(
                f"turn {k}: its timestamp is {last - call.timestamp:,.0f} s before the previous call's; "
                "kept at the previous call's time"
            )
            call = replace(call, timestamp=last)
        last = call.timestamp if call.timestamp is not None else last
        now[0] = call.timestamp if call.timestamp is not None else now[0]
        edits = None
        if fed and call.messages[:fed] != fed_msgs:
            # Not the calls before it and their replies as they were: an agent's history processor
            # rewrote earlier messages (SWE-agent's last_n_observations elides old tool outputs where
            # they stood). Edits in place are made in the engine's history too (else it sent the
            # originals every turn after); any other rewrite leaves where earlier messages went unknown.
            msgs = list(call.messages)
            edited = in_place(list(fed_msgs), msgs)
            if edited:
                edits = {**in_place_note(fed, msgs, edited), **apply_edits(pipe, list(fed_msgs), fed_at, msgs)}
            else:
                fed_at = [None] * fed
        for m in call.messages[fed:]:
            fed_at.append(feed_placed(pipe, feeder, m, None))
        fed = len(call.messages)
        fed_msgs = call.messages
        feeder.before_request()
        actual.record(k, call)
        req = pipe.next_request()
        feeder.note_media()
        if edits is not None:
            # (the turn's trace and the journal say so, as for a captured agent: simulate names the break)
            if edits.get("applied"):
                name_edit_break(pipe, req, edits)
            pipe.annotate(REWRITE_KEY, edits)
            pipe.journal.append(rewrite_event(k, edits))
        if call.error or call.response is None:
            kind = "prompt_too_long" if call.error and "too long" in call.error.lower() else "error"
            pipe.record_error(kind, call.error or "no response")
            first = (call.error or "").strip().splitlines()
            why = first[0][:160] if first else "no response"
            report.notes.append(f"turn {k}: no reply in the source ({why}); kept as a failed call")
            continue
        if call.usage is not None:
            pipe.record_usage(call.usage.to_dict())
        fed_at.append(feed_placed(pipe, feeder, call.response, k))
        fed_msgs = (*call.messages, call.response)
        fed += 1
        report.turns += 1
    pipe.close_turn()
    return pipe, report


class ActualRecorder:
    """Journals what the agent actually sent, one `actual` event per call: message hashes delta-encoded
    against the previous call, tool schemas when they change, the serving build when it changes."""

    def __init__(self, pipe: Pipeline) -> None:
        self.pipe = pipe
        self.prev: list[str] = []
        self.fingerprint: str | None = None
        self.tools_key: tuple[tuple[str, str, str], ...] | None = None
        # The last call's messages: a call that repeats them and adds to it has only the added ones hashed.
        # Hashing every call's whole history again made an import quadratic (a 3,000-call session: 23 ms a
        # call, 69 s); a repeated message's texts are journaled already, so nothing written changes.
        self.prev_msgs: tuple[MessageRec, ...] = ()

    def _hash(self, m: MessageRec) -> str:
        blob = self.pipe.journal.blob
        return blob(canonical_json(message_dict(m, blob)).decode())

    def record(self, turn: int, call: CallRec) -> None:
        blob = self.pipe.journal.blob
        msgs = tuple(call.messages)
        n = len(self.prev_msgs)
        if n and len(msgs) >= n and all(map(operator.is_, msgs[:n], self.prev_msgs)):
            # The common case for an importer, which shares one message object between the calls that
            # repeat it: an identity check in C. The tap parses each request afresh (no message is the
            # object fed before) and has compared its history with what it fed already: not again here.
            hashes = self.prev + [self._hash(m) for m in msgs[n:]]
        else:  # the first call, or the agent rewrote its history: hash it all once
            hashes = [self._hash(m) for m in msgs]
        self.prev_msgs = msgs
        base = len(self.prev) if hashes[: len(self.prev)] == self.prev else 0
        ev: dict[str, Any] = {"k": "actual", "turn": turn, "base": base, "add": hashes[base:]}
        params = [blob(canonical_json(t.parameters).decode()) for t in call.tools]
        key = tuple((t.name, t.description, h) for t, h in zip(call.tools, params, strict=True))
        # Tools whenever they change (a new MCP server, an edited description, a reorder: the commonest
        # ways an agent breaks its own cache), and with every full (non-delta) request.
        if turn == 0 or base == 0 or key != self.tools_key:
            ev["tools"] = params
            ev["tool_names"] = [t.name for t in call.tools]
            ev["tool_descriptions"] = [blob(t.description) for t in call.tools]
        self.tools_key = key
        if call.cache_marks is not None:
            # The request's own cache breakpoints: where (and for how long) it asked the provider to
            # cache. Without them simulate's as_sent column can only assume a rolling 5-minute one.
            ev["marks"] = [list(m) for m in call.cache_marks]
        # Real usage is not repeated here: record_usage() journals it as the turn's `usage` event.
        if call.timestamp is not None:
            ev["time"] = call.timestamp
        if call.fingerprint and call.fingerprint != self.fingerprint:
            ev["system_fingerprint"] = self.fingerprint = call.fingerprint
        self.pipe.journal.append(ev)
        self.prev = hashes

    def served_by(self, turn: int, fingerprint: Any) -> None:
        """The serving build a reply named, when it changes, for a request journaled before its reply came
        (the tap and the proxy journal the request as it is sent): a `build` event under the request's
        turn, read by simulate with the `actual` events' own (DeepSeek's cache persistence is per build)."""
        if isinstance(fingerprint, str) and fingerprint and fingerprint != self.fingerprint:
            self.fingerprint = fingerprint
            self.pipe.journal.append({"k": "build", "turn": turn, "system_fingerprint": fingerprint})
