"""Every error class the engine defines derives from ContextPipeError, so an agent can catch them all."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import engine
from engine.errors import ContextPipeError


def _engine_modules() -> list[str]:
    names = ["engine"]
    for info in pkgutil.walk_packages(engine.__path__, prefix="engine."):
        names.append(info.name)
    return names


def test_every_engine_exception_derives_from_contextpipe_error() -> None:
    strays: list[str] = []
    seen = 0
    for name in _engine_modules():
        module = importlib.import_module(name)
        for _, obj in inspect.getmembers(module, inspect.isclass):
            if obj.__module__ != name or not issubclass(obj, BaseException):
                continue
            seen += 1
            if not issubclass(obj, ContextPipeError):
                strays.append(f"{name}.{obj.__name__}")
    assert seen >= 10, "the scan found too few error classes: is the package walk broken?"
    assert strays == [], f"errors outside the ContextPipeError hierarchy: {strays}"
