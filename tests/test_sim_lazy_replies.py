"""simulate counts a turn's recorded reply only for a turn whose source kept no usage.

The reply's engine tokens are the output tokens of such a turn (tests/test_sim_output_tokens.py holds
those figures); a turn with provider usage bills its recorded output_tokens, so its reply needs no
count. The build pass measured every reply's parts as it folded them, a second time after the builds
measured the same message (~2% of a 930-turn simulate); now it keeps the reply and counts it when a
turn without usage asks.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from engine.artifacts import Message
from engine.assembly import Measure
from engine.pipeline import Pipeline
from engine.sim.simulate import SimSettings, simulate_file


def _session(path: Path, turns: int) -> list[Message]:
    """A recorded agent loop with provider usage on every turn; returns its replies."""
    now = [1_000.0]
    pipe = Pipeline("deepseek-chat", "deepseek", 128_000, record=path, serve=False, clock=lambda: now[0])
    pipe.identity("You are a careful coding agent.")
    pipe.add_tool(
        "bash", "Run a shell command", {"type": "object", "properties": {"cmd": {"type": "string"}}}
    )
    pipe.user("Fix the failing test in tests/test_io.py.")
    for t in range(turns):
        req = pipe.next_request()
        pipe.record_usage({"prompt_tokens": req.trace["final_tokens"], "completion_tokens": 40 + t})
        now[0] += 5
        args = json.dumps({"cmd": f"sed -n 1,20p src/module_{t}.py"})
        calls = pipe.assistant(
            f"Step {t}: read module {t}.", [{"id": f"c{t}", "name": "bash", "arguments": args}]
        )
        pipe.tool_result(calls[0].id, f"line {t}\n" * (5 + t))
    replies = [m for m in pipe.history if m.role == "assistant"]
    pipe.close()
    return replies


def test_replies_of_turns_with_usage_are_not_counted_again(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    replies = _session(tmp_path / "s.cpsession", 6)
    reply_parts = {p.sha for m in replies for p in m.parts}
    sent = {p.sha for m in replies[:-1] for p in m.parts}  # the last reply is in no later request
    measured: Counter[str] = Counter()
    part = Measure.part

    def counting(self: Measure, p: object) -> int:
        sha = getattr(p, "sha", None)
        if sha in reply_parts:
            measured[sha] += 1
        return part(self, p)

    monkeypatch.setattr(Measure, "part", counting)
    r = simulate_file(tmp_path / "s.cpsession", SimSettings())
    # Every turn billed its recorded output tokens, not its reply's count.
    assert [t.output_tokens for t in r.policies["pipeline"].turns] == [40 + t for t in range(6)]  # type: ignore[union-attr]
    # Each reply part is measured once, by the build that first sends its message (Measure.item keeps
    # the message's total), and the last one never; the build pass counted every one again, for an
    # output figure nobody read.
    assert set(measured) == sent
    assert set(measured.values()) == {1}, measured
