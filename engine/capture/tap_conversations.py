"""Which of a tapped client's conversations a request is in (`TapConversations`, a part of
`engine.capture.tap_session.Tap`): one whose known history it extends, or a new one for a restart,
another attempt or a fork, as the proxy files sessions (engine.capture.lineage).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.capture.lineage import Placement, ambiguous_note, branch_note, digests
from engine.capture.tap_call import TapError
from engine.capture.tap_request import parse_request
from engine.capture.tap_state import CONVERSATION_STATE, MAX_CONVERSATIONS, TapState, _Conversation
from engine.importers.model import MessageRec


class TapConversations(TapState):
    """Routing a request to its conversation, each with its own shadow pipeline and recording."""

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
            "fed_at": [],
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
