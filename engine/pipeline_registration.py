"""What an agent registers before and between its turns: the sources a request is made of (`add_source`,
and `identity`, `constraints`, `goal`, `memory` for the usual ones; `set_content` for a source's static
text), its tools (`add_tool`, `remove_tool`, each schema checked as the providers check it), latches
(`latch`), emergent items (`emerge`) and the window (`set_window`). Each is a journaling call: the
event is journaled and folded (pipeline_fold.py).

A base class of Pipeline (see engine/pipeline_state.py for the chain).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from engine.artifacts import ToolSchema
from engine.catalog import Binder, SourceSpec, source_option
from engine.config import PipelineConfig
from engine.errors import ConfigError, ContentError
from engine.pipeline_guard import _journals
from engine.pipeline_turn_end import TurnEnd
from engine.recording.journal import Event
from engine.types import CacheScope, Lifecycle, Priority, SectionKind


def _check_output_fits(cfg: PipelineConfig) -> None:
    """Every request asks for max_output_tokens of reply (the body's max_tokens). At or past the window
    no prompt fits beside it: the provider refuses every call, or (if the window is set below the
    model's) the engine plans prompts against a window the reply alone fills."""
    if cfg.max_output_tokens < 1:
        raise ConfigError(
            f"max_output_tokens={cfg.max_output_tokens} asks for no reply: the providers refuse max_tokens "
            "below 1; give the model's output limit (e.g. 4096), or leave it out for the default"
        )
    if cfg.max_output_tokens >= cfg.window:
        raise ConfigError(
            f"max_output_tokens={cfg.max_output_tokens:,} is not below the window ({cfg.window:,} tokens): "
            "the reply would leave no room for the prompt; give the model's output limit (e.g. 4096 or "
            "8192), below the window, or the model's whole context window as window"
        )


# Tool schemas are JSON the provider parses: NaN and Infinity (which json.dumps writes by default) are
# not JSON, and the whole request body would be refused.
_STRICT_JSON = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _require_text(text: Any, what: str) -> None:
    """identity(), constraints(), goal() and memory() take the section's text: None registered the
    section with no text and left the previous one in place (add_source's text=None means a bound
    source), so the call did nothing and said nothing."""
    if text is None:
        raise ContentError(
            f"{what}(None): expected the {what} text (str); pass '' to leave the section empty"
        )


# The tool-name pattern of Anthropic's and OpenAI's APIs, as they state it (used with fullmatch, so a
# name ending in a newline does not pass by `$`).
_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def _tool_schema(name: Any, description: Any, parameters: Any) -> ToolSchema:
    """add_tool's arguments as a ToolSchema, or a ConfigError saying what is wrong: a name or description
    that is not a string failed every later request in the serializer (a TypeError, the tool already
    journaled), and parameters that are not a JSON object went out as an `input_schema` string or list."""
    if type(name) is not str or not name:
        raise ConfigError(f"add_tool(): the tool name must be a non-empty str, got {name!r}; e.g. 'bash'")
    if type(description) is not str:
        raise ConfigError(
            f"add_tool({name!r}): description must be a str, got {type(description).__name__}; pass '' for none"
        )
    if not isinstance(parameters, Mapping):
        hint = " (parse it first: json.loads(...))" if isinstance(parameters, (str, bytes)) else ""
        raise ConfigError(
            f"add_tool({name!r}): parameters must be the JSON Schema as a dict, got "
            f"{type(parameters).__name__}{hint}; e.g. {{'type': 'object', 'properties': {{...}}}}"
        )
    kind = parameters.get("type", "object")
    if kind != "object":
        raise ConfigError(
            f"add_tool({name!r}): parameters has type {kind!r}; providers take a tool's input as an "
            "object: {'type': 'object', 'properties': {...}}"
        )
    try:
        text = _STRICT_JSON.encode(dict(parameters))
    except (TypeError, ValueError) as exc:
        raise ConfigError(
            f"add_tool({name!r}): parameters are not JSON ({exc}); use only dicts, lists, str, int, finite "
            "floats, bool and None"
        ) from None
    return ToolSchema(name, description, text)


class Registration(TurnEnd):
    """A Pipeline's registration calls (public API: see engine/pipeline.py's module docstring)."""

    @_journals
    def add_source(
        self,
        id: str,
        kind: SectionKind | str = SectionKind.CONTEXT,
        *,
        text: str | None = None,
        binder: Binder | None = None,
        scope: CacheScope | str = CacheScope.SESSION,
        priority: Priority | str = Priority.NORMAL,
        lifecycle: Lifecycle | str | None = None,
        estimate: int = 0,
        max_tokens: int | None = None,
        timeout_s: float = 2.0,
        name: str = "",
    ) -> None:
        kind = source_option(SectionKind, kind, "kind", id)
        scope = source_option(CacheScope, scope, "scope", id)
        priority = source_option(Priority, priority, "priority", id)
        if lifecycle is not None:
            lifecycle = source_option(Lifecycle, lifecycle, "lifecycle", id)
        if kind == SectionKind.HISTORY:
            raise ConfigError("history is built from user()/assistant()/tool_result(); register other kinds")
        if lifecycle is None:
            lifecycle = Lifecycle.PER_TURN if binder is not None else Lifecycle.STATIC
        spec = SourceSpec(id, kind, lifecycle, scope, priority, estimate, max_tokens, timeout_s, name)
        if binder is not None:
            self.binders[id] = binder
        ev: Event = {"k": "source", "spec": spec.to_event()}
        if text is not None:
            ev["h"] = self._blob(text)
        self._spec_hint = (ev["spec"], spec)
        try:
            self._emit(ev)
        finally:
            self._spec_hint = None

    @_journals
    def identity(self, text: str) -> None:
        _require_text(text, "identity")
        self.add_source(
            "identity", SectionKind.IDENTITY, text=text, scope=CacheScope.GLOBAL, priority=Priority.NEVER
        )

    @_journals
    def constraints(self, text: str) -> None:
        _require_text(text, "constraints")
        self.add_source(
            "constraints",
            SectionKind.CONSTRAINTS,
            text=text,
            scope=CacheScope.GLOBAL,
            priority=Priority.NEVER,
        )

    @_journals
    def goal(self, text: str) -> None:
        _require_text(text, "goal")
        self.add_source(
            "goal", SectionKind.GOAL, text=text, scope=CacheScope.SESSION, priority=Priority.NEVER
        )

    @_journals
    def memory(self, text: str, *, working: bool = False) -> None:
        _require_text(text, "memory")
        sid = "working_memory" if working else "memory"
        kind = SectionKind.WORKING_MEMORY if working else SectionKind.MEMORY
        self.add_source(sid, kind, text=text, scope=CacheScope.NONE if working else CacheScope.SESSION)

    @_journals
    def set_content(self, id: str, text: str) -> None:
        if id not in {s.id for s in self.specs}:
            raise ConfigError(f"no source {id!r}; register it with add_source() first")
        self._emit({"k": "content", "id": id, "h": self._blob(text)})

    @_journals
    def add_tool(self, name: str, description: str, parameters: dict[str, Any]) -> None:
        """Register (or replace) a tool. `parameters` is its JSON Schema as an object (a dict), e.g.
        {"type": "object", "properties": {...}}: checked here, because a tool is in every request from
        now on and a bad one made each of them fail to build or be refused by the provider."""
        schema = _tool_schema(name, description, parameters)
        if self.check_content and not _TOOL_NAME.fullmatch(name):
            # Both providers refuse such a name on every request (Anthropic: "tools.0.custom.name: String
            # should match pattern"; OpenAI: "Invalid 'tools[0].function.name'"). Importers and taps keep
            # another agent's names as it sent them (check_content off).
            raise ConfigError(
                f"add_tool({name!r}): a tool name must match {_TOOL_NAME.pattern} (letters, digits, _ and -, "
                "1 to 64 of them), as Anthropic and OpenAI require; e.g. 'read_file'"
            )
        self._emit(
            {"k": "tool", "name": name, "description": description, "h": self._blob(schema.parameters_json)}
        )

    @_journals
    def remove_tool(self, name: str) -> None:
        self._emit({"k": "untool", "name": name})

    @_journals
    def latch(self, name: str, value: str) -> bool:
        """Set a session latch. Returns True when the value changed (a flip: the cache will break)."""
        if type(name) is not str or not name:
            raise ConfigError(f"latch(): the name must be a non-empty str (e.g. 'cwd'), got {name!r}")
        cur = self.latches.latches.get(name)
        self._emit({"k": "latch", "name": name, "h": self._blob(value)})
        return cur is not None and cur.value != value

    @_journals
    def emerge(self, list_name: str, text: str) -> bool:
        """Queue an item discovered mid-turn for the next turn only. False if a duplicate or over the cap."""
        if type(list_name) is not str or not list_name:
            raise ConfigError(
                f"emerge(): the list name must be a non-empty str (e.g. 'todo'), got {list_name!r}"
            )
        before = len(self.emergent.items)
        # Found while turn `self.turn - 1` is in progress (its response being handled), so it is due in
        # turn `self.turn`: the very next request. The event names the turn in progress.
        self._emit({"k": "emergent", "list": list_name, "h": self._blob(text), "turn": self.turn - 1})
        return len(self.emergent.items) > before

    @_journals
    def set_window(self, window: int) -> None:
        from dataclasses import replace

        cfg = replace(self.config, window=window)
        if self._output_chosen:
            _check_output_fits(cfg)
        self._emit({"k": "config", "config": cfg.to_event()})
