"""inspector/dataclass_code.py: dataclass methods run from the compiled table are the ones `exec` compiles."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from inspector import dataclass_code

REPO = Path(__file__).resolve().parents[1]

# Class shapes the engine uses (frozen, slots, defaults, factories, kw_only, InitVar, ClassVar, order),
# with and without postponed annotations (most engine modules have them).
SHAPES = """
import dataclasses
from dataclasses import dataclass, field, InitVar, KW_ONLY
from typing import ClassVar

@dataclass(frozen=True)
class Frozen:
    a: int
    b: str = "x"
    c: tuple = ()
    d: list = field(default_factory=list, compare=False)

@dataclass(order=True, slots=True)
class Ordered:
    n: int
    m: float = 1.5

@dataclass
class Init:
    k: ClassVar[int] = 3
    v: InitVar[int] = 0
    w: int = 0
    _: KW_ONLY
    z: str = "q"

    def __post_init__(self, v):
        self.w = self.w + v

@dataclass(unsafe_hash=True, repr=False)
class Hashed:
    p: "int"
    q: bytes = b""
"""
METHODS = ("__init__", "__repr__", "__eq__", "__hash__", "__setattr__", "__delattr__", "__lt__", "__ge__")


def _classes(future: bool) -> dict[str, Any]:
    """The SHAPES classes made in a fresh namespace (compiled without this module's __future__ flags)."""
    src = ("from __future__ import annotations\n" if future else "") + SHAPES
    mod = types.ModuleType(f"_dataclass_code_shapes_{future}")
    sys.modules[mod.__name__] = mod  # string annotations are looked up in the class's module
    try:
        exec(compile(src, f"<shapes {future}>", "exec", dont_inherit=True), mod.__dict__)
    finally:
        del sys.modules[mod.__name__]
    ns = mod.__dict__
    return {k: v for k, v in ns.items() if isinstance(v, type) and dataclasses.is_dataclass(v)}


def _methods(classes: dict[str, Any]) -> dict[tuple[str, str], Any]:
    out: dict[tuple[str, str], Any] = {}
    for cname, cls in classes.items():
        for m in METHODS:
            fn = cls.__dict__.get(m)
            if fn is None or not hasattr(fn, "__code__"):
                out[(cname, m)] = fn
                continue
            # (annotations by repr: each class's InitVar[int] is an object of its own, equal by identity only)
            notes = {k: repr(v) for k, v in fn.__annotations__.items()}
            out[(cname, m)] = (fn.__code__, notes, fn.__defaults__, fn.__kwdefaults__, fn.__qualname__)
    return out


def _behaviour(classes: dict[str, Any]) -> list[Any]:
    f = classes["Frozen"](1, "y")
    o1, o2 = classes["Ordered"](1), classes["Ordered"](2, 0.5)
    i = classes["Init"](2, 5, z="r")
    h = classes["Hashed"](4)
    with pytest.raises(dataclasses.FrozenInstanceError):
        f.a = 2
    return [
        repr(f),
        f == classes["Frozen"](1, "y", d=[1]),
        hash(f),
        o1 < o2,
        repr(o1),
        repr(i),
        i.w,
        hash(h),
        h == h,
    ]


@pytest.fixture
def table(tmp_path: Path) -> Any:
    dataclass_code.uninstall()
    path = tmp_path / "dc.marshal"
    yield path
    dataclass_code.uninstall()


@pytest.mark.parametrize("future", [False, True])
def test_methods_from_the_table_equal_the_compiled_ones(table: Path, future: bool, monkeypatch: Any) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    plain = _classes(future)
    dataclass_code.install(table)
    missed = _classes(future)  # compiled through cached_exec, then saved
    assert dataclass_code._new, "the classes were not made through the table's exec"
    dataclass_code.save()
    assert table.exists()
    dataclass_code.uninstall()
    dataclass_code.install(table)
    hit = _classes(future)
    assert not dataclass_code._new, "a text saved by the last run was compiled again"
    assert _methods(missed) == _methods(plain)
    assert _methods(hit) == _methods(plain)
    assert _behaviour(missed) == _behaviour(plain) == _behaviour(hit)


def test_compiled_without_this_modules_future_flags(table: Path) -> None:
    # __init__'s annotations are the field types as objects, as dataclasses' own exec makes them: code
    # compiled with inherited `from __future__ import annotations` would hold the names as strings.
    dataclass_code.install(table)
    cls = _classes(False)["Ordered"]
    assert cls.__init__.__annotations__["n"] is int


def test_a_table_of_another_python_or_damaged_is_not_used(table: Path) -> None:
    code = compile("x = 1", "<string>", "exec")
    table.write_bytes(dataclass_code._magic() + __import__("marshal").dumps({"x = 1": code}))
    assert dataclass_code.load(table) == {"x = 1": code}
    table.write_bytes(b"\x00\x00\r\n" + __import__("marshal").dumps({"x = 1": code}))  # another magic number
    assert dataclass_code.load(table) == {}
    table.write_bytes(dataclass_code._magic() + b"\xff\x00garbage")
    assert dataclass_code.load(table) == {}
    table.write_bytes(dataclass_code._magic() + __import__("marshal").dumps({"x = 1": "not code", 3: code}))
    assert dataclass_code.load(table) == {}
    assert dataclass_code.load(table.with_name("missing")) == {}


def test_nothing_written_when_bytecode_is_not(table: Path, monkeypatch: Any) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    dataclass_code.install(table)
    _classes(False)
    dataclass_code.save()
    assert not table.exists()


def test_save_keeps_what_another_process_saved(table: Path, monkeypatch: Any) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    other = compile("y = 2", "<string>", "exec")
    dataclass_code.install(table)
    _classes(False)
    table.write_bytes(dataclass_code._magic() + __import__("marshal").dumps({"y = 2": other}))
    dataclass_code.save()
    saved = dataclass_code.load(table)
    assert saved["y = 2"] == other and len(saved) > 1
    assert not list(table.parent.glob("*.tmp"))


def test_the_console_script_runs_from_the_table_on_its_second_run(tmp_path: Path) -> None:
    """`cp-inspect` (inspector.entry.main) installs the table before the engine is imported and saves it:
    a second process makes every engine dataclass on simulate's path without compiling."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONPYCACHEPREFIX": str(tmp_path / "pyc")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    probe = (
        "import sys; from inspector import dataclass_code as d; d.install(); "
        "import engine.sim.simulate, engine.recording.replay; print(len(d._new), len(d._used)); d.save()"
    )
    runs = [
        subprocess.run(
            [sys.executable, "-c", probe], env=env, cwd=REPO, capture_output=True, text=True, check=True
        )
        for _ in range(2)
    ]
    first, second = (tuple(map(int, r.stdout.split())) for r in runs)
    assert first[0] > 50 and first[0] == first[1]  # every text compiled on the first run
    assert second == (0, first[1])  # none on the second
    out = subprocess.run(
        [sys.executable, "-c", "import sys; from inspector.entry import main; sys.exit(main())", "--help"],
        env=env, cwd=REPO, capture_output=True, text=True,
    )  # fmt: skip
    assert out.returncode == 0 and "simulate" in out.stdout
    assert dataclass_code.cache_file() is not None
    assert list((tmp_path / "pyc").rglob("_dataclass_methods.*.marshal"))
