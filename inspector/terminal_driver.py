"""The inspector's terminal driver: Textual's Linux driver, made safe for a terminal that goes away.

When a terminal closes (a tmux or ssh session killed, a terminal window shut), the kernel sends the
processes on it SIGHUP and then SIGCONT, and every later write to it fails with EIO. Textual's driver
(8.2) handled neither well, and `cp-inspect run`, which closes its inspector on SIGHUP, hung for good
in about one hangup in twenty (tests/capture/test_run_tmux.py under load), leaving the run and its
proxy behind:

* its writer thread ends at the first write that fails, and the app's writes still go into that
  thread's bounded queue (30 entries); the frames drawn after the hangup and the writes that restore
  the terminal on exit fill it, and the next write, or the `None` that closing the driver puts
  there, blocks forever;
* its SIGCONT handler (there to resume after Ctrl-Z) restarts application mode on any SIGCONT, the
  one that comes with a hangup too: a second writer thread and a second input thread on the dead
  terminal, the first writer orphaned.

Here the terminal's file is wrapped so that a failed write means "the terminal is gone": that write
and every later one are dropped, so the writer thread keeps draining its queue and the app can close;
and SIGCONT resumes only after this driver's own SIGTSTP suspend.
"""

from __future__ import annotations

import os
from typing import IO, Any

from textual.driver import Driver
from textual.drivers.linux_driver import LinuxDriver


class _TerminalFile:
    """The terminal's file as the writer thread sees it: once a write or flush has failed, the
    terminal is gone and writes go nowhere (raising would end the writer thread and leave the app's
    later writes, and its closing, blocked on a queue nobody drains)."""

    def __init__(self, file: IO[str]) -> None:
        self._file = file
        self.gone = False

    def write(self, text: str) -> int:
        if not self.gone:
            try:
                return self._file.write(text)
            except OSError:  # EIO on a hung-up terminal (EPIPE, EBADF: no terminal either)
                self.gone = True
        return len(text)

    def flush(self) -> None:
        if not self.gone:
            try:
                self._file.flush()
            except OSError:
                self.gone = True

    def __getattr__(self, name: str) -> Any:  # fileno, isatty, encoding: the terminal's own
        return getattr(self._file, name)


class TerminalDriver(LinuxDriver):
    """Textual's Linux driver, whose output survives the terminal going away (see the module doc)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Set before Textual's __init__, which installs the signal handlers that read it.
        self._resume_on_cont = False  # a SIGTSTP suspended application mode: SIGCONT resumes it
        super().__init__(*args, **kwargs)
        if self._file is not None:  # (None: Python was started with no stderr)
            self._file = _TerminalFile(self._file)  # type: ignore[assignment]

    def _sigtstp_application(self, *args: Any) -> None:
        # Textual suspends only when it will restart by itself (its `no_automatic_restart` is how
        # App.suspend opts out); set before the call, which stops the process until SIGCONT.
        self._resume_on_cont = self._auto_restart
        super()._sigtstp_application(*args)

    def _sigcont_application(self, *args: Any) -> None:
        # A SIGCONT with no suspend before it (the kernel's, after SIGHUP, when the terminal closes;
        # a `kill -CONT`) has nothing to resume: resuming anyway starts a second writer and input
        # thread while the first still run.
        if self._resume_on_cont:
            self._resume_on_cont = False
            super()._sigcont_application(*args)

    def _get_terminal_size(self) -> tuple[int, int]:
        # Textual asks shutil (COLUMNS and LINES, else stdout's size), and with stdout redirected
        # (`cp-inspect replay FILE > out.log`, `1<&-`) it got the 80x25 fallback: a 120x40 terminal
        # showed the app in its top-left corner, the last screen's text beside it. What shutil cannot
        # tell is the size of the terminal the app draws on: stderr's.
        import shutil

        columns, lines = shutil.get_terminal_size(fallback=(0, 0))
        if not (columns and lines):
            try:
                size = os.get_terminal_size(2)
            except (OSError, ValueError):
                pass
            else:
                columns, lines = columns or size.columns, lines or size.lines
        return columns or 80, lines or 25

    @property
    def terminal_gone(self) -> bool:
        """True once a write to the terminal has failed."""
        return isinstance(self._file, _TerminalFile) and self._file.gone


def driver_for(default: type[Driver]) -> type[Driver]:
    """The driver an app of the inspector runs with: this one where Textual would pick its Linux
    driver; any other (headless in tests, Windows, one named by TEXTUAL_DRIVER) as Textual picks it."""
    return TerminalDriver if default is LinuxDriver else default
