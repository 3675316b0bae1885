"""`cp-inspect top` with a standalone proxy's conversations beside an agent's own probe: each conversation
under the opening of its first message and the process that made its calls, or "unknown agent" when the
proxy could not tell (AgentInfo.label, engine/probe/discover.py); an agent of its own under its command.
Fixed rows (the watcher's figures as the real watcher builds them), so the snapshot is byte-stable."""

from __future__ import annotations

from pathlib import Path

from engine.fleet import AgentRow, AgentStats
from engine.probe.client import AgentInfo
from engine.probe.watch import FleetWatcher
from inspector.top_app import TopApp

PROXY = "python -m inspector.cli proxy --port 8080"
INFOS = [
    AgentInfo(
        4100,
        "python agent.py --task parser",
        "claude-sonnet-4",
        "anthropic",
        12,
        Path("a"),
        session=1,
        client="pid 4242",
        opening="Fix the parser bug in tokens.py, then run the tests",
    ),
    AgentInfo(
        4100,
        PROXY,
        "gpt-4o",
        "openai",
        3,
        Path("b"),
        session=2,
        client="unknown",
        opening="Write the release notes for 2.1",
    ),
    AgentInfo(5200, "python my_agent.py --config long.yaml", "deepseek-chat", "deepseek", 40, Path("c")),
]


class FixedFleet(FleetWatcher):
    """A watcher whose agents are the rows above (never started: nothing is scanned)."""

    def __init__(self) -> None:
        super().__init__(Path("/nonexistent"), clock=lambda: 1000.0)

    def snapshot(self) -> list[AgentRow]:
        rows = []
        for i, info in enumerate(INFOS):
            stats = AgentStats(
                info.target, info.pid, info.session, info.label, info.model or "", info.provider or ""
            )
            stats.turns, stats.cost_usd = info.turns or 0, 0.01 * (i + 1)
            rows.append(stats.row(1000.0))
        return rows


def test_labels() -> None:
    assert [i.label for i in INFOS] == [
        "\u201cFix the parser bug in tokens.py, then run the tests\u201d · python agent.py --task parser",
        "\u201cWrite the release notes for 2.1\u201d · unknown agent",
        "python my_agent.py --config long.yaml",
    ]


def test_top_conversations_snapshot(snap_compare) -> None:
    assert snap_compare(TopApp(FixedFleet(), refresh_s=3600), terminal_size=(200, 12))
