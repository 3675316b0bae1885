"""The tap's state (`TapState`, the base of `engine.capture.tap_session.Tap`): what is one
conversation's (CONVERSATION_STATE, swapped by `tap_conversations`), what is the whole client's, and
the journal's clock. Each part of the tap builds on it: tap_conversations (which conversation a request
is in), tap_steps (journaling a request and its outcome), tap_sequencing (concurrent calls in start
order), tap_session (background Responses calls, closing).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.capture.lineage import Lineage
from engine.capture.tap_call import TapCall, TapStats
from engine.capture.tap_request import Parsed
from engine.importers.history_edits import Placed
from engine.importers.ingest import DEFAULT_WINDOW, ActualRecorder, _Feeder
from engine.importers.model import MessageRec, ToolSchemaRec
from engine.pipeline import Pipeline

# The tap's state that is one conversation's (Tap._enter swaps it)
CONVERSATION_STATE = (
    "pipe",
    "feeder",
    "fed",
    "fed_at",
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


class TapState:
    """The state of the shadow session behind a tapped client (see Tap)."""

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
        # Where each message of `fed` is in the engine's history (None: no place of its own, or its place
        # unknown after the agent rewrote its history): an edit of it is the engine's edit of that
        # message (Pipeline.edit_text, edit_part; see engine.importers.history_edits.apply_edits)
        self.fed_at: list[Placed | None] = []
        self.reply_fed = False  # the last of `fed` is a reply (after()), not a message the agent sent
        self.choices_asked = 1  # the choices (`n`) the request being journaled asked for
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
