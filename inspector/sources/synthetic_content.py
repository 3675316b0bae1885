"""Section contents and request bodies for `SyntheticSource`, shaped like the real thing.

Each kind gets the format the content viewer must highlight: Markdown prose, JSON schemas,
a Python traceback, and the omission markers / spill references that the optimizer leaves behind.
"""

from __future__ import annotations

import json

_TOOLS = [
    {"name": "read_file", "description": "Read a file from the workspace.",
     "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}},
    {"name": "run_tests", "description": "Run the test suite and return failures.",
     "input_schema": {"type": "object", "properties": {"pattern": {"type": "string"},
                                                       "timeout_s": {"type": "integer", "default": 60}}}},
    {"name": "apply_patch", "description": "Apply a unified diff.",
     "input_schema": {"type": "object", "properties": {"diff": {"type": "string"}}, "required": ["diff"]}},
]


def _find(trace: dict, section_id: str) -> dict:
    for s in trace["sections"]:
        if s["id"] == section_id:
            return s
    raise KeyError(section_id)


def section_text(trace: dict, section_id: str) -> str:
    s = _find(trace, section_id)
    turn, form, omitted = trace["turn"], s["form"], s["omitted"]
    if form == "dropped":
        return f"(section dropped on turn {turn}: {s['name']} is not in the request)"
    if form == "spilled":
        return (f"[spilled: {s['planned']} tokens -> spill://artifacts/{s['sha256'][:16]}]\n"
                "Use the read_artifact tool with this reference to load the full documents.\n")
    if form == "cleared":
        return f"[tool result cleared: {s['planned']} tokens, original kept as spill://results/{s['sha256'][:12]}]\n"
    kind = s["kind"]
    if kind == "tools":
        tools = _TOOLS if form == "full" else [{k: v for k, v in t.items() if k != "description"} for t in _TOOLS]
        body = json.dumps(tools, indent=2)
        return body if not omitted else body + f"\n[...{omitted} tokens omitted...]"
    if kind == "tool_results":
        return (f"$ pytest tests/test_parser.py -x   # turn {turn}\n"
                "Traceback (most recent call last):\n"
                '  File "parser.py", line 42, in parse\n'
                "    return self._expr(tokens.pop(0))\n"
                "IndexError: pop from empty list\n")
    if kind == "history":
        head = f"[...{omitted} tokens omitted...]\n\n" if omitted else ""
        rounds = [f"### Round {r}\n**user:** fix the failing parser test (step {r})\n"
                  f"**assistant:** calling `run_tests` with pattern `test_parser`\n"
                  for r in range(max(0, turn - 3), turn + 1)]
        return head + "\n".join(rounds)
    if kind == "latch":
        return json.dumps({"model_config": {"temperature": 0.2 if turn < 10 else 0.0, "max_tokens": 1200}}, indent=2)
    if kind == "retrieval":
        return "# parser.py (retrieved)\n\n```python\ndef parse(tokens):\n    return Parser(tokens).expr()\n```\n"
    if kind == "identity":
        return "# Identity\n\nYou are **RefactorBot**, a careful coding agent.\n- Prefer small diffs.\n- Run tests.\n"
    if kind == "message":
        return f"Turn {turn}: please continue with the parser fix."
    return f"# {s['name']}\n\n- item one\n- item two (turn {turn})\n"


def request_body(trace: dict) -> str:
    """The serialized request, Anthropic-shaped, with cache_control where the markers are."""
    marked = {m["section"] for m in trace["markers"]}
    blocks = []
    for s in trace["sections"]:
        if s["form"] == "dropped":
            continue
        block: dict = {"type": "text", "text": section_text(trace, s["id"])[:400]}
        if s["id"] in marked:
            block["cache_control"] = {"type": "ephemeral"}
        blocks.append(block)
    body = {"model": trace["model"], "max_tokens": trace["reserves"]["response"],
            "system": blocks[:3], "messages": [{"role": "user", "content": blocks[3:]}]}
    return json.dumps(body, indent=2)
