"""A request whose history does not extend the last one the tap fed: the agent rewrote its own history
(`rewritten`). What the turn's trace says of it (REWRITE_KEY) and the edits in place it holds are
engine.importers.history_edits' (the importers read them too).
"""

from __future__ import annotations

from engine.importers.history_edits import in_place, in_place_note
from engine.importers.model import MessageRec


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
    engine can tell, new), and the system prompt is never one of them: fed again it became user text.
    A request that holds every message fed in its place, some of them edited (a reworded reply: the
    same role, calls and call ids), is an edit in place (`edited` in the note): its new messages are
    those after them, and the engine keeps the originals, as it keeps a compacted history's."""
    edited = in_place(fed, msgs)
    if edited:
        # The agent (or its user) edited earlier messages where they were (a reply reworded before the
        # conversation is sent again): the request is the history the engine holds with those messages
        # replaced, then the new ones. Taken for new, each edit was fed after the messages the engine
        # already had, and the history held the original and the edited one both.
        return len(fed), in_place_note(len(fed), msgs, edited)
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
