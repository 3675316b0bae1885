"""A command line missing a required argument or option, or an option's value: one `cp-inspect:` line
naming what is missing and what to write (exit 2, typer's code for it), like every other error of the
program. Typer printed its usage block for a missing parameter ("Usage: ... Try '... --help' for help.
Error: Missing argument 'target'."), lines that named it by its Python name and said nothing of what it
takes, and "Error: Option '--db' requires an argument." for `--db` last on the line."""

from __future__ import annotations

import sys
from typing import Any

import typer
from typer.core import TyperGroup

from .recording_open import fail

# Click's MissingParameter, from whichever click this typer uses (its own copy since typer 0.2x, the click
# package before): the module BadParameter, which typer exports, comes from.
_EXCEPTIONS = sys.modules[typer.BadParameter.__module__]
MissingParameter: type[Exception] = _EXCEPTIONS.MissingParameter
BadOptionUsage: type[Exception] = _EXCEPTIONS.BadOptionUsage


def _is_option(param: Any) -> bool:
    return getattr(param, "param_type_name", "") == "option"


def _names(ctx: Any) -> list[str]:
    """The command's words after the program's name: ["ctx", "get"]."""
    words: list[str] = []
    while ctx.parent is not None:
        words.append(ctx.info_name or "")
        ctx = ctx.parent
    return words[::-1]


def _placeholder(param: Any) -> str:
    """How the usage line writes the parameter's value: ID, FILE, TOKENS; FILES... for several."""
    meta = (param.metavar or param.name or "value").strip("<>").upper()
    return meta + ("..." if param.nargs == -1 else "")


def _shown(param: Any) -> str:
    """The parameter as the user writes it: --db for an option, TARGET or FILES for an argument."""
    if _is_option(param):
        return str(max(param.opts, key=len))
    return _placeholder(param).removesuffix("...")


def _written(param: Any) -> str:
    if _is_option(param):
        return f"{_shown(param)} {_placeholder(param)}"
    return _placeholder(param)


def _about(param: Any) -> str:
    """The parameter's help as a clause: "a .cpsession recording" (its first word lower-cased unless it is
    a name in capitals, such as PID)."""
    text = (getattr(param, "help", None) or "").strip().rstrip(".")
    first = text.split(" ", 1)[0]
    if text and not (len(first) > 1 and first.isupper()):
        text = text[0].lower() + text[1:]
    return text


def _usage(command: str, params: list[Any], also: Any = None) -> str:
    """The command written out with everything it requires (and `also`): options first, then the
    arguments in order."""
    required = [p for p in params if p.required or p is also]
    options = [p for p in required if _is_option(p)]
    arguments = [p for p in required if not _is_option(p)]
    return " ".join([command, *(_written(p) for p in [*options, *arguments])])


def missing_line(exc: Any) -> str:
    """The one line for a missing parameter: what is missing, what it is, and what to write."""
    ctx, param = exc.ctx, exc.param
    if ctx is None or param is None:
        return f"{exc.format_message()} (cp-inspect --help lists the commands)"
    words = " ".join(_names(ctx))
    command = f"cp-inspect {words}"
    about = _about(param)
    what = f"{_shown(param)}, {about}" if about else _shown(param)
    return f"{words}: missing {what}: write `{_usage(command, ctx.command.params)}` (`{command} --help` lists its options)"


def option_line(exc: Any, words: list[str], command: Any) -> str:
    """The one line for an option used wrongly (BadOptionUsage, raised with no context: the caller names
    the command): an option given no value says what value it takes."""
    name = exc.option_name
    text = " ".join(words)
    full = f"cp-inspect {text}"
    param = next((p for p in command.params if _is_option(p) and name in p.opts), None)
    if param is None or getattr(param, "is_flag", False):  # "does not take a value", say
        message = exc.message[:1].lower() + exc.message[1:]
        return f"{text}: {message.rstrip('.')} (`{full} --help` lists its options)"
    about = _about(param)
    what = f"{name} needs a value" + (f", {about}" if about else "")
    return (
        f"{text}: {what}: write `{_usage(full, command.params, param)}` (`{full} --help` lists its options)"
    )


class OneLineMissing(TyperGroup):
    """The program's command groups (the app and `ctx`): a command run without one of its required
    parameters, or an option without its value, is refused in one line, exit 2. The innermost group
    answers (its context names the subcommand that failed to parse)."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except MissingParameter as exc:
            fail(missing_line(exc), 2)
        except BadOptionUsage as exc:
            name = ctx.invoked_subcommand
            command = self.get_command(ctx, name) if name else None
            if command is None or isinstance(command, TyperGroup):
                raise
            fail(option_line(exc, [*_names(ctx), name], command), 2)
