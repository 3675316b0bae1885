"""Counting the work of an agent's steady turn: the Python frames and C calls a piece of code runs (under
sys.setprofile, this thread only), on a char-counted pipeline (tests/turn_session.py) past twelve steady
tool rounds. Shared by the tests that hold a steady turn's fixed work down (test_agent_call_work.py,
test_lane_turn_frames.py)."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable
from types import FrameType
from typing import Any

from tests.turn_session import char_pipe, tool_round


def _profiled(fn: Callable[[], Any], prof: Callable[[FrameType, str, Any], None]) -> None:
    sys.setprofile(prof)
    try:
        fn()
    finally:
        sys.setprofile(None)


def python_frames(fn: Callable[[], Any], *, basename: bool = False, frozen: bool = False) -> Counter[tuple[str, str]]:
    """(file, function) of every Python frame `fn` runs, counted; the file's name alone with `basename`.
    With `frozen`, a dataclass-generated __init__ (its file is "<string>") of a frozen dataclass counts as
    ("frozen", the class's name)."""
    seen: Counter[tuple[str, str]] = Counter()

    def prof(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call":
            code = frame.f_code
            if frozen and code.co_filename == "<string>" and code.co_name == "__init__":
                cls = type(frame.f_locals.get("self"))
                params = getattr(cls, "__dataclass_params__", None)
                if params is not None and params.frozen:
                    seen[("frozen", cls.__qualname__)] += 1
                    return
            seen[(code.co_filename.rsplit("/", 1)[-1] if basename else code.co_filename, code.co_name)] += 1

    _profiled(fn, prof)
    return seen


def c_calls(fn: Callable[[], Any]) -> Counter[str]:
    """The names of the C functions `fn` calls, counted."""
    seen: Counter[str] = Counter()

    def prof(frame: FrameType, event: str, arg: Any) -> None:
        if event == "c_call":
            seen[getattr(arg, "__qualname__", getattr(arg, "__name__", "?"))] += 1

    _profiled(fn, prof)
    return seen


def steady_pipe(usage: Callable[[int], Any]) -> Any:
    """A coding agent's pipeline (200k window, characters counted) after twelve tool rounds, each
    requested and its usage (`usage(t)`) recorded."""
    pipe = char_pipe(200_000)
    pipe.identity("You are a careful coding agent.")
    pipe.user("Fix the failing test.")
    for t in range(12):
        tool_round(pipe, t, f"output of step {t}\n" * 20)
        pipe.next_request()
        pipe.record_usage(usage(t))
    return pipe


def steady_turn(pipe: Any, usage: Any) -> Callable[[], None]:
    """One more such turn (a longer tool output), its usage `usage`: to be counted."""

    def turn() -> None:
        tool_round(pipe, 99, "the newest output\n" * 30)
        pipe.next_request()
        pipe.record_usage(usage)

    return turn
