"""Why the cache missed: the current request against the previous one at the first point they differ
(section, unit, byte offset, cause), as the agent sent it and as the engine built it, with the
provider's own cache diagnostics when the usage carried them. Filled by the app from
`Source.why_missed(turn)` in a worker; this widget only draws the dict."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.reactive import reactive
from textual.widgets import Static

from panels.fmt import one_line


class WhyMissPanel(Static):
    DEFAULT_CSS = """
    WhyMissPanel { height: auto; padding: 0 1; }
    """
    why: reactive[dict[str, Any] | None] = reactive(None, always_update=True)

    def on_mount(self) -> None:
        self.border_title = "Why the cache missed"
        self.update("(step to a turn)")

    def watch_why(self, why: dict[str, Any] | None) -> None:
        if why is None:
            self.update("(computing...)")
            return
        from engine.recording.why import describe  # the replay engine: not needed for a first frame

        out = Text()
        for k, line in enumerate(describe(why)):
            style = "bold red" if "prefix broken" in line or line.startswith("provider says") else ""
            # (a section's id is the agent's: an ESC in it reached the terminal)
            out.append(("\n" if k else "") + one_line(line), style=style)
        self.update(out)
