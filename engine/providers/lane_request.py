"""The express lane's request, built on the serializer's state in one pass (`lane_request`, issue 12).

A steady lane turn's request is the last one with a few messages appended to the history, which is the
last section in wire order. The general way to it is three of the serializer's steps, each written for
every caller and checking its own case: `grown` (-> `_appended`) extends the history's run, `request_of`
walks the layout for its blocks, sums and hashes, and `_spliced` makes the body from the last one. When
the lane's last turn was built the same way (its run extended in place, its body spliced, the sums over
the runs before the history kept: the second lane turn of a streak onwards), all that is known to hold
but for a few identity checks, and this function does only the work left: the new items' fragments and
blocks, the run's lists extended in place, the section hash resumed, the body spliced and hashed from
the last one's mark. Everything it leaves in the serializer (its runs, item caches, `_grew`, `layout`,
`_body_at`, the body hasher's streams) and the request it returns are what those three steps leave and
return: tests/test_express_lane_request.py compares the two ways field by field and byte by byte.

Anything else (the first lane turn after a general-path turn, a provider whose history is followed by
another section, a non-message item, a marker that moved further back than SLICE_MIN) gives None before
anything changed, and the lane takes the general steps.
"""

from __future__ import annotations

from operator import attrgetter
from typing import TYPE_CHECKING

from engine.artifacts import Message
from engine.providers.request_body import _MESSAGES, _BodyAt
from engine.providers.section_runs import _TOKENS, _SectionRun
from engine.providers.serialized_request import (
    Block,
    DeferredPrefixRequest,
    PrefixDigest,
    SerializedRequest,
    _prefix_hex,
)
from engine.providers.stretch import SLICE_MIN
from engine.providers.tool_pairing import _pair_info, _pair_one, _pair_state

if TYPE_CHECKING:
    from engine.assembly import Measure, Section
    from engine.providers.base import Serializer

_SHA = attrgetter("sha")
_object_new = object.__new__


def lane_request(
    ser: Serializer,
    s: Section,
    prev: _SectionRun,
    marks: frozenset[int],
    tok: str,
    measure: Measure,
    layout: list[tuple[Section, _SectionRun]],
    at: int,
    model: str,
    max_tokens: int,
    live_other: int,
) -> tuple[list[tuple[Section, _SectionRun]], SerializedRequest] | None:
    """The lane's request for history section `s` (the last request's, whose run was `prev`, with
    messages appended) in the last request's `layout` (the history at `at`, its last section), and the
    new layout: what `grown(s, prev, marks, tok, measure)`, `_prune(live_other + its keys)` and
    `request_of(new layout, model, max_tokens, True, False, at)` give, or None (nothing changed) when the
    turn is not the one this pass is for (see the module's docstring)."""
    # The last request: the lane's, spliced from the one before (its end and sums known), this layout.
    b = ser._body_at
    if b is None:
        return None
    # (Unpacked once: Python 3.11 specializes no read of a named tuple's field by name.)
    b_layout, body, b_model, b_max_tokens, end, got = b
    if b_layout is not layout or b_model != model or b_max_tokens != max_tokens:
        return None
    if got is None or end is None or at != len(layout) - 1 or layout[at][1] is not prev:
        return None
    got_at, got_blocks, got_total, got_last_marker, _tail, got_tool_shas, got_section_shas, ghex = got
    if got_at != at:
        return None
    runs = ser._runs.get(s.id)
    ptokens = prev.tokens
    if not runs or runs[0] is not prev or prev.segset != _MESSAGES or ptokens is None:
        return None
    h = prev.hstate  # (set by the run _appended made: the lane's last turn)
    items = s.items
    old = prev.items
    k = len(old)
    n = len(items)
    if (
        h is None
        or prev.tok != tok
        or not 0 < k < n
        or n - k > SLICE_MIN
        or prev.hexes is None
        or items[:k] != old  # identity first, in C (as _appended compares them)
    ):
        return None
    # The first reused item whose marking changed (_appended's d).
    d = k
    was_marks = prev.marks
    if marks or was_marks:
        for x in marks.symmetric_difference(was_marks):
            if x < d:
                d = x
    if k - d > SLICE_MIN:
        return None
    appended = items[k:]
    new_shas = list(map(_SHA, appended))
    for sha in new_shas:
        if len(sha) != 64:
            return None
    # Pairing from the first appended item, as _appended checks it (raises as it does; a non-message
    # item, which _appended passes over, leaves the turn to it: the run's segments and the body's splice
    # are messages only here).
    memo = ser._pairs
    pairing = _pair_state(items, k, memo)
    for it in appended:
        if type(it) is not Message:
            return None
        info = memo.get(it.sha)
        if info is None:
            info = memo[it.sha] = _pair_info(it)
        pairing = _pair_one(info, pairing)
    # The items from d on: their keys and (fragment, segment, block), looked up or built.
    sid = s.id
    cache = ser._items
    item_hit = ser._item_hit
    frags = prev.frags
    shas = prev.shas
    keys_new: list[tuple[str, str, str, bool]] = []
    new_frags: list[bytes] = []
    new_blocks: list[Block] = []
    added_tokens = 0
    at_item = d
    for it in items[d:]:
        key = (tok, sid, new_shas[at_item - k] if at_item >= k else shas[at_item], at_item in marks)
        hit = cache.get(key) or item_hit(s, it, key, measure)
        keys_new.append(key)
        new_frags.append(hit[0])
        block = hit[2]
        new_blocks.append(block)
        added_tokens += block.tokens
        at_item += 1
    # Nothing raised: only now is anything changed. What the last body held of the items written again
    # (their fragments and commas) and of its last fragment, read before the lists are cut back.
    was_last = frags[k - 1]
    if d < k:
        rewritten = sum(map(len, frags[d:k])) + (k - 1 - d)
        gone = sum(map(_TOKENS, prev.blocks[d:k]))
        del frags[d:], prev.segments[d:], prev.blocks[d:], prev.keys[d:]
    else:
        rewritten = gone = 0
    segments = prev.segments
    blocks = prev.blocks
    keys = prev.keys
    frags += new_frags
    segments += ["messages"] * len(new_frags)
    blocks += new_blocks
    keys += keys_new
    shas += new_shas
    added = "".join(new_shas)
    hexes = (shas, n)  # (not joined: see serialized_request.Hexes)
    prev.hstate = None  # taken over with its lists: that run is not extended again
    h.update(added.encode())
    where = prev.where
    if where is not None:
        x = k
        for sha in new_shas:
            where[sha] = x
            x += 1
    # The run _appended makes (its fields in the dataclass's order, positional: a slotted class's
    # generated __init__ stores them one by one, in slots).
    run_sha = h.hexdigest()
    run_tokens = ptokens - gone + added_tokens
    run = _SectionRun(
        tok, shas, marks, frags, segments, blocks, keys, items, run_sha, hexes, where, prev.segset, run_tokens, h
    )
    runs[0] = run  # (in place of the run it extends, the most recently used)
    ser._grew = (run, prev, d, rewritten, was_last)
    ser._prune(live_other + len(keys))
    # The request: the runs before the history as the last request summed them (`got`), then this run.
    out = layout.copy()
    out[at] = (s, run)
    ser.layout = out
    if marks:
        last_marker = len(got_blocks) + max(marks)
        tail_marked = n - 1 in marks
    else:
        last_marker = got_last_marker
        tail_marked = False
    all_blocks = got_blocks + blocks
    total = got_total + run_tokens
    section_shas = got_section_shas.copy()
    section_shas[sid] = run_sha
    hex_list = None if ghex is None else [*ghex, hexes]
    marked = last_marker
    if not ser.policy.supports_markers:
        last_marker = len(all_blocks) - 2
    plen = min(max(last_marker + 1, 0), len(all_blocks))
    if len(all_blocks) - plen <= plen:
        prefix_tokens = total - sum(map(_TOKENS, all_blocks[plen:]))
    else:
        prefix_tokens = sum(map(_TOKENS, all_blocks[:plen]))
    # The body: the last one's bytes before the first fragment written again, the new fragments, and
    # its tail after the messages (_spliced's splice).
    view = memoryview(body)
    start = end - rewritten
    parts: list[bytes | memoryview] = [b","] * (2 * len(new_frags) + 1)
    parts[1::2] = new_frags
    parts[0] = view[:start]
    parts[-1] = view[end:]
    if d == k:
        parts.insert(1, b",")
    data = b"".join(parts)
    new_end = end + len(data) - len(body)
    ser._body_at = tuple.__new__(_BodyAt, (out, data, model, max_tokens, new_end, got))
    mark = new_end
    if tail_marked and mark:
        mark -= len(new_frags[-1])
    request_sha = ser._body_hash.hexdigest(data, mark, body, start)
    # The request as request_of makes it, its dict given at once (the dataclass's field order; a
    # deferred digest under the key its prefix_sha256 property keeps it in), not through the generated
    # __init__'s frame.
    req: SerializedRequest
    if hex_list is not None:
        req = _object_new(DeferredPrefixRequest)
        req.__dict__ = {
            "provider": ser.policy.name, "body": data, "blocks": all_blocks, "request_sha256": request_sha,
            "_prefix": PrefixDigest(hex_list, plen, ser._digests), "cacheable_prefix_tokens": prefix_tokens,
            "tool_shas": got_tool_shas.copy(), "section_shas": section_shas, "last_marked": marked,
        }  # fmt: skip
        return out, req
    prefix_sha = ser._prefix_hash.hexdigest(_prefix_hex(None, all_blocks[:plen]))
    req = _object_new(SerializedRequest)
    req.__dict__ = {
        "provider": ser.policy.name, "body": data, "blocks": all_blocks, "request_sha256": request_sha,
        "prefix_sha256": prefix_sha, "cacheable_prefix_tokens": prefix_tokens,
        "tool_shas": got_tool_shas.copy(), "section_shas": section_shas, "last_marked": marked,
    }  # fmt: skip
    return out, req
