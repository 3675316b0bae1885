"""The fold: every journal event applied to a Pipeline's state (`fold`, the one way the state changes, live
or replayed), and what it keeps as it goes: the journal's blobs (`_blob`, `_text`), the parts and
messages folded from events, the running usage, the history released to disk behind the cut, and an
agent's edit of its history put in place (with `drop_caches`: what the stages above carry for speed).

A base class of Pipeline (see engine/pipeline_state.py for the chain).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engine.artifacts import Media, Message, Part, Text, Thinking, ToolCall, ToolResult, ToolSchema
from engine.assembly import Measure
from engine.catalog import SourceSpec
from engine.config import PipelineConfig
from engine.errors import ContentError
from engine.feedback import Usage, normalize_usage
from engine.hashing import new_sha256, sha256_hex
from engine.pipeline_assembly import Assembling
from engine.policy.settings import WAVE1
from engine.policy.state import CompactionState
from engine.providers.anthropic import sends_nothing, silent_error
from engine.recording.journal import Event, trace_of

# Pipeline._lane_pause after an agent's edit of its history: the express lane stands aside for good.
EDITED_PAUSE = 1 << 62

# Journal events whose fold changes what the sections before the history are made of (source specs and
# their text, tools, latches, emergent items): see Pipeline._assemble_from.
_SOURCE_KINDS = frozenset({"source", "content", "tool", "untool", "latch", "emergent"})


def _blob_hashes(msgs: Sequence[Message], blob_of: dict[str, str] | None) -> list[str]:
    """The journal blobs the parts of `msgs` were folded from (a part's text is its blob's text), taken
    out of `blob_of` (see Pipeline._part); a part not found there (another part with the same hash took
    it out) has its text hashed."""
    out: list[str] = []
    known: dict[str, str] = blob_of if blob_of is not None else {}
    pop = known.pop
    # ("" for a part not there: no blob hash is empty)
    for m in msgs:
        for p in m.parts:
            if isinstance(p, (Text, Thinking)):
                out.append(pop(p.sha, "") or sha256_hex(p.text))
            elif isinstance(p, ToolResult):
                out.append(pop(p.sha, "") or sha256_hex(p.content))
            elif isinstance(p, ToolCall):
                out.append(pop(p.sha, "") or sha256_hex(p.arguments))
    return out


class Folding(Assembling):
    """A Pipeline's fold of journal events into its state (public: `fold`, `begin_request`)."""

    # ----------------------------------------------------------------- events
    def _emit(self, ev: Event) -> None:
        self.fold(ev)
        self.journal.append(ev)

    def _blob(self, text: str) -> str:
        if not isinstance(text, str):
            # Checked before hashing: the hash takes bytes too, and bytes journaled as a blob left a
            # recording no reader could open (its frames hold JSON text).
            hint = (
                "decode it first, e.g. out.decode('utf-8', errors='replace')"
                if isinstance(text, (bytes, bytearray))
                else "pass str(value), or '' for no text"
            )
            raise ContentError(f"expected text (str), got {type(text).__name__}: {hint}")
        journal = self.journal
        try:
            # Journal.blob's work in line (a frame fewer for each of the ~3 texts a turn journals).
            hasher = new_sha256()
            hasher.update(text.encode())
            h = hasher.hexdigest()
        except UnicodeEncodeError as exc:
            # Lone surrogates (os.listdir or subprocess output decoded with errors='surrogateescape')
            # cannot be sent as JSON to any provider; nothing was journaled yet.
            raise ContentError(
                f"text holds characters that are not valid UTF-8 ({exc.reason} at position {exc.start}: "
                f"{text[max(0, exc.start - 20) : exc.end + 20]!r}); decode the source with "
                "errors='replace', or re-encode it: text.encode('utf-8', 'surrogateescape')"
                ".decode('utf-8', 'replace')"
            ) from None
        if journal.blobs.add(h, text):
            journal.append({"k": "blob", "h": h, "data": text})
        # The text journaled last, by its hash: the event that names it is usually folded next (a tool
        # result, a user text), and _part takes the text from here rather than looking the hash up in
        # the journal's store (two Python calls). A hash names one text, so either gives the same.
        self._last_blob = (h, text)
        return h

    def _text(self, h: str) -> str:
        return self.journal.blobs[h]

    def fold(self, ev: Event) -> None:
        """Apply one journal event to the state, without journaling it: the engine's state is a fold
        over its journal. Live calls (user(), add_tool(), next_request(), ...) journal an event and
        fold it; replay, simulate and the importers fold recorded events the same way. A `turn` event
        adds its recorded trace to the recent traces (the next build compares with the last one)."""
        k = ev["k"]
        if k in _SOURCE_KINDS or (k == "request" and ev.get("bound")):
            self._sources_version += 1  # what the sections before the history are made of changed
        # The kinds every turn journals first (the branches exclude each other, so their order only
        # decides how many comparisons each event pays: a turn's eight events paid ~60).
        if k == "blob":
            self.journal.blobs[ev["h"]] = ev["data"] if isinstance(ev["data"], str) else ev["data"].decode()
        elif k == "part":
            self.pending.append(self._part(ev["part"]))
        elif k == "msg":
            if self.pending:
                self._close_pending()
            else:  # (what _close_pending does with nothing pending, without its frame: every reply)
                self._pending_msg = None
            jparts = ev["parts"]
            part = self._part
            # (map calls _part from C: a generator resumes a frame per part, a comprehension is one more)
            parts = tuple(map(part, jparts))
            hist = self.history
            hist.append(Message(ev["role"], parts))
            if ev["role"] == "assistant":
                # The newest assistant message's call ids into the session's (engine/providers/call_ids.py):
                # each id sent, and the agent's own id of a call sent with another (the part's `as`).
                alias: dict[str, str] = {}
                ids = self._call_ids
                for p in jparts:
                    if p["t"] == "call":
                        ids.add(p["id"])
                        own = p.get("as")
                        if own is not None:
                            alias[own] = p["id"]
                            self._renamed.append((len(hist) - 1, own, p["id"]))
                self._call_alias = alias
            if sends_nothing(parts):
                self._empty_msgs.append(len(hist) - 1)
            if silent_error(parts):
                self._silent_errors.append(len(hist) - 1)
        elif k == "request":
            for sid, b in ev.get("bound", {}).items():
                if "h" in b:  # the last good value: what a later failing binder falls back to
                    self.content[sid] = self._text(b["h"])
            self._close_pending()
            if "compaction" in ev:
                self.compaction = CompactionState.from_event(ev["compaction"])
            self.emergent.expire(ev["turn"] - 1)
            self.turn = ev["turn"] + 1
            self.flipped = []
            if self.history.chunk is not None:
                self._release_history()
        elif k == "usage":
            self._learn_usage(normalize_usage(ev["usage"]), ev.get("estimated"))
        elif k == "turn":
            self.traces.append(trace_of(ev))
        elif k == "error":
            if ev.get("kind") == "prompt_too_long":
                self.stats.enter_recovery()
        elif k == "session":
            self.config = PipelineConfig.from_event(ev["config"])
        elif k == "config":
            self.config = PipelineConfig.from_event(ev["config"])
        elif k == "source":
            # add_source() built and checked this very spec a moment ago: reuse it (a replayed one is
            # new). from_event's five enum look-ups and second check were ~1/4 of identity() on turn 0.
            given = self._spec_hint
            raw = ev["spec"]
            spec = given[1] if given is not None and given[0] is raw else SourceSpec.from_event(raw)
            self.specs = [s for s in self.specs if s.id != spec.id] + [spec]
            if ev.get("h"):
                self.content[spec.id] = self._text(ev["h"])
        elif k == "content":
            self.content[ev["id"]] = self._text(ev["h"])
        elif k == "tool":
            t = ToolSchema(ev["name"], ev["description"], self._text(ev["h"]))
            self.tools = [x for x in self.tools if x.name != t.name] + [t]
        elif k == "untool":
            self.tools = [x for x in self.tools if x.name != ev["name"]]
        elif k == "latch":
            if self.latches.set(ev["name"], self._text(ev["h"])):
                self.flipped.append(ev["name"])
        elif k == "emergent":
            self.emergent.push(ev["list"], self._text(ev["h"]), ev["turn"])
        elif k == "summary":
            self.summaries[ev["in"]] = self._text(ev["h"])
        elif k == "edit":  # (last: an agent's edit of its history is rare)
            self._edit(ev)

    def _learn_usage(self, u: Usage, estimated: int | None) -> None:
        """What folding a usage event teaches the statistics (record_usage does it with the Usage it
        normalized, without folding its own event back through the dispatch)."""
        stats = self.stats
        cfg = self.config
        stats.record_completion(cfg.model, cfg.query_source, u.output_tokens)
        if estimated:
            stats.record_calibration(cfg.model, estimated, u.input_tokens)
        if stats.recovery_turns_left > 0:  # (turn_succeeded's one test, without its frame)
            stats.turn_succeeded()

    def _release_history(self) -> None:
        """Move the messages behind the compaction cut out of memory (with their texts and per-message
        memo entries), so a long session holds the task, the live window and a small index. Every build
        the session makes each turn assembles from the cut on (see _assemble_from), so none of them reads
        the disk; a what-if that cuts shallower, a summary of a new cut or a wave-1 build reads it back.
        Nothing moves while the live policy or a shadow candidate decides from the whole history
        (wave 1), nor below the shallowest cut a build of every turn uses (the shadow's state)."""
        cut = self.compaction.cut
        if self.config.policy.name == WAVE1:
            return
        sh = self._shadow
        if sh is not None:
            if sh.config_for(self.config).policy.name == WAVE1:
                return
            cut = min(cut, sh.state.cut)
        hist = self.history
        te = self._first_assistant  # _task_end(), remembered
        if te is None:
            te = self._task_end()
        # Asked already with this task end and cut, and answered (nothing failed since): release moved
        # everything it could below the cut then, so it would move nothing now. Most turns keep the cut
        # (two calls into the log a turn fewer). The log's on-disk end is in the key: a replay's
        # checkpoint that parks or reads messages back (park, unpark) moves it, and release then runs.
        if not te < cut:
            return  # (starts_round's first test: no cut past the task, nothing to release)
        done = (hist, te, cut, hist._base)
        was = self._released
        if was is not None and was[0] is hist and was[1:] == done[1:]:  # (the log by identity)
            return
        # At a round boundary only: there _assemble_from sends the task and history[cut:], nothing before.
        if not hist.starts_round(te, cut):
            return
        moved = hist.release(te, cut)
        # (Its on-disk end after this release: asked again with this cut, it would move nothing.)
        self._released = (hist, te, cut, hist._base) if hist.spill_error is None else None
        if moved:
            self.journal.blobs.evict(_blob_hashes(moved, self._blob_of))
            self.measure.forget(moved)
            self.counter.forget(p.sha for m in moved for p in m.parts)

    def _edit(self, ev: Event) -> None:
        """An `edit` event (Pipeline.edit_text): message `at` of the history with its text replaced by
        blob `h` (its thinking, calls, results and media kept, in their places); with `part`
        (Pipeline.edit_part), that one part's text, arguments or content. What was carried from
        turn to turn for speed assumed the history only grows (the lanes extend the last request, the
        memos sum and link its prefix): all of it is dropped, and the next request is built afresh."""
        i = ev["at"]
        old = self.history[i]
        j = ev.get("part")
        if j is not None:  # one part (Pipeline.edit_part): a text, a call's arguments, a result's content
            msg = Message(old.role, (*old.parts[:j], self._edited_part(old.parts[j], ev["h"]), *old.parts[j + 1 :]))
            self._put_edit(i, msg)
            return
        text = self._part({"t": "text", "h": ev["h"]}) if ev["h"] else None
        parts: list[Part] = []
        for p in old.parts:
            if isinstance(p, Text):
                if text is not None:
                    parts.append(text)
                    text = None
            else:
                if text is not None and not isinstance(p, Thinking):  # (a reply's text after its thinking)
                    parts.append(text)
                    text = None
                parts.append(p)
        if text is not None:
            parts.append(text)
        self._put_edit(i, Message(old.role, tuple(parts)))

    def _edited_part(self, p: Part, h: str) -> Part:
        """Part `p` of an edited message with its text, arguments or content blob `h` (its id, name and
        error flag as they were)."""
        if isinstance(p, ToolCall):
            return self._part({"t": "call", "id": p.id, "name": p.name, "h": h})
        if isinstance(p, ToolResult):
            return self._part({"t": "result", "id": p.call_id, "h": h, "err": p.is_error})
        return self._part({"t": "text", "h": h})

    def _put_edit(self, i: int, msg: Message) -> None:
        """`msg` in place of message `i` (in memory: one on disk is not rewritten), its notes kept, and
        what the stages above carried for speed dropped."""
        if not self.history.replace(i, msg):
            return
        ed = self._edited
        self._edited = (self.turn, i if ed is None or ed[0] != self.turn else min(ed[1], i))
        self._edit_frontier = max(self._edit_frontier, i)
        # The express lane carries the markers of the turn before and would not place the breakpoint
        # after the agent's newest edit (markers.edit_marker): an agent that edits its history (an edit
        # drops the lane's memos anyway, SWE-agent's every turn) takes the general path from now on.
        self._lane_pause = EDITED_PAUSE
        for notes, holds in ((self._empty_msgs, sends_nothing), (self._silent_errors, silent_error)):
            if i in notes:
                notes.remove(i)
            if holds(msg.parts):
                notes.append(i)
                notes.sort()
        self.drop_caches()

    def drop_caches(self) -> None:
        """Forget everything carried from turn to turn only for speed (serializer fragments and previous
        runs, section totals, planner estimates, unchanged source sections, the running history total).
        The next request is the same, byte for byte; it just does more work. Token counts stay in the
        TokenCounter, which callers may share between sessions. Here, below the stages that fill these
        caches (Planning, Building), because an agent's `edit` folded here must drop them: each stage
        calls only what is below it."""
        self._serializers.clear()
        self._sections.clear()
        self._estimates.clear()
        self._carry.clear()
        self._sources_carry = None
        self.measure = Measure(self.counter)
        self._hist_counted, self._hist_tokens, self._hist_tokenizer = 0, 0, ""
        # The last whole history built, which a log that only appends extends (the same length, the same
        # messages): an edit of its newest message left the length as it was, and the request before it
        # was rebuilt (a replay's verify failed at a captured agent's edited last message).
        self._whole = (None, ())

    def _part(self, p: dict[str, Any]) -> Part:
        t = p["t"]
        part: Text | ToolCall | ToolResult | Thinking
        if t == "text":
            h = p["h"]
            last = self._last_blob
            part = Text(last[1] if last[0] == h else self._text(h))
        elif t == "call":
            # assistant() built this very call a moment ago (hashing it costs a JSON encoding): reuse it.
            h = p["h"]
            hit = self._call_hint.get((p["id"], p["name"], h))
            part = hit if hit is not None else ToolCall(p["id"], p["name"], self._text(h))
        elif t == "result":
            h = p["h"]
            last = self._last_blob
            part = ToolResult(p["id"], last[1] if last[0] == h else self._text(h), bool(p.get("err")))
        elif t == "thinking":
            h = p["h"]
            part = Thinking(self._text(h), p.get("sig", ""), redacted=bool(p.get("redacted")))
        elif t == "media":
            return Media(p["media_type"], p["ref"], p["size"], p.get("tokens", 0))
        else:
            raise ValueError(f"unknown part type {t!r} in journal")
        blob_of = self._blob_of
        if blob_of is not None:
            blob_of[part.sha] = h
        return part

    def _close_pending(self) -> None:
        if self.pending:
            parts = tuple(self.pending)
            # The message the last build closed these very parts into (see _assemble_from), else a new
            # one: equal either way, and the same object lets every prefix memo downstream match the
            # history a turn sent by identity instead of comparing its newest message field by field.
            hint = self._pending_msg
            self.history.append(hint if hint is not None and hint.parts == parts else Message("user", parts))
            self.pending = []
            if sends_nothing(parts):
                self._empty_msgs.append(len(self.history) - 1)
            if silent_error(parts):
                self._silent_errors.append(len(self.history) - 1)
        self._pending_msg = None

    def begin_request(self, turn: int) -> None:
        """Bring a folded state to the moment turn `turn`'s request was built: pending tool results and
        user text close into a user message and the turn is numbered, which is what folding the request
        event does first. Call it before `build()` to rebuild a recorded request from a journal."""
        self._close_pending()
        self.turn = turn
