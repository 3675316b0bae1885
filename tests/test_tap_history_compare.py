"""A tapped client's request is compared with the history the tap fed once: the tap parses each request
afresh (no message is the same object as the one fed before), so that compare reads every message of
the history field by field, and `TapSteps._before` made it twice a request. Real SDK, real socket."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from engine.capture.tap import tap
from engine.importers.model import MessageRec
from tests.capture.standin import StandIn

CALLS = 8


@pytest.fixture(scope="module")
def upstream() -> Iterator[StandIn]:
    s = StandIn().start()
    yield s
    s.stop()


def test_each_request_compares_the_history_fed_once(
    upstream: StandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    compares: list[int] = []
    plain_eq = MessageRec.__eq__

    def counted_eq(self: MessageRec, other: object) -> Any:
        compares[-1] += 1
        return plain_eq(self, other)

    client = tap(
        openai.OpenAI(api_key="k", base_url=upstream.url, max_retries=0),
        record=tmp_path / "r.cpsession",
        split=False,
    )
    msgs: list[Any] = [{"role": "system", "content": "Be terse."}]
    fed_before: list[int] = []
    monkeypatch.setattr(MessageRec, "__eq__", counted_eq)
    try:
        for k in range(CALLS):
            msgs.append({"role": "user", "content": f"Step {k}: go on."})
            fed_before.append(len(msgs) - 1 if k else 0)  # (the history the tap fed: all but this message)
            compares.append(0)
            r = client.chat.completions.create(model="gpt-4o", messages=msgs)
            msgs.append({"role": "assistant", "content": r.choices[0].message.content})
    finally:
        monkeypatch.undo()
        client.contextpipe_tap.close()
    # Each request: its first messages against the history fed, one compare a message (twice: 2x)
    assert compares == fed_before, (compares, fed_before)
