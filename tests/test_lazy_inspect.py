"""inspector/lazy_inspect.py: `inspect` deferred until read, and the same module once read."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _run(code: str) -> str:
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(REPO), "PYTHONDONTWRITEBYTECODE": "1"},
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_already_imported_is_left_alone() -> None:
    import inspect

    from inspector import lazy_inspect

    assert not lazy_inspect.defer()
    assert sys.modules["inspect"] is inspect


def test_dataclasses_import_without_loading_inspect() -> None:
    out = _run(
        """
        import sys
        from inspector import lazy_inspect
        assert lazy_inspect.defer()
        import dataclasses
        from dataclasses import dataclass

        @dataclass
        class Documented:
            '''Has its own docstring: dataclasses reads nothing of inspect.'''
            a: int
            b: str = "x"

        assert Documented(1) == Documented(1, "x")
        stand_in = sys.modules["inspect"]
        assert type(stand_in).__name__ == "_Deferred", type(stand_in)
        assert "signature" not in vars(stand_in)
        assert "tokenize" not in sys.modules and "dis" not in sys.modules
        print("deferred")
        """
    )
    assert out.split() == ["deferred"]


def test_first_read_loads_the_real_module() -> None:
    out = _run(
        """
        import sys
        from inspector import lazy_inspect
        assert lazy_inspect.defer()
        import dataclasses
        stand_in = sys.modules["inspect"]
        stand_in.mine = "kept"  # set by a caller before the first read

        @dataclasses.dataclass
        class Bare:
            a: int
            b: str = "x"

        # No docstring of its own: dataclasses writes one from inspect.signature, which loads it.
        assert Bare.__doc__ == "Bare(a: int, b: str = 'x')", Bare.__doc__
        real = sys.modules["inspect"]
        assert real is not stand_in and type(real).__name__ == "module"
        assert stand_in.signature is real.signature and stand_in.Parameter is real.Parameter
        assert stand_in.__spec__ is real.__spec__ and stand_in.mine == "kept"
        import inspect
        from inspect import signature
        assert inspect is real and signature is real.signature
        try:
            stand_in.no_such_name
        except AttributeError as exc:
            assert "no_such_name" in str(exc)
        else:
            raise AssertionError("a missing name read")
        print("loaded")
        """
    )
    assert out.split() == ["loaded"]


def test_import_statement_after_defer_reads_through() -> None:
    out = _run(
        """
        from inspector import lazy_inspect
        assert lazy_inspect.defer()
        import inspect
        from inspect import Parameter

        def f(a, b=2):
            return a

        assert str(inspect.signature(f)) == "(a, b=2)"
        assert Parameter.POSITIONAL_OR_KEYWORD.name == "POSITIONAL_OR_KEYWORD"
        print("ok")
        """
    )
    assert out.split() == ["ok"]


def test_plain_simulate_never_loads_inspect() -> None:
    """The console script's path: `cp-inspect simulate FILE` runs to its end without reading inspect."""
    demo = REPO / "demo_sessions" / "scout-openai.cpsession"
    out = _run(
        f"""
        import os, sys
        def leave(code):  # the plain simulate leaves through os._exit: report first
            loaded = "signature" in vars(sys.modules["inspect"])
            sys.stderr.flush()
            os.write(1, f"exit {{code}} inspect loaded {{loaded}}\\n".encode())
            os._exit_real(code)
        os._exit_real, os._exit = os._exit, leave
        sys.argv = ["cp-inspect", "simulate", {str(demo)!r}]
        from inspector.entry import main
        main()
        """
    )
    assert out.splitlines()[-1] == "exit 0 inspect loaded False"
