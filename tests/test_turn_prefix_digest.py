"""A turn nothing observes leaves its prefix hash to whoever reads it
(providers.serialized_request.PrefixDigest).

Only a turn's trace reads `prefix_sha256`, so Pipeline's unobserved build serializes with
prefix_hash=False: the request is a DeferredPrefixRequest whose prefix hash is computed on first read,
from the sections' joined item hashes the serializer had anyway. The reference is the serializer's
resumed chain hash (what every eager build still computes): the same digest for any hashes and prefix
length, the same request field, the same trace. The counting test fails on 5404302, where every turn
joined and hashed its prefix at the request. wire_order's sliced fast path is held equal to the two
generators it replaced.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import engine.providers.request_body as request_body
import engine.providers.serialized_request as serialized_request
from engine.assembly import Section, wire_order
from engine.pipeline import Pipeline
from engine.providers.hex_chain import ChainHasher
from engine.providers.serialized_request import (
    DeferredPrefixRequest,
    PrefixDigest,
    SerializedRequest,
    _prefix_hex,
)
from engine.types import CacheScope, Priority, SectionKind
from tests.test_express import _feed, ops_st, paired_requests
from tests.test_trace_lazy import _observed, _start, _turns
from tests.test_turn_lineage import _pipe

hex64 = st.binary(min_size=32, max_size=32).map(bytes.hex)
# A section's hashes as a run keeps them (serialized_request.Hexes): the first n of a list that may hold
# more (appended by a later run of its lineage), which no read may see.
section_st = st.tuples(st.lists(hex64, max_size=6), st.lists(hex64, max_size=3)).map(
    lambda t: (t[0] + t[1], len(t[0]))
)
sections_st = st.lists(section_st, max_size=5)


def _plain(hexes: list[tuple[list[str], int]]) -> str:
    return "".join("".join(shas[:n]) for shas, n in hexes)


@settings(max_examples=300, deadline=None)
@given(hexes=sections_st, cut=st.integers(0, 40), chain=st.lists(sections_st, max_size=3))
def test_a_digest_is_the_chain_hash_of_the_prefix(
    hexes: list[tuple[list[str], int]], cut: int, chain: list[list[tuple[list[str], int]]]
) -> None:
    """The same digest as the serializer's resumed hash, whatever the chain hashed before it."""
    blocks = sum(n for _, n in hexes)
    n = min(cut, blocks)
    hasher = ChainHasher(bytes.fromhex, keep=8)
    for earlier in chain:  # strings hashed before: the chain resumes from any it extends
        hasher.hexdigest(_prefix_hex(earlier, sum(m for _, m in earlier)))
    assert _prefix_hex(hexes, n) == _plain(hexes)[: 64 * n]
    want = hasher.hexdigest(_prefix_hex(hexes, n))
    got = PrefixDigest(list(hexes), n)
    assert got.value() == want == hashlib.sha256(bytes.fromhex(_plain(hexes)[: 64 * n])).hexdigest()
    assert got.value() == want  # read again: the same string, kept


def _request(prefix: str | PrefixDigest, kind: type[SerializedRequest]) -> SerializedRequest:
    return kind("openai", b"{}", [], "r" * 64, prefix, 7)  # type: ignore[arg-type]


def test_a_deferred_request_reads_and_copies_as_a_plain_one() -> None:
    digest = PrefixDigest([(["ab" * 32], 1)], 1)
    lazy = _request(digest, DeferredPrefixRequest)
    plain = _request(digest.value(), SerializedRequest)
    assert lazy.prefix_digest() is digest  # not computed by asking for the digest
    assert lazy.prefix_sha256 == plain.prefix_sha256 and lazy.prefix_digest() == plain.prefix_sha256
    assert dataclasses.asdict(lazy) == dataclasses.asdict(plain)
    assert dataclasses.replace(lazy, body=b"[]").prefix_sha256 == plain.prefix_sha256
    assert copy.deepcopy(lazy).prefix_sha256 == plain.prefix_sha256
    assert repr(lazy).replace("DeferredPrefixRequest(", "SerializedRequest(", 1) == repr(plain)


def _count_prefix_joins(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    real, n = request_body._prefix_hex, [0]

    def counted(*a: Any) -> str:
        n[0] += 1
        return real(*a)

    # The serializer joins a prefix when it hashes one at once (request_body), a deferred digest when it is read
    # (serialized_request): both are counted.
    monkeypatch.setattr(request_body, "_prefix_hex", counted)
    monkeypatch.setattr(serialized_request, "_prefix_hex", counted)
    return n


def test_an_unobserved_turn_hashes_no_prefix_until_its_trace_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """30 unobserved turns join and hash no prefix (on 5404302: 30); reading a trace hashes its prefix,
    once; the request's field and the trace say what an observed pipeline's say."""
    joins = _count_prefix_joins(monkeypatch)
    lazy, eager = _pipe(6_001, "cost_aware", False, True), _observed(_pipe(6_001, "cost_aware", False, True))
    for p in (lazy, eager):
        _start(p)
    mine, theirs = _turns(lazy, 30), _turns(eager, 30)
    assert joins[0] == 30  # the observed side's, at each request
    assert all(type(r.serialized) is DeferredPrefixRequest for r in mine)
    assert all(type(r.serialized) is SerializedRequest for r in theirs)
    t = mine[12].trace
    assert joins[0] == 31
    assert t["prefix_sha256"] == theirs[12].trace["prefix_sha256"] == mine[12].serialized.prefix_sha256
    assert joins[0] == 31  # the request's field and the trace's share one digest
    for a, b in zip(mine, theirs, strict=True):
        assert a.bytes == b.bytes and a.serialized.prefix_sha256 == b.serialized.prefix_sha256
        assert a.trace == b.trace
    assert joins[0] == 30 + 30
    for p in (lazy, eager):
        p.close()


def test_an_eager_build_hashes_its_prefix_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pipeline.build (explain, what-ifs, replay, simulate) and an explain hash the prefix as before."""
    joins = _count_prefix_joins(monkeypatch)
    p = _pipe(6_001, "cost_aware", False, True)
    _start(p)
    _turns(p, 3)
    assert joins[0] == 0
    built = p.build({})
    # Its own, and the previous turn's record's (build_trace reads the previous trace).
    assert type(built.serialized) is SerializedRequest and joins[0] == 2
    assert p.explain()["prefix_sha256"] == built.trace["prefix_sha256"]
    p.close()


def _section(kind: SectionKind, n: int) -> Section:
    return Section(f"{kind.value}{n}", kind.value, kind, CacheScope.SESSION, Priority.NORMAL, ())


@settings(max_examples=200, deadline=None)
@given(kinds=st.lists(st.sampled_from(list(SectionKind)), max_size=8))
def test_wire_order_puts_tools_first_and_keeps_the_rest_in_order(kinds: list[SectionKind]) -> None:
    asm = tuple(_section(k, i) for i, k in enumerate(kinds))
    want = tuple(s for s in asm if s.kind == SectionKind.TOOLS) + tuple(
        s for s in asm if s.kind != SectionKind.TOOLS
    )
    got = wire_order(asm)
    assert len(got) == len(want) and all(a is b for a, b in zip(got, want, strict=True))
    assert wire_order(asm) is got  # the same assembly asked again: remembered


def test_a_pipeline_with_a_recording_is_unchanged(tmp_path: Any) -> None:
    rec = Pipeline("deepseek-chat", "openai", 6_001, serve=False, record=tmp_path / "r.cpsession")
    _start(rec)
    reqs = _turns(rec, 3)
    assert all(type(r.serialized) is SerializedRequest for r in reqs)
    rec.close()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ops=ops_st,
    window=st.sampled_from((2_401, 3_001, 6_001, 40_001)),
    provider=st.sampled_from(("openai", "anthropic")),
)
def test_a_digest_read_late_sees_its_own_hashes_whatever_its_lineage_appended_since(
    ops: list[tuple[str, int]], window: int, provider: str
) -> None:
    """A run's item hashes are the first n of a list its lineage appends to (serialized_request.Hexes):
    every deferred digest, read only after the whole session (the express lane's runs extended, forked by
    compactions, windows, a provider's markers moving, an edited section), is the sha256 of its own
    request's first blocks' hashes, and the one an observed pipeline hashed at the request."""
    lazy, eager = _pipe(window, "cost_aware", False, True), _pipe(window, "cost_aware", False, True)
    for p in (lazy, eager):
        if p.config.provider != provider:
            ev = {"k": "config", "config": dataclasses.replace(p.config, provider=provider).to_event()}
            p.fold(ev)
            p.journal.append(ev)
    _observed(eager)
    sinks: list[list[Any]] = []
    pairs = []
    try:
        for _op, r, a, b in paired_requests(lazy, eager, ops, lambda p, op, r, t: _feed(p, op, r, t, sinks)):
            if a is None or b is None:
                continue
            pairs.append((a.serialized, b.serialized.prefix_sha256, [x.sha for x in b.serialized.blocks]))
            for p, req in ((lazy, a), (eager, b)):
                p.record_usage({"input_tokens": req.final_tokens + r % 50, "output_tokens": 20})
        for mine, want, shas in pairs:  # read late: after every turn that came after them
            assert mine.prefix_sha256 == want
            # The hash of some first blocks of that request (the plain join, not _prefix_hex).
            h, cuts = hashlib.sha256(), {hashlib.sha256().hexdigest()}
            for sha in shas:
                h.update(bytes.fromhex(sha) if len(sha) == 64 else b"")
                cuts.add(h.hexdigest())
            assert want in cuts or any(len(s) != 64 for s in shas)
    finally:
        lazy.close()
        eager.close()
