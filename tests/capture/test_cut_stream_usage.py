"""A streamed Anthropic call cut short keeps the usage its stream had already reported.

`message_start` carries the call's input side (uncached tokens, cache reads, cache writes with their
5m/1h split) before the reply's first word. When the stream ends early (the agent leaves
`with client.messages.stream(...)` after the first event, the API sends an `overloaded_error` event
mid-stream), the proxy and the tap journaled only the error: the turn had no usage, so `explain`, the
inspector and the OpenTelemetry span showed no cache figures for a call whose prompt the upstream had
read (and written to its cache). Now the turn has the usage the stream reported, then the error.
A stream that reported none before it was cut (OpenAI chat: its usage comes in the last chunk) is
journaled with the error alone, as before. Real anthropic and openai SDKs, through the proxy and the
tap, against the stand-in."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from typer.testing import CliRunner

from engine.capture.tap import tap
from inspector.cli import app
from tests.capture.conftest import Proxied, errors, events_of, usages, verify_ok
from tests.capture.standin import USAGE_ANTHROPIC, StandIn

SYSTEM = "You are a careful coding agent."
# What message_start reported: the input side whole, one output token so far
STARTED = {
    "input_tokens": USAGE_ANTHROPIC["input_tokens"]
    + USAGE_ANTHROPIC["cache_read_input_tokens"]
    + USAGE_ANTHROPIC["cache_creation_input_tokens"],
    "output_tokens": 1,
    "cache_read_tokens": USAGE_ANTHROPIC["cache_read_input_tokens"],
    "cache_write_tokens": USAGE_ANTHROPIC["cache_creation_input_tokens"],
    "cache_write_1h_tokens": USAGE_ANTHROPIC["cache_creation"]["ephemeral_1h_input_tokens"],
}


def _messages(turn: int) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [{"role": "user", "content": "List the files."}]
    for i in range(turn):
        msgs += [{"role": "assistant", "content": f"Looked {i}."}, {"role": "user", "content": f"Go on {i}."}]
    return msgs


def _left_early(client: anthropic.Anthropic) -> None:
    """A call, a stream the agent leaves after its first event, a call."""
    common: dict[str, Any] = {"max_tokens": 256, "system": SYSTEM}
    client.messages.create(model="claude-sonnet-4", messages=_messages(0), **common)  # type: ignore[call-overload]
    with client.messages.stream(model="claude-sonnet-4-slow", messages=_messages(1), **common) as s:  # type: ignore[arg-type]
        for _ in s:
            break
    client.messages.create(model="claude-sonnet-4", messages=_messages(2), **common)  # type: ignore[call-overload]


def _closed_early(client: anthropic.Anthropic) -> None:
    """As _left_early, the stream made with create(stream=True) and closed after its first event."""
    common: dict[str, Any] = {"max_tokens": 256, "system": SYSTEM}
    client.messages.create(model="claude-sonnet-4", messages=_messages(0), **common)  # type: ignore[call-overload]
    stream = client.messages.create(
        model="claude-sonnet-4-slow", messages=_messages(1), stream=True, **common
    )  # type: ignore[call-overload]
    for _ in stream:
        break
    stream.close()
    client.messages.create(model="claude-sonnet-4", messages=_messages(2), **common)  # type: ignore[call-overload]


def _overloaded(client: anthropic.Anthropic) -> None:
    """A call, a stream the API breaks off with overloaded_error (the SDK raises it), the call again."""
    common: dict[str, Any] = {"max_tokens": 256, "system": SYSTEM}
    client.messages.create(model="claude-sonnet-4", messages=_messages(0), **common)  # type: ignore[call-overload]
    with pytest.raises(anthropic.APIStatusError, match="overloaded_error"):
        with client.messages.stream(model="claude-sonnet-4-overloaded", messages=_messages(1), **common) as s:  # type: ignore[arg-type]
            s.get_final_message()
    client.messages.create(model="claude-sonnet-4", messages=_messages(2), **common)  # type: ignore[call-overload]


def _check(path: Path, said: str) -> None:
    us = usages(path)
    assert len(us) == 3, us
    assert {k: v for k, v in us[1].items()} == STARTED, us[1]
    errs = errors(path)
    assert [(e["turn"], e["kind"]) for e in errs] == [(1, "incomplete_stream")], errs
    # (the kind is said once: the trace's "{kind}: {message}" read "incomplete_stream: incomplete_stream: ...")
    assert re.search(said, errs[0]["message"]) and not errs[0]["message"].startswith("incomplete_stream")
    assert verify_ok(path) == 3
    # explain says the failure, its kind once (the usage came after it: the trace takes the first outcome)
    res = CliRunner().invoke(app, ["explain", str(path), "--turn", "1", "--format", "json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["error"] == f"incomplete_stream: {errs[0]['message']}", res.stdout


AGENTS: dict[str, tuple[Callable[[anthropic.Anthropic], None], str]] = {
    "left_early": (_left_early, "disconnected|closed before"),
    "closed_early": (_closed_early, "disconnected|stopped reading"),
    "overloaded": (_overloaded, "overloaded_error"),
}


@pytest.mark.parametrize("case", sorted(AGENTS))
def test_a_cut_stream_keeps_its_reported_usage_through_the_proxy(proxied: Proxied, case: str) -> None:
    agent, said = AGENTS[case]
    agent(anthropic.Anthropic(base_url=proxied.url, api_key="sk-ant-test", max_retries=0))
    assert proxied.recorder.flush(30)
    (path,) = proxied.finish()
    _check(path, said)


@pytest.mark.parametrize("case", sorted(AGENTS))
def test_a_cut_stream_keeps_its_reported_usage_through_the_tap(
    standin: StandIn, tmp_path: Path, case: str
) -> None:
    agent, said = AGENTS[case]
    rec = tmp_path / "t.cpsession"
    client = tap(anthropic.Anthropic(base_url=standin.url, api_key="sk-ant-test", max_retries=0), record=rec)
    agent(client)
    client.contextpipe_tap.close()  # type: ignore[attr-defined]
    assert client.contextpipe_stats.errors == 0, client.contextpipe_stats.last_error  # type: ignore[attr-defined]
    _check(rec, said)


def test_a_cut_chat_stream_had_no_usage_and_is_journaled_without(proxied: Proxied) -> None:
    client = openai.OpenAI(base_url=proxied.url + "/v1", api_key="sk-test", max_retries=0)
    msgs: list[Any] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "List the files."}]
    with pytest.raises(openai.APIConnectionError):
        for _ in client.chat.completions.create(
            model="gpt-4o-cut", messages=msgs, stream=True, stream_options={"include_usage": True}
        ):
            pass
    (path,) = proxied.finish()
    assert usages(path) == []
    assert [e["kind"] for e in errors(path)] == ["incomplete_stream"]


def test_usage_the_journal_cannot_read_leaves_the_failure_said(proxied: Proxied, standin: StandIn) -> None:
    # A cut stream whose message_start usage is not a count: the usage is a tap error (counted, a diag
    # event), the call's failure is still journaled under its turn, and the recording still verifies.
    client = anthropic.Anthropic(base_url=proxied.url, api_key="sk-ant-test", max_retries=0)
    common: dict[str, Any] = {"max_tokens": 256, "system": SYSTEM}
    client.messages.create(model="claude-sonnet-4", messages=_messages(0), **common)  # type: ignore[call-overload]
    # (the SDK passes its transport's error on as it is: "peer closed connection ...")
    with pytest.raises(Exception, match="closed connection"):  # noqa: B017, PT011
        for _ in client.messages.create(  # type: ignore[call-overload]
            model="claude-sonnet-4-badusage-cut", messages=_messages(1), stream=True, **common
        ):
            pass
    (path,) = proxied.finish()
    assert len(usages(path)) == 1
    assert [(e["turn"], e["kind"]) for e in errors(path)] == [(1, "incomplete_stream")]
    diags = [e for e in events_of(path) if e["k"] == "diag"]
    assert diags and "UsageFormatError" in diags[0]["message"], diags
    assert verify_ok(path) == 2


def test_a_cut_stream_billed_counts_in_simulate_as_top_prices_it(standin: StandIn, tmp_path: Path) -> None:
    """The cut call was billed (its usage came before the failure), so simulate keeps it in every column:
    the as-recorded column's cost is what the provider's usage prices to, the figure `top` shows. It left
    every turn with an error out (report's COST $0.0126 against top's $0.0186 on this session)."""
    from engine.sim.pricing import usage_cost

    rec = tmp_path / "t.cpsession"
    client = tap(anthropic.Anthropic(base_url=standin.url, api_key="sk-ant-test", max_retries=0), record=rec)
    _left_early(client)
    client.contextpipe_tap.close()  # type: ignore[attr-defined]
    res = CliRunner().invoke(app, ["simulate", str(rec), "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    actual = out["policies"]["actual"]
    assert actual["calls"] == 3 and out["simulated_turns"] == 3, out
    priced = [usage_cost("claude-sonnet-4", u) for u in usages(rec)]
    assert actual["cost_usd"] == pytest.approx(sum(c for c in priced if c is not None), abs=1e-6)
    assert any("billed all the same" in n and "[1]" in n for n in out["notes"]), out["notes"]
    assert not any("left out of every column" in n for n in out["notes"]), out["notes"]
    # diff prices the same turns: the cut call in both sides' figures, as simulate's engine column has it
    res = CliRunner().invoke(app, ["diff", str(rec), str(rec)])
    assert res.exit_code == 0, res.output
    cost = f"${out['policies']['pipeline']['cost_usd']:.4f}"
    assert f"cost {cost} -> {cost}" in res.stdout, (cost, res.stdout)
