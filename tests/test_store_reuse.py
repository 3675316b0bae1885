"""A re-solve that reuses the previous solve's scores, weights, step order and entries (engine/store/
solve_reuse.py) returns exactly what the general solve returns, and re-scores only the newer items."""

from __future__ import annotations

import tempfile
import zlib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.store import ContextStore, Kind, solve_reuse
from engine.store.budget import parse_budget, tokenizer_for
from engine.store.config import StoreConfig
from engine.store.recorder import encode_manifest
from engine.store.scoring import bm25_relevance, query_terms
from engine.store.solve import Solver
from engine.store.window import Window

WORDS = ["alpha", "beta", "parse_file", "load", "cache_key", "the", "error", '{"a": 1}', "x" * 40]


def _general(s: ContextStore) -> Solver:
    """A solver over the same store that never reuses anything: the from-scratch reference."""
    ref = Solver(s.state, s.forms, s.planner)
    ref.reuse.totals = lambda *a, **k: None  # type: ignore[method-assign]
    return ref


def _solve(
    solver: Solver, s: ContextStore, budget: int, query: str | None, sticky: bool
) -> Window | Exception:
    """What `context_get` runs when the sticky path gives up (or sticky=False), without recording it."""
    st_ = s.state
    st_.refresh()
    b = parse_budget(budget)
    tok = tokenizer_for(None)
    terms = query_terms(query)
    relevance = bm25_relevance(st_.conn, terms, len(st_.metas)) if terms else {}
    try:
        return solver.solve(
            b, tok, f"{tok.name}:{b.limit}:{b.margin}", query, terms, relevance, "fresh", sticky, []
        )
    except Exception as exc:  # pins over budget: both must say so
        return exc


def _same(a: Window | Exception, b: Window | Exception) -> None:
    if isinstance(a, Exception) or isinstance(b, Exception):
        assert type(a) is type(b) and str(a) == str(b)
        return
    assert a.entries == b.entries  # ids, forms, texts, tokens, scores (exact floats), reasons, flags
    assert list(a.dropped) == list(b.dropped)
    assert a.text_hash == b.text_hash and a.used == b.used and a.notes == b.notes
    assert encode_manifest(a.manifest(max_dropped=50)) == encode_manifest(b.manifest(max_dropped=50))
    assert a == b


# Short half-lives and a large base make scores freeze within a few turns (the default takes ~175
# turns); w_recency 0 freezes every score at once, 1e-9 after a few turns at any half-life.
configs = st.builds(
    lambda hl, base, wr, keep: StoreConfig(
        half_life_turns=hl, base=base, w_recency=wr, keep_recent_turns=keep
    ),
    st.sampled_from([0.05, 0.1, 0.3, 3.0]),
    st.sampled_from([0.05, 1.0, 3.0]),
    st.sampled_from([1.0, 0.0, 1e-9]),
    st.sampled_from([0, 1, 4]),
)

# A burst of appends, one turn each, as an agent's steps: (how many, words each, kind, importance).
add = st.tuples(
    st.just("add"),
    st.tuples(st.integers(min_value=1, max_value=12), st.integers(min_value=1, max_value=40)),
    st.sampled_from([Kind.ASSISTANT, Kind.TOOL_RESULT, Kind.FILE_READ]),
    st.sampled_from([0.0, 0.0, 0.5]),
)
budgets = st.sampled_from([300, 800, 2000])
step = st.one_of(
    add,
    add,
    add,
    st.tuples(st.just("turn"), st.integers(min_value=1, max_value=6), st.none(), st.none()),
    st.tuples(st.just("get"), budgets, st.booleans(), st.sampled_from([None, None, "parse_file cache_key"])),
    st.tuples(st.just("dup"), st.integers(min_value=0, max_value=40), st.none(), st.none()),
    st.tuples(st.just("pin"), st.integers(min_value=0, max_value=40), st.none(), st.none()),
    st.tuples(st.just("link"), st.integers(min_value=0, max_value=40), st.none(), st.none()),
    st.tuples(st.just("importance"), st.integers(min_value=0, max_value=40), st.none(), st.none()),
    st.tuples(st.just("expand"), st.integers(min_value=0, max_value=40), st.none(), st.none()),
)


# (first steps sorted, per step walked, newly frozen steps sorted in at): the defaults, and tiny ones
# so that small stores sort the order lazily past its head and merge frozen steps often.
tunings = st.sampled_from([(512, 2, 1024), (1, 0, 2), (3, 1, 0)])


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cfg=configs, tuning=tunings, steps=st.lists(step, min_size=10, max_size=40))
def test_reusing_solve_returns_what_the_general_solve_returns(
    cfg: StoreConfig, tuning: tuple[int, int, int], steps: list[Any]
) -> None:
    saved = solve_reuse._MIN_HEAD, solve_reuse._HEAD_PER_STEP, solve_reuse._FOLD_STEPS
    solve_reuse._MIN_HEAD, solve_reuse._HEAD_PER_STEP, solve_reuse._FOLD_STEPS = tuning
    try:
        _run(cfg, steps)
    finally:
        solve_reuse._MIN_HEAD, solve_reuse._HEAD_PER_STEP, solve_reuse._FOLD_STEPS = saved


def _run(cfg: StoreConfig, steps: list[Any]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        s = ContextStore(Path(tmp) / "s.db", config=cfg)
        ref = _general(s)
        ids = [s.add("You are a careful agent.", Kind.SYSTEM, pin=True)]
        for op, a, b, c in steps:
            if op == "add":
                for _ in range(a[0]):
                    k = len(ids)
                    # The same words for a whole burst: equal token counts, so frozen items tie on value per token.
                    text = " ".join(WORDS[(a[1] + j) % len(WORDS)] for j in range(a[1]))
                    ids.append(s.add(f"{k} {text}", b, importance=c))
                    s.advance_turn()
            elif op == "turn":
                for _ in range(a):
                    s.advance_turn()
            elif op == "dup":
                ids.append(s.add(s.get(ids[a % len(ids)]).body, Kind.ASSISTANT))
            elif op == "pin":
                s.pin(ids[a % len(ids)])
            elif op == "link" and len(ids) > 1:
                ids.append(s.add("see that", Kind.ASSISTANT, links=[("cites", ids[a % len(ids)])]))
            elif op == "importance":
                s.set_importance(ids[a % len(ids)], 0.25)
            elif op == "expand":
                s.expand(ids[a % len(ids)])
            elif op == "get":
                # Both solvers on the same state: headroom (sticky) and fresh fills, with and without a
                # query (the reusing solver falls back to the general path with one).
                for sticky in (True, False):
                    _same(_solve(ref, s, a, c, sticky), _solve(s.solver, s, a, c, sticky))
                try:
                    w = s.context_get(a, query=c, sticky=b)  # advances the turn and records the window
                except Exception:
                    continue
                row = s.state.conn.execute("SELECT manifest FROM windows ORDER BY id DESC LIMIT 1").fetchone()
                assert zlib.decompress(row[0]) == zlib.decompress(encode_manifest(w.manifest(max_dropped=50)))
        s.close()


def _agent_store(path: Path) -> ContextStore:
    """300 items over 150 turns with a 1-turn half-life: all but the last few turns' scores are frozen."""
    s = ContextStore(path, config=StoreConfig(half_life_turns=1.0))
    s.add("You are a careful agent.", Kind.SYSTEM, pin=True)
    for i in range(300):
        s.add(f"step {i}: " + " ".join(WORDS[(i + j) % 7] for j in range(5 + i % 30)), Kind.TOOL_RESULT)
        if i % 2:
            s.advance_turn()
    return s


def test_a_re_solve_rescores_only_the_newer_items_and_keeps_the_old_entries() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        s = _agent_store(Path(tmp) / "s.db")
        first = s.context_get(1500, sticky=False)
        s.add("a new assistant message", Kind.ASSISTANT)
        s.add("a new tool result " * 5, Kind.TOOL_RESULT)
        second = s.context_get(1500, sticky=False)
        n = len(s)
        # With a 1-turn half-life a score freezes ~58 turns after its item was added (2 items a turn):
        # about 120 of 303 items are re-scored, and every old item chosen again is the same Entry (pins
        # are rebuilt).
        assert 0 < s.solver.reuse.rescored < n // 2
        old = {e.id: e for e in first.entries}
        again = [e for e in second.entries if e.id in old and e.id < 150 and not e.pinned]
        assert again and all(e is old[e.id] for e in again)
        _same(_solve(_general(s), s, 1500, None, False), _solve(s.solver, s, 1500, None, False))
        s.close()


@pytest.mark.parametrize("tuning", [(512, 2, 1024), (1, 0, 2), (3, 1, 0)])
def test_ties_on_value_per_token_go_by_index_as_in_the_general_solve(tuning: tuple[int, int, int]) -> None:
    """Equal scores (no recency weight: every score frozen at once) and equal token counts: the budget
    cuts through a run of tied items, and which of them are taken must not depend on what was reused."""
    saved = solve_reuse._MIN_HEAD, solve_reuse._HEAD_PER_STEP, solve_reuse._FOLD_STEPS
    solve_reuse._MIN_HEAD, solve_reuse._HEAD_PER_STEP, solve_reuse._FOLD_STEPS = tuning
    try:
        with tempfile.TemporaryDirectory() as tmp:
            s = ContextStore(Path(tmp) / "s.db", config=StoreConfig(w_recency=0.0, keep_recent_turns=0))
            ref = _general(s)
            for i in range(10, 90):
                s.add(f"item {i} alpha beta gamma", Kind.TOOL_RESULT)
                if i % 9 == 0:
                    for budget in (200, 333):
                        _same(_solve(ref, s, budget, None, False), _solve(s.solver, s, budget, None, False))
                        s.context_get(budget, sticky=False)
            s.close()
    finally:
        solve_reuse._MIN_HEAD, solve_reuse._HEAD_PER_STEP, solve_reuse._FOLD_STEPS = saved
