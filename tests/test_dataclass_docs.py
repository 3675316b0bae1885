"""Every dataclass in the project's packages has a docstring of its own.

Why a test: `@dataclass` gives a class without one a docstring built from `inspect.signature` (about
0.1 ms a class, at every import). With ~80 of them that was ~8 ms of every command's start-up, paid
for a text nobody reads; a written docstring costs nothing and says what the class is for."""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
import sys

PACKAGES = ("engine", "inspector", "panels", "themes")


def _modules() -> list[str]:
    names = []
    for top in PACKAGES:
        pkg = importlib.import_module(top)
        for info in pkgutil.walk_packages(pkg.__path__, top + "."):
            if not info.name.endswith("__main__"):  # (runs the CLI when imported)
                names.append(info.name)
    return names


def test_every_dataclass_has_its_own_docstring() -> None:
    missing = []
    for name in _modules():
        importlib.import_module(name)
        for obj in list(vars(sys.modules[name]).values()):
            if isinstance(obj, type) and dataclasses.is_dataclass(obj) and obj.__module__ == name:
                doc = obj.__dict__.get("__doc__") or ""
                if doc.startswith(obj.__name__ + "("):  # the one @dataclass made from the signature
                    missing.append(f"{name}.{obj.__qualname__}")
    assert not missing, "dataclasses without a docstring (write one; see this module's docstring): " + ", ".join(
        missing
    )
