"""place_markers (engine/optimize/markers.py): cache breakpoints per the provider's policy."""

from __future__ import annotations

from dataclasses import replace

from engine.optimize import markers
from engine.providers.policy import ANTHROPIC, OPENAI
from engine.types import CacheScope
from tests.optimize.fixtures import ctx, history, identity, rounds, text_section, tools

SMALL = replace(ANTHROPIC, min_cacheable_tokens=1)


def test_anthropic_gets_tools_system_and_tail_markers_within_the_cap() -> None:
    asm = (
        identity(),
        tools("bash"),
        text_section("repo", "r" * 100, CacheScope.GLOBAL),
        text_section("task", "t" * 100, CacheScope.SESSION),
        history(rounds(3)),
    )
    out = markers.apply(asm, ctx(asm, policy=SMALL))
    assert out.changed and out.asm is asm  # markers never change the content
    reasons = [m.reason for m in out.markers]
    assert "end of tools" in reasons and "end of system prompt" in reasons and "conversation tail" in reasons
    assert len(out.markers) <= SMALL.max_markers


def test_prefix_provider_gets_none() -> None:
    asm = (identity(), history(rounds(2)))
    out = markers.apply(asm, ctx(asm, policy=OPENAI))
    assert not out.changed and not out.markers


def test_latch_flip_suppresses_the_tail_marker() -> None:
    asm = (identity(), history(rounds(3)))
    out = markers.apply(asm, ctx(asm, policy=SMALL, latch_flipped=True))
    assert all(m.reason != "conversation tail" for m in out.markers)
    assert "suppressed" in out.detail


def test_short_prefixes_get_no_marker() -> None:
    asm = (identity("hi"), history(rounds(1)))
    out = markers.apply(asm, ctx(asm))  # Anthropic's 1,024-token minimum
    assert not out.markers
