"""One column of a session-wide what-if simulated (`_simulate`): its requests stepped through the provider's
cache simulator one by one, each call's Blocks made from the last call's (the shared prefix, a shifted
stretch), its cache breaks named and its compactions counted, and the column priced.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from itertools import compress, count
from operator import attrgetter, ne, not_
from typing import Any, cast

from engine.feedback import attribute_cache_break
from engine.providers.base import Block
from engine.sim import cachesim
from engine.sim.cachesim import CacheSimulator, Call, CallCache
from engine.sim.cachesim import (
    find_stretch as _stretch,  # one search for a shifted stretch: the cache simulator's
)
from engine.sim.grown import Grown, Window, shifted
from engine.sim.pricing import PriceTable, call_cost
from engine.sim.simulate_cost import _column_cost
from engine.sim.simulate_figures import PolicyFigures, TurnFigures
from engine.sim.simulate_marks import _marks_after, _marks_shifted, _prefix_from_marks
from engine.sim.simulate_requests import SentBlock, _Req

_SHA = attrgetter("sha")


COMPACTION_STEPS = frozenset({"clear_tool_results", "drop_rounds", "llm_summary", "compact_history"})


# Strictly increasing request times: the simulator lets a call read only what was written strictly
# before it, and an agent loop sends call k+1 only after reply k arrived. Sources without timestamps
# (all zeros) or with whole-second ones would otherwise hide every write from the next call.
MIN_STEP_S = 1e-3


def _told_stretch(
    prev: Sequence[Block], blocks: Sequence[Block], common: int, told: tuple[int, int, int] | None
) -> tuple[int, int, int] | None:
    """A maker's stretch (_Req.stretch) as _stretch(prev, blocks[common:], common) gives one, (h, a, m)
    with h counted from `common`, when it lies past the shared prefix and its ends are the previous
    request's Blocks it names (the same objects): else None (searched for). Any stretch of the same
    Blocks gives the same conversions, markers, keys and sums."""
    if told is None:
        return None
    s, a, m = told
    if (
        m >= 1
        and s >= common
        and a >= common
        and s + m <= len(blocks)
        and a + m <= len(prev)
        and blocks[s] is prev[a]
        and blocks[s + m - 1] is prev[a + m - 1]
    ):
        return s - common, a, m
    return None


def _first_changed(a: Sequence[Block], b: Sequence[Block], shared: int, m: int) -> int | None:
    """The first position below m where b's Block hash is not a's (or b has no Block), given that the
    first `shared` are equal Blocks (so equal hashes); None when b's first m Blocks have a's hashes.
    Past the shared ones a Block may differ and keep its hash (a moved marker)."""
    if shared >= m:
        return None
    end = min(m, len(b))
    # The Block right after the shared ones differs (or shared would be longer): most often in its hash
    # (a sliding window's changed first message), which settles it without listing every hash.
    if shared < end and a[shared].sha != b[shared].sha:
        return shared
    j = next(compress(count(shared), map(ne, map(_SHA, a[shared:end]), map(_SHA, b[shared:end]))), None)
    if j is not None:
        return j
    return end if len(b) < m else None


def _shared_len(prev: Sequence[Block], blocks: Sequence[Block]) -> int:
    """cachesim.shared_prefix_len(prev, blocks), with one compare of the whole prefix for the two shapes
    most requests have: the last request with Blocks appended, and the same but for its last Block (a
    rolling marker moved on from it to the newest message: the paper column's every call). The general
    scan compares a request that differs in its last pair in 256-pair stretches, each two slices and a
    Python step (~2x the one compare on a 3,000-Block request); this copies the shared part once."""
    if type(prev) is Grown and type(blocks) is Grown:
        # Two requests on one run (a peer that extends its last request, see engine/sim/grown.py): its
        # part both hold is the same objects; only the items past it are compared (at most a tail's).
        k = prev.shared_run(blocks)
        if k >= 0:
            return k + cachesim.shared_prefix_len(prev[k:], blocks[k : len(prev)])
    n = len(prev)
    if n and len(blocks) >= n and blocks[n - 1] is prev[n - 1] and prev == blocks[:n]:
        return n
    k = n - 1
    if k > 0 and len(blocks) > k and blocks[k - 1] is prev[k - 1] and blocks[:k] == prev[:k]:
        return n if blocks[k] == prev[k] else k
    return cachesim.shared_prefix_len(prev, blocks)


def _said_shared(prev: Sequence[Block], blocks: Sequence[Block], same: int | None) -> int:
    """_shared_len(prev, blocks), taken from `same` (see _Req.same) when its ends agree with it."""
    if (
        same is not None
        and same <= len(prev)
        and same <= len(blocks)
        and (same == 0 or blocks[same - 1] is prev[same - 1])
        and (same == len(prev) or same == len(blocks) or blocks[same] != prev[same])
    ):
        return same
    return _shared_len(prev, blocks)


# Requests of this many Blocks or more are handed to the simulator as a Grown (see _simulate).
GROWN_FROM = 1024


def _simulate(
    name: str,
    reqs: Iterable[_Req],
    *,
    rules: str,
    model: str,
    table: PriceTable,
    outputs: Mapping[int, int],
    options: Mapping[str, Any],
    link_outputs: bool,
    automatic_prefix: bool,
    as_sent: bool = False,
    scale: float = 1.0,
    converted: dict[tuple[str, int, bool, str, str], cachesim.Block] | None = None,
    agent_causes: Mapping[int, str] | None = None,
) -> PolicyFigures:
    # Each call goes to the simulator as it is made and is let go after its step: the list of every
    # call held each request's Blocks a second time (a column sending the whole conversation holds
    # turns x messages of them: ~70 MB of a 3,000-turn what-if's peak). The same steps, in order.
    # `reqs` is read once, one request ahead (the next request tells this one's reply), and each
    # request's figures are made right after its step: a peer's requests, made turn by turn, are let
    # go as they are simulated (held in a list, a 3,000-turn clear_tool_uses column's were ~8.6 million
    # Block references, quadratic in the session).
    sim = CacheSimulator(rules, model, **dict(options))
    step = sim.step
    results: list[CallCache] = []
    last = float("-inf")
    # A long session sends the same blocks again and again (every request repeats the history), so each
    # distinct block is converted once; building a frozen dataclass per block per call was most of the
    # cost of this function on a long session. `converted`: the conversions of the other columns of one
    # simulate (the same `scale`), which send mostly the same blocks (on the 930-turn synthetic session,
    # 1,861 of the gates-closed column's 2,275 distinct blocks are the pipeline column's).
    conv: dict[tuple[str, int, bool, str, str], cachesim.Block] = {} if converted is None else converted
    # The same Block object is converted by one lookup of its id, done in C for a whole request (a
    # sliding window sends ~100 Blocks a turn that the previous request did not start with, nearly all
    # of them objects sent before). An id is a Block's only while the Block lives: `keep` holds every
    # Block converted by id until the column is done (the requests themselves are let go).
    by_id: dict[int, cachesim.Block] = {}
    by_id_get = by_id.get
    keep: list[Block] = []
    prev_blocks: Sequence[Block] = []
    # The last call's Blocks as the simulator took them: a Grown, so a call that keeps them is made by
    # appending its new ones (see below).
    prev_cblocks: Sequence[cachesim.Block] = ()
    marks: list[int] = []  # where the request's markers are (see _marks_after)
    prev_n = 0  # the previous request's cached prefix, which this one is checked against

    def convert(blocks: Sequence[Block]) -> list[cachesim.Block]:
        got = list(map(by_id_get, map(id, blocks)))
        # The misses, found in C (`None in got` would call each Block's Python-level __eq__).
        for i in compress(range(len(got)), map(not_, got)):
            b = blocks[i]
            ttl = b.ttl if type(b) is SentBlock else "5m"
            key = (b.sha, b.tokens, b.marker, b.segment, ttl)
            cb = conv.get(key)
            if cb is None:
                cb = conv[key] = cachesim.Block(
                    b.sha, round(b.tokens * scale), breakpoint=b.marker, ttl=ttl, segment=b.segment
                )
            got[i] = by_id[id(b)] = cb
            keep.append(b)
        return cast(list[cachesim.Block], got)

    causes: Counter[str] = Counter()
    per_turn: list[TurnFigures] = []
    compactions = 0
    out_total = 0
    times: list[float] = []
    prev: _Req | None = None
    price = table.get(model)  # the row cost() looks up for every call: looked up once
    it = iter(reqs)
    r = next(it, None)
    while r is not None:
        nreq = next(it, None)
        ts = max(r.time, last + MIN_STEP_S)
        last = ts
        out_sha: str | None = None
        if link_outputs and nreq is not None:
            # The reply's identity as later prompts carry it: the block the next request appends
            # right after this one's prompt. If the next request does not extend this one, the
            # prompt+reply unit can never be matched anyway, so any value is harmless.
            nxt = nreq.blocks
            if len(nxt) > len(r.blocks):
                out_sha = nxt[len(r.blocks)].sha
        # The engine hands consecutive requests the same Block objects for what did not change, so
        # the converted prefix of the previous call is reused (list compares check identity first).
        # A maker that says how much it kept (_Req.same) is checked at its last kept Block and the
        # next: a request edited near its end was compared several times over its whole length.
        common = _said_shared(prev_blocks, r.blocks, r.same)
        # A sliding window (the gates-closed column): a few new Blocks (the task with its new omission
        # note), then a stretch the previous request sent from a later point on, then the newest round.
        # The stretch's conversions and markers are the previous call's: not ~180 lookups a call.
        # A maker that says where it is (a window that moved on or back) is held to its ends instead.
        # The Blocks around a told stretch are cut from the request by where they are, not from its
        # new Blocks made as one slice (clear_tool_uses past its window: ~4,800 a call, to read a few).
        told = _told_stretch(prev_blocks, r.blocks, common, r.stretch)
        if told is not None:
            h, a, m = told
            new: Sequence[Block] = () if m else r.blocks[common:]
        else:
            new = r.blocks[common:]
            h, a, m = _stretch(prev_blocks, new, common)
        if m:
            s = common + h
            fresh, after = r.blocks[common:s], r.blocks[s + m :]
            marks = _marks_shifted(marks, common, fresh, after, a, m)
        else:
            marks = _marks_after(marks, common, new)
        # The call's Blocks as the simulator takes them. A long request that keeps (nearly) all of the
        # last call's is that call's extended by its new Blocks, in what it adds (a Grown: the last
        # call's run appended to); made as a tuple of the shared prefix and the new Blocks, each call
        # copied a whole-conversation request and freed the last one's (per-call work that grew with
        # the session). A short one is a tuple, one copy of the shared prefix (the last call's tuple
        # itself when it starts with all of it): cheaper than a Grown's Python-level reads there.
        if m and common + h + m + len(after) >= GROWN_FROM:
            # A long shifted request (clear_tool_uses past its window: ~4,800 Blocks, most of its calls
            # there): a Window on the last call's run (engine/sim/grown.py), the conversation's Blocks
            # in the order it grew: the stretch is not copied, only the few around it put in. Where the
            # last call's Blocks are not such a run's, one list, the stretch copied once from the last
            # call's, handed over as a Grown on that list (a copy and later a free of ~4,800 Blocks a
            # call, ~15 us; a tuple of the four parts unpacked copied the stretch three times).
            cfresh, cafter = convert(fresh), convert(after)
            view = shifted(prev_cblocks, common, cfresh, a, m, cafter)
            if view is not None:
                cblocks: Sequence[cachesim.Block] = view
            else:
                run = (
                    prev_cblocks.items(a, a + m)
                    if isinstance(prev_cblocks, Grown | Window)
                    else list(prev_cblocks[a : a + m])
                )
                run[0:0] = [*prev_cblocks[:common], *cfresh]
                run += cafter
                cblocks = Grown.of(run, own=True)
        elif m:
            cblocks = (
                *prev_cblocks[:common],
                *convert(fresh),
                *prev_cblocks[a : a + m],
                *convert(after),
            )
        elif common + len(new) >= GROWN_FROM:
            grown = prev_cblocks if type(prev_cblocks) is Grown else Grown.of(prev_cblocks[:common])
            cblocks = grown.extended(common, convert(new) if new else ())
        else:
            head = prev_cblocks if common == len(prev_cblocks) else prev_cblocks[:common]
            cblocks = tuple(head) + tuple(convert(new)) if new else tuple(head)
        prev_blocks, prev_cblocks = r.blocks, cblocks
        out_t = _output(r, outputs)
        # cblocks[:common] are the last call's own Blocks: the simulator need not compare them again.
        # And where the stretch is, so the simulator does not search for it again (m == 0: none).
        c = step(Call(cblocks, ts, model, out_t, out_sha, None, common, (h, a, m)))
        results.append(c)
        brk = None
        if prev is not None:
            mm = min(prev_n, len(prev.blocks))
            # The common case (the request keeps the previous one's cached prefix) is settled by the
            # Blocks the two share (found above, in C); attribute_cache_break walks the prefix block by
            # block to name the cause.
            j = _first_changed(prev.blocks, r.blocks, common, mm)
            if j is not None:
                # attribute_cache_break names the cause from the first changed Block (j) alone: handed
                # that one, it does not list the ~180 hashes of a sliding window's prefix a turn again.
                why = attribute_cache_break(
                    prev.blocks[j : j + 1],
                    r.blocks[j : j + 2],  # and the next one: an inserted block is told by it
                    1,
                    model_changed=False,
                    flipped_latches=r.latch_flips,
                    actions=[{"step": s} for s in r.actions],
                )
                brk = why["cause"] if why else None
                if brk == "history rewritten" and r.compaction and r.actions:
                    brk = f"history rewritten by {', '.join(r.actions)}"  # a peer's own step
                elif brk == "history rewritten" and agent_causes and r.turn in agent_causes:
                    brk = agent_causes[r.turn]  # the agent's own rewrite (engine/capture/tap_rewrite.py)
        if brk:
            causes[brk] += 1
        if r.compaction is not None:
            # A peer's compaction: its own step dropped or rewrote part of what it sent before. A prefix
            # the session changed (a flipped latch, a new section) is not one, nor is a trim that cut
            # where the last one did.
            comp = (
                r.compaction
                and prev is not None
                and _first_changed(prev.blocks, r.blocks, common, len(prev.blocks)) is not None
            )
        elif as_sent:
            # The agent's own compaction: its request no longer starts with everything it sent before.
            comp = (
                prev is not None
                and _first_changed(prev.blocks, r.blocks, common, len(prev.blocks)) is not None
            )
        else:
            comp = not COMPACTION_STEPS.isdisjoint(r.actions)  # in C: no generator frame a turn
        compactions += comp
        per_turn.append(
            TurnFigures(
                r.turn,
                c.input_tokens,
                c.cache_read,
                c.cache_write,
                c.uncached,
                out_t,
                call_cost(price, c, out_t, r.time),
                comp,
                brk,
            )
        )
        out_total += out_t
        times.append(r.time)
        prev_n = _prefix_from_marks(marks, len(r.blocks), automatic_prefix)
        prev, r = r, nreq
    tot = cachesim.totals(results)
    usd, crossed, off = _column_cost(price, model, table, tot, out_total, per_turn, times)
    return PolicyFigures(
        name,
        model,
        rules,
        tot,
        out_total,
        usd,
        compactions,
        dict(sorted(causes.items())),
        per_turn,
        crossed,
        off,
    )


def _output(r: _Req, outputs: Mapping[int, int]) -> int:
    """The output tokens `r` bills: its own (a peer's summarizing call), else its turn's reply."""
    return outputs.get(r.turn, 0) if r.output is None else r.output
