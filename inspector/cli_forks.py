"""What `cp-inspect forks PARENT [CHILD...]` does, importable without typer.

A script looping over recordings (`for f in runs/*.cpsession; do cp-inspect forks "$f" --json; done`)
paid, under typer, for typer's dispatch, every command built and pydantic's argument adapters on each
file. A plain forks command line (cli_argv.py) runs forks() here directly; the typer command
(diff_cli.py) calls it too, so both read, check and answer alike.
"""

from __future__ import annotations

import json
from pathlib import Path

from engine.wording import counted

from .cli_output import echo
from .option_check import check_prices
from .recording_open import about, fail, missing, trajectory_hint, warn


def forks(parent: Path, children: list[Path] | None, as_json: bool, prices: Path | None) -> None:
    """`forks`'s work: the fork tree of PARENT (and the children named, or those its fork events name), priced."""
    from engine.errors import ContextPipeError
    from engine.recording.replay import MALFORMED, not_the_engines
    from engine.sim.forks import fork_children, price_forks, tree_text

    if prices is not None:  # (a recording that forked nothing is not priced: $CONTEXTPIPE_PRICES waits till then)
        check_prices(prices)
    def load(p: Path, named: bool) -> list[dict] | None:
        """A recording's events. One named on the command line that cannot be read is exit 2; one the
        fork events lead to is a warning and left out (as a missing one is), the rest of the tree shown."""
        why = None
        events: list[dict] = []
        if not p.exists():
            why = missing(p, "recording")
        else:
            try:
                events, damage = _read_events(p)
                if damage:
                    warn(f"{p}: {damage}")
                if not events:
                    why = f"{p} holds no events: its agent stopped before its first turn was recorded"
            except ContextPipeError as exc:
                why = trajectory_hint(p) or about(p, exc)
        if why is None:
            return events
        if named:
            fail(why, 2)
        warn(f"{why}; left out of the tree")
        return None

    pev = load(parent, True)
    assert pev is not None
    kids: list[tuple[Path, list[dict]]] = []
    if children:
        for k in children:
            ev = load(k, True)
            assert ev is not None
            kids.append((k, ev))
        # Children named on the command line are the whole tree priced: forks the parent recorded that
        # are not among them were left out of every figure (its totals read as the whole run's) in silence.
        given = {str(e.get("session_id")) for _, ev in kids for e in ev if e.get("k") == "link"}
        for at, ev in [(parent, pev), *kids]:
            left = [f for f in fork_children(ev) if str(f.get("child")) not in given]
            if left:
                names = ", ".join(
                    Path(f["record"]).name if isinstance(f.get("record"), str) else f"session {f.get('child')}"
                    for f in left
                )
                warn(
                    f"{at} forked {counted(len(left), 'sub-agent')} not given ({names}): left out of the tree and of "
                    "the totals (name no children to price every recorded fork)"
                )
    else:
        # The paths the fork events name, then theirs (a sub-agent's own sub-agents), each read once.
        seen = {parent.resolve()}
        todo = [(parent, pev)]
        while todo:
            at, events = todo.pop(0)
            for f in fork_children(events):
                rec = f.get("record")
                if not rec:
                    continue
                if not isinstance(rec, str):  # (a path was a traceback here)
                    warn(f"{at}: a fork event names {rec!r} as the child's recording, not a path; skipped")
                    continue
                cand = [Path(rec), at.parent / Path(rec).name]
                found = next((c for c in cand if c.exists()), None)
                if found is None:
                    warn(f"child recording {rec} not found")
                    continue
                if found.resolve() in seen:
                    continue
                seen.add(found.resolve())
                ev = load(found, False)
                if ev is not None:
                    kids.append((found, ev))
                    todo.append((found, ev))
    if not kids:
        up = next((e for e in pev if e.get("k") == "link"), None)
        if up is not None and not fork_children(pev):
            # A sub-agent's recording given where the parent's goes: it said only "has no recorded forks".
            fail(
                f"{parent} is a sub-agent's recording (forked from session {up.get('parent_session')} at turn "
                f"{up.get('fork_turn')}): give its parent's recording first, e.g. cp-inspect forks "
                f"PARENT.cpsession {parent}",
                2,
            )
        named = sum(1 for f in fork_children(pev) if f.get("record"))
        if named:
            fail(
                (f"the recorded fork of {parent} could not be read" if named == 1
                 else f"none of the {named} recorded forks of {parent} could be read") + " (the warnings above say why)",
                2,
            )
        if fork_children(pev):
            fail(
                f"{parent} has no recorded forks (fork with pipe.fork(..., record=PATH), or name the children)",
                2,
            )
        # A session that forked no sub-agent is a tree of one, not a bad file: it was exit 2 and read as
        # an error in a script looping over recordings. --json gives the report's usual shape (no children).
    try:
        report = price_forks((parent.name, pev), [(k.name, ev) for k, ev in kids], prices=prices)
    except ContextPipeError as exc:
        fail(str(exc), 2)
    except MALFORMED as exc:  # a fork or link event of the wrong shape: the file's fault, not a crash
        files = ", ".join(str(x) for x in [parent, *(k for k, _ in kids)])
        fail(f"{files}: events are {not_the_engines(exc, 'a recording')}", 2)
    if not kids and not as_json:
        turns = report["parent"]["turns"]
        echo(f"no forks in {parent} ({counted(turns, 'turn')})")
        return
    echo(json.dumps(report, indent=2) if as_json else tree_text(report))


def _read_events(p: Path) -> tuple[list[dict], str | None]:
    """A recording's events, and what the reader found damaged (a file cut short: its events up to the
    cut are read, and the figures are of those only, which a reader has to be told)."""
    from engine.recording.cpsession import RecordingReader

    with RecordingReader.open(p) as r:
        events = list(r.events())
        return events, (r.damage.message if r.damage is not None else None)
