"""The one-line status bar: where the data comes from, which turn, and the follow/play/disconnect state."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.markup import escape

if TYPE_CHECKING:
    from inspector.app_state import AppState


def status_markup(app: AppState) -> str:
    from inspector.app_state import SPEEDS

    h, tl = app.source.header, app.timeline
    if app.source.kind == "live":
        origin = f"[bold $success]● LIVE[/] pid {h.get('pid', '?')}"
    else:
        origin = f"[bold $primary]REPLAY[/] {escape(str(h.get('path', '')).rsplit('/', 1)[-1])}"
    model = f"[$text-muted]{escape(str(h.get('model', '')))} · {escape(str(h.get('provider', '')))}[/]"
    if not len(tl):
        return f"{origin}  {model}  [$text-muted]loading…[/]"
    trace = tl.trace(app.index) or tl.traces[-1]
    turn = f"turn [bold]{trace['turn']}[/] [$text-muted]({app.index + 1}/{len(tl)})[/]"
    speed = f"{SPEEDS[app.speed]:g}×"
    mode = f"[bold $accent]▶ playing {speed}[/]" if app.playing else f"[$text-muted]⏸ {speed}[/]"
    if app.disconnected is not None:
        state = (f"[bold $text on $error] Agent disconnected — {len(tl)} turns kept; press s to save [/]")
    elif app.source.kind == "live":
        state = "[$success]following newest[/]" if tl.follow else "[$warning]stepped back (End to follow)[/]"
    else:
        state = ""
    dropped = f"  [$warning]{app.dropped} events dropped[/]" if app.dropped else ""
    if app.disconnected is not None:  # the banner goes first so 80 columns never cut it off
        return f"{origin} {state}  {turn}  {mode}{dropped}  {model}"
    return f"{origin}  {turn}  {mode}  {state}{dropped}  {model}"
