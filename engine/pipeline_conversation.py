"""The conversation an agent reports: its user messages (`user`), each reply with its thinking and tool
calls as the SDKs return them (`assistant`: the calls read, given the ids each provider accepts, and
folded), and each call's result (`tool_result`); `_check_answered` refuses to go on past a call with no
result while pairing is checked. Each is a journaling call (pipeline_fold.py folds its events).

A base class of Pipeline (see engine/pipeline_state.py for the chain).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from operator import attrgetter
from typing import Any

from engine.artifacts import Message, Text, ToolCall, ToolResult
from engine.errors import ConfigError, ContentError, UnpairedToolResultError
from engine.pipeline_guard import _journals
from engine.pipeline_registration import Registration
from engine.providers import canonical_provider
from engine.providers.call_ids import RULES as CALL_ID_RULES
from engine.recording.journal import Event
from engine.wording import counted, nouned

_CALL_ID = attrgetter("id")


# Pipeline._call_hint between assistant() calls: read only (a new empty dict after every reply was one
# more object made and freed).
_NO_HINT: Mapping[tuple[str, str, str], ToolCall] = {}


def _thinking_parts(thinking: Any, blob: Callable[[str], str]) -> list[dict[str, Any]]:
    """assistant()'s thinking as journal parts: text, or the model's thinking block(s) as the SDK
    returns them (Anthropic's ThinkingBlock / RedactedThinkingBlock or their dicts, one or a list, in
    the response's order), whose signature the provider checks when the block is sent back (without
    one, the serializer leaves it out); a redacted block's `data` goes back as it came."""
    if isinstance(thinking, str):
        return [{"t": "thinking", "h": blob(thinking)}]
    if isinstance(thinking, (list, tuple)):
        return [_thinking_part(b, blob) for b in thinking]
    return [_thinking_part(thinking, blob)]


def _thinking_part(thinking: Any, blob: Callable[[str], str]) -> dict[str, Any]:
    get = thinking.get if isinstance(thinking, Mapping) else lambda k, d=None: getattr(thinking, k, d)
    if get("type") == "redacted_thinking":
        data = get("data")
        if type(data) is not str or not data:
            raise ContentError(
                f"thinking {thinking!r:.120} is a redacted_thinking block without its `data` (a str): "
                "pass the block as the SDK returns it"
            )
        return {"t": "thinking", "h": blob(data), "redacted": True}
    text, sig = get("thinking"), get("signature", "")
    if type(text) is not str or type(sig) is not str:
        raise ContentError(
            f"thinking {thinking!r:.120} is neither text nor a thinking block: pass the text, or the "
            "block as the SDK returns it (with `thinking` and `signature`; a redacted_thinking block "
            "with `data`), or a list of them"
        )
    part = {"t": "thinking", "h": blob(text)}
    if sig:
        part["sig"] = sig
    return part


def _call_of(c: Any) -> ToolCall:
    """A tool call as the agent has it: a ToolCall (as it is), {"id", "name", "arguments" (JSON text) or
    "input" (an object)}, OpenAI's {"id", "function": {"name", "arguments"}}, or the SDK's own object for
    either (Anthropic's ToolUseBlock, OpenAI's ChatCompletionMessageToolCall), so `resp.content`'s
    tool_use blocks and `message.tool_calls` go in as the SDK returns them."""
    if type(c) is dict:
        # Our own shape, what most agents pass every turn: read without the general path's Mapping check
        # (an ABC instance check), the `function` look-up and _args' defaults (the same ToolCall).
        cid, name, args = c.get("id"), c.get("name"), c.get("arguments")
        if type(cid) is str and cid and type(name) is str and name and type(args) is str:
            return ToolCall(cid, name, args)
    elif isinstance(c, ToolCall):
        return c
    d = c
    if type(d) is not dict and not isinstance(d, Mapping) and hasattr(d, "model_dump"):
        d = d.model_dump()
    if isinstance(d, Mapping):
        fn = d.get("function")
        if "name" not in d and isinstance(fn, Mapping):
            d = {"id": d.get("id"), "name": fn.get("name"), "arguments": fn.get("arguments") or ""}
        cid, name = d.get("id"), d.get("name")
        if type(cid) is str and cid and type(name) is str and name:
            return ToolCall(cid, name, _args(d))
    raise ConfigError(
        f"tool call {c!r:.200} lacks an id or a name: pass {{'id': ..., 'name': ..., 'arguments': '<JSON>'}} "
        "(or 'input': {...}), OpenAI's tool_calls items or Anthropic's tool_use blocks"
    )


def _args(c: Mapping[str, Any]) -> str:
    a = c.get("arguments", c.get("input", {}))
    if isinstance(a, str):
        return a
    from engine.hashing import canonical_json

    return canonical_json(a).decode()


class Conversation(Registration):
    """A Pipeline's conversation calls (public API: see engine/pipeline.py's module docstring)."""

    @_journals
    def user(self, text: str) -> None:
        if self.check_content and type(text) is str and (not text or text.isspace()):
            raise ContentError(
                f"user({text!r}): the text is empty or only whitespace, and the providers refuse such a "
                "message (Anthropic: 'text content blocks must be non-empty'); skip the call, or pass the "
                "text the model should read"
            )
        self._emit({"k": "part", "part": {"t": "text", "h": self._blob(text)}})

    @_journals
    def media(self, media_type: str, ref: str, size: int, tokens: int) -> None:
        """An image (or other attachment) in the message being reported (after its `user` text or its
        `tool_result`): tracked by reference, never by bytes, and counted as `tokens` (what the provider
        bills for it: engine.importers.image_tokens works it out from the image's header)."""
        if type(tokens) is not int or tokens < 0:
            raise ContentError(f"media({media_type!r}, tokens={tokens!r}): tokens must be a count (an int >= 0)")
        part = {"t": "media", "media_type": str(media_type), "ref": str(ref), "size": int(size), "tokens": tokens}
        self._emit({"k": "part", "part": part})

    @_journals
    def assistant(
        self,
        text: str = "",
        tool_calls: Sequence[ToolCall | Mapping[str, Any] | Any] | None = (),
        thinking: str | Any | None = None,
    ) -> list[ToolCall]:
        """The model's reply. `tool_calls`: dicts {"id", "name", "arguments" (JSON text) or "input"},
        OpenAI's `message.tool_calls` or Anthropic's tool_use blocks as the SDK returns them. `thinking`:
        text, or Anthropic's thinking/redacted_thinking block(s) as the SDK returns them (one or a list),
        which carry the signature the API needs to take them back. Returns the calls, each to be
        answered with tool_result(call.id, ...) before the next request. A call whose id the provider
        would refuse (one an earlier call of the session had, as an agent that numbers its calls per turn
        gives; characters or a length it does not take) is sent with another id, the same on every later
        turn (engine/providers/call_ids.py): its result still goes by the id returned here."""
        self._check_answered("the next assistant message")
        if tool_calls is None:  # OpenAI's message.tool_calls when the model made none
            tool_calls = ()
        # The calls are read and checked before anything is journaled: a bad one leaves no trace.
        calls = list(map(_call_of, tool_calls))  # (from C: a comprehension is a frame of its own)
        if self.check_content and type(text) is str and text.isspace():
            # Whitespace the model wrote beside its calls or thinking: Anthropic refuses a text block of
            # whitespace only ("must contain non-whitespace text"), and it says nothing to the model.
            text = ""
        if self.check_content and not text and not calls and not thinking:
            raise ContentError(
                "assistant(): no text, tool calls or thinking: the providers refuse an empty assistant "
                "message (Anthropic: 'text content blocks must be non-empty'; OpenAI: content or "
                "tool_calls required); skip the call when the model returned nothing"
            )
        ids = list(map(_CALL_ID, calls))  # (read in C: a comprehension is a frame of its own)
        if len(ids) > 1 and len(set(ids)) != len(ids):
            raise ConfigError(f"duplicate tool call ids in one assistant message: {ids}")
        # The ids the provider takes (call_ids.py): the agent's own unless refused or sent before.
        sent_ids = ids
        if ids:
            provider, rule = self._id_rule
            if provider is not self.config.provider:  # (the provider's name resolved once, not per reply)
                provider = self.config.provider
                rule = CALL_ID_RULES[canonical_provider(provider)]
                self._id_rule = (provider, rule)
            sent_ids = self._call_ids.assign(rule, ids)
        parts: list[dict[str, Any]] = _thinking_parts(thinking, self._blob) if thinking else []
        if (
            self.check_content
            and parts
            and not text
            and not calls
            and canonical_provider(self.config.provider) in ("anthropic", "bedrock")
            and not any(p.get("sig") or p.get("redacted") for p in parts)
        ):
            # The serializer leaves unsigned thinking out, and here it is all the message has: the
            # request would carry it unsigned and be refused ("Invalid signature in thinking block").
            raise ContentError(
                "assistant(): the message holds only thinking without its signature, which Anthropic "
                "refuses when it is sent back; pass the thinking block as the SDK returns it "
                "(assistant(thinking=resp.content[0]), or a list of the response's thinking and "
                "redacted_thinking blocks), which carries the signature, or skip a reply without text"
            )
        text_h = self._blob(text) if text else ""
        if text:
            parts.append({"t": "text", "h": text_h})
        hint: dict[tuple[str, str, str], ToolCall] = {}
        for c, given, sid in zip(calls, tool_calls, sent_ids, strict=True):
            h = self._blob(c.arguments)
            if sid != c.id:
                # Journaled as sent, with the agent's id beside it: a replay folds the same ids.
                parts.append({"t": "call", "id": sid, "name": c.name, "h": h, "as": c.id})
                hint[(sid, c.name, h)] = ToolCall(sid, c.name, c.arguments)
                continue
            parts.append({"t": "call", "id": c.id, "name": c.name, "h": h})
            if not isinstance(given, ToolCall):  # built here from its content: fold may reuse it
                hint[(c.id, c.name, h)] = c
        self._call_hint = hint
        if text:
            # The calls' arguments were journaled after the text; the text is the part _part reads
            # (the calls come from `hint`).
            self._last_blob = (text_h, text)
        try:
            ev: Event = {"k": "msg", "role": "assistant", "parts": parts}
            self.fold(ev)  # (_emit in line)
            self.journal.append(ev)
        finally:
            self._call_hint = _NO_HINT
        return calls

    @_journals
    def edit_text(self, index: int, text: str) -> bool:
        """The agent edited the text of message `index` of the history where it stood (a reply reworded
        before the conversation was sent again): from here on the history holds the edit, and requests
        send it. Its thinking, tool calls, results and media stay as they were. One `edit` event, which a
        replay and simulate fold alike; the next request is built afresh from the edited history (the
        cache breaks there, as it did for the agent). False, and nothing journaled, when the text is
        already that, or the message is behind the compaction's cut and written to disk (what is sent in
        its place is the compaction's). One part of a message (a user message's text beside tool
        results, a call's arguments, a result): edit_part, edit_call, edit_result."""
        old = self._edit_target("edit_text", index, text)
        if old is None or "".join(p.text for p in old.parts if isinstance(p, Text)) == text:
            return False
        ev: Event = {"k": "edit", "turn": self.turn, "at": index, "h": self._blob(text) if text else ""}
        self.fold(ev)
        self.journal.append(ev)
        return True

    @_journals
    def edit_part(self, index: int, part: int, text: str) -> bool:
        """The agent edited one part of message `index` where it stood: `pipe.history[index].parts[part]`,
        a text (its text: a user message reworded), a tool call (its arguments, JSON text) or a tool
        result (its content: an agent truncating an old tool output, as mini-swe-agent and OpenHands do).
        The message's other parts, and the part's id, name and error flag, stay as they were. One `edit`
        event (with the part), folded by a replay and simulate alike; the next request is built afresh.
        False, and nothing journaled, when the part holds that already, or the message is behind the
        compaction's cut and written to disk."""
        return self._edit_part("edit_part", index, part, text)

    @_journals
    def edit_result(self, call_id: str, content: str) -> bool:
        """The agent rewrote the result of call `call_id` where it stood (truncated an old tool output,
        cleared it): edit_part on that result. `call_id` is the id the call was sent with or, for a call
        sent with another id (engine/providers/call_ids.py), the agent's own (its newest call of that
        id)."""
        index, part = self._find_part("edit_result", call_id, ToolResult)
        return self._edit_part("edit_result", index, part, content, f"edit_result({call_id!r}")

    @_journals
    def edit_call(self, call_id: str, arguments: str) -> bool:
        """The agent rewrote the arguments of its call `call_id` (JSON text) where it stood: edit_part on
        that call. `call_id` as edit_result takes it."""
        index, part = self._find_part("edit_call", call_id, ToolCall)
        return self._edit_part("edit_call", index, part, arguments, f"edit_call({call_id!r}")

    def _edit_target(self, name: str, index: int, text: str) -> Message | None:
        """The message an edit rewrites (its index and new text checked), or None when it is behind the
        cut, on disk: not sent, not rewritten."""
        if type(index) is not int or not 0 <= index < len(self.history):
            raise ConfigError(f"{name}({index!r}): no such message ({self._edit_range()})")
        if type(text) is not str:
            raise ContentError(
                f"{name}({index}, ...): the text is a {type(text).__name__}, not a str: "
                "give the message's whole new text"
            )
        return self.history[index] if self.history.held(index) else None

    def _edit_part(self, name: str, index: int, part: int, text: str, said: str = "") -> bool:
        """edit_part's work; `said`, how an error names the call (edit_call's and edit_result's by id)."""
        msg = self._edit_target(name, index, text)
        if msg is None:
            return False
        if type(part) is not int or not 0 <= part < len(msg.parts):
            raise ConfigError(
                f"{name}({index}, {part!r}): message {index} has {counted(len(msg.parts), 'part')}: give an "
                f"index into pipe.history[{index}].parts, 0 to {len(msg.parts) - 1}"
            )
        p = msg.parts[part]
        old: str
        if isinstance(p, Text):
            old, what = p.text, "a text"
        elif isinstance(p, ToolCall):
            old, what = p.arguments, "a tool call's arguments"
        elif isinstance(p, ToolResult):
            old, what = p.content, ""
        else:
            raise ConfigError(
                f"{name}({index}, {part}): part {part} is a {type(p).__name__}: an edit rewrites a text, a "
                "tool call's arguments or a tool result's content"
            )
        if what and not text:
            # (the providers refuse an empty text block; a call's arguments are JSON: '{}' for none)
            raise ContentError(
                f"{said or f'{name}({index}, {part}'}, ''): {what} cannot be empty: give its whole new text"
                + (" ('{}' for no arguments)" if isinstance(p, ToolCall) else "")
            )
        if old == text:
            return False
        # (a result's empty content is a blob too: the part's text is always its blob's)
        ev: Event = {"k": "edit", "turn": self.turn, "at": index, "part": part, "h": self._blob(text)}
        self.fold(ev)
        self.journal.append(ev)
        return True

    def _find_part(self, name: str, call_id: str, kind: type[ToolCall] | type[ToolResult]) -> tuple[int, int]:
        """Where the call (or result) `call_id` is in the history held in memory: (message, part)."""
        if type(call_id) is not str or not call_id:
            raise ConfigError(f"{name}({call_id!r}, ...): give the call's id (a str)")
        sent = [call_id]
        for _, own, sid in reversed(self._renamed):
            if own == call_id:  # (the agent's own id of a call sent with another: its newest)
                sent.append(sid)
                break
        hist = self.history
        for want in sent:
            for i in range(len(hist) - 1, -1, -1):
                if not hist.held(i):
                    continue
                for j, p in enumerate(hist[i].parts):
                    if isinstance(p, kind) and (p.id if isinstance(p, ToolCall) else p.call_id) == want:
                        return i, j
        what = "call" if kind is ToolCall else "result"
        raise ConfigError(
            f"{name}({call_id!r}, ...): no tool {what} with that id in the history (a result enters it with "
            "the request that sends it; a message behind the compaction's cut, on disk, is not rewritten)"
        )

    def _edit_range(self) -> str:
        """What edit_text takes, for its error: an index into pipe.history, whose messages it names."""
        n = len(self.history)
        if n == 0:
            return "the history holds none yet: the agent's messages enter it with the request that sends them"
        return f"the history holds {n}: give an index into pipe.history, 0 to {n - 1}"

    def _check_answered(self, before: str) -> None:
        """Raise when the newest assistant message made a call that has no result yet: both providers
        reject such a request (Anthropic: tool_use without tool_result; OpenAI: tool_calls without
        tool messages), and the error would come from the API a whole model call later."""
        newest = self.history.newest()
        if newest is None or newest.role != "assistant" or not self.check_pairing:
            return
        # Plain loops: each comprehension is a frame of its own, three every assistant message.
        open_ids = []
        for p in newest.parts:
            if isinstance(p, ToolCall):
                open_ids.append(p.id)
        if not open_ids:
            return
        answered = set()
        for p in self.pending:
            if isinstance(p, ToolResult):
                answered.add(p.call_id)
        missing = []
        for c in open_ids:
            if c not in answered:
                missing.append(c)
        if missing:
            raise UnpairedToolResultError(
                missing[0],
                f"the assistant's {nouned(len(missing), 'tool call')} {missing} "
                f"{'has' if len(missing) == 1 else 'have'} no result before {before}; answer each with "
                "tool_result(call_id, output) (is_error=True with a short reason for a call that was not "
                "run): the provider rejects a request with an unanswered call",
            )

    @_journals
    def tool_result(self, call_id: str, content: str, is_error: bool = False) -> None:
        """The result of the newest assistant message's call `call_id` (the id the agent gave it: a call
        sent with another id, see engine/providers/call_ids.py, is answered by the agent's own)."""
        alias = self._call_alias
        if alias and type(call_id) is str:
            call_id = alias.get(call_id, call_id)
        hist = self.history
        # The assistant message is nearly always the newest one (results wait in `pending`): read it
        # directly rather than walking the history backwards through the log's item access.
        newest = hist.newest()
        last = newest if newest is not None and newest.role == "assistant" else None
        if last is None:
            last = next((m for m in reversed(hist) if m.role == "assistant"), None)
        # Looked for in plain loops (a comprehension is a frame of its own, every tool result); the
        # sets are made only for the error.
        made = False
        for p in last.parts if last else ():
            if isinstance(p, ToolCall) and p.id == call_id:
                made = True
                break
        if not made:
            calls = (
                {p.id for p in last.parts if isinstance(p, ToolCall)} if last else set()
            )  # last.tool_calls' ids
            own = {v: k for k, v in alias.items()}  # as the agent knows them
            calls = {own.get(c, c) for c in calls}
            raise UnpairedToolResultError(
                call_id,
                f"the last assistant message made calls {sorted(calls) or 'none'}; record the assistant's "
                "tool call with assistant(tool_calls=[...]) before its result",
            )
        for p in self.pending:
            if isinstance(p, ToolResult) and p.call_id == call_id:
                raise UnpairedToolResultError(call_id, "this call already has a result")
        part = {"t": "result", "id": call_id, "h": self._blob(content), "err": bool(is_error)}
        ev = {"k": "part", "part": part}
        # (_emit's two calls in line, and of fold(ev) its part branch: every turn's agent calls journal
        # this way.)
        self.pending.append(self._part(part))
        self.journal.append(ev)
