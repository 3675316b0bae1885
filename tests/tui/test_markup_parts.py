"""A MarkupLine given parts (balanced markup fragments and literal styled text) shows the Content that
parsing the joined markup shows: the status line is built from parts so that a step parses nothing new."""

from __future__ import annotations

from types import SimpleNamespace

from hypothesis import given, settings
from hypothesis import strategies as st
from textual.content import Content
from textual.markup import MarkupError, escape

from inspector.status import status_markup, status_parts
from inspector.timeline import Timeline
from panels.markup_line import as_markup, assemble


def _escapes(text: str) -> bool:
    """Textual's escape() leaves some bracket runs ("[ [/]", "[/") that still parse as tags: the status
    line shows such a path wrongly either way (as one markup string it can even fail to parse), so the
    comparison is over texts that escape() makes literal."""
    try:
        return Content.from_markup(f"[bold]{escape(text)}[/] [bold]{escape(text)}[/]").plain == f"{text} {text}"
    except MarkupError:
        return False


TEXT = st.text(alphabet=st.sampled_from("ab [/]\\·$:x0"), max_size=12).filter(_escapes)


def _same(a: Content, b: Content) -> bool:
    return (a.plain, list(a.spans)) == (b.plain, list(b.spans))  # Content's == compares the text only


@settings(max_examples=300, deadline=None)
@given(
    live=st.booleans(), path=TEXT, model=TEXT, provider=TEXT, damage=st.one_of(st.none(), TEXT),
    turns=st.integers(0, 5), index=st.integers(0, 4), playing=st.booleans(), speed=st.integers(0, 6),
    disconnected=st.one_of(st.none(), TEXT), failed=st.one_of(st.none(), TEXT),
    saved_to=st.one_of(st.none(), TEXT), dropped=st.integers(0, 3), tap_errors=st.integers(0, 2),
    follow=st.booleans(), first_turn=st.integers(0, 10_000),
)
def test_status_parts_show_what_the_status_markup_shows(  # type: ignore[no-untyped-def]
    live, path, model, provider, damage, turns, index, playing, speed, disconnected, failed, saved_to,
    dropped, tap_errors, follow, first_turn,
) -> None:
    header = {"path": "/x/" + path, "model": model, "provider": provider, "pid": 7, "recording": path or None}
    if damage:
        header["damage"] = damage
    timeline = Timeline()
    timeline.traces = [{"turn": first_turn + i, "tap_errors": tap_errors} for i in range(turns)]
    timeline.follow = follow
    view = SimpleNamespace(source=SimpleNamespace(header=header, kind="live" if live else "file"),
                           timeline=timeline, dropped=dropped)
    args = (view, min(index, turns - 1), playing, speed, disconnected, failed, saved_to)
    parts = status_parts(*args)  # type: ignore[arg-type]
    assert as_markup(parts) == status_markup(*args)  # type: ignore[arg-type]
    assert _same(assemble(parts), Content.from_markup(status_markup(*args)))  # type: ignore[arg-type]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(
    st.sampled_from(["[bold]x[/]", "[$text-muted]a · b[/] ", "plain ", "[bold $primary]R[/] p", "  ", ""]),
    st.tuples(TEXT, st.sampled_from(["", "bold", "$text-muted", "bold $accent"])),
), min_size=1, max_size=8))
def test_parts_join_as_their_markup_parses(parts: list) -> None:  # type: ignore[type-arg]
    assert _same(assemble(parts), Content.from_markup(as_markup(parts)))


def test_a_different_part_is_noticed() -> None:
    a = assemble(["turn ", ("12", "bold")])
    assert not _same(a, assemble(["turn ", ("12", "italic")]))
    assert not _same(a, assemble(["turn ", ("13", "bold")]))
