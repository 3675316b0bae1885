"""Shared helpers for the format modules: reading JSON with usable errors, typed field access."""

from __future__ import annotations

import ast
import json
from collections.abc import Iterator
from typing import Any, NoReturn

from engine.feedback import UsageFormatError, normalize_usage
from engine.importers.model import (
    ROLES,
    CallRec,
    ImportedSession,
    ImportFormatError,
    MediaRec,
    MessageRec,
    ThinkingRec,
    ToolCallRec,
    ToolSchemaRec,
    UsageRec,
)


class Ctx:
    """Carries the format name and source path so every helper can raise a precise error."""

    def __init__(self, fmt: str, path: str) -> None:
        self.fmt = fmt
        self.path = path
        # Images met in the content being read, for the message it becomes (take_media)
        self.media: list[MediaRec] = []

    def take_media(self) -> tuple[MediaRec, ...]:
        """The images read since the last call (the message being built carries them)."""
        out, self.media = tuple(self.media), []
        return out

    def fail(self, where: str, detail: str) -> NoReturn:
        raise ImportFormatError(self.fmt, self.path, where, detail)

    def obj(self, value: Any, where: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            self.fail(where, f"is {_kind(value)} (expected an object)")
        return value

    def lst(self, value: Any, where: str) -> list[Any]:
        if not isinstance(value, list):
            self.fail(where, f"is {_kind(value)} (expected a list)")
        return value

    def key(self, parent: dict[str, Any], name: str, where: str) -> Any:
        if name not in parent:
            self.fail(join(where, name), "is missing")
        return parent[name]

    def text(self, value: Any, where: str, *, allow_none: bool = True) -> str:
        """Message text: None becomes "" (assistant turns with only tool calls)."""
        if value is None and allow_none:
            return ""
        if not isinstance(value, str):
            self.fail(where, f"is {_kind(value)} (expected a string)")
        return value

    def opt_str(self, value: Any, where: str) -> str | None:
        if value is None or isinstance(value, str):
            return value
        self.fail(where, f"is {_kind(value)} (expected a string or null)")

    def int_(self, value: Any, where: str) -> int:
        # bool is an int subclass; a usage count of `true` is a broken file, not 1 token
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(where, f"is {_kind(value)} (expected an integer)")
        return value


def join(where: str, key: str | int) -> str:
    """Build a readable JSON path: `messages[3].role`."""
    if isinstance(key, int):
        return f"{where}[{key}]"
    return f"{where}.{key}" if where else key


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, (int, float)):
        return f"a number ({value})"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return repr(shown)
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def read_text(path: str, fmt: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except UnicodeDecodeError as e:
        raise ImportFormatError(fmt, path, "", f"is not UTF-8 text (byte {e.start})") from e


EMPTY_FILE = "the file is empty (the agent may have stopped before writing it)"


def parse_json(text: str, ctx: Ctx, where: str = "") -> Any:
    """json.loads with the position of the first bad character in the error (truncated files)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        if not where and not text.strip():  # a whole file with nothing in it, not a JSON syntax error
            ctx.fail("", EMPTY_FILE)
        loc = f"{where}: " if where else ""
        ctx.fail("", f"{loc}invalid JSON at line {e.lineno}, column {e.colno}: {e.msg}")


def _json_or_literal(text: str, ctx: Ctx, where: str, what: str) -> Any:
    """JSON, else a Python literal (some agents log repr() strings); never eval."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        try:
            return ast.literal_eval(text)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            ctx.fail(where, f"is a string that is neither JSON nor a Python literal {what}")


def parse_listish(value: Any, ctx: Ctx, where: str) -> list[Any]:
    """A list that some writers store as text: JSON, or a Python repr (`str(list_of_dicts)`).

    mini-swe-agent and litellm objects have been seen serialized with `str()`; ast.literal_eval
    reads that without executing anything.
    """
    if value is None:
        return []
    if isinstance(value, list):
        return value
    if isinstance(value, str):
        s = value.strip()
        if not s:
            return []
        parsed = _json_or_literal(s, ctx, where, "list")
        if isinstance(parsed, tuple):
            parsed = list(parsed)
        if not isinstance(parsed, list):
            ctx.fail(where, f"is a string holding {_kind(parsed)} (expected a list)")
        return parsed
    ctx.fail(where, f"is {_kind(value)} (expected a list)")


def parse_dictish(value: Any, ctx: Ctx, where: str) -> dict[str, Any]:
    """Like parse_listish, for objects (mini-swe-agent `extra` may be a repr string)."""
    if value is None:
        return {}
    if isinstance(value, dict):
        return value
    if isinstance(value, str):
        parsed = _json_or_literal(value, ctx, where, "dict")
        if not isinstance(parsed, dict):
            ctx.fail(where, f"is a string holding {_kind(parsed)} (expected an object)")
        return parsed
    ctx.fail(where, f"is {_kind(value)} (expected an object)")


def arguments_text(value: Any, ctx: Ctx, where: str) -> str:
    """Tool-call arguments as JSON text. Kept verbatim when the source has text; objects are dumped."""
    if isinstance(value, str):
        return value
    if value is None:
        return "{}"
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False)
    ctx.fail(where, f"is {_kind(value)} (expected JSON text or an object)")


def content_text(value: Any, ctx: Ctx, where: str) -> str:
    """OpenAI content: a string, null, or a list of parts. Text parts are joined with newlines;
    non-text parts (images) become a short placeholder so their presence is not lost."""
    if value is None or isinstance(value, str):
        return value or ""
    if isinstance(value, list):
        out: list[str] = []
        for i, part in enumerate(value):
            pw = join(where, i)
            if isinstance(part, str):
                out.append(part)
                continue
            part = ctx.obj(part, pw)
            ptype = part.get("type")
            if ptype in ("text", "input_text", "output_text") or (ptype is None and "text" in part):
                out.append(ctx.text(part.get("text"), join(pw, "text"), allow_none=False))
            elif ptype in ("image_url", "image", "input_image"):
                out.append("[image]")
                ctx.media.append(_openai_image(part))
            elif ptype == "refusal" and isinstance(part.get("refusal"), str):
                out.append(part["refusal"])
            elif ptype in ("file", "input_file", "input_audio"):
                # A PDF or an audio clip: a placeholder in the text, counted as OpenAI bills it
                out.append(f"[{ptype}]")
                ctx.media.append(_openai_attachment(part, ptype))
            elif isinstance(ptype, str) and ptype:
                # Any other part the API takes (a PDF `file`, `input_audio`, ...) is kept as a placeholder,
                # as images are: refusing it would drop the call, and every later call that carries it.
                out.append(f"[{ptype}]")
            else:
                ctx.fail(join(pw, "type"), f"is {_kind(ptype)} (expected text or image_url)")
        return "\n".join(out)
    ctx.fail(where, f"is {_kind(value)} (expected a string, null or a list of parts)")


def guess_provider(model: str | None) -> str:
    """Provider from a model name, for sources that do not name it. 'unknown' rather than a guess."""
    if not model:
        return "unknown"
    m = model.lower()
    if "/" in m:
        head = m.split("/", 1)[0]
        if head in ("deepseek", "openai", "anthropic", "bedrock", "azure", "gemini", "openrouter"):
            return head
    if "deepseek" in m:
        return "deepseek"
    if "claude" in m:
        return "anthropic"
    if m.startswith(("gpt", "o1", "o3", "o4", "chatgpt")):
        return "openai"
    return "unknown"


def strip_provider_prefix(model: str) -> str:
    """litellm-style `deepseek/deepseek-chat` -> `deepseek-chat`."""
    return model.split("/", 1)[1] if "/" in model else model


def openai_tool_calls(value: Any, ctx: Ctx, where: str) -> tuple[ToolCallRec, ...]:
    """OpenAI `tool_calls` (list, or a list stored as text) -> ToolCallRecs, in order."""
    out: list[ToolCallRec] = []
    for i, tc in enumerate(parse_listish(value, ctx, where)):
        tw = join(where, i)
        tc = ctx.obj(tc, tw)
        # A custom (freeform) tool's call carries its raw `input` where a function's has `arguments`
        kind = "custom" if tc.get("type") == "custom" and "custom" in tc else "function"
        fn = ctx.obj(ctx.key(tc, kind, tw), join(tw, kind))
        fw = join(tw, kind)
        args = "input" if kind == "custom" else "arguments"
        out.append(
            ToolCallRec(
                id=ctx.text(ctx.key(tc, "id", tw), join(tw, "id"), allow_none=False),
                name=ctx.text(ctx.key(fn, "name", fw), join(fw, "name"), allow_none=False),
                arguments=arguments_text(fn.get(args), ctx, join(fw, args)),
            )
        )
    return tuple(out)


def legacy_call_id(name: str) -> str:
    """The id given to a legacy `function_call` and to the `function` message that answers it, which have
    none on the wire. The function's name is all both sides carry, and a reply makes one call only."""
    return f"function_call:{name}"


def thinking_blocks(raw: Any) -> tuple[str | None, tuple[ThinkingRec, ...]]:
    """litellm's `thinking_blocks` on a chat message (its copy of Anthropic's thinking and
    redacted_thinking blocks; SWE-agent and mini-swe-agent keep them in their histories) as (their
    text, the blocks with their signatures or data when any can go back to the API, else ()). A value
    of another shape is kept as its text."""
    if not raw:
        return None, ()
    if not (isinstance(raw, list) and all(isinstance(b, dict) for b in raw)):
        return str(raw), ()
    texts: list[str] = []
    blocks: list[ThinkingRec] = []
    for b in raw:
        if b.get("type") == "redacted_thinking":
            texts.append("[redacted thinking]")
            data = b.get("data")
            ok = isinstance(data, str) and bool(data)
            blocks.append(ThinkingRec(data, redacted=True) if ok else ThinkingRec("[redacted thinking]"))
        else:
            text, sig = b.get("thinking"), b.get("signature")
            texts.append(text if isinstance(text, str) else "")
            blocks.append(ThinkingRec(texts[-1], sig if isinstance(sig, str) else ""))
    keep = tuple(blocks) if any(t.signature or t.redacted for t in blocks) else ()
    return "\n".join(texts) or None, keep


def openai_message(
    m: Any, ctx: Ctx, where: str, *, extra_roles: tuple[str, ...] = (), role_map: dict[str, str] | None = None
) -> MessageRec:
    """One OpenAI chat message -> MessageRec. Roles outside system/user/assistant/tool are refused
    (callers that allow more, like mini-swe-agent's `exit`, handle those before calling)."""
    m = ctx.obj(m, where)
    role = ctx.key(m, "role", where)
    role = (role_map or {}).get(role, role) if isinstance(role, str) else role
    legacy_result = role == "function"
    if legacy_result:
        # The legacy function-calling API (`functions` / `function_call`, before `tools`): a function's
        # result, named by the function, answers the assistant message just before it (one call per
        # reply). Neither side has an id on the wire: both get legacy_call_id(name), so they pair.
        role = "tool"
    if role not in ROLES:
        expected = "/".join(ROLES + extra_roles)
        ctx.fail(join(where, "role"), f"is {_kind(role)} (expected {expected})")
    ctx.media.clear()
    content = content_text(m.get("content"), ctx, join(where, "content"))
    media = ctx.take_media()
    thinking = m.get("reasoning_content")
    if thinking is not None and not isinstance(thinking, str):
        ctx.fail(join(where, "reasoning_content"), f"is {_kind(thinking)} (expected a string)")
    blocks: tuple[ThinkingRec, ...] = ()
    if role == "assistant" and m.get("thinking_blocks"):
        # litellm's Anthropic replies: reasoning_content is the text, thinking_blocks hold the signatures
        block_text, blocks = thinking_blocks(m.get("thinking_blocks"))
        thinking = thinking or block_text
    tool_calls = openai_tool_calls(m.get("tool_calls"), ctx, join(where, "tool_calls"))
    fc = m.get("function_call")
    if fc is not None and role == "assistant":  # the legacy API's one call per reply (see above)
        fw = join(where, "function_call")
        fc = ctx.obj(fc, fw)
        name = ctx.text(ctx.key(fc, "name", fw), join(fw, "name"), allow_none=False)
        legacy = ToolCallRec(
            id=legacy_call_id(name),
            name=name,
            arguments=arguments_text(fc.get("arguments"), ctx, join(fw, "arguments")),
        )
        tool_calls = (*tool_calls, legacy)
    tool_call_id: str | None = None
    if legacy_result:
        tool_call_id = legacy_call_id(ctx.opt_str(m.get("name"), join(where, "name")) or "")
    elif role == "tool":
        tool_call_id = ctx.opt_str(m.get("tool_call_id"), join(where, "tool_call_id"))
    return MessageRec(
        role=role,
        content=content,
        tool_calls=tool_calls,
        tool_call_id=tool_call_id,
        name=ctx.opt_str(m.get("name"), join(where, "name")),
        thinking=thinking or None,
        thinking_blocks=blocks,
        media=media,
    )


def _openai_image(part: dict[str, Any]) -> MediaRec:
    """An OpenAI image part (Chat's `image_url: {url, detail}`, Responses' `input_image` with its
    `image_url` a string) counted by OpenAI's rule."""
    from engine.importers.image_tokens import data_url, image_rec

    given = part.get("image_url")
    url = given.get("url") if isinstance(given, dict) else given
    detail = (given.get("detail") if isinstance(given, dict) else None) or part.get("detail") or "auto"
    url = url if isinstance(url, str) else str(part.get("file_id") or "")
    media_type, data = data_url(url)
    return image_rec("openai", data, media_type, url=url, detail=str(detail))


def _openai_attachment(part: dict[str, Any], ptype: str) -> MediaRec:
    """An OpenAI file part (Chat's `file: {file_data, file_id, filename}`, Responses' `input_file` with
    those at its top) or `input_audio: {data, format}`, counted by engine.importers.media_tokens."""
    from engine.importers.image_tokens import data_url
    from engine.importers.media_tokens import audio_rec, pdf_rec

    if ptype == "input_audio":
        given = part.get("input_audio")
        audio: dict[str, Any] = given if isinstance(given, dict) else {}
        data, fmt = audio.get("data"), audio.get("format")
        return audio_rec(data if isinstance(data, str) else None, fmt if isinstance(fmt, str) else "")
    given = part.get("file") if ptype == "file" else part
    f: dict[str, Any] = given if isinstance(given, dict) else {}
    raw = f.get("file_data")
    media_type, data = data_url(raw) if isinstance(raw, str) else ("", None)
    if data is None and isinstance(raw, str) and raw and not raw.startswith("data:"):
        data = raw  # base64 without the data: prefix
    ref = str(f.get("file_id") or f.get("file_url") or f.get("filename") or "")
    return pdf_rec("openai", data, media_type or "application/pdf", ref=ref)


def openai_tools(value: Any, ctx: Ctx, where: str) -> tuple[ToolSchemaRec, ...]:
    """OpenAI `tools` ([{type: function, function: {name, description, parameters}}]) or bare
    function objects -> ToolSchemaRecs."""
    out: list[ToolSchemaRec] = []
    for i, t in enumerate(ctx.lst(value, where) if value is not None else []):
        tw = join(where, i)
        t = ctx.obj(t, tw)
        if t.get("type") == "custom" and "custom" in t:
            # A custom (freeform) tool: its description, and the grammar its input follows as its parameters
            cw = join(tw, "custom")
            c = ctx.obj(t["custom"], cw)
            fmt = c.get("format")
            out.append(
                ToolSchemaRec(
                    name=ctx.text(ctx.key(c, "name", cw), join(cw, "name"), allow_none=False),
                    description=ctx.text(c.get("description"), join(cw, "description")),
                    parameters={"format": fmt} if isinstance(fmt, dict) else {},
                )
            )
            continue
        fn = t.get("function", t) if t.get("type", "function") == "function" else t
        fw = join(tw, "function") if "function" in t else tw
        fn = ctx.obj(fn, fw)
        params = fn.get("parameters")
        out.append(
            ToolSchemaRec(
                name=ctx.text(ctx.key(fn, "name", fw), join(fw, "name"), allow_none=False),
                description=ctx.text(fn.get("description"), join(fw, "description")),
                parameters=ctx.obj(params, join(fw, "parameters")) if params is not None else {},
            )
        )
    return tuple(out)


def json_lines(text: str, ctx: Ctx) -> Iterator[tuple[str, Any]]:
    """(where, value) for every non-blank line of a JSON-lines file; a line that is not JSON fails the
    import naming its line and column."""
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"line {lineno}:"
        try:
            yield where, json.loads(line)
        except json.JSONDecodeError as e:
            ctx.fail(where, f"invalid JSON at column {e.colno}: {e.msg}")


def sub(parent: Any, key: str) -> dict[str, Any]:
    """parent[key] if both are objects, else {}: for optional metadata that must never fail an import."""
    if isinstance(parent, dict):
        value = parent.get(key)
        if isinstance(value, dict):
            return value
    return {}


def sublist(parent: Any, key: str) -> list[Any]:
    if isinstance(parent, dict):
        value = parent.get(key)
        if isinstance(value, list):
            return value
    return []


def session_from_model(
    fmt: str, path: str, model: str | None, calls: list[CallRec], meta: dict[str, Any]
) -> ImportedSession:
    """The session of a format that names no provider: the provider is guessed from the model name."""
    return ImportedSession(
        format=fmt,
        source=path,
        model=model or "unknown",
        provider=guess_provider(model),
        calls=calls,
        meta=meta,
    )


def usage_rec(value: Any, ctx: Ctx, where: str, **extra: Any) -> UsageRec:
    """A provider usage object -> UsageRec through the one normaliser every path uses
    (engine.feedback.normalize_usage): Anthropic cache writes incl. the 1-hour part, OpenAI/Responses
    cached tokens, DeepSeek hit/miss, litellm's fields. `extra` adds diagnostics (prompt_cache_key)."""
    u = ctx.obj(value, where)
    try:
        n = normalize_usage(u)
    except UsageFormatError as e:
        ctx.fail(where, str(e))
    if extra:
        n = n.with_extra(**extra)
    return UsageRec(
        input_tokens=n.input_tokens,
        output_tokens=n.output_tokens,
        cache_read_tokens=n.cache_read_tokens,
        cache_write_tokens=n.cache_write_tokens,
        cache_write_1h_tokens=n.cache_write_1h_tokens,
        extra=n.extra,
    )
