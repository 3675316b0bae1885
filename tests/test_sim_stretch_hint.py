"""The cache simulator told where a call's stretch is (cachesim.Call.stretch).

simulate finds a sliding window's stretch (a run of the previous request's Blocks, sent again further
along) on its own Blocks, and hands it to the simulator with the shared prefix, so the simulator does not
search for it a second time. Any stretch of the very same objects gives the same prefix keys and running
sums, so a valid hint (the one a search finds, a shorter piece of it, or none) must give exactly the
figures of a simulator that is told nothing; a hint whose ends are not those objects is not used.
Differential over random sessions of shifting, appending and editing requests, per provider's rules.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.sim.cachesim import Block, CacheSimulator, Call, shared_prefix_len


@st.composite
def _session(draw: Any) -> list[tuple[tuple[Block, ...], int, tuple[int, int, int]]]:
    """Calls as simulate makes them: (blocks, shared, hint). Each call keeps a drawn prefix of the last
    one's Blocks (the same objects), then a few new Blocks, a stretch of the last call's from a drawn
    point on, and new ones; some Blocks are equal copies of earlier ones. The hint is the stretch as
    built, a shorter piece of it, no stretch, or one whose ends are other Blocks."""
    marked = draw(st.booleans())
    n = [0]

    def new_block() -> Block:
        n[0] += 1
        if draw(st.integers(0, 9)) == 0 and n[0] > 2:  # an equal copy of an earlier Block
            i = draw(st.integers(1, n[0] - 1))
            return Block(f"b{i}", 5 + i % 13, marked and i % 7 == 0)
        return Block(f"b{n[0]}", 5 + n[0] % 13, marked and n[0] % 7 == 0)

    system = (Block("tools", 300, segment="tools"), Block("sys", 200, segment="system"))
    prev: tuple[Block, ...] = system + tuple(new_block() for _ in range(draw(st.integers(0, 40))))
    out = [(prev, 0, (0, 0, 0))]
    for _ in range(draw(st.integers(1, 14))):
        keep = draw(st.integers(0, len(prev)))
        head = tuple(new_block() for _ in range(draw(st.integers(0, 5))))
        at = draw(st.integers(keep, len(prev)))
        stretch = prev[at:]
        tail = tuple(new_block() for _ in range(draw(st.integers(0, 5))))
        blocks = prev[:keep] + head + stretch + tail
        if stretch:
            h, a, m = len(head), at, len(stretch)
            kind = draw(st.sampled_from(["as built", "shorter", "none", "wrong"]))
            if kind == "shorter":
                cut = draw(st.integers(0, m - 1))
                h, a, m = h + cut, a + cut, m - cut
            elif kind == "none":
                h, a, m = 0, 0, 0
            elif kind == "wrong":
                wa = draw(st.integers(0, len(prev) - 1))
                if prev[wa] is not stretch[0]:
                    a = wa
                    m = min(m, len(prev) - wa)
            hint = (h, a, m)
        else:
            hint = (0, 0, 0)
        out.append((blocks, keep, hint))
        prev = blocks
    return out


@settings(max_examples=250, deadline=None)
@given(calls=_session(), rules=st.sampled_from(["deepseek", "openai", "anthropic"]))
def test_a_hinted_stretch_gives_the_figures_of_a_search(
    calls: list[tuple[tuple[Block, ...], int, tuple[int, int, int]]], rules: str
) -> None:
    told, searched = CacheSimulator(rules, "m"), CacheSimulator(rules, "m")
    for t, (blocks, shared, hint) in enumerate(calls):
        # (Anthropic takes at most 4 breakpoints a request: a session that breaks that raises alike.)
        try:
            want: Any = searched.step(Call(blocks, 10.0 * t, output_tokens=7))
        except Exception as exc:  # noqa: BLE001 - the same error either way
            want = repr(exc)
        try:
            got: Any = told.step(Call(blocks, 10.0 * t, output_tokens=7, shared=shared, stretch=hint))
        except Exception as exc:  # noqa: BLE001
            got = repr(exc)
        assert got == want, (t, hint)
        chain, ref = told._policy._chain, searched._policy._chain
        assert (chain.keys, [x + chain.base for x in chain.raw]) == (
            ref.keys,
            [x + ref.base for x in ref.raw],
        )


def test_the_hint_spares_the_search(monkeypatch: Any) -> None:
    """A sliding window told its stretch does not search for it (the search counted)."""
    from engine.sim import key_chain

    searched = [0]
    real = key_chain.find_stretch

    def counting(*a: Any) -> tuple[int, int, int]:
        searched[0] += 1
        return real(*a)

    monkeypatch.setattr(key_chain, "find_stretch", counting)
    msgs = [Block(f"m{i}", 10) for i in range(300)]
    sim = CacheSimulator("deepseek", "m")
    prev = tuple(msgs[:100])
    sim.step(Call(prev, 0.0))
    searched[0] = 0  # (the first call, told nothing, looks)
    for t in range(1, 20):
        blocks = (Block(f"note{t}", 3), *prev[3:], *msgs[100 + 2 * t : 102 + 2 * t])
        common = shared_prefix_len(prev, blocks)
        hint = real(prev, blocks[common:], common)
        assert hint[2] >= 90
        sim.step(Call(blocks, float(t), shared=common, stretch=hint))
        prev = blocks
    assert searched[0] == 0
