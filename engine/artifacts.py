"""Typed artifacts: the units the engine assembles. Never plain strings.

Keeping structure (who called which tool, which result answers which call) until serialization is
what lets later phases keep provider invariants: a tool result is never separated from its call,
a spilled section is still a typed reference, and every unit carries a content hash.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any, Literal

from engine.hashing import call_hash, canonical_json, content_hash, new_sha256, result_hash, sha256_hex

_SHA = attrgetter("sha")
_set = object.__setattr__  # how a frozen artifact's __init__ sets its fields (see Text.__init__)


@dataclass(frozen=True, init=False)
class Text:
    """A piece of plain text in a section (a rule, a note, a message's text), with its content hash."""
    text: str
    sha: str = field(default="", compare=False)

    def __init__(self, text: str, sha: str = "") -> None:
        # Set through object.__setattr__ read once (_set), the hash computed here: the generated __init__
        # of a frozen dataclass looks the setter up for each field and calls __post_init__ (~2x the cost;
        # every agent call makes parts and a message). Not stored through self.__dict__, which would
        # give each instance a dict of its own (+64 bytes, and a message's one the collector tracks).
        # Frozen as before: assigning a field still raises.
        _set(self, "text", text)
        if not sha:  # (sha256_hex's work in line: no frame of its own)
            h = new_sha256()
            h.update(("text\x00" + text).encode())
            sha = h.hexdigest()
        _set(self, "sha", sha)


@dataclass(frozen=True)
class Thinking:
    """The model's reasoning as it goes back to the provider: its text and the signature Anthropic checks
    it by, or (`redacted`) the opaque `data` of a redacted_thinking block, kept in `text` and sent back
    as it came."""

    text: str
    signature: str = ""
    sha: str = field(default="", compare=False)
    redacted: bool = False

    def __post_init__(self) -> None:
        if not self.sha:
            kind = "redacted_thinking\x00" if self.redacted else "thinking\x00"
            object.__setattr__(self, "sha", sha256_hex(kind + self.text + "\x00" + self.signature))


@dataclass(frozen=True)
class Media:
    """An attachment placeholder (image, PDF): the engine tracks it by reference, never by bytes."""

    media_type: str
    ref: str
    size: int
    tokens: int = 0
    sha: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if not self.sha:
            object.__setattr__(self, "sha", content_hash(["media", self.media_type, self.ref, self.size]))


@dataclass(frozen=True, init=False)
class ToolCall:
    """A tool call the model made: its id, the tool's name and the arguments as the model wrote them."""
    id: str
    name: str
    arguments: str  # JSON text exactly as the model produced it
    sha: str = field(default="", compare=False)

    def __init__(self, id: str, name: str, arguments: str, sha: str = "") -> None:
        _set(self, "id", id)  # (see Text.__init__)
        _set(self, "name", name)
        _set(self, "arguments", arguments)
        if not sha:
            if type(id) is str and type(name) is str and type(arguments) is str:
                # Escaped through the memo the request fragment reads again (see json_string).
                sha = call_hash(id, name, arguments)
            else:
                sha = content_hash(["call", id, name, arguments])
        _set(self, "sha", sha)

    def arguments_obj(self) -> Any:
        import json

        if not self.arguments:
            return {}
        try:
            v = json.loads(self.arguments, parse_constant=_not_json, parse_float=_finite_float)
        except ValueError:
            v = None
        if type(v) is not dict:
            # Providers require an object (Anthropic's tool_use `input`, Bedrock's toolUse): arguments
            # that are not JSON, or are JSON but not an object ('[1, 2]', 'null'), or hold NaN or an
            # overflowing number (which Python parses and json.dumps writes back as NaN/Infinity, not
            # JSON), go as {"_raw": text}: visible to the model rather than dropped or refused.
            return {"_raw": self.arguments}
        return v


def _not_json(name: str) -> Any:
    """json.loads' parse_constant: NaN, Infinity and -Infinity are Python's extension, not JSON."""
    raise ValueError(f"{name} is not JSON")


def _finite_float(text: str) -> float:
    """json.loads' parse_float: a number too large for a float parses as infinity, which no JSON
    encoder writes back as JSON."""
    f = float(text)
    if f - f != 0.0:  # inf - inf is NaN
        raise ValueError(f"{text} overflows a float")
    return f


@dataclass(frozen=True, init=False)
class ToolResult:
    """A tool's output for one call id, and how it reached the request (full, cleared or spilled)."""
    call_id: str
    content: str
    is_error: bool = False
    # How the result reached the request: full, cleared (placeholder) or spilled (reference).
    form: Literal["full", "cleared", "spilled"] = "full"
    sha: str = field(default="", compare=False)

    def __init__(
        self,
        call_id: str,
        content: str,
        is_error: bool = False,
        form: Literal["full", "cleared", "spilled"] = "full",
        sha: str = "",
    ) -> None:
        _set(self, "call_id", call_id)  # (see Text.__init__)
        _set(self, "content", content)
        _set(self, "is_error", is_error)
        _set(self, "form", form)
        if not sha:
            if type(call_id) is str and type(content) is str and type(is_error) is bool and type(form) is str:
                # Escaped through the memo the request fragment reads again (see json_string).
                sha = result_hash(call_id, content, is_error, form)
            else:
                sha = content_hash(["result", call_id, content, is_error, form])
        _set(self, "sha", sha)


@dataclass(frozen=True)
class SpillReference:
    """What stays in the prompt when content moved to the spill backend."""

    key: str  # content hash of the original
    uri: str
    tokens: int  # size of the original
    preview: str
    sha: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if not self.sha:
            object.__setattr__(
                self, "sha", content_hash(["spill", self.key, self.uri, self.tokens, self.preview])
            )

    def render(self) -> str:
        return (
            f"[spilled {self.tokens} tokens to {self.uri} (sha256 {self.key[:12]}); preview:]\n{self.preview}"
        )


Part = Text | Thinking | Media | ToolCall | ToolResult


@dataclass(frozen=True, init=False)
class Message:
    """One conversation message. Tool results live in a user message, as in Anthropic's shape;
    OpenAI-style serializers split them into `tool` messages."""

    role: Literal["user", "assistant"]
    parts: tuple[Part, ...]
    sha: str = field(default="", compare=False)

    def __init__(self, role: Literal["user", "assistant"], parts: tuple[Part, ...], sha: str = "") -> None:
        _set(self, "role", role)  # (see Text.__init__)
        _set(self, "parts", parts)
        # The parts' hashes read in C (a generator is a Python frame per part; a message is made every
        # turn).
        if not sha:
            h = new_sha256()
            h.update((role + "\x00" + "\x00".join(map(_SHA, parts))).encode())
            sha = h.hexdigest()
        _set(self, "sha", sha)

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        return tuple(p for p in self.parts if isinstance(p, ToolCall))

    @property
    def tool_results(self) -> tuple[ToolResult, ...]:
        return tuple(p for p in self.parts if isinstance(p, ToolResult))

    def text(self) -> str:
        return "\n".join(p.text for p in self.parts if isinstance(p, Text))


@dataclass(frozen=True)
class ToolSchema:
    """A tool the model may call: its name, description and parameters as canonical JSON."""
    name: str
    description: str
    parameters_json: str  # canonical JSON of the JSON-Schema object
    sha: str = field(default="", compare=False)

    @classmethod
    def create(cls, name: str, description: str, parameters: dict[str, Any]) -> ToolSchema:
        return cls(name, description, canonical_json(parameters).decode("utf-8"))

    def __post_init__(self) -> None:
        if not self.sha:
            object.__setattr__(
                self, "sha", content_hash(["tool", self.name, self.description, self.parameters_json])
            )

    def parameters(self) -> Any:
        import json

        return json.loads(self.parameters_json)


SectionItem = Text | SpillReference | Media | ToolSchema | Message
