"""What bench_cold_misses.py and bench_turn_steps.py share: the options naming the trajectory replayed and
its steady turns, and the child process's start (the trajectory loaded as bench_engine replays it, the
tokenizer loaded before the first turn counted). Each counts a replay of one trajectory, turn by turn, in
a child process under one tree's PYTHONPATH (--ab BASE_DIR: an older tree's too)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def add_replay_options(ap: argparse.ArgumentParser, ab_help: str) -> None:
    """--file, --provider, --window, --warm and --ab, as both benchmarks take them."""
    import bench_engine as be

    ap.add_argument("--file", type=Path, default=be.DEFAULT)
    ap.add_argument("--provider", default="anthropic")
    ap.add_argument("--window", type=int, default=32_000)
    ap.add_argument("--warm", type=int, default=10, help="turns before steady state (as bench_engine's)")
    ap.add_argument("--ab", metavar="BASE_DIR", help=ab_help)


def replay_child_options(args: argparse.Namespace) -> list[str]:
    """The replay's options again, for the child process's command line."""
    return [
        "--file", str(args.file), "--provider", args.provider, "--window", str(args.window),
        "--warm", str(args.warm),
    ]  # fmt: skip


def start_child(args: argparse.Namespace) -> tuple[Any, Any]:
    """In the child: bench_engine set to the provider and the trajectory loaded (bench_engine, the
    imported session), the tokenizer loaded before any turn is counted."""
    import bench_engine as be

    from engine.importers import load
    from engine.tokens import TokenCounter

    be.PROVIDER = args.provider
    imp = load(args.file)
    TokenCounter().count("warm up the tokenizer")
    return be, imp
