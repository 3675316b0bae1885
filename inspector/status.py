"""The one-line status bar: where the data comes from, which turn, and the follow/play/disconnect state."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.cells import cell_len

from engine.wording import counted
from inspector.agent_end import FAILED_ENDS
from inspector.session_view import SPEEDS, SessionView
from panels.fmt import fit_cells, literal, model_in, one_line
from panels.markup_line import Part, as_markup, assemble, parse
from panels.middle_cut import middle_cut

# The most of a recording's file name the status line keeps when the turn number itself would not fit.
# An imported run's name is often 60-70 characters (deepseek_reasoner_dev__marshmallow-code__
# marshmallow-1343.cpsession): whole, it pushed the turn, the play state and the model past the right
# edge at 80 columns. A wider terminal shows more of it, or all.
NAME_CHARS = 32
# The least of that name kept (cut in the middle) to leave the model whole: the model says what ran, and
# the name is whole in the tooltip and the help screen. Kept at 32, the name cut the model at 80 columns
# ("claude-sonnet-…", the provider gone); shorter than this, the model is cut at the edge instead.
NAME_MIN = 12
# The least of a model's name kept, cut at its end, to leave its provider whole after it; with less room
# the line is cut at the edge (the provider goes first).
MODEL_MIN = 12
# How a run's inspector is told its agent exited with status 0 (the reason of its SourceDisconnected)
FINISHED = "the agent exited with status 0"
# How an attached inspector is told its agent's process is gone: `attach` did not start it, so its exit
# status is its parent's to know. It was "Agent disconnected" in red, as a connection lost to a running
# agent reads, over an agent that had ended its work and exited.
EXITED = "the agent's process has ended"
# The same for one session of a process that serves several (PID.N: a proxy's conversation, a served
# fork): the process that ended is the proxy (or the parent agent), so the session is said to have ended.
SESSION_ENDED = "the process serving this session has ended"
# How an agent that failed is said to have ended (inspector.agent_end.ended_said: `run`'s, `demo`'s and
# `attach`'s): "the agent exited with status 3 (its output: FILE)", "the agent was ended by SIGKILL". The
# status line said "Agent disconnected" over them, a lost connection, though the run knew the exit status.
OUTPUT_NOTE = " (its output: "  # where a run's agent's output went: the toast says it, the banner has no room


def failed_head(disconnected: str) -> str | None:
    """The banner's head for an agent known to have failed ("Agent exited with status 3", "Agent ended by
    SIGKILL"), None for any other end."""
    if disconnected == FINISHED or not disconnected.startswith(FAILED_ENDS):
        return None
    how = disconnected.removeprefix("the agent ").split(OUTPUT_NOTE, 1)[0]
    return "Agent " + how.replace("was ended by", "ended by", 1)


SUFFIX = ".cpsession"  # what every recording's name ends with: the first thing a cut name leaves out
# The least of a path in a disconnected agent's banner ("recording kept at PATH") kept when the banner is
# shortened to fit; with less room than that the path is left whole and cut at the edge. Shortened, the
# path keeps more of its end (the file's name, what a person looks for) than of its start.
PATH_CHARS = 10
# The least of that path kept, shortened, beside the source's name: with less room, the name goes first.
PATH_CHARS_NAMED = 24


# The models a provider setting's own: its name alone says what talks to what ("claude-sonnet-4 ·
# anthropic"). The setting is the engine's wire format and cache rules (engine.providers: "deepseek" is
# an alias of "openai"), so beside any other model it is said to be the wire: "deepseek-chat · openai"
# read as if DeepSeek's model ran at OpenAI. Bedrock hosts others' models: its name says where, as is.
OWN_MODELS = {"anthropic": ("claude",), "openai": ("gpt", "o1", "o3", "o4", "chatgpt")}


def provider_label(model: str, provider: str) -> str:
    """The provider as the status line names it beside `model`: "openai wire" when the model is not
    the provider's own (DeepSeek, or Claude sent in the OpenAI format), else the provider."""
    own = OWN_MODELS.get(provider, () if provider == "prefix" else None)
    # Any piece of a routed name ("openai/o3-mini", "openrouter/anthropic/claude-..."): its last alone
    # made "gpt-4o[/]" read as "]", no model of OpenAI's, so "openai wire".
    if own is None or not provider or any(piece.lower().startswith(own) for piece in model.split("/")):
        return provider
    return f"{provider} wire"


def short_name(name: str, limit: int = NAME_CHARS, head_share: float = 0.5) -> str:
    """`name`, or its start and end around an ellipsis when it is longer than `limit` characters (the
    start `head_share` of what is kept)."""
    return middle_cut(name, limit, "…", head_share)


def ended_where(
    view: SessionView, saved_to: str | None, saved_turns: int | None = None, save_on_quit: str | None = None
) -> tuple[str, str]:
    """Where an ended agent's session is, as its banner says it: the wording with `{}` for the path, and
    the path ("" when there is none: "press s to save")."""
    # `saved_turns`: the turns the file `s` wrote holds (None: not known, as before). A save made while the
    # agent ran holds the turns received by then: "saved to FILE" beside "400 turns kept", once the agent
    # had ended, said the file held all 400 when it held the 386 of the save.
    partial = saved_to is not None and saved_turns is not None and saved_turns < len(view.timeline)
    kept = view.source.header.get("recording")
    if saved_to and not partial:
        return "saved to {}", saved_to
    if kept:
        return "recording kept at {}", one_line(str(kept))
    if saved_to:
        return f"{saved_turns} saved to {{}}; press s to save all", saved_to
    if save_on_quit:
        return "written to {} when you quit", save_on_quit
    return "press s to save", ""


def path_in(path: str, room: int) -> str:
    """`path` in `room` cells: whole when it fits; else its directory shortened in the middle and the
    file's name kept whole (what a person looks for, and types next); else the name itself shortened."""
    if len(path) <= room:
        return path
    head, sep, name = path.rpartition("/")
    if sep and len(name) + 1 + PATH_CHARS <= room:  # some of the directory: its start, "…", its end
        return f"{short_name(head, room - len(name) - 1, head_share=2 / 3)}/{name}"
    if sep and len(name) + 2 <= room:
        return f"…/{name}"
    return short_name(name, max(room, 1))


def ended_where_line(
    view: SessionView, saved_to: str | None, width: int, saved_turns: int | None = None,
    save_on_quit: str | None = None,
) -> str | None:
    """The line under the status line that says where an ended agent's session is, when the status line
    at `width` cells would show the path it names only cut: at 80 columns the banner read "Agent ended
    by SIGKILL; kept at /tmp….cpsession", which said nothing of where the session went, and the toast
    that said it whole went away after a few seconds. None when there is no path to name. Markup."""
    form, path = ended_where(view, saved_to, saved_turns, save_on_quit)
    if not path:
        return None
    if cell_len(form.format(path)) > width:  # "kept at": its ten cells go to the path (the banner above
        form = form.removeprefix("recording ")  # says the agent ended, so what is kept is its recording)
    said = form[0].upper() + form[1:]
    room = width - cell_len(said.format(""))
    return "[$text-muted]" + literal(said.format(path_in(path, room))) + "[/]"


def status_markup(
    view: SessionView,
    index: int,
    playing: bool,
    speed: int,
    disconnected: str | None,
    failed: str | None = None,
    saved_to: str | None = None,
    saved_turns: int | None = None,
    save_on_quit: str | None = None,
) -> str:
    return as_markup(status_parts(view, index, playing, speed, disconnected, failed, saved_to,
                                  saved_turns=saved_turns, save_on_quit=save_on_quit))


def status_parts(
    view: SessionView,
    index: int,
    playing: bool,
    speed: int,
    disconnected: str | None,
    failed: str | None = None,
    saved_to: str | None = None,
    width: int | None = None,
    saved_turns: int | None = None,
    save_on_quit: str | None = None,
    where_below: bool = False,
) -> tuple[Part, ...]:
    """The status line as MarkupLine parts: balanced markup fragments that repeat from step to step
    (parsed once each), and the turn's numbers as literal styled text (never parsed).

    `width`: the cells the line has. What follows the turn number may be cut at the edge (the model goes
    first, as before); when the turn number itself would be, the line is laid out for the width: the
    name shortened or left out, the turn before a disconnected agent's banner, the count left out last.
    At 40 columns a recording's name pushed the turn number off the edge.
    `save_on_quit`: the file `attach --record` writes what was received to when the inspector is left:
    the end's banner said "press s to save" over a session that is saved anyway.
    `where_below`: a disconnected agent's banner leaves out where the session is (the file it names), which
    the line under it says whole (ended_where_line)."""
    h, tl = view.source.header, view.timeline
    live = view.source.kind == "live"
    if live:
        # PID.SESSION for one conversation of a process that serves several (a proxy's, a served fork's):
        # "pid 19439" alone did not say whether it was the parent or its child.
        session = f".{h['session']}" if h.get("session") is not None else ""
        # Once the agent is gone the line no longer says LIVE in green beside the red "Agent disconnected".
        kind = "[bold $success]● LIVE[/]" if disconnected is None else "[bold $text-muted]○ ENDED[/]"
        name = f"pid {h.get('pid', '?')}{session}"
    else:
        kind, name = "[bold $primary]REPLAY[/]", str(h.get("path", "")).rsplit("/", 1)[-1]
    origin = f"{kind} {literal(name if live else one_line(short_name(name)))}"
    model_name = one_line(str(h.get("model", "")))
    provider = provider_label(model_name, str(h.get("provider", "")))

    def model_markup(name: str, with_provider: bool = True) -> str:
        said = f" · {literal(one_line(provider))}" if with_provider else ""
        return f"[$text-muted]{literal(name)}{said}[/]"

    model = model_markup(model_name)
    # The provider its model's name already says ("claude-…" · anthropic): the first to give way to the
    # model on a narrow line. "openai wire" and bedrock say what the name does not.
    implied = provider == h.get("provider") and provider in OWN_MODELS
    if failed is not None:
        return (f"{origin} [bold $text on $error] cannot read it: {literal(failed)} [/]",)
    damage = f"  [$warning]⚠ {literal(str(h['damage']))}[/]" if h.get("damage") else ""
    if not len(tl):
        return (f"{origin}  {model}  [$text-muted]loading…[/]{damage}",)
    trace = tl.trace(index) or tl.traces[-1]
    number: Part = (str(trace["turn"]), "bold")
    count: Part = (f"({index + 1}/{len(tl)})", "$text-muted")
    rate = f"{SPEEDS[speed]:g}×"
    mode = f"[bold $accent]▶ playing {rate}[/]" if playing else f"[$text-muted]⏸ {rate}[/]"
    following = live and disconnected is None and not playing and tl.follow
    if following:
        # The view moves with each turn that arrives: "⏸ 1×  following newest" put a pause sign on it.
        # The speed is play's alone (space), so it goes too.
        mode = "[$success]following newest[/]"
    # `saved_turns`: the turns the file `s` wrote holds (None: not known, as before). A save made while the
    # agent ran holds the turns received by then: "saved to FILE" beside "400 turns kept", once the agent
    # had ended, said the file held all 400 when it held the 386 of the save.
    banner_path = ""  # the path the disconnected banner names (shortened in it when the line is too long)
    if disconnected is not None:
        where, banner_path = ended_where(view, saved_to, saved_turns, save_on_quit)
        if where_below:  # the line under this one says where, whole: the banner names no path
            where, banner_path = "", ""

        # A `cp-inspect run`'s agent that finished (inspector.proxy_cli.agent_ended) is not one that went
        # away: "Agent disconnected" in red over a run that ended well read as a failure.
        done = disconnected == FINISHED
        head, colour = ("Agent exited", "$success") if done else ("Agent disconnected", "$error")
        if disconnected in (EXITED, SESSION_ENDED):  # gone, its status not known: neither success nor a
            # lost connection
            head, colour = ("Agent exited" if disconnected == EXITED else "Session ended"), "$primary"
        head = failed_head(disconnected) or head  # a failure, said as such (in the error colour)

        def banner(path: str, short: bool = False) -> str:
            # `short`: without the count of turns kept, which the turn's "(i/N)" beside it says too, and
            # "kept at PATH" for "recording kept at PATH" (the path names a .cpsession): the ten cells go
            # to the path. At 80 columns the demo's end read "Agent exited; recording kept at /tm…psession",
            # a path that said nothing; now "Agent exited; kept at /tmp/cp…/demo.cpsession".
            form = where.removeprefix("recording ") if short else where
            told = form.format(literal(path)) if banner_path else form
            kept_n = "" if short else f" — {counted(len(tl), 'turn')} kept"
            return f"[bold $text on {colour}] {head}{kept_n}{'; ' if told else ''}{told} [/]"

        state = banner(banner_path)
    elif saved_to:
        held = f"{counted(saved_turns, 'turn')} " if saved_turns is not None else ""
        state = f"[$success]saved {held}to {literal(saved_to)}[/]"
    elif live and not following:
        state = "" if tl.follow else "[$warning]stepped back (End to follow)[/]"
    else:
        state = ""
    dropped = f"  [$warning]{counted(view.dropped, 'event')} dropped[/]" if view.dropped else ""
    history = getattr(view, "history", None)  # (a view from before it, as some callers build one)
    if history is not None and disconnected is None:
        # The turns before the newest still coming from the agent (stand-ins until then): how far.
        dropped += f"  [$text-muted]history {history[0]:,}/{history[1]:,}[/]"
    dropped += damage
    # A tapped client's journaling failures so far (the tap never raised them into the agent)
    n_err = trace.get("tap_errors") or 0
    if n_err:
        dropped += f"  [$warning]{n_err} tap error{'s' if n_err != 1 else ''}[/]"
    turn: tuple[Part, ...] = ("turn ", number, " ", count)
    if not live and width is not None:
        # A recording's name: whole when the line has room for it and everything after it; else what
        # leaves the rest whole, but not under NAME_CHARS (the model, at the end, is cut first then).
        whole = (f"{kind} {literal(one_line(name))}  ", *turn, f"  {mode}  {state}{dropped}  {model}")
        over = _cells(whole) - width
        if over <= 0:
            return whole
        room = max(len(name) - over, NAME_MIN)
        stem = name[: -len(SUFFIX)] if name.endswith(SUFFIX) else name
        origin = f"{kind} {literal(one_line(short_name(stem, room)))}"
    if disconnected is not None and width is not None:
        return _disconnected_line(origin, kind, turn, mode, state, f"{dropped}  {model}", width, banner,
                                  banner_path)
    if disconnected is not None:  # the banner goes first: the line said at once that the agent is gone
        full: tuple[Part, ...] = (f"{origin} {state}  ", *turn, f"  {mode}{dropped}  {model}")
    else:
        full = (f"{origin}  ", *turn, f"  {mode}  {state}{dropped}  {model}")
    # What follows the turn number is cut at the edge, and the cut's last cell is an ellipsis: the number
    # must end before that cell.
    if width is None or _cells(full[: full.index(number) + 1]) < width:
        # The turn number is on screen; what follows it is cut at the edge with an ellipsis, a routed
        # model's prefix first ("…/claude-3.5-sonnet · openai wire", not "openrouter/anthropic/cla…").
        return _model_fitted(full, model, model_name, model_markup, width, implied)
    # Narrower: the name is shortened to leave the turn on screen (12 cells at least, else it goes), then
    # the count goes.
    rest = f"  {mode}  {state}{dropped}  {model}"
    room = width - 1 - _cells((f"{kind}   ", *turn))  # kind, a space, the name, two spaces, the turn, "…"
    if live:
        shown = name if room >= len(name) else ""
    else:
        shown = one_line(short_name(name, min(room, NAME_CHARS))) if room >= 12 else ""
    start = f"{kind} {literal(shown)}  " if shown else f"{kind} "
    if _cells((start, *turn)) < width:
        return _model_fitted((start, *turn, rest), model, model_name, model_markup, width, implied)
    return _model_fitted((start, *turn[:2], rest), model, model_name, model_markup, width, implied)


def status_lines(
    view: SessionView,
    index: int,
    playing: bool,
    speed: int,
    disconnected: str | None,
    failed: str | None,
    saved_to: str | None,
    width: int | None,
    saved_turns: int | None = None,
    save_on_quit: str | None = None,
) -> tuple[tuple[Part, ...], str | None]:
    """The status line's parts at `width`, and the line under it (markup; None: no such line): once the
    agent has ended, where its session is, when the status line would show that path only cut. Then the
    banner above names no path (it would say it twice)."""
    parts = status_parts(view, index, playing, speed, disconnected, failed, saved_to, width, saved_turns,
                         save_on_quit)
    if disconnected is None or failed is not None or width is None:
        return parts, None
    path = ended_where(view, saved_to, saved_turns, save_on_quit)[1]
    if not path or one_line(path) in assemble(parts).plain:
        return parts, None
    return (
        status_parts(view, index, playing, speed, disconnected, failed, saved_to, width, saved_turns,
                     save_on_quit, where_below=True),
        ended_where_line(view, saved_to, width, saved_turns, save_on_quit),
    )


def _model_fitted(
    parts: tuple[Part, ...],
    model: str,
    name: str,
    markup: Callable[[str, bool], str],
    width: int | None,
    implied: bool = False,
) -> tuple[Part, ...]:
    """`parts` (ending with the model's markup, `model`) fitted to `width`: the model's routing prefix left
    out as far as the line needs (panels.fmt.model_in); then, when the provider is `implied` by the model's
    name ("claude-…" at anthropic), the provider left out for the model whole; else the model's name cut
    at its end down to MODEL_MIN cells, its provider kept after it. A live agent's line at 80 columns cut
    "claude-sonnet-4-5-20250929 · anthropic" at the edge, "claude-sonnet-4-5-202509…": neither the model
    whole nor the provider (which says whether it ran at Anthropic or through the OpenAI wire)."""
    over = 0 if width is None else _cells(parts) - width
    last = parts[-1]
    if over <= 0 or not isinstance(last, str) or not last.endswith(model):
        return parts
    before = last[: len(last) - len(model)]
    if before.endswith(" " * 4):  # an empty state's gap ("following newest    model"): two of it go first
        before, over = before[:-2], over - 2
    room = cell_len(name) - over
    shown = model_in(name, max(1, room))
    with_provider = True
    if cell_len(shown) > room and implied:
        alone = _cells((markup(shown, True),)) - _cells((markup(shown, False),))  # " · anthropic"
        with_provider, room = False, room + alone
        shown = model_in(name, max(1, room))
    if cell_len(shown) > room >= MODEL_MIN:
        shown = fit_cells(shown, room)
    if shown == name and with_provider and before == last[: len(last) - len(model)]:
        return parts
    return (*parts[:-1], before + markup(shown, with_provider))


def _disconnected_line(
    origin: str,
    kind: str,
    turn: tuple[Part, ...],
    mode: str,
    state: str,
    tail: str,
    width: int,
    banner: Callable[[str, bool], str],
    path: str,
) -> tuple[Part, ...]:
    """A disconnected agent's line at `width`: the turn, its count and the play state always show, and
    the banner gives way to them. At 120 columns the banner ("... recording kept at /tmp/cp-demo-x/
    demo.cpsession") cut the line after "turn 12": stepping back and playing, a person saw neither where
    they were nor that it played. In turn: the line whole; the path named shortened in the middle (its end,
    the file's name, kept more of); then the name left out, the turn and play state first and the banner
    after them, shorter (the count kept is the turn's "(i/N)"), its path shortened to the room left or the
    banner cut at the edge; the count goes last. The whole line is in the tooltip and `?` (status_whole)."""

    def fit(parts: tuple[Part, ...], least: int) -> tuple[Part, ...] | None:
        """`parts` with the banner (its second part) naming the path shortened so that all up to the play
        state ends before the edge's ellipsis cell; None when `least` characters of it would not be left."""
        over = _cells(parts[: parts.index(f"  {mode}") + 1]) - width + 1
        if over <= 0:
            return parts
        if not path:  # (a banner naming no path: without its count, which the turn's "(i/N)" says, the
            # source's name may fit: "○ ENDED pid 27513.1  Agent ended by SIGKILL  turn 3 (4/4)")
            shorter = (parts[0], banner(path, True), *parts[2:])
            return shorter if _cells(shorter[: shorter.index(f"  {mode}") + 1]) < width else None
        if len(path) - over < least:
            return None
        return (parts[0], banner(short_name(path, len(path) - over, head_share=1 / 3), False), *parts[2:])

    # The banner first, after the source's name: it says at once that the agent is gone. The name goes
    # before the path is shortened to less than PATH_CHARS_NAMED ("/tmp….cpsession" said nothing), and so
    # does the banner's first place, for the short banner after the play state, when the path would be
    # (at 100 columns "recording kept at /tmp/….cpsession", where the short banner has room for most of it).
    for start, least in ((f"{origin} ", PATH_CHARS_NAMED), (f"{kind} ", PATH_CHARS_NAMED)):
        laid = fit((start, state, "  ", *turn, f"  {mode}", tail), least)
        if laid is not None:
            return laid
    short = banner(path, True)
    for shown in (turn, turn[:2]):
        parts: tuple[Part, ...] = (f"{kind} ", *shown, f"  {mode}", "  ", short, tail)
        if _cells(parts[: parts.index(f"  {mode}") + 1]) >= width and shown is turn:
            continue  # no room for the count: it goes
        # The banner after the play state, its path shortened to end inside the line: with room for less
        # than PATH_CHARS_NAMED of it, the file's name alone when it fits ("…/demo.cpsession": what a
        # person looks for; "/tm…psession" named nothing); with no room for PATH_CHARS the banner is cut
        # at the edge.
        at = parts.index(short)
        over = _cells(parts[: at + 1]) - width + 1
        room = len(path) - over
        if path and over > 0 and room >= PATH_CHARS:
            name = path.rsplit("/", 1)[-1]
            if room < PATH_CHARS_NAMED and name != path and len(name) + 2 <= room:
                shown_path = f"…/{name}"
            else:
                shown_path = short_name(path, room, head_share=1 / 3)
            parts = (*parts[:at], banner(shown_path, True), tail)
        return parts
    raise AssertionError("unreachable")


def _cells(parts: tuple[Part, ...]) -> int:
    """The cells the parts take on screen (fragments are parsed once each: see markup_line.parse)."""
    return sum(parse(p).cell_length if isinstance(p, str) else cell_len(p[0]) for p in parts)


# Wider than any terminal: status_parts then lays the line out whole (the full name and path, no cut).
WHOLE = 1 << 20


def status_whole(
    view: SessionView,
    index: int,
    playing: bool,
    speed: int,
    disconnected: str | None,
    failed: str | None = None,
    saved_to: str | None = None,
    width: int | None = None,
    saved_turns: int | None = None,
    save_on_quit: str | None = None,
) -> list[str]:
    """What the status line says, whole, as plain lines: the line itself when `width` cuts it (the name
    or a path shortened, the end cut at the edge), and where the data comes from, which the line never
    shows whole (a recording's directory, a live agent's command). The status line's tooltip and the
    help screen show these; built only when asked (not on every step)."""
    whole = status_parts(view, index, playing, speed, disconnected, failed, saved_to, WHOLE, saved_turns,
                         save_on_quit)
    lines = [assemble(whole).plain] if width is None or _cells(whole) > width else []
    h = view.source.header
    if view.source.kind == "live":
        if h.get("command"):
            lines.append(f"command: {one_line(str(h['command']))}")
    elif h.get("path"):
        lines.append(f"file: {one_line(str(h['path']))}")
    branch = _branch(view)
    if branch is not None:
        from engine.capture.lineage import branch_note

        lines.append(f"this session: {branch_note(branch)}")
    unsure = _ambiguous(view, index)
    if unsure is not None:
        lines.append(f"this turn: {unsure}")
    return lines


def _ambiguous(view: SessionView, index: int) -> str | None:
    """The turn's note when other captured sessions fit its request as well (conversation_ambiguous: it
    was filed with the earliest), as explain prints it; None for any other turn."""
    from engine.capture.lineage import AMBIGUOUS_KEY

    if not 0 <= index < len(view.timeline.traces):
        return None
    trace = view.full_trace(index)
    unsure = trace.get(AMBIGUOUS_KEY) if trace is not None else None
    note = unsure.get("note") if isinstance(unsure, dict) else None
    return note if isinstance(note, str) and note else None


def _branch(view: SessionView) -> dict[str, Any] | None:
    """Where a captured session branched from another (its first turn's conversation_branch), or None:
    the Tier panel says it on that turn only; the tooltip and `?` say it on every turn."""
    from engine.capture.lineage import BRANCH_KEY

    if not view.timeline.traces:
        return None
    first = view.full_trace(0)
    branch = first.get(BRANCH_KEY) if first is not None else None
    return branch if isinstance(branch, dict) else None
