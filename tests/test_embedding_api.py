"""The embedding API as a new user meets it: the real SDKs against the local stand-in upstream, and
misuse that must fail at the wrong call with an error saying what to do, leaving the pipeline usable."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine import ConfigError, ContentError, Pipeline, PipelineClosedError, UnpairedToolResultError
from engine.feedback import UsageFormatError
from engine.recording.cpsession import RecordingReader
from engine.recording.replay import Replayer

anthropic = pytest.importorskip("anthropic")
openai = pytest.importorskip("openai")
pytest.importorskip("aiohttp")
from tests.capture.standin import StandIn  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
BASH = {"type": "object", "properties": {"command": {"type": "string"}}}


@pytest.fixture(scope="module")
def standin() -> Iterator[StandIn]:
    s = StandIn().start()
    yield s
    s.stop()


def _pipe(provider: str = "anthropic", **kw: object) -> Pipeline:
    pipe = Pipeline("claude-sonnet-4" if provider == "anthropic" else "gpt-4o", provider, **kw)  # type: ignore[arg-type]
    pipe.identity("You are a careful coding agent.")
    pipe.add_tool("bash", "Run a shell command", BASH)
    pipe.user("List the files.")
    return pipe


def _with_call(pipe: Pipeline) -> Pipeline:
    pipe.next_request()
    pipe.assistant("Let me look.", tool_calls=[{"id": "c1", "name": "bash", "arguments": '{"command": "ls"}'}])
    return pipe


# ----------------------------------------------------------------------------- text the engine cannot journal
def test_bytes_tool_output_is_refused_and_the_recording_stays_readable(tmp_path: Path) -> None:
    """subprocess output without text=True is bytes. It was hashed (sha256 takes bytes), journaled as a
    blob and written to the recording, which no reader could open afterwards."""
    path = tmp_path / "run.cpsession"
    pipe = _with_call(_pipe(record=path))
    n = len(pipe.journal.events)
    with pytest.raises(ContentError, match=r"got bytes: decode it first"):
        pipe.tool_result("c1", b"\xff\xfe total 0\n")  # type: ignore[arg-type]
    assert len(pipe.journal.events) == n  # nothing journaled
    pipe.tool_result("c1", "total 0\n")  # the call is still open and takes its result
    req = pipe.next_request()
    assert "total 0" in req.bytes.decode()
    pipe.record_usage({"input_tokens": 10, "output_tokens": 1})
    pipe.close()
    with RecordingReader.open(path) as r:
        assert r.damage is None
        events = list(r.events())
    assert Replayer(events).verify().ok


def test_surrogates_and_non_text_say_what_to_do() -> None:
    """A file name from os.listdir() with non-UTF-8 bytes holds lone surrogates: no provider accepts
    them as JSON. The error said only `'utf-8' codec can't encode character`."""
    pipe = _with_call(_pipe())
    n = len(pipe.journal.events)
    name = os.fsdecode(b"caf\xe9.txt")
    with pytest.raises(ContentError, match=r"not valid UTF-8 .*caf.*errors='replace'"):
        pipe.tool_result("c1", name)
    with pytest.raises(ContentError, match=r"got NoneType: pass str\(value\)"):
        pipe.user(None)  # type: ignore[arg-type]
    assert len(pipe.journal.events) == n
    pipe.tool_result("c1", name.encode("utf-8", "surrogateescape").decode("utf-8", "replace"))
    assert "caf\ufffd.txt" in pipe.next_request().bytes.decode()


# ----------------------------------------------------------------------------- tool calls as the SDK returns them
def test_sdk_tool_call_objects_go_in_as_returned(standin: StandIn) -> None:
    """`resp.content`'s tool_use blocks and `message.tool_calls` are what a user has in hand; they
    raised `'ToolUseBlock' object is not subscriptable` / KeyError."""
    standin.script[:] = [{"bash": "ls"}, {"bash": "pwd"}]
    a = _pipe("anthropic")
    resp = anthropic.Anthropic(base_url=standin.url, api_key="k").messages.create(**a.next_request().body)
    a.record_usage(resp.usage)
    calls = a.assistant("", tool_calls=[b for b in resp.content if b.type == "tool_use"])
    assert [(c.id, c.name, c.arguments_obj()) for c in calls] == [("toolu_call_1", "bash", {"command": "ls"})]
    a.tool_result(calls[0].id, "README.md\n")
    assert '"tool_use_id":"toolu_call_1"' in a.next_request().bytes.decode().replace(" ", "")

    o = _pipe("openai")
    client = openai.OpenAI(base_url=standin.url + "/v1", api_key="k")
    msg = client.chat.completions.create(**o.next_request().body).choices[0].message
    calls = o.assistant(msg.content or "", tool_calls=msg.tool_calls or [])
    assert [(c.id, c.name, c.arguments_obj()) for c in calls] == [("call_2", "bash", {"command": "pwd"})]
    o.tool_result(calls[0].id, "/work\n")
    # the request built from SDK objects is the one built from plain dicts
    p = _pipe("openai")
    p.next_request()
    p.assistant(msg.content or "", tool_calls=[{"id": "call_2", "name": "bash", "arguments": '{"command": "pwd"}'}])
    p.tool_result("call_2", "/work\n")
    assert o.next_request().bytes == p.next_request().bytes


def test_a_bad_tool_call_is_refused_before_anything_is_journaled() -> None:
    pipe = _pipe()
    pipe.next_request()
    n = len(pipe.journal.events)
    with pytest.raises(ConfigError, match=r"lacks an id or a name: pass \{'id'"):
        pipe.assistant("thinking aloud", tool_calls=[{"name": "bash", "arguments": "{}"}])
    assert len(pipe.journal.events) == n  # the text was journaled before the KeyError
    pipe.assistant("thinking aloud", tool_calls=[{"id": "c1", "name": "bash", "input": {"command": "ls"}}])
    pipe.tool_result("c1", "ok")
    pipe.next_request()


# ----------------------------------------------------------------------------- after close()
def test_calls_after_close_raise_instead_of_vanishing(tmp_path: Path) -> None:
    """After close() the recorder is gone: user(), next_request(), record_usage() went on working and
    their events reached no recording."""
    path = tmp_path / "run.cpsession"
    pipe = _pipe(record=path)
    pipe.next_request()
    pipe.close()
    for call in (lambda: pipe.user("more"), pipe.next_request, lambda: pipe.record_usage({"input_tokens": 1})):
        with pytest.raises(PipelineClosedError, match=r"after close\(\).*make a new Pipeline"):
            call()
    pipe.close()  # closing twice is harmless
    with Pipeline("claude-sonnet-4") as p2:
        p2.user("hi")
    with pytest.raises(PipelineClosedError, match=r"^user\(\) after close"):
        p2.user("again")


# ----------------------------------------------------------------------------- the user's own mypy
def test_user_code_type_checks_against_the_engine(tmp_path: Path) -> None:
    """Without py.typed (PEP 561) an agent's mypy saw no types at all: `import engine` was
    'Cannot find implementation or library stub', so every engine call went unchecked."""
    script = tmp_path / "agent.py"
    script.write_text(
        textwrap.dedent(
            """
            from engine import Pipeline, Request

            pipe = Pipeline("claude-sonnet-4", provider="anthropic", window=200_000)
            pipe.user("hi")
            req: Request = pipe.next_request()
            tokens: int = req.final_tokens
            wrong: str = req.final_tokens
            """
        )
    )
    env = {**os.environ, "PYTHONPATH": str(REPO), "MYPYPATH": ""}
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--cache-dir", os.devnull, str(script)],
        cwd=tmp_path,  # outside the repository: the engine is found as an installed package
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "Cannot find implementation" not in out.stdout, out.stdout
    # the one deliberate mistake is caught, so the engine's annotations were read
    assert 'Incompatible types in assignment (expression has type "int", variable has type "str")' in out.stdout
    assert out.stdout.count("error:") == 1, out.stdout


# ----------------------------------------------------------------------------- unanswered tool calls
@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_an_unanswered_call_is_refused_at_the_request_not_by_the_api(provider: str, standin: StandIn) -> None:
    """A user message after a call with no result built a request both APIs reject (tool_use without
    tool_result; tool_calls without tool messages): the error came from the provider a model call later.
    It is refused at next_request() (and at the next assistant()), nothing journaled, and the pipeline
    goes on once the call is answered."""
    pipe = _with_call(_pipe(provider))
    pipe.user("Actually, also check the tests.")  # legal so far: the serializer puts results first
    n = len(pipe.journal.events)
    with pytest.raises(UnpairedToolResultError, match=r"tool call \['c1'\] has no result before the next request"):
        pipe.next_request()
    with pytest.raises(UnpairedToolResultError, match=r"before the next assistant message.*is_error=True"):
        pipe.assistant("More.")
    assert len(pipe.journal.events) == n
    pipe.explain()  # EXPLAIN looks at the state mid-round: it sends nothing
    pipe.tool_result("c1", "", is_error=True)
    body = pipe.next_request().body
    if provider == "anthropic":
        anthropic.Anthropic(base_url=standin.url, api_key="k").messages.create(**body)
    else:
        openai.OpenAI(base_url=standin.url + "/v1", api_key="k").chat.completions.create(**body)


# ----------------------------------------------------------------------------- the README runs as written
def _readme_engine_examples() -> list[str]:
    text = (REPO / "README.md").read_text()
    blocks = [b.split("```", 1)[0] for b in text.split("```python\n")[1:]]
    # The engine's own examples (the tap and litellm ones need an API key for their client's constructor).
    return [b for b in blocks if b.startswith("from engine import")]


@pytest.mark.parametrize("n", range(2))
def test_readme_engine_example_runs_as_written(n: int, tmp_path: Path) -> None:
    """The fork/shadow example used Pipeline without importing it and a `parent_request` never made."""
    examples = _readme_engine_examples()
    assert len(examples) == 2
    env = {**os.environ, "PYTHONPATH": str(REPO), "XDG_RUNTIME_DIR": str(tmp_path)}
    env.pop("CONTEXTPIPE_RECORD", None)
    out = subprocess.run(
        [sys.executable, "-c", examples[n]], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    # Every recording an example asks for holds its turns and replays: the fork example's child.cpsession
    # held only its header (the child's one turn, with no usage recorded and the pipeline never closed,
    # was never written), so `cp-inspect verify` and `forks` found nothing in it.
    written = sorted(tmp_path.glob("*.cpsession"))
    assert written
    for rec in written:
        check = subprocess.run([sys.executable, "-m", "inspector.cli", "verify", str(rec)], cwd=tmp_path, env=env,
                               capture_output=True, text=True, timeout=120)
        assert check.returncode == 0 and check.stdout.startswith("ok:"), (rec.name, check.stdout, check.stderr)
        assert "not closed" not in check.stdout + check.stderr, (rec.name, check.stdout)


# ----------------------------------------------------------------------------- usage from a stream
def test_a_streams_partial_usage_says_which_usage_to_pass(standin: StandIn) -> None:
    """The usage in hand at the end of a raw Anthropic stream is message_delta's (output tokens only):
    the error said 'unrecognised usage object dict', the SDK's type lost and no word of what to pass.
    An OpenAI stream without include_usage has no usage at all: say how to get one."""
    pipe = _pipe("anthropic")
    client = anthropic.Anthropic(base_url=standin.url, api_key="k")
    start = delta = None
    for ev in client.messages.create(**pipe.next_request().body, stream=True):
        if ev.type == "message_start":
            start = ev.message.usage
        elif ev.type == "message_delta":
            delta = ev.usage
    assert start is not None and delta is not None
    with pytest.raises(UsageFormatError, match=r"MessageDeltaUsage has output tokens but no input.*get_final_message"):
        pipe.record_usage(delta)
    # what the message says to do works
    u = pipe.record_usage(start.model_copy(update={"output_tokens": delta.output_tokens}))
    assert (u.output_tokens, u.cache_read_tokens) == (17, 3400)
    with pytest.raises(UsageFormatError, match=r"include_usage"):
        _pipe("openai").record_usage(None)


def test_the_loops_own_types_import_from_engine() -> None:
    """assistant() returns ToolCalls, record_usage() a Usage or a UsageFormatError: a typed agent loop
    names them, and they were only in engine.artifacts / engine.feedback."""
    import engine
    from engine import ToolCall, Usage, UsageFormatError  # noqa: F401

    pipe = _pipe()
    pipe.next_request()
    assert isinstance(pipe.record_usage({"input_tokens": 5, "output_tokens": 1}), engine.Usage)
    assert all(isinstance(c, engine.ToolCall) for c in pipe.assistant("", [{"id": "c1", "name": "bash"}]))
    assert {"ToolCall", "Usage", "UsageFormatError"} <= set(engine.__all__)
