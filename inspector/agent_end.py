"""How an agent that ended other than with status 0 is said to have ended ("the agent exited with status 3",
"the agent was ended by SIGKILL"), one wording for `run` and `demo` (their child's return code) and
`attach` (a zombie's wait status), and the prefixes the status line reads back to say it failed
(inspector.status.failed_head). Light: `run`'s summary says it after the TUI or without one, so this
imports neither textual nor typer.
"""

from __future__ import annotations

import signal

# The ways ended_said begins: status.failed_head reads a disconnect's reason as an agent that failed by them.
FAILED_ENDS = ("the agent exited with status ", "the agent was ended by ")


def signal_name(number: int) -> str:
    """Signal `number`'s name ("SIGKILL"), or "signal 35" for one Python has no name for: a real-time
    signal (SIGRTMIN+1 ... SIGRTMAX-1) is valid, so it ends a process, but signal.Signals(35) raises."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def ended_said(code: int) -> str:
    """How an agent with return code `code` ended, as subprocess.Popen gives it (a signal negative):
    "the agent exited with status 3", "the agent was ended by SIGKILL"."""
    if code < 0:
        return f"the agent was ended by {signal_name(-code)}"
    return f"the agent exited with status {code}"


def wait_status_code(status: int) -> int:
    """A waitpid status (the exit code in the high byte, or the signal in the low 7 bits: /proc's
    exit_code field) as Popen's return code: the code, or minus the signal."""
    sig = status & 0x7F
    return -sig if sig else status >> 8
