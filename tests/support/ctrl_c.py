"""Ctrl-C in a test as a terminal delivers it."""

from __future__ import annotations

import signal


def ctrl_c_as_in_a_terminal() -> None:
    """SIGINT back to its default in the child (a Popen preexec_fn), as a program started in a terminal
    has it: a shell that starts a job in the background (`cmd &` without job control: a CI runner, a
    setsid launcher) sets it to ignored, the child inherits that, and Python then installs no
    KeyboardInterrupt handler, so the test's Ctrl-C was ignored and the command ran to the end (exit 0)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
