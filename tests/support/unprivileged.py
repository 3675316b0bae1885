"""Permission denials that are real when the suite runs as root.

Root ignores file modes (CAP_DAC_OVERRIDE), so `chmod 000` denies root nothing and a permission test
run as root passes without testing anything. Here a child that must meet a denial runs as another,
unprivileged user when the suite is root (nobody:nogroup, through subprocess's own `user=`/`group=`,
which needs no setuid tool), and as the suite's own user when it is not (where a plain chmod denies).

What the child must read or write has to be reachable by it: pytest's tmp_path lives under a 0700
directory of the suite's user, so `Sandbox` makes a fresh directory under /tmp that anyone may
traverse, and hands out paths in it with the owner and mode a test asks for (`readable`, `unreadable`,
`writable_dir`, `read_only_dir`). Where neither way works (root without the `nobody` user, or an
interpreter the other user cannot run) the test is skipped with the reason.
"""

from __future__ import annotations

import atexit
import functools
import grp
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
IS_ROOT = os.geteuid() == 0


@functools.cache
def other_user() -> tuple[int, int] | None:
    """(uid, gid) the child runs as when the suite is root: nobody's, with nogroup (or its own group)."""
    try:
        pw = pwd.getpwnam("nobody")
    except KeyError:
        return None
    try:
        gid = grp.getgrnam("nogroup").gr_gid
    except KeyError:
        gid = pw.pw_gid
    return pw.pw_uid, gid


def child_uid() -> int:
    """The uid the child runs as (the suite's own when it is not root)."""
    user = other_user() if IS_ROOT else None
    return user[0] if user else os.getuid()


def _env(extra: Mapping[str, str] | None, home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "XDG_RUNTIME_DIR")}
    # TMPDIR: what a command keeps in a temporary directory (demo's recording) is removed with the sandbox.
    env.update(
        PYTHONPATH=str(ROOT), PYTHONDONTWRITEBYTECODE="1", HOME=str(home), TMPDIR=str(home), NO_COLOR="1"
    )
    env.update(extra or {})
    return env


def _try(argv0: str, user: tuple[int, int]) -> str | None:
    """Why `argv0`, run as `user`, cannot import the project (None: it can)."""
    try:
        r = subprocess.run(
            [argv0, "-c", "import inspector, engine, typer"],
            user=user[0],
            group=user[1],
            extra_groups=[],
            cwd="/",
            capture_output=True,
            timeout=60,
            env=_env(None, Path("/")),
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{argv0}: {exc}"
    if r.returncode != 0:
        tail = r.stderr.decode(errors="replace").strip().splitlines()[-1:]
        return f"{argv0}: {' '.join(tail)}"
    return None


def _shim_venv() -> str | None:
    """A copy of the venv's entry (bin/python, pyvenv.cfg, site-packages by symlink) the child user can
    run, for a venv whose interpreter is a symlink into a directory only root may enter (a pyenv build
    under /root). Its python is the system's build of the same minor version; it finds the venv's
    packages through pyvenv.cfg beside it, and it is what the child's sys.executable names, so a command
    that starts a Python child of its own (`run`'s proxy, `demo`'s agent) starts one it can run."""
    same = shutil.which(
        f"python{sys.version_info[0]}.{sys.version_info[1]}", path="/usr/local/bin:/usr/bin:/bin"
    )
    site_dirs = [p for p in sys.path if p.startswith(sys.prefix) and p.endswith("site-packages")]
    if not same or sys.prefix == sys.base_prefix or not site_dirs:
        return None
    base = Path(tempfile.mkdtemp(prefix="cpperm-venv-", dir="/tmp"))
    base.chmod(0o755)
    atexit.register(shutil.rmtree, base, True)
    (base / "bin").mkdir(mode=0o755)
    (base / "bin" / "python").symlink_to(same)
    (base / "pyvenv.cfg").write_text(f"home = {Path(same).parent}\ninclude-system-site-packages = false\n")
    (base / "pyvenv.cfg").chmod(0o644)
    lib = base / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}"
    lib.mkdir(parents=True, mode=0o755)
    (base / "lib").chmod(0o755)
    (lib / "site-packages").symlink_to(site_dirs[0])
    return str(base / "bin" / "python")


@functools.cache
def _probe() -> tuple[str | None, str | None]:
    """(the interpreter the child runs, None) or (None, why there is none)."""
    if not IS_ROOT:
        return sys.executable, None
    user = other_user()
    if user is None:
        return None, "the suite runs as root and there is no `nobody` user to run the child as"
    why = _try(sys.executable, user)
    if why is None:
        return sys.executable, None
    shim = _shim_venv()
    if shim is not None:
        why_shim = _try(shim, user)
        if why_shim is None:
            return shim, None
        why = f"{why}; {why_shim}"
    return None, f"uid {user[0]} cannot run the project's interpreter: {why}"


def python() -> str:
    """The interpreter a child started through `Sandbox` runs (sys.executable, or the shim venv's)."""
    return _probe()[0] or sys.executable


def why_not() -> str | None:
    """None when a denial can be made real here; else the reason (the tests skip with it)."""
    return _probe()[1]


def _argv(argv: Sequence[str]) -> list[str]:
    """`argv` with sys.executable replaced by the interpreter the child can run."""
    return [python() if i == 0 and a == sys.executable else a for i, a in enumerate(argv)]


def _child_kw() -> dict[str, Any]:
    """subprocess keywords that start a Python child as the child user (see the module docstring)."""
    if not IS_ROOT:
        return {}
    uid, gid = other_user() or (os.getuid(), os.getgid())
    return dict(user=uid, group=gid, extra_groups=[])


def need_denial() -> None:
    """Skip the calling test, with why, where a permission denial cannot be made real."""
    reason = why_not()
    if reason:
        pytest.skip(reason)


class Sandbox:
    """A directory under /tmp the child can traverse, and paths in it owned and moded as asked."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.home = self.dir("home", writable=True)

    def _give(self, path: Path) -> Path:
        if IS_ROOT:
            uid, gid = other_user() or (os.getuid(), os.getgid())
            os.chown(path, uid, gid)
        return path

    def dir(self, name: str, *, writable: bool) -> Path:
        """A directory the child can enter; it may create files in it only when `writable`."""
        d = self.base / name
        d.mkdir(parents=True, exist_ok=True)
        d.chmod(0o755)
        if writable:
            self._give(d)
        else:
            d.chmod(0o555)  # as root the child is another user anyway; as a user this denies ourselves
        return d

    def readable(self, name: str, data: bytes | Path) -> Path:
        """A file the child may read (a copy when `data` is a path)."""
        p = self.base / name
        p.write_bytes(data.read_bytes() if isinstance(data, Path) else data)
        p.chmod(0o644)
        return p

    def unreadable(self, name: str, data: bytes | Path) -> Path:
        """A file the child may not read: the suite's own with mode 000 (root's, when the child is nobody)."""
        p = self.readable(name, data)
        p.chmod(0o000)
        return p

    def writable_file(self, name: str, data: bytes | Path) -> Path:
        p = self.readable(name, data)
        self._give(p)
        return p

    def run(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        timeout: float = 120,
        cwd: Path | None = None,
        **kw: Any,
    ) -> subprocess.CompletedProcess[bytes]:
        """`argv` as the child user (see the module docstring), stdin closed, output captured."""
        return subprocess.run(
            _argv(argv),
            env=_env(env, self.home),
            cwd=str(cwd or self.home),
            stdin=kw.pop("stdin", subprocess.DEVNULL),
            capture_output=True,
            timeout=timeout,
            **_child_kw(),
            **kw,
        )

    def popen(
        self, argv: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: Path | None = None, **kw: Any
    ) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            _argv(argv),
            env=_env(env, self.home),
            cwd=str(cwd or self.home),
            stdin=kw.pop("stdin", subprocess.DEVNULL),
            **_child_kw(),
            **kw,
        )

    def cli(
        self, *args: str, env: Mapping[str, str] | None = None, timeout: float = 120
    ) -> subprocess.CompletedProcess[bytes]:
        """`cp-inspect ARGS...` as the child user."""
        return self.run([sys.executable, "-m", "inspector", *args], env=env, timeout=timeout)

    def files(self) -> set[str]:
        """Every path under the sandbox (relative), to check that a failure left nothing behind."""
        return {str(p.relative_to(self.base)) for p in self.base.rglob("*")}


def one_line(err: bytes) -> str:
    """A failed command's stderr as its one line: no traceback, no usage block, nothing else."""
    text = err.decode(errors="replace")
    assert "Traceback" not in text, text
    lines = [line for line in text.strip().splitlines() if line]
    assert len(lines) == 1, text
    return lines[0]


@contextmanager
def sandbox(prefix: str = "cpperm-") -> Iterator[Sandbox]:
    """A Sandbox, removed afterwards (modes restored first so a non-root suite can remove it)."""
    need_denial()
    base = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    base.chmod(0o755)
    try:
        yield Sandbox(base)
    finally:
        for p in [base, *base.rglob("*")]:
            try:
                if not p.is_symlink():
                    p.chmod(0o755 if p.is_dir() else 0o644)
            except OSError:
                pass
        shutil.rmtree(base, ignore_errors=True)
