"""Every dataclass in the project's packages has a docstring of its own.

Why a test: `@dataclass` gives a class without one a docstring built from `inspect.signature` (about
0.1 ms a class, at every import). With ~80 of them that was ~8 ms of every command's start-up, paid
for a text nobody reads; a written docstring costs nothing and says what the class is for.

Read from the source (every class a `@dataclass` or `@dataclasses.dataclass` decorates, nested ones
too), not by importing every module into the suite's process: the import took 4.5 s of CPU (the OTLP
exporter, litellm, every app) and left its objects in the process for the rest of the run. A subclass
of a dataclass that is not decorated itself gets no generated docstring, so it is not asked for one."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("engine", "inspector", "panels", "themes")


def _is_dataclass_decorator(node: ast.expr) -> bool:
    f = node.func if isinstance(node, ast.Call) else node
    return (isinstance(f, ast.Name) and f.id == "dataclass") or (
        isinstance(f, ast.Attribute) and f.attr == "dataclass"
    )


def _dataclasses(tree: ast.AST, prefix: str = "") -> list[tuple[str, ast.ClassDef]]:
    """(qualified name, class) of every class `tree` holds that @dataclass decorates, outside functions."""
    found: list[tuple[str, ast.ClassDef]] = []
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.ClassDef):
            name = prefix + node.name
            if any(_is_dataclass_decorator(d) for d in node.decorator_list):
                found.append((name, node))
            found += _dataclasses(node, name + ".")
        elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found += _dataclasses(node, prefix)
    return found


def test_every_dataclass_has_its_own_docstring() -> None:
    seen, missing = 0, []
    for top in PACKAGES:
        for path in sorted((ROOT / top).rglob("*.py")):
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            for name, cls in _dataclasses(ast.parse(path.read_text(), str(path))):
                seen += 1
                if ast.get_docstring(cls) is None:
                    missing.append(f"{module}.{name}")
    assert seen > 100  # (the walk found the packages' dataclasses)
    assert not missing, (
        "dataclasses without a docstring (write one; see this module's docstring): " + ", ".join(missing)
    )


def test_the_reading_finds_what_a_decorator_makes() -> None:
    tree = ast.parse(
        "from dataclasses import dataclass\nimport dataclasses\n"
        "@dataclass\nclass A:\n    x: int\n"
        "@dataclass(frozen=True, slots=True)\nclass B:\n    '''B.'''\n"
        "@dataclasses.dataclass\nclass C:\n    class D: ...\n"
        "class E:\n    @dataclass\n    class F:\n        '''F.'''\n"
        "if True:\n    @dataclass\n    class G: ...\n"
        "def f():\n    @dataclass\n    class H: ...\n"
        "class I(A): ...\n"
    )
    found = {name: ast.get_docstring(cls) for name, cls in _dataclasses(tree)}
    assert found == {"A": None, "B": "B.", "C": None, "E.F": "F.", "G": None}
