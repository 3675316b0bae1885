"""A tool call's input as Anthropic and Bedrock send it: the arguments' own literals where they are the
canonical ones (engine/providers/anthropic._one_member), else parsed and written again; and the ASCII
escaper engine.hashing.escaped uses. Both must give the very string the general way gives."""

from __future__ import annotations

import json
import os
import random
from json.encoder import encode_basestring
from pathlib import Path

import pytest

from engine.artifacts import ToolCall
from engine.hashing import canonical_json, escaped, json_string
from engine.providers.anthropic import _one_member, input_json


def reference(text: str) -> str:
    """The canonical JSON of the arguments' object (what input_json promises), computed the slow way."""
    return canonical_json(ToolCall("c", "bash", text).arguments_obj()).decode("utf-8")


CASES = [
    '{"command": "ls -la"}',
    '{"command":"ls -la"}',
    '{"command": "cd /testbed && cat > a.py << \'EOF\'\\nimport json\\nprint(\\"hi\\")\\n\\tx = 1\\nEOF"}',
    '{"command": "echo \\u0041"}',  # an escape canonical JSON does not write: \u0041 is "A"
    '{"command": "echo \\u00e9"}',
    '{"command": "echo \\u001b[0m"}',  # a control character: canonical writes \u001b itself
    '{"command": "a\\/b"}',  # \/ is "/"
    '{"command": "a\\\\u0041"}',  # an escaped backslash, then the text u0041
    '{"command": "a\\\\/b"}',
    '{"command": "a\\\\"}',
    '{"command": "back\\bform\\fcr\\r"}',
    '{"command": "caf\u00e9 \u4e2d\u6587 \U0001f600"}',
    '{"command": "\x7f del"}',
    '{"command": "raw\ttab"}',  # a raw control character: not JSON (strict)
    '{"command": ""}',
    '{"": "empty key"}',
    '{"k\\u0041": "escaped key"}',
    '{"k\\"q": "quote in key"}',
    '{"command": "a", "cwd": "/tmp"}',
    '{"cwd": "/tmp", "command": "a"}',
    '{"command": "a", "command": "b"}',
    '{"command": 1}',
    '{"command": "a" }',
    '{ "command": "a"}',
    '{"command" : "a"}',
    '{"command":  "a"}',
    '{"command": "a"} ',
    ' {"command": "a"}',
    '{"command": "a"}}',
    '{"command": "a",}',
    '{"command": "a\\"}',
    '{"command": "a"',
    '{"command": "a\\x"}',
    '{"command": null}',
    '{"command": ["a"]}',
    '{"a": {"b": "c"}}',
    "[1, 2]",
    "not json",
    "{}",
    '{"command": "NaN"}',
    '{"n": NaN}',
]


@pytest.mark.parametrize("text", CASES)
def test_the_same_string_as_the_general_way(text: str) -> None:
    assert input_json(ToolCall("c", "bash", text)) == reference(text)


def test_the_usual_command_takes_its_literal() -> None:
    """An agent's `{"command": ...}` is answered from its own literals (the general way parses and
    escapes again), and those literals are what the general way writes."""
    text = '{"command": "grep -n \\"def \\" a.py\\nsed -n 1,20p a.py"}'
    got = _one_member(text)
    assert got == '{"command":"grep -n \\"def \\" a.py\\nsed -n 1,20p a.py"}'
    assert got == reference(text)
    for text in (
        '{"command": "echo \\u0041"}',
        '{"command": "a\\/b"}',
        '{"a": "b", "c": "d"}',
        '{"k\\u0041": "v"}',
    ):
        assert _one_member(text) is None


def _random_literal(rng: random.Random) -> str:
    pieces = ['\\"', "\\\\", "\\n", "\\t", "\\r", "\\b", "\\f", "\\/", "\\u0041", "\\u00e9", "\\u001f", "a",
              " ", "'", "{", "}", ":", ",", "\u00e9", "\U0001f600", "\x7f", "u", "/", "\\\\u"]  # fmt: skip
    return "".join(rng.choice(pieces) for _ in range(rng.randrange(0, 12)))


def test_random_arguments() -> None:
    rng = random.Random(1235)
    for _ in range(3000):
        key = rng.choice(["command", "", "k\\u0041", "c\\\\d", "x y"])
        sep = rng.choice([": ", ":", " : ", ":  "])
        text = '{"' + key + '"' + sep + '"' + _random_literal(rng) + '"}'
        assert input_json(ToolCall("c", "bash", text)) == reference(text), text


def test_every_shared_trajectorys_arguments() -> None:
    root = Path(
        os.environ.get(
            "CONTEXTPIPE_TRAJECTORIES", Path(__file__).resolve().parents[2] / "shared" / "trajectories"
        )
    )
    files = sorted(root.glob("mini-swe-agent-pr816/*.traj.json"))
    if not files:
        pytest.skip("no shared trajectories here")
    seen = 0
    for f in files:
        data = json.loads(f.read_text())
        stack: list[object] = [data]
        while stack:  # every "arguments" string anywhere in the file (tool calls, as recorded)
            v = stack.pop()
            if isinstance(v, dict):
                args = v.get("arguments")
                if isinstance(args, str) and args:
                    assert input_json(ToolCall("c", "bash", args)) == reference(args)
                    seen += 1
                stack.extend(v.values())
            elif isinstance(v, list):
                stack.extend(v)
    assert seen > 100


@pytest.mark.parametrize(
    "text",
    ["", "plain", 'q"uote\\back\n\t\x00\x1f\x7f', "caf\u00e9", "\U0001f600", "a" * 300, "\u2028\u2029"],
)
def test_escaped_is_encode_basestring(text: str) -> None:
    assert escaped(text) == encode_basestring(text)
    assert json_string(text) == encode_basestring(text)
    long = text * 40 + "x" * 300
    assert json_string(long) == encode_basestring(long)
