"""Keys that reach the app together are handled one after the other, each where focus is by then.

Textual hands a key that no priority binding takes to the focused widget's queue, and the app goes on to
the next key at once. When a terminal delivers two keys in one read (tmux sends Esc then Left as
`\\x1b\\x1b[D`), the second is handled before the first has bubbled back up to the app, whose Esc binding
moves focus from a slider to the manifest: the Left still went to the slider (through Textual's
forwarding, or the app's binding look-up for stepping keys, key_route.py, which starts at the focused
widget), and moved it instead of stepping.

`KeyOrder` follows a forwarded key up to the app: a callback goes into each queue on its way (the focused
widget, each ancestor, the screen, the app) once the one before has run it. Queues are first in, first
out, so the callback reaches a node after the key has been handled there and, if it bubbled, posted to
the parent. Keys that arrive meanwhile are held, and posted to the app again, in order, once the
callback has been through the app's queue and once more behind what the key's binding queued there (a
focus change is applied by a callback on the app). If the way is cut (a screen closed by that key), the
held keys go on after MAX_WAIT_S."""

from __future__ import annotations

import time
from functools import partial
from typing import Any

from textual import events
from textual.app import App
from textual.dom import DOMNode
from textual.timer import Timer

MAX_WAIT_S = 0.25  # the longest a key waits for the one before it (a cut path; normally a few ms)


class KeyOrder:
    def __init__(self, app: App[Any]) -> None:
        self.app = app
        self._flight: object | None = None  # the forwarded key being followed (a token), if any
        self._since = 0.0
        self._held: list[events.Key] = []
        self._timer: Timer | None = None

    def hold(self, event: events.Key) -> bool:
        """Keep `event` for later if a key before it is still on its way through the widgets."""
        if self._flight is None:
            return False
        waited = time.monotonic() - self._since
        if waited >= MAX_WAIT_S:  # its way was cut (the timer lets held keys go; this is the first since)
            held = bool(self._held)
            self._land(self._flight)
            if held:
                self.app.post_message(event)  # behind the keys just let go
            return held
        self._held.append(event)
        if self._timer is None:
            self._timer = self.app.set_timer(MAX_WAIT_S - waited, partial(self._land, self._flight))
        return True

    def forwarded(self, target: DOMNode) -> None:
        """A key has been handed to `target` (the focused widget or the screen): follow it to the app."""
        token = object()
        self._flight, self._since = token, time.monotonic()
        self._hop(token, list(target.ancestors_with_self), 0)

    def _hop(self, token: object, path: list[DOMNode], at: int) -> None:
        if self._flight is not token:
            return
        if at == len(path):  # through the app's queue: once more, behind what the key's binding queued
            if not self.app.call_later(self._land, token):
                self._land(token)
            return
        if not path[at].call_later(self._hop, token, path, at + 1):  # a closed queue: the key went no further
            self._land(token)

    def _land(self, token: object) -> None:
        if self._flight is not token:
            return
        self._flight = None
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        held, self._held = self._held, []
        for event in held:  # the first may be forwarded in turn: the others are then held again, in order
            self.app.post_message(event)
