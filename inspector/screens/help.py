"""`?`: what each key does and what the panels show. Built from the app's bindings, so the
footer, this screen and the command palette never disagree."""

from __future__ import annotations

import re

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.keys import format_key
from textual.screen import ModalScreen

from inspector.keys_footer import KeysFooter

PANELS = """
## Panels
- **Status line**: the source, the turn (its place of all), play or follow, and the model with the
  provider setting: the engine's request format and cache rules. `openai wire` beside a model not
  OpenAI's own (DeepSeek, say): the model spoken to in OpenAI's format.
- **Pressure**: raw (█) and predictive (▒) pressure (the request's tokens over the window: 1.00 is full)
  against the tier thresholds (T, C, A); `uncompacted`: the whole history's pressure, had none of it been
  compacted; the reserves (tokens) that make up the difference, and the history of predictive pressure.
- **Tier**: the compaction tier and why (raw, predictive, recovery after an error); the plan's size and
  what was sent, in the provider's tokens.
- **Cache layout**: the request as blocks proportional to tokens, coloured by cache scope; ▲ markers,
  ─ cacheable prefix, ━ what the provider served from cache, ✖ where the cache broke and why.
- **Timeline**: tokens sent per turn, the provider's count (coloured by tier), cache-hit shading, ✖ cache breaks, c compactions
  (a compaction's own rewrite of the history is its c), ! errors. Click a column to jump there; on a
  compaction's turn the line under it says what the compaction saves and when it pays back.
- **Sections**: the manifest in send order. `kind` of content; `scope`: the cache scope (global, session,
  none); `prio`: when it gives way under pressure (`first` before `normal`, `last_resort`; `never`);
  `budget`: the tokens it may take; `plan`: its content before the optimize steps that cut it (a spill,
  a trim), so it may be far over the budget (a history of 82k planned, 2.7k sent once its long tool
  results were spilled); `sent`: the tokens sent; `form`: full, trimmed
  (−tokens cut), spilled, ...; `Δ` ●: its content changed since the previous turn; `hash`: its content's
  sha256, first 7 digits; `*` after a name: the section carries a note (why it was sent as it was), which
  **Content** shows under its title. Enter or cursor shows the section in **Content**. Its counts are the
  engine's tokens (cl100k), what budgets are planned in; its bottom border says how the provider's compare.
- **Token scales**: the tier, the cache layout and the timeline show the provider's tokens (what the
  prompt is billed and cached in): its own count once the reply's usage arrives, before that (or from a
  provider with none) the engine's count times the calibration learned from earlier replies, marked ≈.
  The sections, what-if and skipped figures are the engine's, and say so.
- **Content**: the selected section's text as sent (`b`: the whole request body).
- **What-if**: sliders (arrows, shift+arrows, mouse), gate switches and provider; every change re-plans
  this turn and shows it beside the actual plan. `W`: the whole session re-run and priced.
- **Skipped / Alerts**: gated-off steps and what they would have saved; every alert (Enter jumps).
- **Why miss**: this request against the previous one: the first byte that differs and why.
- **Shadow** (a session recorded with a shadow): the candidate configuration beside the live one, with
  the running cost and hit-rate difference.
"""


class HelpScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 90%; max-width: 100; height: 90%; border: round $primary;
                                  background: $surface; padding: 0 1; }
    """
    BINDINGS = [Binding("escape,q,question_mark", "dismiss(None)", "Close")]

    def __init__(self, bindings: list[Binding], session: list[str] | None = None, *, title: str = "ContextPipe Inspector",
                 about: str = PANELS) -> None:
        super().__init__()
        self.bindings_list = bindings
        # The app's name and what its screen shows: `top` has its own columns, not the inspector's panels.
        self.title, self.about = title, about
        # What the status line cut at this width, and the source's file or command (InspectorApp.status_whole):
        # a person on the keyboard has no tooltip to show it.
        self.session = session or []

    def compose(self) -> ComposeResult:
        from textual.widgets import Markdown  # markdown-it and friends: only when help is opened

        with VerticalScroll():
            yield Markdown("\n".join(self.compose_rows()) + "\n" + self.about)
        # Its own footer: the main screen's showed through beneath it, offering keys that do nothing here
        # (←→ Turn, g Go to, q Quit) and not the one that closes it.
        yield KeysFooter(compact=True)

    def compose_rows(self) -> list[str]:
        """The keys table as Markdown lines."""
        rows = [f"# {self.title}", ""]
        if self.session:
            # Code spans: a path or a command is the agent's text, never Markdown.
            rows += ["## This session", "", *(f"- {_code(line)}" for line in self.session), ""]
        rows += ["## Keys", "", "| key | action |", "|---|---|"]
        # One row a key: a key bound twice (Esc: back from a zoomed tab, else the sections) was listed
        # twice; its row says both, in binding order (the first that applies runs). A binding with no
        # tooltip is another's fallback (`s` in a replay says it is for live sessions): not listed.
        said: dict[str, list[str]] = {}
        for b in self.bindings_list:
            if b.tooltip or b.description:
                told = said.setdefault(b.key, [])
                if (b.tooltip or b.description) not in told:
                    told.append(b.tooltip or b.description)
        for key, told in said.items():
            # As a person types them: `+`, `]`, `?`, `←`, not plus / right_square_bracket / question_mark.
            keys = ", ".join(f"`{format_key(k.strip())}`" for k in key.split(","))
            rows.append(f"| {keys} | {'; else '.join(told)} |")
        rows.append("| `ctrl+p` | command palette: every action above, themes, screenshots |")
        return rows


def _code(text: str) -> str:
    """`text` as a Markdown code span, literal whatever it holds: fenced by one backtick more than its
    longest run of them (CommonMark), with a space either side when it starts or ends with one."""
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"
