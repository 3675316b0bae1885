"""Cache-simulator accuracy against real DeepSeek usage.

The mini-swe-agent trajectories in ../shared/trajectories/mini-swe-agent-pr816 carry, for every model
call, the usage the DeepSeek API returned (`prompt_tokens`, `prompt_cache_hit_tokens`). This script
rebuilds each call's prompt as cachesim Blocks, runs the DeepSeek policy and compares the per-trajectory
cache-hit rate (sum of hits / sum of prompt tokens) with the real one.

Token counts: messages are counted with cl100k (engine.tokens). DeepSeek's tokenizer differs, but the
real prompt size of every call is known, so block counts are scaled to it: each block keeps the count it
got when it first appeared (same content, same count in every later prompt), and the blocks new in call
k share `prompt_tokens[k] - (tokens of the blocks already seen)` in proportion to their cl100k counts.
Every simulated prompt therefore has exactly the real size.

Run:  .venv/bin/python benchmarks/bench_cachesim_accuracy.py [TRAJECTORY_DIR]
(default: $CONTEXTPIPE_TRAJECTORIES or ../shared/trajectories next to the repo).
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from engine.hashing import content_hash  # noqa: E402
from engine.sim.cachesim import (  # noqa: E402
    Block,
    Call,
    CallCache,
    deepseek_persist_probability,
    simulate_session,
)
from engine.tokens import MESSAGE_OVERHEAD_TOKENS, TokenCounter  # noqa: E402

# mini-swe-agent's bash tool schema: not stored in the trajectory but sent with every request, so it is
# part of the real prompt. Its exact bytes only matter for cross-session sharing, which is not simulated.
BASH_TOOL = {
    "type": "function",
    "function": {
        "name": "bash",
        "description": "Execute a bash command",
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "string", "description": "The bash command to execute"}},
            "required": ["command"],
        },
    },
}


def default_trajectory_root() -> Path:
    env = os.environ.get("CONTEXTPIPE_TRAJECTORIES")
    if env:
        return Path(env)
    return REPO.parent / "shared" / "trajectories"


@dataclass
class Trajectory:
    name: str
    calls: list[Call]
    prompt_tokens: list[int]
    hit_tokens: list[int]
    fingerprint: str
    model: str

    @property
    def real_hit_rate(self) -> float:
        return sum(self.hit_tokens) / sum(self.prompt_tokens)


def _tool_calls(msg: dict[str, Any]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for tc in msg.get("tool_calls") or []:
        fn = tc.get("function") or {}
        out.append((str(fn.get("name", "")), str(fn.get("arguments", ""))))
    return out


def _sent_form(msg: dict[str, Any]) -> dict[str, Any]:
    """What the agent sends back for a message. reasoning_content is left out: DeepSeek does not put
    earlier turns' chain of thought into the context."""
    return {
        "role": msg.get("role"),
        "content": msg.get("content") or "",
        "tool_calls": _tool_calls(msg),
        "tool_call_id": msg.get("tool_call_id") or "",
    }


def _generated_form(msg: dict[str, Any]) -> dict[str, Any]:
    """What the model generated for an assistant message: the sent form plus any reasoning, which is
    generated (and cached) but never sent back, so such a reply cannot be matched by later prompts."""
    form = _sent_form(msg)
    if msg.get("reasoning_content"):
        form["reasoning_content"] = msg["reasoning_content"]
    return form


def _raw_tokens(counter: TokenCounter, msg: dict[str, Any]) -> int:
    text = (msg.get("content") or "") + "".join(n + a for n, a in _tool_calls(msg))
    return counter.count(text) + MESSAGE_OVERHEAD_TOKENS


def _apportion(total: int, weights: list[int]) -> list[int]:
    """Split `total` in proportion to `weights` (largest remainder), so the parts sum to `total`."""
    wsum = sum(weights)
    if wsum <= 0:
        base = [total // len(weights)] * len(weights)
        base[-1] += total - sum(base)
        return base
    exact = [total * w / wsum for w in weights]
    parts = [int(x) for x in exact]
    order = sorted(range(len(weights)), key=lambda i: -(exact[i] - parts[i]))
    for i in order[: total - sum(parts)]:
        parts[i] += 1
    return parts


def load_trajectory(path: Path, counter: TokenCounter | None = None) -> Trajectory:
    counter = counter or TokenCounter()
    data = json.loads(path.read_text())
    messages: list[dict[str, Any]] = data["messages"]
    tool_block_raw = counter.count(json.dumps(BASH_TOOL))
    tool_sha = content_hash(BASH_TOOL)

    # Per message position: (sha, raw cl100k estimate, segment). Position -1 is the tool schema.
    shas = [content_hash(_sent_form(m)) for m in messages]
    raws = [_raw_tokens(counter, m) for m in messages]
    assigned: dict[int, int] = {}  # position -> scaled tokens, fixed when the block first appears

    calls: list[Call] = []
    prompts: list[int] = []
    hits: list[int] = []
    fingerprint = ""
    model = ""
    last_done = float("-inf")
    for i, m in enumerate(messages):
        if m.get("role") != "assistant":
            continue
        extra = m.get("extra") or {}
        resp = extra.get("response") or {}
        usage = resp.get("usage") or {}
        if "prompt_tokens" not in usage:
            continue  # a failed call (server error): no usage to compare against
        prompt_tokens = int(usage["prompt_tokens"])
        positions = [-1] + [
            p for p in range(i) if messages[p].get("role") in ("system", "user", "tool", "assistant")
        ]
        new = [p for p in positions if p not in assigned]
        known = sum(assigned[p] for p in positions if p in assigned)
        residual = prompt_tokens - known
        weights = [tool_block_raw if p == -1 else raws[p] for p in new]
        if new and residual >= len(new):
            for p, t in zip(new, _apportion(residual, weights), strict=True):
                assigned[p] = t
            tokens = [assigned[p] for p in positions]
        else:
            # The cl100k split disagrees with the real total (rare): scale this call alone.
            all_w = [tool_block_raw if p == -1 else raws[p] for p in positions]
            tokens = _apportion(prompt_tokens, all_w)
        blocks = tuple(
            Block(
                sha=tool_sha if p == -1 else shas[p],
                tokens=t,
                segment="tools"
                if p == -1
                else ("system" if messages[p].get("role") == "system" else "messages"),
            )
            for p, t in zip(positions, tokens, strict=True)
        )
        created = float(resp.get("created") or extra.get("timestamp") or 0.0)
        done = float(extra.get("timestamp") or created)
        # `created` is whole seconds; the agent only sends after the previous reply arrived.
        ts = max(created, last_done + 1e-3)
        last_done = max(done, ts)
        calls.append(
            Call(
                blocks=blocks,
                timestamp=ts,
                model=str(resp.get("model") or ""),
                output_tokens=int(usage.get("completion_tokens") or 0),
                output_sha=content_hash(_generated_form(m)),
                completed_at=last_done,
            )
        )
        prompts.append(prompt_tokens)
        hits.append(int(usage.get("prompt_cache_hit_tokens") or 0))
        fingerprint = fingerprint or str(resp.get("system_fingerprint") or "")
        model = model or str(resp.get("model") or "")
    return Trajectory(path.name.removesuffix(".traj.json"), calls, prompts, hits, fingerprint, model)


def deepseek_trajectories(root: Path | None = None) -> list[Path]:
    root = root or default_trajectory_root()
    return sorted((root / "mini-swe-agent-pr816").glob("*.traj.json"))


def sim_rate(results: list[CallCache], prompts: list[int]) -> float:
    return sum(r.cache_read for r in results) / sum(prompts)


@dataclass
class Row:
    name: str
    calls: int
    real: float
    sim_default: float
    sim_build: float
    persist: float

    @property
    def err_default(self) -> float:
        return 100 * (self.sim_default - self.real)

    @property
    def err_build(self) -> float:
        return 100 * (self.sim_build - self.real)


def evaluate(traj: Trajectory) -> Row:
    default = simulate_session("deepseek", traj.calls, traj.model)
    p = deepseek_persist_probability(traj.fingerprint)
    build = simulate_session("deepseek", traj.calls, traj.model, persist_probability=p)
    return Row(
        traj.name,
        len(traj.calls),
        traj.real_hit_rate,
        sim_rate(default, traj.prompt_tokens),
        sim_rate(build, traj.prompt_tokens),
        p,
    )


def main(argv: list[str]) -> int:
    root = Path(argv[1]) if len(argv) > 1 else default_trajectory_root()
    paths = deepseek_trajectories(root)
    if not paths:
        print(f"no DeepSeek trajectories under {root / 'mini-swe-agent-pr816'}; nothing to measure")
        return 1
    counter = TokenCounter()
    trajs = [load_trajectory(p, counter) for p in paths]
    rows = [evaluate(t) for t in trajs]

    print("DeepSeek cache-hit rate, real vs simulated (hits / prompt tokens over the whole trajectory)")
    print("  'current' = documented current behaviour (every request persists its prefix units);")
    print("  'build'   = persistence rate of the DeepSeek build named in system_fingerprint.\n")
    hdr = f"| {'trajectory':<57} | calls | real % | current % | err pts | persist | build % | err pts |"
    print(hdr)
    print("|" + "|".join("-" * (len(c)) for c in hdr.split("|")[1:-1]) + "|")
    for r in rows:
        print(
            f"| {r.name:<57} | {r.calls:>5} | {100 * r.real:>6.2f} | {100 * r.sim_default:>9.2f} | "
            f"{r.err_default:>+7.2f} | {r.persist:>7.2f} | {100 * r.sim_build:>7.2f} | {r.err_build:>+7.2f} |"
        )
    mae_d = sum(abs(r.err_default) for r in rows) / len(rows)
    mae_b = sum(abs(r.err_build) for r in rows) / len(rows)
    print(
        f"\nmean abs error: current {mae_d:.2f} pts (max {max(abs(r.err_default) for r in rows):.2f}); "
        f"build-aware {mae_b:.2f} pts (max {max(abs(r.err_build) for r in rows):.2f})"
    )

    longest = max(paths, key=lambda p: len(load_trajectory(p, counter).calls))
    t0 = time.perf_counter()
    fresh = load_trajectory(longest, TokenCounter())
    t1 = time.perf_counter()
    reps = 20
    for _ in range(reps):
        simulate_session("deepseek", fresh.calls, fresh.model)
    t2 = time.perf_counter()
    n_blocks = sum(len(c.blocks) for c in fresh.calls)
    print(
        f"\nlongest trajectory {fresh.name}: {len(fresh.calls)} calls, {n_blocks} blocks in all; "
        f"load + tokenize (cold count cache) {1000 * (t1 - t0):.0f} ms; "
        f"whole-session simulation {1000 * (t2 - t1) / reps:.1f} ms"
    )
    for prov in ("anthropic", "openai", "bedrock"):
        t3 = time.perf_counter()
        simulate_session(prov, fresh.calls, "claude-sonnet-4" if prov != "openai" else "gpt-4.1")
        print(f"  same session under {prov}: {1000 * (time.perf_counter() - t3):.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
