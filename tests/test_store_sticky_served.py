"""The sticky path checks only what was appended to a window it served itself (engine/store/sticky.py):
it decides exactly as a check of the whole previous window does."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.store import ContextStore, Kind
from engine.store.budget import parse_budget, tokenizer_for
from engine.store.sticky import Sticky

WORDS = ["alpha", "beta", "parse_file", "load", "cache_key", "the", "error"]


class CountingDict(dict[int, Any]):
    gets = 0

    def get(self, key: int, default: Any = None) -> Any:
        CountingDict.gets += 1
        return super().get(key, default)


step = st.one_of(
    st.tuples(st.just("add"), st.integers(min_value=1, max_value=4), st.integers(min_value=1, max_value=30)),
    st.tuples(st.just("add"), st.integers(min_value=1, max_value=4), st.integers(min_value=1, max_value=30)),
    st.tuples(st.just("get"), st.sampled_from([400, 900, 2500]), st.booleans()),
    st.tuples(st.just("get"), st.sampled_from([400, 900, 2500]), st.just(True)),
    st.tuples(st.just("dup"), st.integers(min_value=0, max_value=40), st.none()),
    st.tuples(st.just("pin"), st.integers(min_value=0, max_value=40), st.booleans()),
    st.tuples(st.just("link"), st.integers(min_value=0, max_value=40), st.none()),
    st.tuples(st.just("collapse"), st.integers(min_value=0, max_value=40), st.none()),
    st.tuples(st.just("add_pinned"), st.integers(min_value=0, max_value=40), st.none()),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(step, min_size=8, max_size=40))
def test_sticky_extend_of_its_own_window_decides_as_a_full_check(steps: list[Any]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        s = ContextStore(Path(tmp) / "s.db")
        ids = [s.add("You are a careful agent.", Kind.SYSTEM, pin=True)]
        for op, a, b in steps:
            if op == "add":
                for _ in range(a):
                    k = len(ids)
                    ids.append(
                        s.add(f"{k} " + " ".join(WORDS[(k + j) % 7] for j in range(b)), Kind.TOOL_RESULT)
                    )
            elif op == "add_pinned":  # appended, but the pins change: a layout change, same metas list
                ids.append(s.add(f"note {a}", Kind.USER, pin=True))
            elif op == "dup":
                ids.append(s.add(s.get(ids[a % len(ids)]).body, Kind.ASSISTANT))
            elif op == "pin":
                s.pin(ids[a % len(ids)], b)
            elif op == "link" and len(ids) > 1:
                ids.append(s.add("see that", Kind.ASSISTANT, links=[("cites", ids[a % len(ids)])]))
            elif op == "collapse" and len(ids) > 3:
                lo = 1 + a % (len(ids) - 2)
                s.collapse_subtask(ids[lo : lo + 2], ids[-1])
            elif op == "get":
                bud = parse_budget(a)
                tok = tokenizer_for(None)
                lane = f"{tok.name}:{bud.limit}:{bud.margin}"
                s.state.refresh()
                prev = s.state.last.get(lane)
                if b and prev is not None:
                    expected = Sticky(s.state, s.forms).extend(prev, bud, tok, lane, None)  # checks it all
                    got = s.sticky.extend(prev, bud, tok, lane, None)
                    assert got[1] == expected[1]
                    assert (got[0] is None) == (expected[0] is None)
                    if got[0] is not None and expected[0] is not None:
                        assert got[0] == expected[0]
                try:
                    s.context_get(a, sticky=b)
                except Exception:
                    continue
        s.close()


def test_a_sticky_turn_looks_up_only_the_appended_items() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        s = ContextStore(Path(tmp) / "s.db")
        s.add("You are a careful agent.", Kind.SYSTEM, pin=True)
        for i in range(400):
            s.add(f"step {i}: " + " ".join(WORDS[(i + j) % 7] for j in range(3)), Kind.TOOL_RESULT)
        s.context_get(100_000)
        s.add("one more", Kind.ASSISTANT)
        first = s.context_get(100_000)  # re-checks the solved window once, then serves its own
        assert first.mode == "sticky" and len(first.entries) > 400
        s.add("and another", Kind.ASSISTANT)
        s.state.by_id = CountingDict(s.state.by_id)
        CountingDict.gets = 0
        second = s.context_get(100_000)
        assert second.mode == "sticky" and len(second.entries) == len(first.entries) + 1
        assert CountingDict.gets <= 2  # not one per entry of the previous window (~400)
        s.close()


def test_a_pinned_append_after_a_served_sticky_window_still_re_solves() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        s = ContextStore(Path(tmp) / "s.db")
        s.add("You are a careful agent.", Kind.SYSTEM, pin=True)
        for i in range(20):
            s.add(f"step {i}", Kind.TOOL_RESULT)
        s.context_get(5000)
        s.add("one more", Kind.ASSISTANT)
        assert s.context_get(5000).mode == "sticky"  # served by the sticky path: its own window next
        s.add("a rule from now on", Kind.USER, pin=True)  # appended, so the metas list is the same
        w = s.context_get(5000)
        assert w.mode == "resolved" and "the set of pinned items changed" in w.notes[0]
        s.close()
