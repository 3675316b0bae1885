"""A small agent loop on the openai SDK, configured only by the environment (OPENAI_BASE_URL), as real
agents are: `cp-inspect run` must record it without any change to its code.

    python -m tests.capture.script_agent --turns 4 [--stream] [--exit 3] [--delay 0.5] [--conversations 2]
                                         [--runs 2]

With --conversations K it holds K conversations one after the other, each with its own system prompt
(as a sub-agent would): the proxy sees K sessions. With --runs N it does all that N times over, the same
task again (as a harness retrying it): sessions with the same opening.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import openai


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=3)
    ap.add_argument("--stream", action="store_true", help="stream every other call")
    ap.add_argument("--exit", type=int, default=0, help="exit with this code at the end")
    ap.add_argument("--delay", type=float, default=0.0, help="seconds between calls")
    ap.add_argument("--model", default="gpt-4o")
    ap.add_argument(
        "--conversations", type=int, default=1, help="conversations (sessions), one after another"
    )
    ap.add_argument("--runs", type=int, default=1, help="run it all this many times (the same task again)")
    args = ap.parse_args()
    client = openai.OpenAI(api_key=os.environ.get("OPENAI_API_KEY", "sk-script-agent"), max_retries=0)
    for _ in range(args.runs):
        for c in range(args.conversations):
            who = "a script agent" if c == 0 else f"sub-agent {c}"
            converse(client, args, f"You are {who}. Answer briefly.", prefix="" if c == 0 else f"[{c}] ")
    return args.exit


def converse(client: openai.OpenAI, args: argparse.Namespace, system: str, prefix: str) -> None:
    messages: list[dict[str, object]] = [
        {"role": "system", "content": system},
        {"role": "user", "content": "Count the files in the repository."},
    ]
    for turn in range(args.turns):
        if args.stream and turn % 2:
            chunks = list(
                client.chat.completions.create(
                    model=args.model,
                    messages=messages,
                    stream=True,  # type: ignore[arg-type]
                    stream_options={"include_usage": True},
                )
            )
            text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
            messages.append({"role": "assistant", "content": text})
        else:
            r = client.chat.completions.create(model=args.model, messages=messages)  # type: ignore[arg-type]
            # The idiom from OpenAI's docs: append the SDK's message object (as a dict) to the history.
            messages.append(r.choices[0].message.model_dump(exclude_none=True))
            text = r.choices[0].message.content or ""
        print(f"{prefix}turn {turn}: {text}", flush=True)
        messages.append({"role": "user", "content": f"Tool output {turn}: 42 files. Go on."})
        if args.delay:
            time.sleep(args.delay)


if __name__ == "__main__":
    sys.exit(main())
