"""Shadow rollout: the live configuration and the candidate planned beside it, side by side for the
current turn, with the running cost and cache-hit-rate delta up to that turn. Drawn from
`engine.shadow.shadow_summary` (the journal's `shadow` events); the app adds this tab only for a
session that has a shadow."""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text
from textual.reactive import reactive
from textual.widgets import Static

from engine.wording import counted

OVERRIDE_KEYS = {"window", "thresholds", "gates", "provider"}


def describe_candidate(config: dict[str, Any] | None) -> str:
    """The candidate as a person writes one (`diff`'s inline settings: window=N, provider=P,
    threshold.NAME=X, gate.NAME=on|off), or, for a whole configuration of its own, its model, provider
    and window. The journal's dict (every unset override None) read as Python, not as settings."""
    from panels.whatif import SHORT

    if not config:
        return "the live settings"
    if set(config) <= OVERRIDE_KEYS:
        parts = []
        if config.get("window") is not None:
            parts.append(f"window={config['window']}")
        if config.get("provider") is not None:
            parts.append(f"provider={config['provider']}")
        for name, value in sorted((config.get("thresholds") or {}).items()):
            parts.append(f"threshold.{SHORT.get(name, name)}={value:g}")
        for name, on in sorted((config.get("gates") or {}).items()):
            parts.append(f"gate.{name}={'on' if on else 'off'}")
        return ", ".join(parts) or "the live settings"
    return (f"a configuration of its own: {config.get('model', '?')}, {config.get('provider', '?')}, "
            f"window {config.get('window', '?')}")


def running(rows: list[dict[str, Any]], upto_turn: int) -> dict[str, float]:
    """Cost and hit-rate totals of both sides over the turns up to `upto_turn`."""
    acc = {
        "live_cost": 0.0,
        "shadow_cost": 0.0,
        "live_tokens": 0,
        "shadow_tokens": 0,
        "live_read": 0,
        "shadow_read": 0,
    }
    for r in rows:
        if r["turn"] > upto_turn or "live" not in r:
            continue
        for side in ("live", "shadow"):
            acc[f"{side}_cost"] += r[side]["cost_usd"]
            acc[f"{side}_tokens"] += r[side]["tokens"]
            acc[f"{side}_read"] += r[side]["read"]
    return acc


class ShadowPanel(Static):
    DEFAULT_CSS = """
    ShadowPanel { height: auto; padding: 0 1; }
    """
    summary: reactive[dict[str, Any] | None] = reactive(None, always_update=True)
    turn: reactive[int] = reactive(-1, always_update=True)

    def on_mount(self) -> None:
        self.border_title = "Shadow rollout"

    def watch_summary(self) -> None:
        self._draw()

    def watch_turn(self) -> None:
        self._draw()

    def _draw(self) -> None:
        s = self.summary
        if s is None:
            self.update("(no shadow in this session: Pipeline(..., shadow=Overrides(...)))")
            return
        rows = s["turns"]
        row = next((r for r in rows if r["turn"] == self.turn), None)
        acc = running(rows, self.turn)
        table = Table(box=None, show_header=True, header_style="bold", pad_edge=False)
        table.add_column("")
        table.add_column("live", justify="right")
        table.add_column("candidate", justify="right")
        # A side whose model the price table lacks was priced at $0: say n/a rather than show it free.
        priced = s.get("priced_sides") or [s.get("priced", True)] * 2
        models = s.get("models") or ["", ""]

        def usd(side: int, value: float, places: int) -> str:
            return f"${value:.{places}f}" if priced[side] else "n/a"

        if row is not None and "live" in row:
            lv, sh = row["live"], row["shadow"]
            table.add_row("tokens", f"{lv['tokens']:,}", f"{sh['tokens']:,}")
            table.add_row("est. cache read", f"{lv['read']:,}", f"{sh['read']:,}")
            table.add_row("est. cache write", f"{lv['write']:,}", f"{sh['write']:,}")
            table.add_row("est. cost", usd(0, lv["cost_usd"], 5), usd(1, sh["cost_usd"], 5))
        hr = [
            acc[f"{x}_read"] / acc[f"{x}_tokens"] if acc[f"{x}_tokens"] else 0.0 for x in ("live", "shadow")
        ]
        table.add_row("cost so far", usd(0, acc["live_cost"], 4), usd(1, acc["shadow_cost"], 4))
        table.add_row("hit rate so far", f"{hr[0]:.1%}", f"{hr[1]:.1%}")
        delta = acc["shadow_cost"] - acc["live_cost"]
        pct = f" ({100 * delta / acc['live_cost']:+.1f}%)" if acc["live_cost"] else ""
        head = Text(f"candidate: {describe_candidate(s['config'])}\n", style="dim")
        if all(priced):
            cost_delta = f"cost {delta:+.4f} USD{pct}"
        else:
            unpriced = sorted({str(m) for m, ok in zip(models, priced, strict=True) if not ok})
            cost_delta = f"cost n/a (no price for {', '.join(unpriced)})"
        head.append(
            f"running delta: {cost_delta}, hit rate {100 * (hr[1] - hr[0]):+.1f} pts\n",
            style="bold red" if delta > 0 else "bold green",
        )
        failed = sum(1 for r in rows if r["turn"] <= self.turn and "error" in r)
        if failed:
            # The totals above leave those turns out on both sides: say so, or the delta reads as complete.
            head.append(
                f"the candidate could not be planned on {counted(failed, 'turn')} so far (left out of both sides)\n",
                style="bold yellow",
            )
        tail = Text()
        if row is not None and "error" in row:
            tail.append(
                f"\nthe candidate could not be planned on this turn: {row['error']}", style="bold red"
            )
        elif row is not None:
            fd = row.get("first_diff")
            tail.append(
                "\nfirst difference: " + (f"{fd['section']} ({fd['cause']})" if fd else "identical request")
            )
            if row.get("cache_break"):
                tail.append(f"\ncandidate cache break: {row['cache_break']['cause']}", style="yellow")
        from rich.console import Group

        self.update(Group(head, table, tail))
