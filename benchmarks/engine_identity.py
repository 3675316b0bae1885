"""bench_engine --identity: every request's bytes and the whole journal of many runs, hashed per run (real
trajectories x providers x windows x policies, and long synthetic sessions), written and compared with an
earlier run's: a speed change must not move a byte."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from bench_engine import TRAJ, EngineRun
from engine_long import synthetic_round

from engine.importers import load
from engine.optimize import OptimizeLimits
from engine.pipeline import Pipeline
from engine.tokens import TokenCounter

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
