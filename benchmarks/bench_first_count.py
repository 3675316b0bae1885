"""What tokenizing a text the first time costs inside an engine turn, against counting it again.

bench_engine.py's `--iso` times the engine's tokenizing of new content inside its turns at ~1.6-1.7x
what the same texts cost counted back to back (django-14752: ~7.6 against ~4.5 ms). Two readings
predict different fixes: (1) the turn's Python evicts the tokenizer's code and tables, so counting a
turn's new texts together, or warming the tokenizer first, would win the difference back; (2) each
new text walks table entries no earlier text touched (the cl100k crate's automaton and token tables
are megabytes), so only the text's own first count pays, and nothing on the Python side recovers it.

In one process, every repeat replays the trajectory through the engine's turns as bench_engine does
(feed, next_request, record_usage, the reply; json.dumps of the body between turns). At each count the
engine asks for, this times:

  first      the count as the engine makes it (the text seen for the first time)
  again      the same text counted again right after (everything it touched warm)
  copy       a new string with the same characters (a new object, the same content)
  warmed     (in alternate repeats) the first count after counting another text of the same
             trajectory just before: the tokenizer's code and common tables warm, this content not

and a pass over every text back to back after the repeats. Each text's figure is its minimum over
repeats; the totals and ratios are printed. Reading (2) holds when `again` and `copy` are far below
`first` and `warmed` is not.

    .venv/bin/python benchmarks/bench_first_count.py [--file PATH] [--provider anthropic] [--repeats 8]
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parents[1]))

import bench_engine as be  # noqa: E402  (this directory: its replay, tokenizer and usage helpers)

from engine.importers import load  # noqa: E402

WALL = time.perf_counter


class Probe:
    """Replaces TimedTokenizer.count: the engine's count timed, then the probes of the same text."""

    def __init__(self) -> None:
        self.best: dict[str, dict[str, float]] = {}
        self.warm_with: str | None = None  # a text counted before each first count (None: not)
        self.previous = "hello world"

    def keep(self, kind: str, text: str, took: float) -> None:
        row = self.best.setdefault(text, {})
        row[kind] = min(row.get(kind, took), took)

    def count(self, tok: Any, text: str) -> int:
        count = tok.inner.count
        if self.warm_with is not None:
            count(self.previous)  # another text of this trajectory: the code and tables warm
        t = WALL()
        n = count(text)
        took = WALL() - t
        tok.cpu += took
        self.keep("warmed" if self.warm_with is not None else "first", text, took)
        if self.warm_with is None:
            t = WALL()
            count(text)
            self.keep("again", text, WALL() - t)
            twin = "".join(list(text))  # equal characters, another object
            t = WALL()
            count(twin)
            self.keep("copy", text, WALL() - t)
        self.previous = text
        return int(n)


def replay(imp: Any, window: int) -> None:
    """One repeat: the trajectory through the engine's turns, as bench_engine's one_repeat runs them."""
    run = be.EngineRun(imp, window)
    fed = 0
    for call in imp.calls:
        req, fed = be.engine_turn(run, call, fed, be.agent_usage(call))
        json.dumps(req.body)  # the floor, between turns, as in bench_engine
    run.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--file", type=Path, default=be.DEFAULT)
    ap.add_argument("--provider", default="anthropic")
    ap.add_argument("--window", type=int, default=32000)
    ap.add_argument("--repeats", type=int, default=8)
    args = ap.parse_args()
    be.PROVIDER = args.provider
    imp = load(args.file)
    probe = Probe()
    be.TimedTokenizer.count = lambda self, text: probe.count(self, text)  # type: ignore[method-assign]
    replay(imp, args.window)  # imports, the tokenizer and the SDK's usage classes loaded
    probe.best.clear()
    for r in range(args.repeats):
        probe.warm_with = "yes" if r % 2 else None
        gc.collect()
        replay(imp, args.window)
    texts = list(probe.best)
    inner = be.TimedTokenizer().inner
    b2b: dict[str, float] = {}
    for _ in range(args.repeats):
        for text in texts:
            t = WALL()
            inner.count(text)
            took = WALL() - t
            b2b[text] = min(b2b.get(text, took), took)
    ms = 1000.0
    total = {k: sum(row[k] for row in probe.best.values()) for k in ("first", "again", "copy", "warmed")}
    chars = sum(map(len, texts))
    print(f"{args.file.name}, {args.provider} at {args.window}: {len(texts)} texts, {chars:,} characters "
          f"counted in the engine's turns; minimum per text over {args.repeats} repeats (wall)")  # fmt: skip
    print(
        f"  first count in the turn      {total['first'] * ms:6.2f} ms  ({total['first'] * 1e9 / chars:.0f} ns a character)"
    )
    print(
        f"  the same text again          {total['again'] * ms:6.2f} ms  {total['again'] / total['first']:.2f}x first"
    )
    print(
        f"  an equal copy right after    {total['copy'] * ms:6.2f} ms  {total['copy'] / total['first']:.2f}x first"
    )
    print(
        f"  first, another text before   {total['warmed'] * ms:6.2f} ms  {total['warmed'] / total['first']:.2f}x first"
    )
    print(
        f"  all texts back to back       {sum(b2b.values()) * ms:6.2f} ms  {sum(b2b.values()) / total['first']:.2f}x first"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
