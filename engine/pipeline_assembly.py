"""A turn's window before it is planned: the sections before the history (the sources, tools, latches and
emergent items, carried while their inputs do not change) and the history section, assembled from the
task and the conversation after the compaction cut; the notes the history carries (messages with nothing
a provider takes, calls sent under other ids than the agent gave them) and the call ids each provider
is sent.

A base class of Pipeline (see engine/pipeline_state.py for the chain).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from engine.artifacts import Message, Text, ToolCall
from engine.assembly import Assembly, Section
from engine.optimize import OptimizeResult
from engine.pipeline_sinks import Sinks
from engine.providers import canonical_provider
from engine.providers.anthropic import (
    EMPTY_SYSTEM_TEXT,
    EMPTY_TEXT,
    ERROR_NO_OUTPUT,
    sends_nothing,
    silent_error,
)
from engine.providers.call_ids import RULES as CALL_ID_RULES
from engine.providers.call_ids import AtProvider, IdRule, rename_in
from engine.sections import history_section, source_sections
from engine.types import SectionKind
from engine.wording import counted

# A compacted session's turn is assembled from the task and the conversation after the cut, not from
# every message (see Pipeline._assemble_from). The output is the same either way; tests switch this off
# to compare the two.
ASSEMBLE_FROM_CUT = True


# The providers that refuse a message with nothing in it, and so get anthropic.EMPTY_TEXT in its place
# (see Pipeline._empty_note): their names in the note, and the API that refuses.
_REFUSE_EMPTY = {"anthropic": ("Anthropic", "the Messages API"), "bedrock": ("Bedrock", "Converse")}


class Assembling(Sinks):
    """A Pipeline's assembly of a turn's window (Pipeline._assemble_from and what it notes)."""

    def _assemble(self, bound: dict[str, dict[str, Any]]) -> Assembly:
        return self._assemble_from(bound, 0)[0]

    def _assemble_from(self, bound: dict[str, dict[str, Any]], cut: int) -> tuple[Assembly, int]:
        """The assembly, its history section holding the task and the conversation from `cut` on (a
        compaction state's cut: what it may send), and how many messages were left out after the task.

        A long session's turn then copies what it may send, not the whole conversation: a tuple of
        20,000 messages touches 20,000 scattered objects to build and again to free (a quarter of a
        2.5 ms turn at 20,000 messages, as much as the request's json.dumps). Only at a round boundary
        (an assistant message at `cut`, where every cut the policy makes lies), so the task ends where
        it ends in the whole history."""
        elided = 0
        te = self._first_assistant  # _task_end(), remembered
        if te is None:
            te = self._task_end()
        log = self.history
        window = log.task_and_window(te, cut) if ASSEMBLE_FROM_CUT else None
        history: Sequence[Message]
        if window is not None:
            history = window  # a list: history[:te] + history[cut:]
            elided = cut - te
        elif self.pending:
            # The whole conversation as a list of our own (history_section closes the pending parts
            # onto it; iterating the log is a generator step a message).
            history = log.since(0)
        else:
            was_log, was = self._whole
            # Nothing pending: the section's items are the log's messages themselves. A log that never
            # releases only appends, so the same length is the same messages: the tuple the last whole
            # build made (a what-if builds the whole conversation twice a turn: wave 1's column and the
            # peers' view) is the items again (tuple() of a tuple is the tuple), else one copy of the
            # log's own list (whole(): read, never changed). Each copy was two, a list then the tuple:
            # O(session) a build, ~12,000 messages touched and freed per copy at 6,000 turns.
            history = was if was_log is log and log.chunk is None and len(was) == len(log) else log.whole()
        due = self.emergent.due(self.turn)
        carried = self._sources_carry
        if (
            carried is not None
            and carried[0] == self._sources_version
            and not bound
            and not due
            and self.fast_path
        ):
            sources = carried[1]
        else:
            sources = source_sections(
                self.specs,
                self.content,
                self.journal.blobs,
                bound,
                self.tools,
                self.latches,
                due,
                self._sections,
            )
            if canonical_provider(self.config.provider) in _REFUSE_EMPTY:
                # Noted as they are made, not every turn: carried sections keep their note.
                sources = self._blank_system_note(sources)
            # Carried to the next build while no fold changes what they are made of (see fold): the same
            # sections source_sections would hand back from its memo, without asking it.
            ok = self.fast_path and not bound and not due
            self._sources_carry = (self._sources_version, sources) if ok else None
        hsec = history_section(history, self.pending)
        if window is None and log.chunk is None:
            # A log that never releases only appends (a replay's, simulate's): this turn's whole history
            # starts with the last one built from it, known without comparing them (Measure.grew).
            was_log, was = self._whole
            if was_log is log and was and len(was) <= len(history) and hsec.items is not was:
                self.measure.grew(hsec.items, was)
            self._whole = (log, () if self.pending else hsec.items)  # (a pending message is not the log's)
        if (
            self._empty_msgs
            or self._silent_errors
            or (self.pending and (sends_nothing(self.pending) or silent_error(self.pending)))
        ):
            note = self._empty_note(te, elided)
            if note:
                hsec = replace(hsec, note=note)
        if self._renamed:
            said = self._renamed_note()
            hsec = replace(hsec, note=f"{hsec.note}; {said}" if hsec.note else said)
        asm = (*sources, hsec)
        # The history section's total from the running sum, so measuring the whole conversation (the
        # raw pressure beside the sent one) costs O(new messages), not O(session length). With messages
        # left out it is still the whole conversation's total: the raw figure the policy weighs.
        hist = asm[-1] if asm and asm[-1].kind == SectionKind.HISTORY else None
        if hist is not None:
            n = self.history_tokens()
            if self.pending:  # the pending parts, as assemble() closed them into the last message
                last = hist.items[-1]
                n += self.measure.item(last)
                if isinstance(last, Message):
                    self._pending_msg = last
            self.measure.prime(hist, n)
        return asm, elided

    def _blank_system_note(self, sources: tuple[Section, ...]) -> tuple[Section, ...]:
        """The sections (all but the history) with a note on each that holds a text of whitespace only,
        which Anthropic and Bedrock get as anthropic.EMPTY_SYSTEM_TEXT (both refuse blank text in the
        system prompt), so the trace says why the request holds text the section does not. The same
        tuple when there is none (the usual case)."""
        out: list[Section] | None = None
        for i, sec in enumerate(sources):
            n = sum(1 for it in sec.items if type(it) is Text and it.text.isspace())
            if not n:
                continue
            name, why = _REFUSE_EMPTY[canonical_provider(self.config.provider)]
            said = (
                f"{counted(n, 'text')} of whitespace only: sent to {name} as {EMPTY_SYSTEM_TEXT!r}, "
                f"since {why} refuses blank text in the system prompt"
            )
            if out is None:
                out = list(sources)
            out[i] = replace(sec, note=f"{sec.note}; {said}" if sec.note else said)
        return sources if out is None else tuple(out)

    def _empty_note(self, te: int, elided: int) -> str:
        """The history section's note when it sends messages with nothing in them to Anthropic or
        Bedrock, which get anthropic.EMPTY_TEXT in their place (both refuse a blank text and a message
        without content; OpenAI-compatible APIs take an empty string, so the OpenAI serializer sends it
        as it came and nothing is said), and error results with no output, which get
        anthropic.ERROR_NO_OUTPUT: which ones, so the trace says why the request holds text the
        conversation does not."""
        provider = canonical_provider(self.config.provider)
        if provider not in _REFUSE_EMPTY:
            return ""
        # Those the assembly holds: the task and what follows the elided stretch (see _assemble_from).
        name, why = _REFUSE_EMPTY[provider]
        said = []
        for held, pending_too, what, sent_as, refused in (
            (self._empty_msgs, sends_nothing, ("message", "with no content"), EMPTY_TEXT,
             "a blank text and a message without content"),
            (self._silent_errors, silent_error, ("error result", "with no output"), ERROR_NO_OUTPUT,
             "an error result without content"),
        ):  # fmt: skip
            idx = [i for i in held if i < te or i >= te + elided]
            if self.pending and pending_too(self.pending):
                idx.append(len(self.history))
            if idx:
                which = ", ".join(map(str, idx[:10])) + (
                    f" and {len(idx) - 10} more" if len(idx) > 10 else ""
                )
                said.append(
                    f"{counted(len(idx), what[0])} {what[1]} (conversation message {which}): sent to {name} as "
                    f"{sent_as!r}, "
                    f"since {why} refuses {refused}"
                )
        return "; ".join(said)

    def _renamed_note(self) -> str:
        """The history section's note when the session has sent calls with other ids than the agent gave
        them (see engine/providers/call_ids.py): how many, the newest few, and why, so the trace says why
        the request's ids are not the agent's. It counts the whole conversation's calls, not only those
        this request holds: a build that cuts the history before assembling it (Pipeline._assemble_from,
        simulate's carried cut) and one that trims it afterwards must say the same. Made once per call
        renamed: an agent that numbers its calls per turn has one more each turn."""
        ren = self._renamed
        memo = self._renamed_memo
        if memo[0] == len(ren):
            return memo[1]
        rule = CALL_ID_RULES[canonical_provider(self.config.provider)]
        newest = "; ".join(f"message {i}: {own!r} as {sent!r}" for i, own, sent in ren[-3:])
        said = (
            f"{counted(len(ren), 'tool call')} of the conversation sent to {rule.name} with another id than the agent "
            f"gave ({newest}{'; and earlier ones' if len(ren) > 3 else ''}), since {rule.why}; their "
            "results go with them, and each keeps its id on every later turn"
        )
        self._renamed_memo = (len(ren), said)
        return said

    def seed_ids_at(
        self,
        fold: Callable[[IdRule, Sequence[Message], Sequence[tuple[int, str, str]]], AtProvider],
        provider: str,
    ) -> None:
        """Start _ids_at's fold at `provider` from `fold(rule, history, renamed)`, a fold over this
        conversation kept elsewhere (a replay builds each re-plan on a fresh copy of its state, so the fold
        kept here was lost with each copy: engine/recording/provider_ids.py). Nothing at the session's own
        provider."""
        rule = CALL_ID_RULES[canonical_provider(provider)]
        if rule is CALL_ID_RULES[canonical_provider(self.config.provider)]:
            return
        hist = self.history
        at = fold(rule, hist, self._renamed)
        # _ids_at checks the fold's last message is its conversation's by identity; the newest is the one
        # object a released conversation does not read back from disk anew.
        at.last = hist.newest() if at.folded == len(hist) else (hist[at.folded - 1] if at.folded else None)
        self.__dict__.setdefault("_ids_at_memo", {})[rule.name] = at

    def _ids_at(self, provider: str, res: OptimizeResult) -> OptimizeResult:
        """`res` with its calls under the ids `provider` takes (engine/providers/call_ids.py AtProvider):
        the session's are its own provider's. Folded once per target over the conversation as it grows;
        a fold of another conversation (a replayed snapshot further on, a fork) is started again."""
        rule = CALL_ID_RULES[canonical_provider(provider)]
        if rule is CALL_ID_RULES[canonical_provider(self.config.provider)]:
            return res
        memo: dict[str, AtProvider] = self.__dict__.setdefault("_ids_at_memo", {})
        at = memo.get(rule.name)
        hist = self.history
        if at is None or at.folded > len(hist) or (at.folded and hist[at.folded - 1] is not at.last):
            at = memo[rule.name] = AtProvider(rule)
        new = hist.since(at.folded)
        if new:
            at.extend(
                [
                    [(p.id, p.name) for p in msg.parts if type(p) is ToolCall]
                    if msg.role == "assistant"
                    else []
                    for msg in new
                ],  # fmt: skip
                self._renamed,
            )
            at.last = new[-1]
        if not at.renamed and not at.notes and not self._renamed:
            return res
        return replace(res, asm=rename_in(res.asm, at, self._renamed_note() if self._renamed else ""))

    def _task_end(self) -> int:
        """Index of the first assistant message in the history (its length while there is none).
        Remembered once found: the history is append-only."""
        te = self._first_assistant
        if te is None:
            hist = self.history
            te = next((i for i, msg in enumerate(hist) if msg.role == "assistant"), None)
            if te is None:
                return len(hist)
            self._first_assistant = te
        return te

    def history_tokens(self) -> int:
        """Tokens of the closed conversation messages (as Measure counts them), kept incrementally."""
        m = self.measure
        name = m.counter.tokenizer.name
        if name != self._hist_tokenizer:
            self._hist_tokenizer, self._hist_counted, self._hist_tokens = name, 0, 0
        new = self.history.since(self._hist_counted)
        if new:
            self._hist_tokens += sum(map(m.item, new))
            self._hist_counted += len(new)
        return self._hist_tokens
