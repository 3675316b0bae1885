"""What building a turn's trace reads of the request's blocks (issue 15 item 4: an attached inspector
makes every turn build its trace, so the build's cost is the attach's).

- The cache break (feedback.attribute_cache_break) compares the hashes only from the first block that
  is not the very object sent last turn: between compactions the serializer hands back last turn's
  Block objects, all but the one that carried the tail marker. On 89eeeaf every hash of the cached
  prefix was read twice once identity failed anywhere in it.
- The trace's markers (trace.trace_from) sum the tokens of the blocks up to the last marker, and none
  after it, in C; on 89eeeaf a running total of every block was kept as a list (the same reads when the
  tail carries a marker: that test holds the offsets to the running total, it does not fail on 89eeeaf).
- A deferred prefix hash (providers.serialized_request.PrefixDigest, read when the trace is built)
  resumes from the one read before it, as the eager build's does; on 89eeeaf each hashed its whole prefix
  again.

Each gives what it gave before (a reference written out here, over random requests and real sessions).
"""

from __future__ import annotations

from collections import Counter
from itertools import accumulate
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.feedback import attribute_cache_break
from engine.pipeline import Pipeline
from engine.providers.base import Block
from engine.trace import figures_of, section_shas_of, trace_from

READS: Counter[str] = Counter()


class CountedBlock(Block):
    """A Block that counts reads of its hash and token count (what the builders walk)."""

    def __getattribute__(self, name: str) -> Any:
        if name in ("sha", "tokens"):
            READS[name] += 1
        return super().__getattribute__(name)


def _counted(b: Block) -> Block:
    return CountedBlock(b.section, b.segment, b.sha, b.tokens, b.marker)


def test_cache_break_reads_hashes_only_past_the_shared_blocks() -> None:
    prev = [_counted(Block("history", "messages", f"h{i}", 3, False)) for i in range(300)]
    # This turn: the same objects but the last (it carried the tail marker), then the new message.
    cur = [
        *prev[:-1],
        _counted(Block("history", "messages", "h299", 3, False)),
        Block("history", "messages", "x", 3, True),
    ]
    READS.clear()
    kw: dict[str, Any] = {"model_changed": False, "flipped_latches": [], "actions": []}
    assert attribute_cache_break(prev, cur, 300, **kw) is None
    assert READS["sha"] <= 2, READS  # the one block that is a new object, on each side
    # A changed hash past the shared objects is still found.
    cur[-2] = _counted(Block("history", "messages", "changed", 3, False))
    assert attribute_cache_break(prev, cur, 300, **kw) == {"section": "history", "cause": "history rewritten"}


def _reference_break(prev: list[Block], cur: list[Block], n: int) -> int | None:
    """The index of the first hash of the cached prefix that differs (or is missing), else None."""
    n = min(n, len(prev))
    for i in range(n):
        if i >= len(cur) or cur[i].sha != prev[i].sha:
            return i
    return None


_block = st.builds(
    Block,
    st.sampled_from(["tools", "identity", "history"]),
    st.sampled_from(["tools", "system", "messages"]),
    st.sampled_from(["a", "b", "c"]),
    st.integers(1, 3),
    st.booleans(),
)


@settings(max_examples=300, deadline=None)
@given(
    prev=st.lists(_block, max_size=10),
    shared=st.integers(0, 10),
    tail=st.lists(_block, max_size=6),
    n=st.integers(0, 12),
)
def test_cache_break_same_verdict_with_shared_objects(
    prev: list[Block], shared: int, tail: list[Block], n: int
) -> None:
    cur = prev[:shared] + tail  # the first `shared` are last turn's very objects
    kw: dict[str, Any] = {"model_changed": False, "flipped_latches": [], "actions": []}
    got = attribute_cache_break(prev, cur, n, **kw)
    assert (got is None) == (_reference_break(prev, cur, n) is None)


def _session(provider: str, turns: int) -> Pipeline:
    pipe = Pipeline("claude-sonnet-4" if provider == "anthropic" else "gpt-4o", provider, 200_000)
    # Long enough tools and system text that the early breakpoints are placed too (several markers).
    pipe.identity("You are a careful coding agent. " * 200)
    pipe.constraints("Never modify files outside the repository. " * 100)
    params = {"type": "object", "properties": {"path": {"type": "string"}}}
    for name in ("read_file", "list_dir", "grep"):
        pipe.add_tool(name, f"{name} in the repository " * 120, params)
    pipe.user("Explain the compaction tier.")
    for t in range(turns):
        req = pipe.next_request()
        pipe.record_usage({"input_tokens": req.final_tokens, "output_tokens": 10})
        calls = pipe.assistant(f"step {t}", [{"id": f"c{t}", "name": "read_file", "arguments": "{}"}])
        pipe.tool_result(calls[0].id, f"result {t} " * 40)
    return pipe


def test_markers_sum_no_block_after_the_last_marker() -> None:
    for provider in ("anthropic", "openai"):
        pipe = _session(provider, 12)
        built = pipe.build({})
        blocks = [_counted(b) for b in built.serialized.blocks]
        marked = [i for i, b in enumerate(blocks) if b.marker]
        ser = built.serialized
        ser.blocks = blocks
        d = pipe.decide({}, pipe.config)
        fig = figures_of(d.before, d.res, ser, pipe.measure)
        READS.clear()
        trace = trace_from(
            pipe.turn, pipe.config, d.plan, d.reserves, d.res, fig, section_shas_of(None), [], []
        )
        reads = READS["tokens"]
        cum = list(accumulate(b.tokens for b in blocks))
        assert [m["offset_tokens"] for m in trace["markers"]] == [cum[i] for i in marked]
        assert trace["markers"] == built.trace["markers"]
        if provider == "anthropic":
            assert len(marked) >= 2, marked
            # Only the blocks up to the last marker are summed (the tokens read above are the test's).
            assert reads == marked[-1] + 1, (reads, marked, len(blocks))


def test_deferred_prefix_digests_resume_from_each_other() -> None:
    """An unobserved session whose traces are read every turn hashes only what each prefix adds: on
    89eeeaf each deferred digest hashed its whole prefix again (~25 us a turn at ~300 blocks)."""
    import copy
    import hashlib
    import pickle

    from engine.providers.base import DeferredPrefixRequest, _prefix_hex

    pipe = Pipeline("claude-sonnet-4", "anthropic", 200_000)
    pipe.identity("You are a careful coding agent.")
    pipe.user("Explain the compaction tier.")
    hashed = []
    for t in range(40):
        req = pipe.next_request()
        assert isinstance(req.serialized, DeferredPrefixRequest)  # nothing observes: deferred
        digest = req.serialized.prefix_digest()
        assert not isinstance(digest, str)
        # What the digest hashes, and the plain sha256 of it: the chain gives the same.
        assert digest._hexes is not None
        text = _prefix_hex(digest._hexes, digest._prefix)
        twin, again = copy.deepcopy(digest), pickle.loads(pickle.dumps(digest))
        assert digest._chain is not None  # the serializer's, one for all its requests' digests
        chain = digest._chain._hasher
        before = chain.hashed
        assert req.trace["prefix_sha256"] == hashlib.sha256(bytes.fromhex(text)).hexdigest()
        hashed.append(chain.hashed - before)
        assert twin.value() == again.value() == req.trace["prefix_sha256"]
        pipe.record_usage({"input_tokens": req.final_tokens, "output_tokens": 10})
        calls = pipe.assistant(f"step {t}", [{"id": f"c{t}", "name": "read_file", "arguments": "{}"}])
        pipe.tool_result(calls[0].id, f"result {t} " * 40)
    # Once there is a prefix, each turn hashes the blocks it adds (64 hex digits each: the assistant's
    # call and the tool's result), not the whole prefix (~80 blocks by the end).
    first = next(i for i, n in enumerate(hashed) if n)
    assert all(n == 2 * 64 for n in hashed[first + 1 :]), hashed
    assert len(text) > 64 * 60
