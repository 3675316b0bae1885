"""Importers: every real trajectory imports, counts and usage match the source, bad files fail clearly.

Real data is read from ../shared/trajectories (or $CONTEXTPIPE_TRAJECTORIES) and never copied into the
repository; tests that need it skip when it is absent. Malformed-input tests use the small hand-written
files in tests/fixtures/synthetic/.
"""

from __future__ import annotations

import json
import os
from functools import cache
from pathlib import Path

import pytest

from engine.importers import (
    FORMATS,
    CallRec,
    ImportedSession,
    ImportFormatError,
    load,
    sniff,
    validate_pairing,
)
from engine.importers.model import MessageRec, ToolCallRec
from engine.importers.swe_smith import parse_function_calls

SYNTH = Path(__file__).resolve().parent / "fixtures" / "synthetic"
TRAJ = Path(
    os.environ.get("CONTEXTPIPE_TRAJECTORIES")
    or Path(__file__).resolve().parents[2] / "shared" / "trajectories"
)
FOLDER_FORMAT = {
    "mini-swe-agent-pr816": "mini-swe-agent",
    "swe-agent": "swe-agent",
    "adp-swe-gym-openhands": "openhands",
    "adp-swe-smith": "swe-smith",
}


def _real_files() -> list[Path]:
    if not TRAJ.is_dir():
        return []
    return sorted(p for d in FOLDER_FORMAT for p in (TRAJ / d).glob("*") if p.is_file())


REAL = _real_files()
needs_real = pytest.mark.skipif(
    not REAL, reason=f"real trajectories not found at {TRAJ} (set CONTEXTPIPE_TRAJECTORIES)"
)


def _ids(paths: list[Path]) -> list[str]:
    return [p.name[:60] for p in paths]


@cache
def _load(path: Path) -> ImportedSession:
    return load(path)


@cache
def _raw(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _of(fmt: str) -> list[Path]:
    return [p for p in REAL if FOLDER_FORMAT[p.parent.name] == fmt]


# ------------------------------------------------------------------ every real file


@needs_real
@pytest.mark.parametrize("path", REAL, ids=_ids(REAL))
def test_real_file_imports_and_sniffs(path: Path) -> None:
    expected = FOLDER_FORMAT[path.parent.name]
    assert sniff(path) == expected
    s = _load(path)
    assert s.format == expected
    assert s.calls, "a trajectory with no model calls"
    for c in s.calls:
        assert isinstance(c, CallRec)
        assert all(isinstance(m, MessageRec) for m in c.messages)
        assert c.response is not None or c.error, "a call without response must say why"
    # explicit format gives the same result as sniffing
    again = load(path, expected)
    assert len(again.calls) == len(s.calls)


def _assert_prefix_consistent(s: ImportedSession, *, exact: bool = True) -> None:
    """Call k+1's prompt = call k's prompt + call k's response + what came back."""
    for k in range(len(s.calls) - 1):
        a, b = s.calls[k], s.calls[k + 1]
        assert len(b.messages) > len(a.messages), f"call {k + 1} prompt does not grow"
        head = b.messages[: len(a.messages)]
        if exact:
            # shared objects, not copies
            assert all(x is y for x, y in zip(head, a.messages, strict=True)), f"call {k + 1} rewrote history"
        else:
            assert [(m.role, m.tool_call_id) for m in head] == [(m.role, m.tool_call_id) for m in a.messages]
        if a.response is not None:
            assert b.messages[len(a.messages)] is a.response


# ------------------------------------------------------------------ mini-swe-agent


@needs_real
@pytest.mark.parametrize("path", _of("mini-swe-agent"), ids=_ids(_of("mini-swe-agent")))
def test_mini_swe_agent_calls_usage_and_history(path: Path) -> None:
    raw = _raw(path)
    s = _load(path)
    asst = [m for m in raw["messages"] if m["role"] == "assistant"]
    api_calls = raw["info"]["model_stats"]["api_calls"]
    assert len(s.calls) == api_calls  # includes a failed last call where the run died on one
    assert sum(c.error is None for c in s.calls) == len(asst)
    assert s.provider == "deepseek" and s.model.startswith("deepseek-")
    _assert_prefix_consistent(s)
    # prompt of call k is every message before the k-th assistant message
    first = s.calls[0].messages
    assert [m.role for m in first] == ["system", "user"]
    # real usage on every successful call, sums equal the source
    ok = [c for c in s.calls if c.error is None]
    assert all(c.usage is not None for c in ok)
    usages = [m["extra"]["response"]["usage"] for m in asst]
    assert sum(c.usage.input_tokens for c in ok if c.usage) == sum(u["prompt_tokens"] for u in usages)
    assert sum(c.usage.output_tokens for c in ok if c.usage) == sum(u["completion_tokens"] for u in usages)
    assert sum(c.usage.cache_read_tokens or 0 for c in ok if c.usage) == sum(
        u["prompt_cache_hit_tokens"] for u in usages
    )
    assert all(c.timestamp is not None for c in ok)
    assert [c.timestamp for c in ok] == sorted(c.timestamp for c in ok if c.timestamp is not None)
    assert all(c.tools and c.tools[0].name == "bash" for c in s.calls)
    for c in s.calls:
        assert validate_pairing(c) == []
    if "reasoner" in path.name:
        assert any(c.response and c.response.thinking for c in ok)


@needs_real
def test_mini_swe_agent_server_error_is_last_call() -> None:
    path = TRAJ / "mini-swe-agent-pr816" / "deepseek_reasoner_dev__pvlib__pvlib-python-1072.traj.json"
    if not path.exists():
        pytest.skip("edge-case file absent")
    s = _load(path)
    last = s.calls[-1]
    assert last.response is None and last.usage is None
    assert last.error and "InternalServerError" in last.error
    assert last.messages[-1].role == "tool"  # it was sent after the last tool result
    assert all(c.error is None for c in s.calls[:-1])
    assert s.meta["failed_calls"] == 1


# ------------------------------------------------------------------ swe-agent


@needs_real
@pytest.mark.parametrize("path", _of("swe-agent"), ids=_ids(_of("swe-agent")))
def test_swe_agent_calls(path: Path) -> None:
    raw = _raw(path)
    s = _load(path)
    assert len(s.calls) == sum(1 for m in raw["history"] if m["role"] == "assistant")
    assert all(c.usage is None for c in s.calls)  # SWE-agent keeps only totals
    assert s.meta["usage_totals"] == raw["info"].get("model_stats")
    fc = "function_calling" in path.name
    _assert_prefix_consistent(s, exact=not fc)
    if fc:
        # prompts come from the per-step rendered messages: old outputs are elided by the processor
        assert s.meta["prompt_source"].startswith("trajectory")
        assert any("Old environment output" in m.content for m in s.calls[-1].messages)
        assert all(c.response and c.response.tool_calls for c in s.calls)
        tool_msgs = [m for m in s.calls[-1].messages if m.role == "tool"]
        assert tool_msgs and all(m.tool_call_id for m in tool_msgs)
    else:
        assert all(m.role != "tool" for c in s.calls for m in c.messages)


# ------------------------------------------------------------------ openhands


@needs_real
@pytest.mark.parametrize("path", _of("openhands"), ids=_ids(_of("openhands")))
def test_openhands_calls(path: Path) -> None:
    raw = _raw(path)
    s = _load(path)
    assert len(s.calls) == sum(1 for m in raw["messages"] if m["role"] == "assistant")
    assert {t.name for t in s.calls[0].tools} == {t["function"]["name"] for t in raw["tools"]}
    assert s.model.startswith("gpt-4o") and s.provider == "openai"
    _assert_prefix_consistent(s)
    n_calls = sum(len(m.get("tool_calls") or []) for m in raw["messages"])
    assert sum(len(c.response.tool_calls) for c in s.calls if c.response) == n_calls
    for c in s.calls:
        assert validate_pairing(c) == []


@needs_real
def test_openhands_parallel_calls() -> None:
    path = TRAJ / "adp-swe-gym-openhands" / "python__mypy-15976_0.json"
    if not path.exists():
        pytest.skip("file absent")
    s = _load(path)
    assert max(len(c.response.tool_calls) for c in s.calls if c.response) == 4


# ------------------------------------------------------------------ swe-smith


@needs_real
@pytest.mark.parametrize("path", _of("swe-smith"), ids=_ids(_of("swe-smith")))
def test_swe_smith_calls_parsed(path: Path) -> None:
    raw = _raw(path)
    s = _load(path)
    asst = [m["content"] for m in raw["messages"] if m["role"] == "assistant"]
    assert len(s.calls) == len(asst)
    assert s.provider == "anthropic" and s.model.startswith("claude-3")
    _assert_prefix_consistent(s)
    for k, (c, text) in enumerate(zip(s.calls, asst, strict=True)):
        assert c.response is not None
        assert len(c.response.tool_calls) == text.count("<function="), f"call {k}"
        for n, tc in enumerate(c.response.tool_calls):
            assert tc.id == f"call_{k}_{n}"
            assert isinstance(json.loads(tc.arguments), dict)
            assert tc.name in ("bash", "str_replace_editor", "submit")
        assert "<function=" not in c.response.content
        assert s.meta["original_text"].get(k, text) == text
        assert validate_pairing(c) == []
    # observations became tool results; the prefix the model saw is kept
    tools = [m for m in s.calls[-1].messages if m.role == "tool"]
    assert tools and all(m.tool_call_id for m in tools)
    assert sum(m.content.startswith("OBSERVATION:") for m in tools) >= len(tools) - 1


def test_swe_smith_parser_shapes() -> None:
    prose, calls = parse_function_calls(
        "Edit:\n<function=str_replace_editor>\n<parameter=command>create</parameter>\n"
        "<parameter=file_text>\n  indented\n\n</parameter>\n</function>",
        turn=7,
    )
    assert prose == "Edit:"
    assert calls == [
        ToolCallRec(
            "call_7_0", "str_replace_editor", json.dumps({"command": "create", "file_text": "  indented\n"})
        )
    ]
    # no closing tags at all
    _, calls = parse_function_calls("<function=bash>\n<parameter=command>ls -la", turn=0)
    assert json.loads(calls[0].arguments) == {"command": "ls -la"}
    assert parse_function_calls("just text", 0) == ("just text", [])


def test_swe_smith_synthetic_unclosed_and_unpaired() -> None:
    s = load(SYNTH / "swe_smith_unclosed.json")
    assert s.format == "swe-smith" and len(s.calls) == 3
    c0 = s.calls[0].response
    assert c0 is not None and json.loads(c0.tool_calls[0].arguments) == {
        "command": "view",
        "path": "/testbed/a.py",
    }
    # two calls in one turn, one observation: the second call stays unpaired and is reported, not dropped
    assert validate_pairing(s.calls[2]) == ["messages[4]: tool call 'call_1_1' has no result"]
    assert s.meta["observations_without_prefix"] == 1


# ------------------------------------------------------------------ proxy-jsonl


def test_proxy_anthropic() -> None:
    s = load(SYNTH / "proxy_anthropic.jsonl")
    assert (s.format, s.provider, s.model) == ("proxy-jsonl", "anthropic", "claude-sonnet-4-5-20250929")
    assert len(s.calls) == 3
    c0, c1, c2 = s.calls
    assert [m.role for m in c0.messages] == ["system", "user"]
    assert c0.tools[0].name == "read_file" and c0.tools[0].parameters["required"] == ["path"]
    assert c0.response is not None and c0.response.thinking == "Read it first."
    assert c0.response.tool_calls == (ToolCallRec("toolu_01", "read_file", '{"path": "README.md"}'),)
    # Anthropic input_tokens excludes cached parts; the neutral figure is the whole prompt
    assert c0.usage is not None and (c0.usage.input_tokens, c0.usage.cache_write_tokens) == (1220, 1200)
    assert c1.usage is not None and (c1.usage.input_tokens, c1.usage.cache_read_tokens) == (1275, 1200)
    assert [m.role for m in c1.messages] == ["system", "user", "assistant", "tool"]
    assert c1.messages[3].tool_call_id == "toolu_01" and c1.messages[3].content == "# Helo world"
    assert c1.messages[2] is c0.response  # interned: same object across calls
    assert c1.timestamp == 1700000005.0  # ISO 8601 accepted
    assert validate_pairing(c1) == []
    assert c2.response is None and c2.error and "overloaded" in c2.error


def test_proxy_openai_and_deepseek() -> None:
    s = load(SYNTH / "proxy_openai.jsonl")
    assert s.format == "proxy-jsonl" and s.provider == "openai" and len(s.calls) == 3
    c0, c1, c2 = s.calls
    assert c0.response is not None and len(c0.response.tool_calls) == 2
    assert c0.messages[1].content == "List the files."  # list-of-parts content
    assert c1.usage is not None and c1.usage.cache_read_tokens == 1280
    assert [m.tool_call_id for m in c1.messages if m.role == "tool"] == ["call_a", "call_b"]
    assert validate_pairing(c1) == []
    assert c2.usage is not None and c2.usage.cache_read_tokens == 64  # DeepSeek field
    assert s.meta["providers_per_call"] == ["openai", "openai", "deepseek"]


def test_load_overrides_model_and_provider() -> None:
    s = load(SYNTH / "proxy_openai.jsonl", model="m", provider="p")
    assert (s.model, s.provider) == ("m", "p")


def test_mini_repr_strings_and_failed_call() -> None:
    s = load(SYNTH / "mini_repr_strings.traj.json")
    assert len(s.calls) == 2
    r = s.calls[0].response
    assert r is not None and r.tool_calls[0].name == "bash"
    assert s.calls[0].usage is not None and s.calls[0].usage.cache_read_tokens == 64
    assert s.calls[0].timestamp == 10.5
    assert s.calls[1].response is None and s.calls[1].error == "litellm.APIError: boom"


# ------------------------------------------------------------------ malformed input


@pytest.mark.parametrize(
    ("name", "fmt", "message"),
    [
        (
            "mini_bad_role.traj.json",
            None,
            "not a mini-swe-agent trajectory: messages[3].role is 'robot' (expected system/user/assistant/tool/exit)",
        ),
        (
            "mini_truncated.traj.json",
            None,
            "not a mini-swe-agent trajectory: invalid JSON at line 4, column 31",
        ),
        (
            "swe_agent_bad_role.traj",
            None,
            "not a swe-agent trajectory: history[2].role is 'robot' (expected system/user/assistant/tool)",
        ),
        (
            "openhands_bad_toolcall.json",
            None,
            "not an openhands trajectory: messages[2].tool_calls[0].function is missing",
        ),
        ("proxy_bad_line.jsonl", None, "not a proxy-jsonl trajectory: line 2: invalid JSON at column 78"),
        (
            "proxy_bad_role.jsonl",
            None,
            "not a proxy-jsonl trajectory: line 1: request.messages[1].role is 'robot' (expected system/user/assistant/tool)",
        ),
        (
            "unknown.json",
            None,
            "not a trajectory in any known format: top level is an object with keys ['bar', 'foo']",
        ),
        ("unknown.json", "mini-swe-agent", "not a mini-swe-agent trajectory: messages is missing"),
        # A file named as another format that it recognisably is not: the refusal names what it is
        ("proxy_openai.jsonl", "swe-agent", "not a swe-agent trajectory: the file is a proxy-jsonl trajectory"),
        ("swe_smith_unclosed.json", "swe-agent", "not a swe-agent trajectory: the file is a swe-smith trajectory"),
    ],
)
def test_malformed_messages(name: str, fmt: str | None, message: str) -> None:
    path = SYNTH / name
    with pytest.raises(ImportFormatError) as exc:
        load(path, fmt)
    assert str(exc.value) == f"{path}: {message}" or str(exc.value).startswith(f"{path}: {message}")
    assert exc.value.path == str(path)


def test_unknown_format_name() -> None:
    with pytest.raises(ValueError, match="unknown import format 'nope'"):
        load(SYNTH / "unknown.json", "nope")


def test_sniffing_synthetic() -> None:
    assert sniff(SYNTH / "proxy_anthropic.jsonl") == "proxy-jsonl"
    assert sniff(SYNTH / "mini_repr_strings.traj.json") == "mini-swe-agent"
    assert sniff(SYNTH / "swe_smith_unclosed.json") == "swe-smith"
    assert set(FORMATS) == {"mini-swe-agent", "swe-agent", "openhands", "swe-smith", "claude-trace", "proxy-jsonl"}


def test_validate_pairing_reports_both_directions() -> None:
    tc = ToolCallRec("a", "bash", "{}")
    msgs = (
        MessageRec("user", "hi"),
        MessageRec("assistant", "", tool_calls=(tc, ToolCallRec("b", "bash", "{}"))),
        MessageRec("tool", "out", tool_call_id="a"),
        MessageRec("tool", "stray", tool_call_id="zzz"),
    )
    call = CallRec(messages=msgs, response=None, tools=(), usage=None, timestamp=None, model=None)
    assert validate_pairing(call) == [
        "messages[3]: tool result for unknown tool call 'zzz'",
        "messages[1]: tool call 'b' has no result",
    ]


def test_engine_importers_do_not_import_ui() -> None:
    import ast

    root = Path(__file__).resolve().parents[1] / "engine" / "importers"
    for py in root.glob("*.py"):
        tree = ast.parse(py.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            for n in names:
                assert n.split(".")[0] not in {"textual", "typer", "inspector", "panels", "themes"}, py
