"""The turn-stepping keys reach their binding without the Key event's trip through the widgets.

Textual hands a key that no priority binding takes to the focused widget's message queue; from there the
event bubbles, one queue and one task switch at a time, through every ancestor up to the screen and back
to the app, and only then does the app look up the bindings (focused widget first, then its ancestors,
then the app). For the keys that step turns that trip was most of the Key's cost before the step itself
(four queues with the manifest focused). When no widget on the way has a handler for the key, the trip
does nothing but carry the event, so the app can look up the same bindings, in the same order, at once:
the same action runs (a focused slider's own Left/Right binding included), only sooner.

Any widget on the way that could see the key itself (a key handler of any kind, an `@on(Key)` handler,
its own `on_event`) gets the event the ordinary way; so does every key but the stepping ones, and every
key while a widget is maximized (Escape restores it there)."""

from __future__ import annotations

from functools import cache
from typing import Any

from textual import events
from textual._dispatch_key import dispatch_key
from textual.app import App
from textual.dom import DOMNode
from textual.message import Message
from textual.message_pump import MessagePump
from textual.widget import Widget

# The app's actions that step turns; the keys bound to them are the ones routed directly.
STEP_ACTIONS = frozenset({"step(-1)", "step(1)", "first", "last", "next_interesting", "prev_interesting"})

# Methods through which a node on the bubbling path could see a Key event. Widget's own `_on_key` only
# dispatches to `key_<name>` methods, which are looked for separately.
_HANDLER_NAMES = ("on_key", "_on_key", "handle_key", "on_input_event", "_on_input_event", "on_event",
                  "_on_message", "dispatch_key")
_QUIET_BASES = (Widget, DOMNode, MessagePump, object)
_KEY_MESSAGE_TYPES = tuple(t for t in events.Key.__mro__ if issubclass(t, Message))


def step_keys(bindings: list[object], actions: frozenset[str] = STEP_ACTIONS) -> frozenset[str]:
    """The keys of the bindings whose action is one of `actions` (a binding may list several keys)."""
    keys: set[str] = set()
    for binding in bindings:
        if getattr(binding, "action", None) in actions:
            keys.update(k.strip() for k in binding.key.split(","))  # type: ignore[attr-defined]
    return frozenset(keys)


@cache
def ignores_key(cls: type, key_aliases: tuple[str, ...]) -> bool:
    """True if a node of class `cls` does nothing with a Key event for these key names but pass it on."""
    for base in cls.__mro__:
        if base in _QUIET_BASES:
            continue
        namespace = vars(base)
        if any(name in namespace for name in _HANDLER_NAMES):
            return False
        if any(f"key_{k}" in namespace or f"_key_{k}" in namespace for k in key_aliases):
            return False
        decorated = namespace.get("_decorated_handlers") or {}
        if any(t in decorated for t in _KEY_MESSAGE_TYPES):
            return False
    return True


async def run_step_key(app: App[Any], event: events.Key, keys: frozenset[str]) -> bool:
    """Handle a stepping key as the bubbled event would be handled, without bubbling it.

    Returns False (the caller then lets Textual route the event) unless the key is a stepping key and
    nothing between the focused widget and the screen would see the event."""
    if event.key not in keys:
        return False
    screen = app.screen
    if screen.maximized is not None:
        return False
    focused = screen.focused
    path: list[DOMNode] = [screen] if focused is None else list(focused.ancestors_with_self)
    aliases = tuple(event.name_aliases)
    if not all(ignores_key(type(node), aliases) for node in path if node is not app):
        return False
    # What App.on_event does before forwarding a key, then what the key's arrival back at the app does.
    app.app_focus = True
    if focused is not None:
        screen._clear_tooltip()
    if not await check_bindings(app, event.key):
        await dispatch_key(app, event)
    return True


async def check_bindings(app: App[Any], key: str) -> bool:
    """`App._check_bindings(key, priority=True)`, then `App._check_bindings(key)` if that ran nothing:
    the same bindings tried in the same order, from one binding chain. Textual builds the chain afresh
    for each look-up (a copy of every focused ancestor's bindings, then the consume-key filtering),
    which was ~0.5 ms of a step for the second copy; with no action run in between, the second chain
    is the first one cut at the last modal screen, as `Screen._modal_binding_chain` cuts it. If a
    priority binding's action ran (and declined), focus or the screen may have changed: the ordinary
    look-up is then Textual's own."""
    chain = app.screen._binding_chain
    ran = False
    for namespace, bindings in reversed(chain):
        for binding in bindings.key_to_bindings.get(key, ()):
            if binding.priority:
                ran = True
                if await app.run_action(binding.action, namespace):
                    return True
    if ran:
        return await app._check_bindings(key)
    for cut, (node, _) in enumerate(chain, 1):
        if node.is_modal:
            chain = chain[:cut]
            break
    for namespace, bindings in chain:
        for binding in bindings.key_to_bindings.get(key, ()):
            if not binding.priority and await app.run_action(binding.action, namespace):
                return True
    return False
