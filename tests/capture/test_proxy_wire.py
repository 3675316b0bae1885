"""The proxy at the byte level: identical pass-through, errors passed unchanged, and bad input.

A raw HTTP client (httpx) asks the stand-in directly and through the proxy; the bodies must be equal
byte for byte, streamed or not. Then: the upstream down (the agent gets a 502 naming it), upstream
4xx/5xx (status, body and headers passed through), malformed SSE (passed through, recorded as
incomplete), an agent that disconnects mid-stream, an upstream that cuts the stream, a 50 MB body.
Through all of it the proxy keeps serving and the recordings stay verifiable.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import anthropic
import httpx
import openai
import pytest

from engine.capture.proxy.recording import Recorder
from engine.capture.proxy.server import ProxyServer
from tests.capture.conftest import Proxied, errors, usages, verify_ok
from tests.capture.standin import StandIn

BODIES = {
    "/v1/messages": {
        "model": "claude-sonnet-4",
        "max_tokens": 64,
        "system": "S",
        "messages": [{"role": "user", "content": "hi"}],
    },
    "/v1/chat/completions": {
        "model": "gpt-4o",
        "messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "hi"}],
        "stream_options": {"include_usage": True},
    },
    "/v1/responses": {"model": "gpt-4.1", "instructions": "S", "input": "hi"},
}


def _post(base: str, path: str, body: dict[str, object], stream: bool) -> httpx.Response:
    payload = {**body, "stream": stream}
    if not stream:
        payload.pop("stream_options", None)
    with httpx.Client(timeout=60) as c:
        return c.post(base + path, json=payload, headers={"x-api-key": "k", "authorization": "Bearer k"})


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("path", list(BODIES))
def test_byte_identical_pass_through(proxied: Proxied, standin: StandIn, path: str, stream: bool) -> None:
    direct = _post(standin.url, path, BODIES[path], stream)
    sent_direct = standin.sent[-1]
    via = _post(proxied.url, path, BODIES[path], stream)
    sent_via = standin.sent[-1]
    assert direct.status_code == via.status_code == 200
    assert direct.content == sent_direct and via.content == sent_via == sent_direct
    assert via.headers["content-type"] == direct.headers["content-type"]
    if not stream:
        assert via.headers["x-request-id"] == "req_1"
    paths = proxied.finish()
    assert len(paths) == 1 and len(usages(paths[0])) == 1 and not errors(paths[0])
    verify_ok(paths[0])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_upstream_down_gives_clear_502(tmp_path: Path, rtdir: Path) -> None:
    dead = f"http://127.0.0.1:{_free_port()}"
    rec = Recorder(tmp_path / "rec", serve=False)
    with ProxyServer({"anthropic": dead, "openai": dead}, rec) as px:
        client = anthropic.Anthropic(base_url=px.url, api_key="k", max_retries=0)
        with pytest.raises(anthropic.APIStatusError) as exc:
            client.messages.create(
                model="claude-sonnet-4", max_tokens=5, messages=[{"role": "user", "content": "x"}]
            )
        assert exc.value.status_code == 502
        assert "could not reach the upstream" in str(exc.value) and dead in str(exc.value)
        oc = openai.OpenAI(base_url=px.url + "/v1", api_key="k", max_retries=0)
        with pytest.raises(openai.APIStatusError) as oexc:
            oc.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "x"}])
        assert oexc.value.status_code == 502 and "--upstream" in str(oexc.value)
    rec.close()
    paths = [i.path for i, _ in rec.sessions.values()]
    assert len(paths) == 2
    for p in paths:
        assert [e["kind"] for e in errors(p)] == ["error"] and "could not reach" in errors(p)[0]["message"]
        verify_ok(p)


@pytest.mark.parametrize("code", [429, 500, 529])
def test_upstream_errors_pass_through_unchanged(proxied: Proxied, standin: StandIn, code: int) -> None:
    body = {**BODIES["/v1/messages"], "model": f"claude-x-error{code}"}
    standin.retry_after = "7" if code != 500 else ""
    try:
        direct = _post(standin.url, "/v1/messages", body, False)
        via = _post(proxied.url, "/v1/messages", body, False)
    finally:
        standin.retry_after = ""
    assert via.status_code == direct.status_code == code
    assert via.content == direct.content == standin.sent[-1]
    assert via.headers["x-request-id"] == "req_err"
    assert via.headers.get("retry-after") == direct.headers.get("retry-after")
    client = anthropic.Anthropic(base_url=proxied.url, api_key="k", max_retries=0)  # (no retry-after here)
    err = {429: anthropic.RateLimitError, 529: anthropic.OverloadedError}.get(code, anthropic.InternalServerError)
    with pytest.raises(err):
        client.messages.create(**body)  # type: ignore[arg-type]
    paths = proxied.finish()
    errs = errors(paths[0])
    # the recording says the status, how long the agent was told to wait (the gap before its retry), the body
    said = f"HTTP {code} (retry-after: 7): " if code != 500 else f"HTTP {code}: "
    assert len(errs) == 2 and errs[0]["message"].startswith(said) and errs[1]["message"].startswith(f"HTTP {code}: ")
    verify_ok(paths[0])


def test_malformed_sse_passes_through_and_is_recorded_incomplete(proxied: Proxied, standin: StandIn) -> None:
    body = {**BODIES["/v1/messages"], "model": "claude-x-malformed"}
    via = _post(proxied.url, "/v1/messages", body, True)
    assert via.content == standin.sent[-1]  # garbage and all, untouched
    ok = _post(proxied.url, "/v1/messages", BODIES["/v1/messages"], True)  # the proxy carries on
    assert ok.status_code == 200
    paths = proxied.finish()
    errs = [e for p in paths for e in errors(p)]
    assert len(errs) == 1 and errs[0]["kind"] == "incomplete_stream"
    # both have usage: the malformed one what its message_start reported (output: 1 token so far)
    assert sorted(u["output_tokens"] for p in paths for u in usages(p)) == [1, 17]
    for p in paths:
        verify_ok(p)


def test_client_disconnect_mid_stream(proxied: Proxied, standin: StandIn) -> None:
    body = {**BODIES["/v1/chat/completions"], "model": "gpt-x-slow", "stream": True}
    with (
        httpx.Client(timeout=60) as c,
        c.stream("POST", proxied.url + "/v1/chat/completions", json=body) as r,
    ):
        first = next(r.iter_raw())
        assert first.startswith(b"data: ")
    # The agent is gone; the proxy stays up and the next call works.
    after = _post(proxied.url, "/v1/chat/completions", BODIES["/v1/chat/completions"], True)
    assert after.status_code == 200 and after.content.endswith(b"data: [DONE]\n\n")
    assert proxied.recorder.flush(60)
    paths = proxied.finish()
    errs = [e for p in paths for e in errors(p)]
    assert len(errs) == 1 and "disconnected" in errs[0]["message"]
    for p in paths:
        verify_ok(p)


def test_upstream_cuts_the_stream(proxied: Proxied, standin: StandIn) -> None:
    body = {**BODIES["/v1/messages"], "model": "claude-x-cut"}
    client = anthropic.Anthropic(base_url=proxied.url, api_key="k", max_retries=0)
    # The SDK's transport error (its HTTP library varies by version): what it would raise without the proxy.
    with pytest.raises(Exception, match="incomplete|peer closed|closed connection"):
        with client.messages.stream(**body) as s:  # type: ignore[arg-type]
            s.get_final_message()
    paths = proxied.finish()
    errs = errors(paths[0])
    assert len(errs) == 1 and errs[0]["kind"] == "incomplete_stream"
    verify_ok(paths[0])


@pytest.mark.parametrize("how", ["cut", "reset"])
def test_an_upstream_that_breaks_off_is_passed_on_as_it_broke(proxied: Proxied, standin: StandIn, how: str) -> None:
    # After some events the upstream closes (FIN) or resets (RST) the connection: the agent gets the events
    # as sent, then the same kind of break it would have had directly (a reset was an orderly close, so
    # httpx said "peer closed connection" where it says "Connection reset"); the recording says which.
    body = {**BODIES["/v1/messages"], "model": f"claude-x-{how}", "stream": True}

    def read(base: str) -> tuple[bytes, type[BaseException]]:
        got = bytearray()
        with pytest.raises(httpx.TransportError) as info, httpx.Client(timeout=30) as c:
            with c.stream("POST", base + "/v1/messages", json=body) as r:
                for piece in r.iter_raw():
                    got += piece
        return bytes(got), type(info.value)

    direct, direct_exc = read(standin.url)
    via, via_exc = read(proxied.url)
    # (what the stand-in sent for each: the shared stand-in's last body may be another test's late call, as
    # a background follow-up of the proxy's: seen once in CI)
    assert via == direct and direct in standin.sent and len(via) > 0
    assert via_exc is direct_exc, (via_exc, direct_exc)
    (err,) = [e for p in proxied.finish() for e in errors(p)]
    assert err["kind"] == "incomplete_stream"
    said = "reset the connection" if how == "reset" else "ended the response early"
    assert f"the upstream {said}" in err["message"], err


def test_50_mb_request_body(proxied: Proxied, standin: StandIn) -> None:
    # Tens of megabytes are screenshots (base64) in practice: forwarded whole and recorded, every turn
    shot = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "iVBO" * (50 * 2**18)}}
    body = {
        "model": "gpt-4o",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "go"}, shot]}],
    }
    raw = json.dumps(body).encode()
    with httpx.Client(timeout=120) as c:
        r = c.post(
            proxied.url + "/v1/chat/completions", content=raw, headers={"content-type": "application/json"}
        )
    assert r.status_code == 200
    assert standin.requests[-1][2] == raw  # the upstream got every byte
    ok = _post(proxied.url, "/v1/chat/completions", BODIES["/v1/chat/completions"], False)
    assert ok.status_code == 200
    paths = proxied.finish()
    assert proxied.recorder.skipped == []
    assert len(paths) == 2 and [len(usages(p)) for p in paths] == [1, 1]
    for p in paths:
        verify_ok(p)


def test_a_request_over_the_ceiling_is_forwarded_not_recorded(
    standin: StandIn, tmp_path: Path, rtdir: Path
) -> None:
    rec = Recorder(tmp_path / "rec", serve=False, max_record_bytes=1024)
    with ProxyServer({"openai": standin.url, "anthropic": standin.url}, rec) as px:
        body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "x" * 4096}]}
        assert _post(px.url, "/v1/chat/completions", body, False).status_code == 200
    rec.close()
    assert rec.sessions == {} and rec.skipped == [
        "a 4 KiB request was forwarded but not recorded (above 1 KiB)"
    ]


def test_unrecorded_paths_pass_through(proxied: Proxied, standin: StandIn) -> None:
    with httpx.Client(timeout=60) as c:
        r = c.post(
            proxied.url + "/v1/messages/count_tokens?beta=true",
            json={"model": "m"},
            headers={"anthropic-version": "2023-06-01"},
        )
    assert standin.requests[-1][0] == "/v1/messages/count_tokens"
    assert r.status_code == 200
    assert proxied.finish() == []


@pytest.mark.parametrize("coding", ["gzip", "zstd", "br"])
def test_a_compressed_stream_cut_off_is_recorded_with_what_arrived(
    proxied: Proxied, standin: StandIn, coding: str
) -> None:
    # A server that compresses its event stream, and the connection breaks half-way: the agent gets the
    # compressed bytes as sent, then the same broken connection; the recording keeps the events that
    # arrived and says the stream was cut (it said the body "does not decode", and kept no event).
    whole = {**BODIES["/v1/messages"], "model": f"claude-x-{coding}sse-ok"}
    cut = {**BODIES["/v1/messages"], "model": f"claude-x-{coding}sse-cut"}
    with httpx.Client(timeout=30) as c:
        with c.stream("POST", proxied.url + "/v1/messages", json={**whole, "stream": True}) as r:
            assert r.headers["content-encoding"] == coding
            assert b"".join(r.iter_raw()) == standin.sent[-1]
        with pytest.raises(httpx.HTTPError), c.stream(
            "POST", proxied.url + "/v1/messages", json={**cut, "stream": True}
        ) as r:
            got = bytearray()
            for piece in r.iter_raw():
                got += piece
        assert bytes(got) == standin.sent[-1]
    paths = proxied.finish()
    # the whole one, decoded and reassembled; the cut one with what its message_start reported
    assert sorted(u["output_tokens"] for p in paths for u in usages(p)) == [1, 17]
    (err,) = [e for p in paths for e in errors(p)]
    assert err["kind"] == "incomplete_stream", err
    assert "the stream ended before message_stop" in err["message"] and "decode" not in err["message"], err
    events = int(err["message"].rsplit("(", 1)[1].split()[0])
    assert events >= 3, err  # message_start and the blocks that arrived before the cut
    for p in paths:
        verify_ok(p)


def test_an_event_stream_labelled_otherwise_is_recorded_as_a_stream(proxied: Proxied, standin: StandIn) -> None:
    # Some OpenAI-compatible servers serve their event stream as text/plain: the SDK streams it all the
    # same, and the recording must hold the reply and its usage (it said "response is not JSON").
    client = openai.OpenAI(base_url=proxied.url + "/v1", api_key="k", max_retries=0)
    chunks = list(
        client.chat.completions.create(
            model="gpt-4o-plainsse",
            messages=[{"role": "user", "content": "hi"}],
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Hello from the stand-in."
    (path,) = proxied.finish()
    assert not errors(path), errors(path)
    assert len(usages(path)) == 1
    verify_ok(path)


def test_a_chat_stream_without_done_is_a_whole_reply(proxied: Proxied, standin: StandIn) -> None:
    # Some OpenAI-compatible servers (llama.cpp forks, older TGI) end a chat stream at the connection's
    # end, without `data: [DONE]`: the SDK reads the whole reply, and so must the recording (it said the
    # stream ended before [DONE], an error on every call). Cut before every choice finished, it is not.
    client = openai.OpenAI(base_url=proxied.url + "/v1", api_key="k", max_retries=0)
    for model in ("gpt-4o-nodone", "gpt-4o-nodone-cut"):
        try:
            list(client.chat.completions.create(
                model=model, messages=[{"role": "user", "content": model}], stream=True,
                stream_options={"include_usage": True},
            ))
        except openai.APIError:
            assert model.endswith("-cut")
    paths = proxied.finish()
    errs = [e for p in paths for e in errors(p)]
    assert len(errs) == 1 and "the stream ended before [DONE]" in errs[0]["message"], errs
    assert sum(len(usages(p)) for p in paths) == 1


@pytest.mark.parametrize("code", [429, 529])
def test_a_tapped_call_refused_with_retry_after_says_it(standin: StandIn, tmp_path: Path, code: int) -> None:
    # The tap records the SDK's exception; a 429 or 529 with Retry-After says how long the SDK was told to
    # wait, as the proxy's recording does.
    from engine.capture.tap import tap

    rec = tmp_path / "t.cpsession"
    client = tap(anthropic.Anthropic(base_url=standin.url, api_key="k", max_retries=0), record=rec)
    standin.retry_after = "7"
    try:
        with pytest.raises(anthropic.APIStatusError):
            client.messages.create(**{**BODIES["/v1/messages"], "model": f"claude-x-error{code}"})  # type: ignore[arg-type]
    finally:
        standin.retry_after = ""
    client.contextpipe_tap.close()
    (err,) = errors(rec)
    assert f"Error code: {code}" in err["message"] and err["message"].endswith("(retry-after: 7)"), err


@pytest.mark.parametrize("coding", ["gzip", "zstd", "br"])
def test_a_compressed_stream_that_stops_before_its_end_is_cut(
    proxied: Proxied, standin: StandIn, coding: str
) -> None:
    # The HTTP body ends cleanly but its coding does not (the last event and the coding's end never came):
    # a chat stream without [DONE] whose every choice finished reads as whole unless something says it was
    # cut, and here only the coding can. zstd's stream reader ended quietly where the data stopped, so the
    # reply was recorded whole without its usage; gzip said "does not decode" and kept no event.
    body = {**BODIES["/v1/chat/completions"], "model": f"gpt-4o-nodone-{coding}sse-unended", "stream": True}
    with httpx.Client(timeout=30) as c, c.stream("POST", proxied.url + "/v1/chat/completions", json=body) as r:
        assert r.headers["content-encoding"] == coding
        assert b"".join(r.iter_raw()) == standin.sent[-1]  # passed on as sent, and it ended cleanly
    (path,) = proxied.finish()
    assert not usages(path)
    (err,) = errors(path)
    assert err["kind"] == "incomplete_stream", err
    assert f"its data stops before the {coding} end" in err["message"], err
    events = int(err["message"].rsplit("(", 1)[1].split()[0])
    assert events >= 5, err  # the role, the words and the finish chunk: all but the usage chunk
    verify_ok(path)
