"""The bounds on what the agent's own thread sends (engine.probe.agent_send, and a fold client's turn:
engine.probe.fold_send): how many clients and events it serves itself, how many sends a window, how long
a held call's publishes wait, how many elided events a quiet client's flush leaves waiting, and when a
paced agent's turn is left to the I/O thread's lingering burst (agent_send, "Lingering").
"""

from __future__ import annotations

from engine.probe.loop import COALESCE

# Clients the agent's thread serves itself at most; with more, the I/O thread does (its pass serves
# many in turn within its CPU budget).
AGENT_CLIENTS = 2
# Events behind the ring's head a client may be for the agent's thread to fill its buffer: more is a
# backlog (a long call, or events left waiting), and encoding it is the I/O thread's work.
AGENT_EVENTS = 512
# A held call's publishes write no wake-up byte for this long after it began.
HOLD_MAX = COALESCE
# At most this many flushes a window of AGENT_WINDOW seconds send on the agent's thread. An agent whose
# turns come back to back calls a send a call here (four a turn: ~10-15 us each, ~50 us a turn), where
# the I/O thread's bursts send many turns in one pass (its per-turn work 12-19 us); so past this rate
# (four turns in a tenth of a second) the flush wakes the I/O thread, whose burst then takes every
# call's events until the agent pauses.
AGENT_WINDOW = COALESCE
AGENT_WINDOW_SENDS = 16
# While every client attached reads the quiet elided stream (see elide), a call that published only
# elided kinds (record_usage, assistant, tool_result) is sent nothing: its flush leaves the events
# waiting (no fill, no send, no wake-up) for the next flush that has one to send (the next turn's
# next_request), up to this many. After a model call each flush runs cold, and on this VM one that
# fills and finds nothing to send still cost its thread ~30-40 us (BENCHMARKS.md): three a turn.
DEFER_EVENTS = 256
# See "Lingering": an event published while every client is quiet, less than this long after the last
# one, is left to the I/O thread's burst (which waits as long between passes while turns keep coming).
# 0: off (the agent's thread sends, as above): measured, the process's CPU rises by more than it saves.
QUIET_LINGER = 0.0
# Events closer together than this are one turn's, judged for lingering at its first (see "Lingering").
TURN_GAP = 0.05
# The low 32 bits of an int (the crc32 half of a frame header made as one int: see fold_send._fold_now).
_U32 = 0xFFFFFFFF
