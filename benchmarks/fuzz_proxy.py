"""Fuzz the recording proxy's request and response parsing (engine/capture/proxy: the Recorder, the SSE
reassembly, the tap it journals through) with hostile exchanges, without sockets: each case hands the
Recorder a three-call conversation (Anthropic Messages or OpenAI Chat, streamed or not) built by the test
suite's stand-in (tests/capture/standin.py; or OpenAI Responses), one call of it mutated: its request's JSON values, its
streamed events' JSON values, or its response's bytes. Each case runs in a forked child with a time and
memory limit (benchmarks/fuzz_harness.py).

A finding: a call lost to a Python error (the Recorder's last-resort catch, or the tap's note of a bare
TypeError / KeyError / AttributeError / IndexError: neither says what in the call was wrong), a recording
the proxy wrote that does not replay to the same request hashes (`verify`), a hang, a runaway allocation.

    PYTHONPATH=. python benchmarks/fuzz_proxy.py --count 2000 --seed 1
"""

from __future__ import annotations

import copy
import json
import random
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(REPO))

from fuzz_harness import arg_parser, main_loop, mutate, mutate_value  # noqa: E402

from engine.capture.proxy.exchange import Exchange  # noqa: E402
from engine.capture.proxy.recording import Recorder  # noqa: E402
from engine.capture.proxy.routes import DEFAULT_UPSTREAMS, match  # noqa: E402
from tests.capture.standin import StandIn  # noqa: E402

S = StandIn()
BARE = re.compile(
    r"\b(TypeError|KeyError|AttributeError|IndexError|UnboundLocalError|RecursionError|AssertionError)\b"
)


def _answer(
    body: dict[str, Any], stream: bool, chunks: list[bytes], whole: dict[str, Any]
) -> tuple[list[bytes], str]:
    """The response to `body` (asked streamed when `stream`): the stream's chunks, or the whole reply."""
    if stream:
        body["stream"] = True
        return chunks, "text/event-stream"
    return [json.dumps(whole).encode()], "application/json"


def conversation(wire: str, stream: bool) -> list[tuple[str, dict[str, Any], list[bytes], str]]:
    """Three calls of one conversation: (path, request body, response chunks, content type)."""
    model = "claude-sonnet-4" if wire == "anthropic" else "gpt-4o"
    msgs: list[dict[str, Any]] = [{"role": "user", "content": "Fix the failing test."}]
    out = []
    for i in range(3):
        text = f"Step {i}: looking at the code now."
        if wire == "anthropic":
            body: dict[str, Any] = {
                "model": model,
                "max_tokens": 256,
                "system": "S",
                "messages": copy.deepcopy(msgs),
            }
            body["tools"] = [{"name": "bash", "description": "run", "input_schema": {"type": "object"}}]
            resp, ctype = _answer(
                body, stream, S.anthropic_stream(model, text), S.anthropic_message(model, text)
            )
            reply = S.anthropic_message(model, text)
            msgs.append({"role": "assistant", "content": reply["content"]})
            msgs.append(
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": f"out {i}"}],
                }
            )
            path = "/v1/messages"
        elif wire == "responses":
            items: list[dict[str, Any]] = [
                {"role": "user", "content": "Fix the failing test."},
                *[{"role": "assistant", "content": f"Step {j}: looking at the code now."} for j in range(i)],
            ]
            body = {"model": model, "instructions": "S", "input": items}
            body["tools"] = [{"type": "function", "name": "bash", "parameters": {"type": "object"}}]
            resp, ctype = _answer(body, stream, S.responses_stream(model, text), S.response_obj(model, text))
            path = "/v1/responses"
        else:
            body = {"model": model, "messages": [{"role": "system", "content": "S"}, *copy.deepcopy(msgs)]}
            body["tools"] = [
                {"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}
            ]
            if stream:
                body["stream_options"] = {"include_usage": True}
            resp, ctype = _answer(
                body, stream, S.chat_stream(model, text, True), S.chat_completion(model, text)
            )
            reply = S.chat_completion(model, text)["choices"][0]["message"]
            msgs.append({k: v for k, v in reply.items() if v is not None})
            for call in reply.get("tool_calls") or []:
                msgs.append({"role": "tool", "tool_call_id": call["id"], "content": f"out {i}"})
            path = "/v1/chat/completions"
        out.append((path, body, resp, ctype))
    return out


def _mutate_sse_values(chunks: list[bytes], rng: random.Random) -> list[bytes]:
    out = list(chunks)
    for _ in range(20):
        i = rng.randrange(len(out))
        text = out[i].decode()
        pre, sep, rest = text.partition("data: ")
        data, nl, tail = rest.partition("\n")
        try:
            doc = json.loads(data)
        except ValueError:
            continue
        if not isinstance(doc, dict | list):
            continue
        mutate_value(doc, rng, skip_keys=("type",) if rng.random() < 0.5 else ())
        out[i] = (pre + sep + json.dumps(doc) + nl + tail).encode()
        return out
    return out


def run_case(calls: list[tuple[str, bytes, list[bytes], str]], tmp: str) -> None:
    from engine.recording.cpsession import RecordingReader
    from engine.recording.replay import Replayer

    rec = Recorder(Path(tmp) / "rec", serve=False, idle_park=3600)
    for path, request, response, ctype in calls:
        ex = Exchange(
            match(path, "", {}, DEFAULT_UPSTREAMS),
            request,
            1.0,
            status=200,
            content_type=ctype,
            response=response,
        )
        rec(ex)
    rec.close()
    problems = [s for s in rec.skipped if BARE.search(s)]
    for info, _tap in list(rec.sessions.values()) + [(i, None) for i in rec.let_go]:
        problems += [n for n in info.notes if BARE.search(n)]
        if info.path is not None and Path(info.path).exists():
            with RecordingReader.open(info.path) as r:
                events = [ev for _, ev in r.event_frames()]
            if events:
                report = Replayer(events).verify()
                if not report.ok:
                    problems.append(f"the proxy's recording does not verify: {report.mismatches[:1]}")
    if problems:
        raise AssertionError("\n".join(dict.fromkeys(problems)))


def main() -> None:
    ap = arg_parser(__doc__, 1000)
    a = ap.parse_args()
    convs = {(w, s): conversation(w, s) for w in ("anthropic", "openai", "responses") for s in (False, True)}
    tmp = tempfile.mkdtemp(prefix="fuzzproxy")

    def case(rng: random.Random) -> tuple[bytes, Any]:
        conv = copy.deepcopy(convs[rng.choice(list(convs))])
        k = rng.randrange(len(conv))
        calls = []
        for i, (path, body, resp, ctype) in enumerate(conv):
            request = json.dumps(body).encode()
            if i == k:
                how = rng.randrange(4)
                if how == 0:
                    for _ in range(rng.choice((1, 2, 3))):
                        mutate_value(body, rng)
                    request = json.dumps(body).encode()
                elif how == 1 and ctype == "text/event-stream":
                    resp = _mutate_sse_values(resp, rng)
                elif how == 1:
                    doc = json.loads(resp[0])
                    mutate_value(doc, rng)
                    resp = [json.dumps(doc).encode()]
                elif how == 2:
                    resp = [mutate(b"".join(resp), rng)]
                else:
                    request = mutate(request, rng)
            calls.append((path, request, resp, ctype))

        def run() -> None:
            d = tempfile.mkdtemp(dir=tmp)
            try:
                run_case(calls, d)
            finally:
                shutil.rmtree(d, ignore_errors=True)

        return repr(calls).encode(), run

    main_loop("proxy", case, seed=a.seed, count=a.count, budget=a.budget, save=a.save)


if __name__ == "__main__":
    main()
