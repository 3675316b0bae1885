"""What the engine tokenizes, against what a turn brings (issue 12).

Measured on the shared trajectories (django-14752, astropy-12907, pydicom-1413, sqlfluff-1625, moto-6387,
two SWE-agent runs; anthropic and openai; 8k to 32k windows): the engine tokenizes 0.99-1.02x the
characters LangChain's trim_messages with a memoized counter does, every text once. What remained:

- TokenCounter's short-text memo was cleared whole when it filled, so a long session's repeated short
  texts under new call ids (a command run again, an empty output) were tokenized again right after each
  clear (a 1,500-turn synthetic session: 97 texts, 8,904 characters). It keeps two generations now.
  `test_a_recent_short_text_is_not_tokenized_again_when_the_memo_fills` and
  `test_a_long_session_tokenizes_each_text_once` fail on 9f1e637.
- `test_a_real_trajectory_tokenizes_each_text_once_and_only_what_is_new` holds the measured state on a
  real trajectory: each turn tokenizes at most what it brought, and no text twice.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from engine.importers import MessageRec, load
from engine.pipeline import Pipeline
from engine.tokens import SHORT_MEMO, SHORT_TEXT, CharTokenizer, TokenCounter

NO_RESULT = "[no result recorded]"
DJANGO = "mini-swe-agent-pr816/deepseek_chat_test_1-100__django__django-14752.traj.json"


class _Counting:
    """CharTokenizer's counts, with every text it was asked to tokenize and how often."""

    name = "chars/4"

    def __init__(self) -> None:
        self.inner = CharTokenizer()
        self.texts: Counter[str] = Counter()
        self.chars = 0

    def count(self, text: str) -> int:
        self.texts[text] += 1
        self.chars += len(text)
        return self.inner.count(text)

    def twice(self) -> dict[str, int]:
        return {t: n for t, n in self.texts.items() if n > 1}


def test_a_recent_short_text_is_not_tokenized_again_when_the_memo_fills() -> None:
    """Each new short text comes with one seen 50 texts before under a new hash (a command run again
    under a new call id): across three fills of the memo none is tokenized twice. Before, the text
    seen just before a clear was tokenized again after it."""
    tok = _Counting()
    c = TokenCounter(tok)
    texts = [f"cmd {i}" for i in range(3 * SHORT_MEMO)]
    for i, text in enumerate(texts):
        assert c.count(text, f"new {i}") == CharTokenizer().count(text)
        if i >= 50:
            again = texts[i - 50]
            assert c.count(again, f"again {i}") == CharTokenizer().count(again)
    assert tok.twice() == {}
    assert len(c._short) + len(c._short_old) <= 2 * SHORT_MEMO  # bounded all the same
    # A text older than both generations is tokenized again (the memo holds no more than that).
    c.count(texts[0], "much later")
    assert tok.texts[texts[0]] == 2


def test_a_long_session_tokenizes_each_text_once() -> None:
    """A 1,000-turn session whose commands recur every 97 turns (under new call ids): every text is
    tokenized once, and a turn tokenizes only what it brought and its compaction's marker."""
    tok = _Counting()
    pipe = Pipeline(
        "deepseek-chat", "openai", 16_000, counter=TokenCounter(tok), serve=False, clock=lambda: 0.0
    )
    pipe.identity("You are a careful coding agent.")
    pipe.add_tool(
        "bash", "Run a shell command", {"type": "object", "properties": {"cmd": {"type": "string"}}}
    )
    pipe.user("Fix the failing test in tests/test_io.py.")
    markers = 0
    for t in range(1000):
        before = set(tok.texts)
        args = json.dumps({"cmd": f"sed -n 1,200p src/module_{t % 97}.py"})
        text = f"Step {t}: read the next module."
        output = "".join(f"line {t}.{i} = compute(x_{i})\n" for i in range(3 + t % 40))
        calls = pipe.assistant(text, [{"id": f"c{t}", "name": "bash", "arguments": args}])
        pipe.tool_result(calls[0].id, output)
        req = pipe.next_request()
        pipe.record_usage({"input_tokens": req.trace["final_tokens"], "output_tokens": 40})
        if t:  # (the first turn counts the system prompt, the tool and the task too)
            # What it brought, and the marker of a compaction it made (new text in the request).
            for counted in set(tok.texts) - before - {text, "bash " + args, output}:
                assert counted.startswith("[...") and "earlier rounds dropped" in counted, (t, counted)
                markers += 1
    pipe.close()
    assert tok.twice() == {}
    assert markers >= 5  # it compacted, several times
    assert any(len(t) <= SHORT_TEXT and t.startswith("bash ") for t in tok.texts)


def test_a_real_trajectory_tokenizes_each_text_once_and_only_what_is_new(trajectories_dir: Path) -> None:
    """django-14752 replayed as its agent fed it, at 16k (the history is trimmed and compacted): each
    turn tokenizes no more characters than the messages it brought, and no text is tokenized twice."""
    imp = load(trajectories_dir / DJANGO)
    tok = _Counting()
    pipe = Pipeline(imp.model or "deepseek-chat", "anthropic", 16_000, counter=TokenCounter(tok), serve=False,
                    clock=lambda: 0.0)  # fmt: skip
    for t in imp.calls[0].tools:
        pipe.add_tool(t.name, t.description, t.parameters)
    fed, seen_system = 0, False
    open_calls: list[str] = []

    def feed(m: MessageRec) -> int:
        """Hands `m` to the pipeline as the agent did; the characters of the texts it brought."""
        nonlocal seen_system, open_calls
        brought = len(m.content or "")
        if m.role == "system" and not seen_system:
            pipe.identity(m.content)
            seen_system = True
        elif m.role == "assistant":
            for cid in open_calls:  # a call the agent never answered (as bench_engine feeds it)
                pipe.tool_result(cid, NO_RESULT)
                brought += len(NO_RESULT)
            calls = [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in m.tool_calls]
            open_calls = [c.id for c in pipe.assistant(m.content, calls)]
            brought += sum(len(c.name) + 1 + len(c.arguments) for c in m.tool_calls)
        elif m.role == "tool" and m.tool_call_id in open_calls:
            pipe.tool_result(m.tool_call_id, m.content)
            open_calls.remove(m.tool_call_id)
        else:
            pipe.user(m.content)
        return brought

    reply = 0  # the previous reply's characters: counted when the next request is assembled
    for k, call in enumerate(imp.calls):
        before, seen = tok.chars, set(tok.texts)
        brought = reply + sum(feed(m) for m in call.messages[fed:])
        req = pipe.next_request()
        pipe.record_usage({"input_tokens": req.trace["final_tokens"], "output_tokens": 40})
        # A compaction's marker is new text in the request too.
        brought += sum(len(t) for t in set(tok.texts) - seen if t.startswith("[..."))
        if k:
            assert tok.chars - before <= brought, (k, tok.chars - before, brought)
        reply = feed(call.response) if call.response is not None else 0
        fed = len(call.messages) + (call.response is not None)
    pipe.close()
    assert tok.twice() == {}
    assert tok.chars > 50_000  # the whole conversation was tokenized, once


@pytest.mark.parametrize("size", [SHORT_TEXT, SHORT_TEXT + 1])
def test_the_memo_keeps_the_counts_it_gave(size: int) -> None:
    """The same counts with the memo as without it, on either side of the short-text length, across
    the generations' turnover."""
    c = TokenCounter(CharTokenizer())
    for i in range(2 * SHORT_MEMO + 5):
        text = ("x" * (i % 7 + 1)).ljust(size, ".")
        assert c.count(text, f"h{i}") == CharTokenizer().count(text)
