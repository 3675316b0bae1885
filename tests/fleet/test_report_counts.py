"""`cp-inspect report`'s table prints token counts with the panels' one rounding rule (panels/token_counts.py,
which panels/fmt.py re-exports): its own formatter printed a session's 123,456-token prompt "123.5k" and
1,234,567 "1.23M" where the inspector and `top` print "123k" and "1.2M"."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from inspector.fleet_report import idle_row, render_table, totals_row
from panels.fmt import tok

ROOT = Path(__file__).resolve().parents[2]


def _row(name: str, prompt: int) -> dict:
    row = idle_row(Path(f"/fleet/{name}.cpsession"), {"model": "m"})
    row.update(basis="actual", calls=3, prompt_tokens=prompt)
    return row


def _prompt_column(line: str) -> str:
    return line[40:49].strip()  # SESSION (34) and CALLS (6), then PROMPT (9)


def test_the_tables_prompt_column_is_rounded_as_the_panels_round() -> None:
    prompts = [850, 9_996, 123_456, 1_234_567]
    rows = [_row(f"s{i}", n) for i, n in enumerate(prompts)]
    lines = render_table(rows, totals_row(rows)).splitlines()
    assert [_prompt_column(line) for line in lines[1:5]] == [tok(n) for n in prompts] == ["850", "10k", "123k", "1.2M"]
    assert _prompt_column(lines[5]) == tok(sum(prompts)) == "1.4M"  # the TOTAL row


def test_the_report_module_does_not_load_the_ui() -> None:
    # panels/fmt.py imports textual (~250 ms); the report prints plain text and imports the rule alone.
    code = "import sys, inspector.fleet_report; print('textual' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert out.stdout.strip() == "False", out.stderr
