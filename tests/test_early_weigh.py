"""early_weigh.EarlyRule answers what the early rule's weighing answers from scratch, on any figures.

The express lane weighs a candidate cut on every held turn over the target; it used to work out the
horizon (cachecost.remaining_turns) and the pay-back (cachecost.compacts_early, its CacheRules.cached and
turn_cost) from the rules each turn. EarlyRule keeps the rules' constants and does the same arithmetic;
these tests drive both with random figures and require the same answer every time (the lane then holds or
hands over on exactly the same turns: bench_engine.py --identity holds every request byte-identical).
"""

from __future__ import annotations

import math

from hypothesis import example, given, settings
from hypothesis import strategies as st

from engine.policy.cachecost import DEFAULTS, CacheRules, compacts_early, remaining_turns
from engine.policy.early_weigh import EarlyRule

# A weighing's figures, in EarlyRule.compacts' order: (turn, t1, trigger_tokens, n_raw, saves, kept, stable).
Figures = tuple[int, int, int, int, int, int, int]


def _from_scratch(rules: CacheRules, scale: float, rev2: bool, served: bool, figures: Figures) -> bool:
    """The lane's weighing as it was written before EarlyRule (and as cost_aware.run weighs a cut)."""
    turn, t1, trigger_tokens, n_raw, saves, kept, stable = figures
    growth = n_raw / max(1, turn)
    to_trigger = math.inf if growth <= 0 else max(0.0, (trigger_tokens - t1) / growth)
    if rev2:
        horizon, reach = remaining_turns(turn, scale, to_trigger)
    else:
        horizon, reach = min(float(max(1, turn)) * scale, to_trigger), 0.0
    return compacts_early(rules, saves, kept, stable, horizon, served, reach, growth, rev2)


# Around the cache rules' steps too (64-token units, OpenAI's 1,024 + 128, the 1,024-token minimum).
_STEPS = st.sampled_from([0, 63, 64, 65, 1_023, 1_024, 1_025, 1_151, 1_152, 1_153])
_TOKENS = st.one_of(st.integers(-50, 3_000), st.integers(-50, 300_000), _STEPS)


@settings(max_examples=3_000, deadline=None)
@given(
    name=st.sampled_from(sorted(DEFAULTS)),
    ratios=st.one_of(
        st.none(),
        st.tuples(
            st.floats(0.0, 1.5, allow_nan=False, allow_infinity=False),
            st.floats(0.0, 2.0, allow_nan=False, allow_infinity=False),
        ),
    ),
    scale=st.floats(0.01, 10.0, allow_nan=False, allow_infinity=False),
    rev2=st.booleans(),
    served=st.booleans(),
    figures=st.tuples(st.integers(-2, 5_000), _TOKENS, _TOKENS, st.integers(-10, 2_000_000), _TOKENS, _TOKENS, _TOKENS),
)
# Cases at the edges: no growth (to_trigger infinite), the trigger already passed (to_trigger 0), a
# request under the minimum cacheable prefix, revision 1's horizon capped by to_trigger.
@example("openai", None, 1.0, True, True, (12, 9_000, 27_000, 0, 2_000, 7_000, 3_000))
@example("anthropic", None, 1.0, True, False, (30, 28_000, 27_000, 90_000, 9_000, 19_000, 3_000))
@example("openai", None, 1.0, True, True, (30, 1_500, 27_000, 90_000, 200, 900, 300))
@example("deepseek", None, 0.5, False, True, (400, 20_000, 21_000, 900_000, 8_000, 12_000, 2_000))
def test_the_early_rule_answers_as_weighing_from_scratch(
    name: str,
    ratios: tuple[float, float] | None,
    scale: float,
    rev2: bool,
    served: bool,
    figures: Figures,
) -> None:
    rules = CacheRules(name, *(ratios if ratios is not None else DEFAULTS[name]))
    want = _from_scratch(rules, scale, rev2, served, figures)
    assert EarlyRule(rules, scale, rev2, served).compacts(*figures) == want


def test_the_figures_of_a_steady_run_cross_the_rule_both_ways() -> None:
    """A session-like run of figures (the request and its saving growing turn by turn) on which the
    answer changes from held to compact: the equality above is not only checked where both say no."""
    rules = CacheRules("anthropic", *DEFAULTS["anthropic"])
    rule = EarlyRule(rules, 1.0, True, True)
    answers = set()
    for turn in range(5, 400):
        t1 = 8_000 + 60 * turn
        saves = 40 * turn  # the cut deepens as the rounds behind it grow
        figures = (turn, t1, 120_000, 150 * turn, saves, t1 - saves, 2_500)
        got = rule.compacts(*figures)
        assert got == _from_scratch(rules, 1.0, True, True, figures)
        answers.add(got)
    assert answers == {True, False}
