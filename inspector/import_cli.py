"""`cp-inspect import`: a real agent's trajectory or log (mini-swe-agent, SWE-agent, OpenHands, SWE-smith,
claude-trace, proxy JSONL) imported as a recording, each model call a turn; `--list` numbers a log's
conversations. Registered in cli.py; the importers are engine/importers/ (loaded when the command runs:
`cp-inspect --help` imports this module).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from engine.errors import ContextPipeError
from engine.wording import counted

from .cli_common import check_window, fail
from .recording_open import file_head, starts_a_recording
from .token_arg import number_option, tokens_option


def import_(
    fmt: Annotated[
        str,
        typer.Argument(
            help="mini-swe-agent | swe-agent | openhands | swe-smith | claude-trace | proxy-jsonl | auto"
        ),
    ],
    src: Annotated[Path, typer.Argument(help="The trajectory or log file.", readable=False)],
    out: Annotated[
        Path | None, typer.Option("-o", "--out", help="The .cpsession file to write.", readable=False)
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(
            help="Model to record it as (default: the one the source names; needed to price it when none)."
        ),
    ] = None,
    provider: Annotated[
        str | None,
        typer.Option(
            help="Provider policy for the engine's shadow plan: anthropic, openai, bedrock, prefix or deepseek "
            "(default: the source's, else openai)."
        ),
    ] = None,
    window_text: Annotated[
        str | None,
        typer.Option(
            "--window",
            metavar="<tokens>",
            help="Context window (tokens: 32000, 32k, 1.5M) for the engine's plan.",
        ),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace OUT if it exists.")] = False,
    conversation: Annotated[
        int | None,
        typer.Option(
            "--conversation",
            metavar="N",
            parser=number_option("--conversation", "a conversation number, e.g. 2"),
            help="Which conversation of a log holding several (proxy JSONL, claude-trace): 1 = the most calls "
            "(the default); --list numbers them.",
        ),
    ] = None,
    list_: Annotated[
        bool,
        typer.Option(
            "--list",
            help="List the file's conversations (calls, first message, restart or fork of which) and "
            "write nothing.",
        ),
    ] = False,
) -> None:
    """Import a real agent trajectory as a recording: each model call becomes a turn.

    \b
    Example:
      cp-inspect import auto TRAJECTORY.json -o run.cpsession
      cp-inspect import auto PROXY.jsonl --list                  # a log of several conversations
      cp-inspect import auto PROXY.jsonl --conversation 2 -o run2.cpsession
    """
    from engine.importers import NoSuchConversation
    from engine.importers.ingest import ingest

    window = tokens_option(window_text, "--window")
    if conversation is not None and conversation < 1:
        fail(
            f"--conversation must be 1 or more (1 is the conversation with the most calls), got {conversation}",
            2,
        )
    if out is None and not list_:
        fail(
            "import: -o/--out FILE is required (the .cpsession to write), or --list to list the conversations",
            2,
        )
    if list_ and (out is not None or conversation is not None):
        # --list printed the conversations and the -o FILE asked for was not written, without a word.
        fail("--list lists the conversations and writes nothing: give it without -o and --conversation", 2)
    if not src.exists():
        fail(f"no such file: {src}")
    if src.is_dir():
        fail(f"{src} is a directory: give the trajectory or log file inside it")
    if not src.is_file():  # reading a FIFO nobody writes waited forever
        fail(f"{src} is not a regular file (a FIFO or a device): give the trajectory or log file itself")
    if list_:
        _list_conversations(fmt, src)
        return
    assert out is not None
    from .out_path import check_out, written_whole  # an import's own (--help imports cli.py)

    check_out(out, force)
    _check_plan_options(window, provider)
    try:
        imp = _load_or_fail(fmt, src, model=model, provider=provider, conversation=conversation)
    except NoSuchConversation as exc:
        n = len(exc.conversations)
        fail(
            f"--conversation {conversation}: {src} holds {counted(n, 'conversation')} (1 to {n}); "
            f"`cp-inspect import {fmt} {src} --list` lists them",
            2,
        )
    # Written beside OUT and renamed over it once complete: an import stopped half way (Ctrl-C, a full
    # disk, an error in a later call) left a shorter recording at OUT that verified and replayed as if
    # it were the whole session, and with --force the file it replaced was already gone.
    try:
        with written_whole(out) as partial:
            pipe, report = ingest(imp, partial, window=window, provider=provider, model=model)
            pipe.close()
            if pipe.recording_error is not None:
                # The pipeline keeps an agent going when its recording fails (and warns); an import's only
                # product is the recording, so a short one is an error.
                cause = pipe.recording_error.__cause__
                why = (
                    cause.strerror if isinstance(cause, OSError) and cause.strerror else pipe.recording_error
                )
                raise ContextPipeError(f"cannot write {out} ({why}): nothing was imported")
    except ContextPipeError as exc:
        fail(str(exc))
    except KeyboardInterrupt:
        kept = f"; {out} is as it was" if out.exists() else ""
        fail(f"interrupted: nothing imported{kept}", 130)
    except OSError as exc:
        fail(f"cannot write {out}: {exc.strerror or exc}")
    typer.echo(
        f"wrote {out}: {counted(report.turns, 'turn')} from {imp.format} ({out.stat().st_size / 1024:.0f} KiB)"
    )
    notes = [*imp.meta.get("notes", []), *report.notes]
    if model is None and imp.model == "unknown":
        # Said here, not first by simulate's price lookup, which refuses 'unknown' a step later.
        unnamed = "the source names no model: recorded as 'unknown'; import with --model NAME to price it"
        notes.insert(0, unnamed)
    elif _unpriced(model or imp.model):
        # A mistyped --model (claude-sonet-4) was recorded without a word; report then skipped the session.
        notes.insert(
            0,
            f"model {model or imp.model!r} has no price: report and simulate price it only with "
            "--model KNOWN_MODEL (or --prices FILE holding its row)",
        )
    for note in notes[:5]:
        typer.echo(f"  note: {note}")
    if len(notes) > 5:  # cut at five without a word, the rest of what was repaired or skipped went unsaid
        typer.echo(f"  ... and {len(notes) - 5} more notes of the same kinds")


def _unpriced(model: str) -> bool:
    """Whether the price table report and simulate read by default has no row for `model`."""
    from engine.sim.pricing import UnknownModelError, load_prices

    try:
        load_prices().get(model)
    except UnknownModelError:
        return True
    except ContextPipeError:
        return False  # the table itself cannot be read: report and simulate say so when they need it
    return False


def _list_conversations(fmt: str, src: Path) -> None:
    """import --list: the file's conversations, numbered as --conversation takes them."""
    from engine.importers import conversation_list

    listing = conversation_list(_load_or_fail(fmt, src))
    typer.echo(f"{src}: {counted(len(listing), 'conversation')}")
    for line in listing:
        typer.echo(f"  {line}")


def _load_or_fail(fmt: str, src: Path, **options: Any) -> Any:
    """The importer's load of `src`, its refusals said as import says them (one line and an exit code);
    a NoSuchConversation (only a load given a conversation raises it) is left to the caller, which words it."""
    from engine.importers import NoSuchConversation, load
    from engine.importers.model import ImportFormatError

    if _is_recording(src):  # "not a trajectory in any known format: is not UTF-8 text (byte 4)" before
        fail(f"{src} is already a recording: replay, explain, simulate and verify take it as it is", 2)
    try:
        return load(src, None if fmt == "auto" else fmt, **options)
    except NoSuchConversation:
        raise  # (an ImportFormatError too: the caller words it)
    except ImportFormatError as exc:
        fail(str(exc))
    except ValueError as exc:
        fail(str(exc), 2)
    except PermissionError:
        from engine.access import denied

        fail(f"cannot read {src}: {denied(src)}")
    except OSError as exc:
        fail(f"cannot read {src}: {exc.strerror or exc}")


def _is_recording(path: Path) -> bool:
    if not path.is_file():  # a FIFO would block this open (the import's own read says what it is)
        return False
    head = file_head(path)  # (None: said by the import's own read)
    return head is not None and starts_a_recording(head)


def _check_plan_options(window: int | None, provider: str | None) -> None:
    """import's --window and --provider, refused before any work: --window 0 was read as no window (the
    default), a negative or huge one failed as exit 1 after reading the file, and an unknown provider
    was replaced by openai without a word."""
    from engine.errors import ConfigError
    from engine.providers import canonical_provider

    check_window(window)
    if provider is not None:
        try:
            canonical_provider(provider)
        except ConfigError as exc:
            fail(f"--provider: {exc}", 2)
