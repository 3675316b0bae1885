"""The paper baseline prices what the engine would send for the same content.

`simulate`'s as-sent column (the `paper` row of `--policies`) counts the agent's own requests from an
import's `actual` events; every other column counts requests the engine built. Both must count the same
content alike, or every engine column reads dearer (or cheaper) than the agent for nothing it did: until
the twenty-first session the as-sent column left tool descriptions out, and OpenHands' python__mypy-15976
read 1.057x the agent's tokens under every peer with no compaction at all.

Here each shared trajectory is rebuilt by the engine with every optimizer gate closed at a window nothing
is trimmed in: for an agent that only appended to its history (no cache break in its own requests), the
engine's requests carry the same content, so the two columns must agree to within the wire's framing
(the engine sends two consecutive user messages as one: 3 tokens). An agent that rewrote its own history
(SWE-agent's observation elision) sent less than it logged; it is left out, as the test says.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.importers import load
from engine.importers.ingest import ingest
from engine.sim.simulate import SimSettings, simulate_file

from .conftest import trajectory_files

FILES = trajectory_files()
pytestmark = pytest.mark.slow


@pytest.mark.parametrize(
    "path", FILES or [None], ids=[f"{p.parent.name}/{p.name[:48]}" for p in FILES] if FILES else ["absent"]
)
def test_engine_rebuild_prices_as_the_agent_sent(
    path: Path | None, trajectories_dir: Path, tmp_path: Path
) -> None:
    assert path is not None
    pipe, _ = ingest(load(path), tmp_path / "t.cpsession")
    pipe.close()
    # deepseek-chat prices: some trajectories name no model; the figures compared are token counts.
    r = simulate_file(
        tmp_path / "t.cpsession",
        SimSettings(window=10_000_000, gates={}, calibrate=False, model="deepseek-chat"),
    )
    sent, closed = r.policies["as_sent"], r.policies["gates_closed"]
    assert sent is not None and closed is not None and len(sent.turns) == len(closed.turns) > 0
    if sent.cache_break_causes:
        pytest.skip(
            f"the agent rewrote its own history ({sent.cache_break_causes}): it sent less than it logged"
        )
    ratio = closed.totals.input_tokens / sent.totals.input_tokens
    worst = max(abs(c.prompt_tokens - s.prompt_tokens) for s, c in zip(sent.turns, closed.turns, strict=True))
    assert abs(ratio - 1) < 0.005, (ratio, worst)
    # Turn by turn, too: no systematic per-request difference (the tools are in every request).
    assert worst <= max(32, sent.turns[-1].prompt_tokens // 500), (ratio, worst)
