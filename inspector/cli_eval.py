"""What `cp-inspect eval` does (the context store against keep-the-last-N on real trajectories),
importable without typer: a plain eval command line (cli_argv.py) runs eval_() here directly, the typer
command (ctx_cli.py) calls it too, so both check and answer alike."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from engine.wording import counted

from .cli_output import echo
from .recording_open import fail


def eval_(trajectories: Path | None, per_trajectory: bool, as_json: bool) -> None:
    """`eval`'s work: every trajectory under the folder replayed through the store at full, half and quarter
    of its peak context; a table (or JSON) of how often what the agent used next was in the window."""
    from engine.store.evaluate import (
        BUDGET_FRACTIONS,
        POLICIES,
        default_root,
        format_report,
        run_eval,
        trajectory_files,
    )

    if trajectories is not None and trajectories.exists() and not trajectories.is_dir():
        # It said "no such folder" of a file that is there (a trajectory given where its folder goes).
        fail(f"--trajectories {trajectories} is a file, not a folder: give the folder holding the trajectories "
             f"(e.g. {trajectories.parent})", 2)
    if trajectories is not None and not trajectories.is_dir():
        # Asked for by name: a mistyped folder is a wrong option (2); a missing default is a missing input (1).
        fail(f"--trajectories {trajectories}: no such folder (give the folder holding the trajectories)", 2)
    root = trajectories or default_root()
    if not root.is_dir():
        # Nothing was evaluated, so this is an error (exit 1, stdout empty even with --json), as the README's
        # exit status says: it was "skipped: ..." with exit 0, which a script reads as a result.
        env = os.environ.get("CONTEXTPIPE_TRAJECTORIES")
        where = f"CONTEXTPIPE_TRAJECTORIES={env}" if env else f"the default folder {root}"
        fail(
            f"nothing to evaluate: {where} does not exist; give the folder holding the trajectories "
            "with --trajectories DIR, or set CONTEXTPIPE_TRAJECTORIES"
        )
    if trajectories is not None and not trajectory_files(root):
        # A table of zeros (it crashed on a KeyError before) would read as a result.
        fail(f"--trajectories {trajectories}: no trajectory files (*.json, *.traj) in it, nor in its subfolders", 2)
    report = run_eval(root, progress=None if as_json else (lambda s: echo(f"cp-inspect: {s}", err=True)))
    if not report.results:
        why = "; ".join(f"{name}: {reason}" for name, reason in report.skipped[:3])
        fail(f"no trajectory under {root} could be read ({counted(len(report.skipped), 'file')} skipped: {why})")
    if as_json:
        tot = report.totals()
        out: dict[str, Any] = {
            f"{lb}/{pol}": {**_cell(tot[(lb, pol)]), "macro_recall": round(report.macro(lb, pol), 4)}
            for lb, _ in BUDGET_FRACTIONS
            for pol in POLICIES
        }
        if report.skipped:  # only then: the document's keys stay what they were for a clean run
            out["skipped_files"] = [{"file": name, "reason": why} for name, why in report.skipped]
        if per_trajectory:
            # Asked for with --json too: it was dropped without a word (the text's lines, as figures).
            out["trajectories"] = [
                {"name": r.name, "calls": r.calls, "peak": r.peak, "notes": r.notes,
                 "cells": {f"{lb}/{pol}": _cell(c) for (lb, pol), c in r.cells.items()}}
                for r in report.results
            ]
        echo(json.dumps(out, indent=2, sort_keys=True))
    else:
        echo(format_report(report, per_trajectory=per_trajectory))


def _cell(c: Any) -> dict[str, Any]:
    """One budget and policy's figures (engine.store.evaluate.Cell), as --json gives them."""
    return {"uses": c.uses, "served": c.served, "recall": round(c.recall, 4), "task_present": round(c.task_rate, 4),
            "resolves": c.resolves}
