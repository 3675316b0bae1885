"""add_source takes its enumerated options by name, as `kind` always did ("context"): scope="session"
raised a bare ValueError from int("session") inside the engine, and a misspelt name did not say what the
choices are. Anything unknown is a ConfigError naming the source, the option and the choices, raised
before anything is journaled."""

from __future__ import annotations

import pytest

from engine import CacheScope, ConfigError, Lifecycle, Pipeline, Priority


def _pipe() -> Pipeline:
    return Pipeline("claude-sonnet-4", window=8000)


def test_names_are_taken_in_any_case_and_mean_their_members() -> None:
    by_name, by_member = _pipe(), _pipe()
    by_name.add_source("docs", "context", text="the docs", scope="Global", priority="last_resort", lifecycle="static")
    by_member.add_source(
        "docs", "context", text="the docs", scope=CacheScope.GLOBAL, priority=Priority.LAST_RESORT,
        lifecycle=Lifecycle.STATIC,
    )  # fmt: skip
    for p in (by_name, by_member):
        p.user("hello")
    assert by_name.next_request().bytes == by_member.next_request().bytes


@pytest.mark.parametrize(
    ("option", "value", "choice"),
    [("scope", "sesion", "session"), ("priority", 9, "last_resort"), ("kind", "contxt", "working_memory"),
     ("lifecycle", "often", "per_turn")],
)  # fmt: skip
def test_an_unknown_value_is_a_config_error_that_lists_the_choices(option: str, value: object, choice: str) -> None:
    p = _pipe()
    kwargs: dict[str, object] = {"kind": "context", "text": "x", option: value}
    with pytest.raises(ConfigError) as info:
        p.add_source("notes", **kwargs)  # type: ignore[arg-type]
    message = str(info.value)
    assert "'notes'" in message and option in message and repr(value) in message and choice in message
    p.user("hello")  # nothing was registered: the request goes out without the source
    assert b"notes" not in p.next_request().bytes
