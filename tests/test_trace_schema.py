"""One definition of the turn trace: engine/trace_schema.py. A real trace has exactly its keys with
values of its types, and docs/TRACE_SCHEMA.md documents the same keys."""

from __future__ import annotations

import re
import types
import typing
from pathlib import Path
from typing import Any, NotRequired, get_args, get_origin, get_type_hints

from engine import Pipeline
from engine.trace_schema import Trace, TraceSection

DOC = Path(__file__).resolve().parents[1] / "docs" / "TRACE_SCHEMA.md"


def _built_traces() -> list[dict[str, Any]]:
    pipe = Pipeline("claude-sonnet-4", provider="anthropic", window=8000)
    pipe.identity("You are a careful agent.")
    pipe.goal("Fix the failing test.")
    pipe.add_tool("bash", "Run a shell command", {"type": "object", "properties": {"cmd": {"type": "string"}}})
    pipe.user("Please fix it.")
    traces = []
    for i in range(3):
        req = pipe.next_request()
        pipe.record_usage({"input_tokens": req.trace["final_tokens"], "output_tokens": 20})
        calls = pipe.assistant("Looking.", tool_calls=[{"id": f"c{i}", "name": "bash", "arguments": '{"cmd": "ls"}'}])
        pipe.tool_result(calls[0].id, "out\n" * 50)
        traces.append(req.trace)
    pipe.close()
    return traces


def _check(value: Any, hint: Any, where: str) -> None:
    origin = get_origin(hint)
    if hint is Any:
        return
    if origin in (typing.Union, types.UnionType):
        errors = []
        for option in get_args(hint):
            try:
                _check(value, option, where)
                return
            except AssertionError as exc:
                errors.append(str(exc))
        raise AssertionError(f"{where}: {value!r} matches none of {hint}: {errors}")
    if hint is type(None):
        assert value is None, f"{where}: expected None, got {value!r}"
    elif origin is list:
        assert isinstance(value, list), f"{where}: expected a list, got {type(value).__name__}"
        for i, item in enumerate(value):
            _check(item, get_args(hint)[0], f"{where}[{i}]")
    elif origin is dict:
        assert isinstance(value, dict), f"{where}: expected a dict"
    elif isinstance(hint, type) and typing.is_typeddict(hint):
        _check_typeddict(value, hint, where)
    elif hint is float:
        assert isinstance(value, int | float) and not isinstance(value, bool), f"{where}: {value!r} is not a number"
    else:
        assert isinstance(value, hint), f"{where}: {value!r} is not {hint.__name__}"


def _check_typeddict(value: Any, td: Any, where: str) -> None:
    assert isinstance(value, dict), f"{where}: expected an object"
    hints = get_type_hints(td)
    extra = set(value) - set(hints)
    assert not extra, f"{where}: keys not in {td.__name__}: {sorted(extra)}"
    missing = set(td.__required_keys__) - set(value)
    assert not missing, f"{where}: required keys missing: {sorted(missing)}"
    for key, item in value.items():
        _check(item, hints[key], f"{where}.{key}")


def test_a_built_trace_has_exactly_the_declared_keys_and_types() -> None:
    for trace in _built_traces():
        _check_typeddict(trace, Trace, f"turn {trace['turn']}")


def test_the_checker_rejects_a_renamed_key() -> None:
    trace = dict(_built_traces()[0])
    trace["final_token"] = trace.pop("final_tokens")
    try:
        _check_typeddict(trace, Trace, "renamed")
    except AssertionError as exc:
        assert "final_token" in str(exc)
    else:
        raise AssertionError("a renamed key passed the schema check")


def test_the_doc_lists_every_trace_and_section_key() -> None:
    doc = DOC.read_text(encoding="utf-8")
    block = doc.split("```", 2)[1]
    documented = set(re.findall(r'"([a-z_0-9]+)"\s*:', block))
    for td in (Trace, TraceSection):
        declared = set(get_type_hints(td))
        undocumented = declared - documented
        assert not undocumented, f"docs/TRACE_SCHEMA.md does not describe {td.__name__} keys {sorted(undocumented)}"
    top = set(re.findall(r'^ {1,2}"([a-z_0-9]+)"\s*:', block, re.M))
    unknown = top - set(get_type_hints(Trace))
    assert not unknown, f"docs/TRACE_SCHEMA.md documents top-level keys the trace does not have: {sorted(unknown)}"


def test_keys_a_later_phase_adds_are_optional_at_run_time() -> None:
    # `from __future__ import annotations` in trace_schema.py would silently make every key required.
    hints = get_type_hints(Trace, include_extras=True)
    marked = {k for k, v in hints.items() if get_origin(v) is NotRequired}
    assert marked and marked == set(Trace.__optional_keys__)
