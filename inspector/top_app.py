"""`cp-inspect top`: every agent on this machine that serves the probe (and every proxy session) in one
live table, like htop or k9s. Sort with `s` / `S`, filter with `/`, Enter attaches the inspector to the
highlighted agent; quitting the inspector comes back here.

The figures come from a FleetWatcher (engine/probe/watch.py) that reads every agent's stream on its own
threads; the app only copies a snapshot into the table twice a second, and only when it changed."""

from __future__ import annotations

from dataclasses import dataclass

from textual import on
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.content import Content
from textual.driver import Driver
from textual.widgets import Input, Static

from engine.fleet import AgentRow
from engine.probe.watch import NO_SOCKET, STOPPED, FleetWatcher
from engine.wording import counted, nouned
from inspector.keys_footer import KeysFooter
from inspector.terminal_driver import driver_for
from panels.fleet_table import COLUMNS, SORT_KEYS, FleetTable
from themes import DEFAULT_VARIABLES, THEMES, pick_theme

REFRESH_S = 0.5


@dataclass
class TopView:
    """What the person set in the table (sort column, order, filter). `top` shows a new table each time
    the inspector it attached returns, and hands it this, so `q` comes back to the table as it was left;
    the sort and filter went back to the defaults."""

    sort_key: str = "cost"
    reverse: bool = True
    filter: str = ""
    # Why the last Enter did not attach (the agent ended between the table and the key press), said by
    # the next table: printed to the terminal between the two, the table drawn at once hid it.
    notice: str = ""


TOP_ABOUT = """
## Columns
- **PID**: the agent's process. **MODEL**: the model of its
  last call. **TURN**: turns so far.
- **PRESS**: the newest turn's predictive pressure (its request and the reply it reserves, over the window: 1.00
  is full). **TIER**: the compaction tier it ran at.
- **HIT 10** / **HIT**: the share of prompt tokens the provider served from cache, over the last 10 turns and
  the whole session. **COST $**: what the session has cost at the model's prices (`+`: some calls' model
  has no known price, so this is a lower bound).
- **ALERTS**: alerts raised so far. **TOK/MIN**: prompt tokens sent a minute, over the last minute.
- **STATE**: live, ended, not answering, or no socket (it cannot be attached: restart it to serve again);
  agent gone: a proxy's conversation whose agent has exited (the proxy keeps it: Enter still attaches).
- **COMMAND**: the agent's command line.

Enter on a row opens the inspector on that agent; leaving the inspector brings you back here.
"""


class TopApp(App[str | None]):
    TITLE = "ContextPipe top"
    CSS = """
    /* auto: on a narrow terminal the total, an error or the "no agents yet" hint wraps instead of being
       cut at the right edge (at 40 columns the hint stopped at "an agent serves with"). */
    #summary { height: auto; max-height: 4; padding: 0 1; background: $panel; }
    #filter { display: none; height: 3; }
    #filter.shown { display: block; }
    FleetTable { height: 1fr; }
    """
    BINDINGS = [
        Binding("s", "sort(1)", "Sort", tooltip="sort by the next column"),
        Binding("S", "sort(-1)", "Sort back", show=False, tooltip="sort by the previous column"),
        Binding("r", "reverse", "Reverse", tooltip="reverse the sort order"),
        # A priority binding runs as the key arrives, so the filter box has the focus before the keys typed
        # after `/` are handed out (see action_filter); in the box, `/` is text (check_action).
        Binding("slash", "filter", "Filter", key_display="/", tooltip="filter rows by text", priority=True),
        Binding("escape", "clear_filter", "Clear filter", show=False),
        Binding("question_mark", "help", "Help", key_display="?", tooltip="this help"),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(self, watcher: FleetWatcher, theme: str | None = None, refresh_s: float = REFRESH_S,
                 view: TopView | None = None) -> None:
        super().__init__()
        self.watcher = watcher
        self.view = view if view is not None else TopView()
        self.refresh_s = refresh_s
        self._summary: tuple[str, str, str] = ("", "", "")  # (markup, filter, error) shown
        for t in THEMES:
            self.register_theme(t)
        self.theme, self._theme_warning = pick_theme(theme, self.available_themes)

    def get_driver_class(self) -> type[Driver]:
        return driver_for(super().get_driver_class())  # one that survives its terminal closing

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return {**super().get_theme_variable_defaults(), **DEFAULT_VARIABLES}

    def compose(self) -> ComposeResult:
        yield Static(id="summary")
        yield Input(placeholder="filter: pid, model, tier, command…  (Enter to apply, Esc to clear)", id="filter")
        yield FleetTable(id="fleet")
        yield KeysFooter(compact=True)  # (whole keys only at narrow widths: keys_footer.py)

    def on_mount(self) -> None:
        table = self.query_one(FleetTable)
        table.sort_key, table.reverse, table.filter = self.view.sort_key, self.view.reverse, self.view.filter
        if self.view.filter:
            box = self.query_one("#filter", Input)
            box.value = self.view.filter
            box.add_class("shown")
        table.focus()
        if self._theme_warning:
            self.notify(self._theme_warning, severity="warning", markup=False)  # (the person's text)
        if self.view.notice:
            self.notify(self.view.notice, title="not attached", severity="warning", timeout=10, markup=False)
            self.view.notice = ""
        self.refresh_table()
        self.set_interval(self.refresh_s, self.refresh_table)

    def refresh_table(self) -> None:
        """Copy the watcher's figures into the table; tokens/min ages even when no turn arrived."""
        agents = self.watcher.snapshot()
        self.query_one(FleetTable).show(agents)
        self._update_summary(agents)

    def _update_summary(self, agents: list[AgentRow]) -> None:
        table = self.query_one(FleetTable)
        live = sum(a.state == "live" for a in agents)
        # An agent that did not answer (stopped, busy: tried again at each scan) has not ended: counted
        # as ended, a SIGSTOPped agent read "1 ended" until it was resumed.
        quiet = sum(a.state in ("error", STOPPED) for a in agents)
        cost = sum(a.cost_usd for a in agents)
        # A row whose calls include an unpriced model shows its cost as a lower bound ("+"): so is the sum.
        bound = "" if all(a.priced for a in agents) else "+"
        sort = dict(COLUMNS)[table.sort_key] + (" ↓" if table.reverse else " ↑")
        not_answering = f"{quiet} not answering, " if quiet else ""
        # Live but not attachable: counted apart, with what to do (their rows say "no socket").
        orphans = sum(a.state == NO_SOCKET for a in agents)
        no_socket = (f"[b]{orphans} without a probe socket[/b] (restart to attach again), " if orphans else "")
        # The filter is the person's text and the watcher's error names paths: both go in as the markup's
        # variables ($filter, $message: text, never markup). In the markup, a filter of "[/]" ended the
        # app (MarkupError, exit 1) and "[b]x" was styled away; escape() left "[/" and "x\\" to break it.
        text = (f"[b]{live}[/b] live {nouned(live, 'agent')}, {no_socket}{not_answering}{len(agents) - live - quiet - orphans} ended · "
                f"total ${cost:.4f}{bound} · "
                f"sort {sort}" + (" · filter [b]$filter[/b]" if table.filter else ""))
        if table.filter and agents and not table.row_count:  # an empty table said nothing of why
            text += " [b]matches no agent[/b] (Esc clears it)"
        skipped = len(self.watcher.skipped)
        refused = f"{counted(skipped, 'probe socket')} skipped (`cp-inspect ps` says why)" if skipped else ""
        if refused:
            text += f" · [b]{refused}[/b]"
        if self.watcher.error:
            text = "[b $error]$message[/]"
        elif not agents:
            text = ("no agents yet: an agent serves with Pipeline(..., serve=True) or CONTEXTPIPE_SERVE=1, "
                    "or run one with `cp-inspect run -- CMD`")
            if refused:
                text = f"no agents you can attach to: [b]{refused}[/b]"
        shown = (text, table.filter, self.watcher.error or "")
        if shown != self._summary:
            self._summary = shown
            self.query_one("#summary", Static).update(
                Content.from_markup(text, filter=table.filter, message=self.watcher.error or ""))

    def action_sort(self, step: int) -> None:
        table = self.query_one(FleetTable)
        table.sort_key = self.view.sort_key = SORT_KEYS[(SORT_KEYS.index(table.sort_key) + step) % len(SORT_KEYS)]
        self.refresh_table()

    def action_reverse(self) -> None:
        table = self.query_one(FleetTable)
        table.reverse = self.view.reverse = not table.reverse
        self.refresh_table()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "filter" and isinstance(self.focused, Input):
            return False  # `/` typed in the filter box is part of the filter
        return True

    def action_help(self) -> None:
        from inspector.screens.help import HelpScreen

        # The table's own Enter is listed too: it is the key that leads on to the inspector.
        keys = [b for b in (*FleetTable.BINDINGS, *self.BINDINGS) if isinstance(b, Binding)]
        self.push_screen(HelpScreen(keys, title="ContextPipe top", about=TOP_ABOUT))

    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.add_class("shown")
        # Focused now, not by box.focus() (a callback queued behind any keys already waiting): what the
        # person typed right after `/` is the filter, not keys for the table (a fast typist, a paste,
        # or a busy machine lost the first characters; Enter then attached to the highlighted agent).
        self.screen.set_focus(box)

    def action_clear_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.value = ""
        box.remove_class("shown")
        self.query_one(FleetTable).filter = self.view.filter = ""
        self.query_one(FleetTable).focus()
        self.refresh_table()

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.query_one(FleetTable).filter = self.view.filter = event.value.strip()
        self.refresh_table()

    @on(Input.Submitted, "#filter")
    def _filter_submitted(self) -> None:
        self.query_one(FleetTable).focus()

    @on(FleetTable.AttachRequested)
    def _attach_requested(self, message: FleetTable.AttachRequested) -> None:
        row = next((a for a in self.watcher.snapshot() if a.target == message.target), None)
        if row is not None and row.state == NO_SOCKET:
            # Leaving the table to fail (no socket to connect to) and coming back to a toast said less than
            # this does here; the table stays.
            self.notify(f"{row.target}: {row.detail}", title="cannot attach", severity="warning", timeout=10,
                        markup=False)
            return
        self.exit(message.target)
