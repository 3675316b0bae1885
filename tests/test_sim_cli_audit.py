"""simulate and diff as a user runs them, on bad or absurd input (sim25's audit).

- simulate --window 10 priced the pipeline and gates_closed columns (every request far past 10 tokens) as
  a 71% saving on the demo and said nothing; peers and paper already said when they passed the window.
- simulate FILE FILE (an overlapping glob, one path spelt two ways) simulated the file twice and counted
  it twice in the --policies totals; diff already refused that.
- diff's window=-3 was "not a whole number of tokens", and window=999999999999 was refused as a "budget
  limit" without naming window=.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from engine.sim.session_diff import DiffError, parse_side
from engine.sim.simulate import SimSettings, simulate_file
from inspector.cli import app

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "demo_sessions" / "scout-anthropic.cpsession"


def test_engine_columns_past_an_absurd_window_are_said_to_be_unsendable() -> None:
    r = simulate_file(DEMO, SimSettings(window=10))
    note = next(n for n in r.notes if n.startswith("requests larger than their window"))
    assert "pipeline 40 of 40 calls (window 10)" in note
    assert "gates_closed 40 of 40 calls (window 10)" in note


def test_engine_columns_within_the_window_say_nothing() -> None:
    r = simulate_file(DEMO, SimSettings())
    assert not any(n.startswith("requests larger than their window") for n in r.notes)


def test_one_recording_given_twice_is_exit_2_not_counted_twice(tmp_path: Path) -> None:
    rec = tmp_path / "a.cpsession"
    shutil.copy(DEMO, rec)
    other = tmp_path / "sub" / ".." / "a.cpsession"
    (tmp_path / "sub").mkdir()
    res = CliRunner().invoke(app, ["simulate", str(rec), str(other), "--policies", "all"])
    assert res.exit_code == 2, res.output
    assert f"{other} is given twice (as {rec} too): give each recording once" in res.output
    assert "SIMULATE" not in res.output  # nothing simulated first
    same = CliRunner().invoke(app, ["simulate", str(rec), str(rec)])
    assert same.exit_code == 2 and f"{rec} is given twice: give each recording once" in same.output


@pytest.mark.parametrize(
    "spec,msg",
    [
        ("window=-3", "'window=-3': window must be between 1 and 100,000,000 tokens, got -3"),
        ("window=0", "'window=0': window must be between 1 and 100,000,000 tokens, got 0"),
        ("window=999999999999", "window must be between 1 and 100,000,000 tokens, got 999999999999"),
        ("window=8k", "'window=8k': window must be a whole number of tokens, got '8k'"),
    ],
)
def test_diff_window_out_of_range_names_the_pair_and_the_range(spec: str, msg: str) -> None:
    with pytest.raises(DiffError) as exc:
        parse_side(spec)
    assert msg in str(exc.value)


def test_diff_window_in_range_is_taken() -> None:
    assert parse_side("window=64000").overrides.window == 64000


# ------------------------------------------------------------------------------------------ forks
# - a sub-agent's recording given as the parent said only "has no recorded forks ... or name the children";
# - children named on the command line that leave out forks the parent recorded priced the smaller tree as
#   the whole run, with no word of the ones left out.


def test_forks_of_a_sub_agents_recording_says_to_give_its_parent_first(tmp_path: Path) -> None:
    from tests.support.fork_tree import run_tree

    parent, kids = run_tree(tmp_path, "anthropic")
    res = CliRunner().invoke(app, ["forks", str(kids[0])])
    assert res.exit_code == 2, res.output
    assert f"{kids[0]} is a sub-agent's recording (forked from session " in res.output
    assert f"at turn 2): give its parent's recording first, e.g. cp-inspect forks PARENT.cpsession {kids[0]}" in (
        res.output
    )


def test_forks_says_which_recorded_forks_the_named_children_leave_out(tmp_path: Path) -> None:
    from tests.support.fork_tree import run_tree

    parent, kids = run_tree(tmp_path, "anthropic")
    res = CliRunner().invoke(app, ["forks", str(parent), str(kids[0])])
    assert res.exit_code == 0, res.output
    assert (
        f"warning: {parent} forked 1 sub-agent not given ({kids[1].name}): left out of the tree and of the "
        "totals (name no children to price every recorded fork)"
    ) in res.output
    every = CliRunner().invoke(app, ["forks", str(parent), *map(str, kids)])
    assert every.exit_code == 0 and "warning" not in every.output


# ------------------------------------------------------------------------------------------ diff of two runs
# Two recordings of different work diffed turn by turn read as a configuration change: dschat against an
# OpenHands run said only "model changed" on every turn and "+395%" on the totals.


def _openhands(path: Path, task: str, system: str = "You are a careful engineer. ") -> Path:
    import json

    msgs: list[dict[str, object]] = [
        {"role": "system", "content": system * 40},
        {"role": "user", "content": task},
    ]
    for k in range(3):
        msgs.append({"role": "assistant", "content": f"step {k}"})
        msgs.append({"role": "user", "content": f"observation {k}\n" * 20})
    tool = {"type": "function", "function": {"name": "execute_bash", "description": "Run a command.",
                                             "parameters": {"type": "object", "properties": {}}}}
    path.write_text(json.dumps({"messages": msgs, "tools": [tool], "run_id": "gpt-4o-2024-08-06_maxiter_30_N_v1"}))
    return path


def _imported(tmp_path: Path, name: str, task: str, system: str = "You are a careful engineer. ") -> Path:
    from engine.importers import load
    from engine.importers.ingest import ingest

    pipe, _ = ingest(load(_openhands(tmp_path / f"{name}.json", task, system)), tmp_path / f"{name}.cpsession")
    pipe.close()
    return tmp_path / f"{name}.cpsession"


def test_diff_of_two_recordings_of_different_tasks_says_so_first(tmp_path: Path) -> None:
    a = _imported(tmp_path, "a", "Fix the failing test in tests/test_fields.py.")
    b = _imported(tmp_path, "b", "Add a --verbose flag to the CLI.")
    res = CliRunner().invoke(app, ["diff", str(a), str(b)])
    assert res.exit_code == 0, res.output
    notes = [ln.strip() for ln in res.output.splitlines() if ln.strip().startswith("note:")]
    assert notes and notes[0].startswith("note: the two recordings open with different tasks"), res.output
    md = CliRunner().invoke(app, ["diff", str(a), str(b), "--markdown"]).output
    assert "open with different tasks" in md


def test_diff_of_one_task_under_two_system_prompts_says_nothing_of_tasks(tmp_path: Path) -> None:
    a = _imported(tmp_path, "a", "Fix the failing test in tests/test_fields.py.")
    b = _imported(tmp_path, "b", "Fix the failing test in tests/test_fields.py.", system="You are terse. ")
    res = CliRunner().invoke(app, ["diff", str(a), str(b)])
    assert res.exit_code == 0, res.output
    assert "different tasks" not in res.output
    same = CliRunner().invoke(app, ["diff", "recorded", "window=3000", str(a)])
    assert same.exit_code == 0 and "different tasks" not in same.output


# ------------------------------------------------------------------------------------------ no-cache models
# A model without a prompt cache (GPT-4: cached reads cost what input does) is simulated under "none"
# rules taken from its own price row; the rules/prices mismatch note took "none" for a provider and told
# the user to choose "--provider openai or a model with none prices (--model)" (every SWE-agent GPT-4 import).


def test_a_model_without_a_prompt_cache_is_not_called_a_rules_mismatch() -> None:
    r = simulate_file(DEMO, SimSettings(model="gpt-4"))
    assert r.cache_rules == "none"
    assert not any("none prices" in n or "none cache rules applied at" in n for n in r.notes), r.notes
    # ... nor is "none" printed as if it were a provider's rules ("weigh compactions by none cache rules").
    assert not any("none cache rules" in n for n in r.notes), r.notes
    assert "engine policies weigh compactions by the input price alone (no prompt cache; price table: gpt-4)" in r.notes
    forced = simulate_file(DEMO, SimSettings(model="gpt-4", provider="anthropic"))
    assert any(n.startswith("anthropic cache rules applied at gpt-4 prices (openai)") for n in forced.notes)


# ------------------------------------------------------------------------------------------ price tables
# simulate read the price table per recording and said its faults as the first recording's
# ("FILE: price table ...: row ... lacks ..."), an unknown --model too; diff and forks, which have no
# --model, told the user to "choose one with --model".

ROW = {"provider": "openai", "input": 2.5, "output": 10, "cache_read": 1.25, "cache_write": 2.5, "as_of": "a",
       "source": "b"}


def test_simulate_says_a_bad_price_table_and_an_unknown_model_as_the_options_errors(tmp_path: Path) -> None:
    import json

    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"models": {"claude-sonnet-4": {"provider": "anthropic", "input": 3}}}))
    res = CliRunner().invoke(app, ["simulate", str(DEMO), "--prices", str(bad)])
    assert res.exit_code == 2
    assert res.output.startswith(f"cp-inspect: --prices: price table {bad}: row 'claude-sonnet-4' lacks output")
    res = CliRunner().invoke(app, ["simulate", str(DEMO), "--model", "gpt-9"])
    assert res.exit_code == 2 and res.output.startswith("cp-inspect: --model: cannot price model 'gpt-9'")
    res = CliRunner().invoke(app, ["simulate", str(DEMO)], env={"CONTEXTPIPE_PRICES": str(bad)})
    assert res.exit_code == 2 and res.output.startswith("cp-inspect: $CONTEXTPIPE_PRICES: price table")


@pytest.mark.parametrize("command", ["diff", "forks"])
def test_diff_and_forks_do_not_offer_a_model_option_they_lack(tmp_path: Path, command: str) -> None:
    import json

    from tests.support.fork_tree import run_tree

    other = tmp_path / "other.json"
    other.write_text(json.dumps({"models": {"gpt-4o": ROW}}))
    parent, _ = run_tree(tmp_path, "anthropic")
    args = ["recorded", "window=5000", str(parent)] if command == "diff" else [str(parent)]
    res = CliRunner().invoke(app, [command, *args, "--prices", str(other)])
    assert res.exit_code == 2, res.output
    assert "cannot price model 'claude-sonnet-4'" in res.output and "--model" not in res.output
    assert "give it with --prices FILE or $CONTEXTPIPE_PRICES" in res.output


def test_simulate_json_of_a_recording_cut_short_says_so_in_its_notes(tmp_path: Path) -> None:
    import json

    cut = tmp_path / "cut.cpsession"
    cut.write_bytes(DEMO.read_bytes()[:30000])
    res = CliRunner().invoke(app, ["simulate", str(cut), "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["turns"] < 40
    assert any(
        n.startswith("recording cut short: last frame at offset") and n.endswith("the figures are of the turns before the cut")
        for n in doc["notes"]
    ), doc["notes"]


# ------------------------------------------------------------------------------------------ diff config files
# A .toml/.json side: `reorder = "off"` was bool("off") = True (the gate left on, the diff empty); a
# threshold that is not a number, or gates/thresholds that are not tables, were tracebacks; window = true
# was a window of 1 token.


def test_a_config_files_gate_words_mean_what_the_command_lines_do(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('[gates]\nreorder = "off"\ndrop_rounds = false\nspill = "on"\n')
    ov = parse_side(str(cfg)).overrides
    assert ov.gates == {"reorder": False, "drop_rounds": False, "spill": True}
    assert ov.gates == parse_side("gate.reorder=off,gate.drop_rounds=off,gate.spill=on").overrides.gates


@pytest.mark.parametrize(
    "text,msg",
    [
        ('[gates]\nreorder = "maybe"\n', "gate reorder must be true/false (or on/off), got 'maybe'"),
        ('[thresholds]\ntrim = "abc"\n', "threshold trim must be a number (a fraction of the window), got 'abc'"),
        ('gates = "x"\n', "gates must be a table of NAME = value, got 'x'"),
        ("thresholds = 5\n", "thresholds must be a table of NAME = value, got 5"),
        ("window = true\n", "window must be a positive number of tokens, got True"),
        ("window = 999999999999\n", "window must be between 1 and 100,000,000 tokens"),
    ],
)
def test_a_bad_config_file_value_is_one_line_naming_the_file(tmp_path: Path, text: str, msg: str) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(text)
    res = CliRunner().invoke(app, ["diff", "recorded", str(cfg), str(DEMO)])
    assert res.exit_code == 2, res.output
    assert res.output.startswith(f"cp-inspect: {cfg}: {msg}"), res.output


# ------------------------------------------------------------------------------------------ unnamed models
# An import whose source names no model (SWE-agent's demonstrations) is recorded as 'unknown'; simulate
# answered with the whole price table ("not in prices.json. Known models: ..."), and diff did too without
# saying which recording's model it was.


def _unnamed(tmp_path: Path) -> Path:
    import json

    from engine.importers import load
    from engine.importers.ingest import ingest

    src = tmp_path / "demo.traj"
    src.write_text(json.dumps({
        "trajectory": [
            {"action": "ls", "observation": "a.py", "response": "Listing.", "thought": "Listing."},
            {"action": "cat a.py", "observation": "print(1)", "response": "Reading.", "thought": "Reading."},
        ],
        "history": [
            {"role": "system", "content": "You are an agent."},
            {"role": "user", "content": "Find the flag."},
            {"role": "assistant", "content": "Listing.\n```\nls\n```"},
            {"role": "user", "content": "a.py"},
            {"role": "assistant", "content": "Reading.\n```\ncat a.py\n```"},
            {"role": "user", "content": "print(1)"},
        ],
        "info": {},
    }))
    pipe, _ = ingest(load(src), tmp_path / "u.cpsession")
    pipe.close()
    return tmp_path / "u.cpsession"


def test_a_recording_that_names_no_model_says_so_and_what_to_do(tmp_path: Path) -> None:
    rec = _unnamed(tmp_path)
    res = CliRunner().invoke(app, ["simulate", str(rec)])
    assert res.exit_code == 2, res.output
    assert "cannot price model 'unknown': the recording does not name the model that served it" in res.output
    assert "Choose the model to price it as with --model M" in res.output and "Known models" not in res.output
    res = CliRunner().invoke(app, ["diff", str(DEMO), str(rec)])
    assert res.exit_code == 2, res.output
    assert res.output.startswith(f"cp-inspect: {rec}: cannot price model 'unknown'") and "--model M (cp-inspect import" in (
        res.output
    )
    assert CliRunner().invoke(app, ["simulate", str(rec), "--model", "gpt-4o"]).exit_code == 0


def test_simulate_says_out_of_order_thresholds_as_the_options_error() -> None:
    res = CliRunner().invoke(app, ["simulate", str(DEMO), "--threshold", "trim=2"])
    assert res.exit_code == 2, res.output
    # It was "FILE: invalid thresholds ...", as if the recording were at fault.
    assert res.output.startswith("cp-inspect: --threshold: invalid thresholds {'trim_schemas': 2.0}: tier thresholds")
