"""A failed call the agent sends again: the attempts of one turn, not turns of the conversation.

The anthropic and openai Python SDKs retry a call themselves (two retries by default) when it failed
with 408, 409, 429 or a 5xx status (Anthropic's 529 overloaded among them), or never reached the server:
they wait (the response's Retry-After, else a backoff of 0.5 s doubling up to 8 s) and send the same
request again, with `x-stainless-retry-count` saying which retry it is (anthropic/_base_client.py,
openai/_base_client.py: `_should_retry`, `_build_headers`, `_calculate_retry_timeout`). Agents retry too
(litellm's `num_retries`, mini-swe-agent's retry loop), sending the same body with the count at 0.
Through the proxy every attempt was a turn of its own, the failed ones as failed turns: a run that met a
rate limit showed a conversation with turns that never happened, and the turn counts, the timeline and
`top`'s call figures with them.

So a call that failed unbilled with a status an SDK retries is held (`Held`) instead of journaled; the
next request of its session decides what it was: the same body again is a retry, and the attempts
before it are journaled on the turn the retry becomes (the trace key RETRIES_KEY, one `attempt_note`
each: status, error, when); any other request, the hold running out (`deadline`) or the proxy closing
means nobody retried it, and the last attempt is journaled as the failed turn it is (with the attempts
before it, if any, as its retries). A failure that was billed (a stream cut after its usage came) is
never held: it is a turn the provider charged for.

An agent can make calls at once in one conversation (a fan-out over the same history, a sub-call beside
the main one): while an SDK waits out its backoff, the other calls finish and reach the recorder first.
So a request releases a held attempt only when it went on from it (`moved_on`: its conversation opens
with the held request's: the next step, or the same messages to another model); one beside it (the same
history, another last message) says nothing of the retry, and the held attempts of several calls wait
side by side, each for its own (`chains`). The retry itself is the same request, wherever the lineage
files it (a concurrent call journaled first can make it a branch of its own): its attempts go with it.
A call given up for a request that does not open with it is journaled once its wait runs out (after the
turns journaled meanwhile).
"""

from __future__ import annotations

import email.utils
import time
from dataclasses import dataclass
from typing import Any

from engine.capture.proxy.exchange import Exchange
from engine.capture.tap_call import cut_short

RETRIES_KEY = "retries"  # the trace key of a turn whose call succeeded (or failed last) after failed attempts
RETRY_COUNT_HEADER = "x-stainless-retry-count"  # the SDKs' attempt number (0: the call's first attempt)
# The SDKs' longest backoff without a Retry-After (MAX_RETRY_DELAY in both SDKs' _constants.py)
SDK_MAX_BACKOFF_S = 8.0
# How long past the wait the agent was told (or the backoff) a held attempt waits for its retry: the
# agent's process may be slow to send it on a loaded machine. Past it the attempt is journaled as failed.
GRACE_S = 10.0
# A Retry-After longer than this is not waited for: the attempt is journaled as failed then (a retry that
# comes later is a new turn). The SDKs wait whatever they are told; a live view should not lag an hour.
MAX_WAIT_S = 120.0
NOTE_CHARS = 300  # of an attempt's error, on the trace (the turn's own error keeps the whole message; the tap's too)


def retried_status(status: int | None) -> bool:
    """A status the SDKs retry (None: the upstream was not reached, which the agent sees as the proxy's
    502, and which the SDKs retry as a 5xx)."""
    return status is None or status in (408, 409, 429) or status >= 500


def holds(ex: Exchange, response: dict[str, Any] | None, problem: str | None) -> bool:
    """Whether a finished exchange is held for a retry: it failed with a status the SDKs retry, and the
    provider reported no usage for it (an attempt that was billed is a turn, retried or not)."""
    if problem is None or not retried_status(ex.status):
        return False
    return isinstance(cut_short(problem, response), str)


def retry_count(value: str | None) -> int | None:
    """The SDK's attempt number from its header (None when absent or not a number)."""
    if value is None:
        return None
    try:
        n = int(value.strip())
    except ValueError:
        return None
    return n if n >= 0 else None


def _wait_s(retry_after: str, now: float) -> float:
    """The wait a Retry-After tells the agent: seconds, or an HTTP date; the SDKs' backoff without one."""
    if not retry_after:
        return SDK_MAX_BACKOFF_S
    try:
        return max(0.0, float(retry_after))
    except ValueError:
        pass
    when = email.utils.parsedate_tz(retry_after)
    if when is None:
        return SDK_MAX_BACKOFF_S
    return max(0.0, float(email.utils.mktime_tz(when)) - now)


@dataclass(eq=False)  # (compared by identity: two attempts of one request hold equal fields)
class Held:
    """A failed attempt waiting for the next request of its session: the exchange, what the recorder
    worked out for it (its wire format, body, session key, lineage placement and parse), its outcome."""

    ex: Exchange
    wire: str
    body: dict[str, Any]
    key: str
    placed: Any  # Recorder._place's (messages, digests), or None
    parsed: Any  # the tap's parse of it (ProxyTap.parsed), or None
    response: dict[str, Any] | None
    problem: str
    deadline: float = 0.0  # time.time() past which nobody is going to retry it

    def __post_init__(self) -> None:
        if not self.deadline:
            ended = self.ex.ended or time.time()
            self.deadline = ended + min(_wait_s(self.ex.retry_after, ended), MAX_WAIT_S) + GRACE_S

    def retried_by(self, ex: Exchange, body: dict[str, Any]) -> bool:
        """Whether `ex` (its parsed body `body`) sends this attempt's request again."""
        return ex.route.wire == self.ex.route.wire and body == self.body

    def note(self, attempt: int) -> dict[str, Any]:
        """What the trace keeps of this attempt (it is attempt `attempt` of its turn, from 0)."""
        out: dict[str, Any] = {
            "attempt": attempt,
            "status": self.ex.status,
            "error": self.problem[:NOTE_CHARS],
            "sent": self.ex.started,
            "ended": self.ex.ended,
        }
        if self.ex.retry_after:
            out["retry_after"] = self.ex.retry_after
        if self.ex.retry_count is not None:
            out["sdk_retry_count"] = self.ex.retry_count  # the SDK's own count (agent re-sends restart at 0)
        return out


def _conversation(body: dict[str, Any]) -> list[Any] | None:
    """A request's messages as sent (Chat's and Anthropic's `messages`, the Responses API's `input`)."""
    msgs = body.get("messages", body.get("input"))
    if isinstance(msgs, str):
        return [msgs]
    return msgs if isinstance(msgs, list) else None


def moved_on(held: Held, body: dict[str, Any]) -> bool:
    """Whether a request other than `held`'s retry (its parsed body `body`) says nobody is sending `held`
    again: it opens with the held request's messages (the agent went on from that history, or sent the
    same to another model). A request beside it (a concurrent call over the same history with another
    last message) says nothing of its retry; one neither side can be read as messages does, as before."""
    old, new = _conversation(held.body), _conversation(body)
    if old is None or new is None:
        return True
    return new[: len(old)] == old


def chains(held: list[Held]) -> list[list[Held]]:
    """The held attempts by request, in the order each request was first sent: each list the attempts
    of one call, oldest first (concurrent calls of a session can wait for their retries side by side)."""
    out: list[list[Held]] = []
    for h in held:
        for chain in out:
            if chain[0].retried_by(h.ex, h.body):
                chain.append(h)
                break
        else:
            out.append([h])
    return out


def attempts_note(held: list[Held]) -> list[dict[str, Any]]:
    """The trace's RETRIES_KEY value for the turn that follows `held` (in the order they were sent)."""
    return [h.note(i) for i, h in enumerate(held)]


def retried_event(turn: int | None, attempts: list[dict[str, Any]]) -> dict[str, Any]:
    """The journal's note of a retried turn for readers that do not open traces (simulate's index): a
    `diag` event of kind "retried" (no `count`: that is a tap error's running count, read by the probe)."""
    return {"k": "diag", "kind": "retried", "turn": turn, "attempts": len(attempts)}


def retried_summary(attempts: list[dict[str, Any]]) -> str:
    """One line for explain: "2 failed attempts before this one (HTTP 529, HTTP 429), the same request
    sent again"."""
    from engine.wording import counted

    said = ", ".join("not reached" if a.get("status") is None else f"HTTP {a['status']}" for a in attempts)
    return f"{counted(len(attempts), 'failed attempt')} before this one ({said}), the same request sent again"
