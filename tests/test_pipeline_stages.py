"""Pipeline is one class made of its stages (engine/pipeline_state.py): the chain that module's docstring
names, from the bottom, is Pipeline's MRO, so a reader who follows it finds every method where it is; and
each stage module holds its stage's class only (its name in docs/PACKAGES.md's engine rows)."""

from __future__ import annotations

import re
from pathlib import Path

import engine.pipeline_state as state
from engine.pipeline import Pipeline

ROOT = Path(__file__).resolve().parent.parent


def _named_chain() -> list[str]:
    return re.findall(r"^    (pipeline\w*\.\w+) ", state.__doc__ or "", re.M)


def test_the_chain_the_state_module_names_is_pipelines_mro() -> None:
    mro = [f"{k.__module__.removeprefix('engine.')}.{k.__name__}" for k in reversed(Pipeline.__mro__)]
    assert mro[:2] == ["builtins.object", "pipeline_state.PipelineState"]
    assert _named_chain() == mro[2:]


def test_every_stage_is_named_on_the_packages_page() -> None:
    page = (ROOT / "docs" / "PACKAGES.md").read_text()
    for entry in _named_chain():
        module, cls = entry.split(".")
        assert f"`{module}.py`" in page, module
        if module != "pipeline":
            assert f"`{cls}`" in page, cls
