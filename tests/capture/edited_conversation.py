"""The conversations the edit tests drive through real SDK clients (the proxy's or a tapped one), each
once and in one place: the agent sends back a message of an earlier turn changed where it stood.

`openai_edited_reply`: three calls; the first reply is sent back reworded (EDITED) at the second.
`openai_truncated_result`: three calls; the first reply calls `bash`, its result (BIG) is sent at the
second call and truncated where it stood (TRUNCATED) at the third, as mini-swe-agent and OpenHands cut
old tool outputs.
"""

from __future__ import annotations

from typing import Any

FIRST = "First answer."
EDITED = "First answer, edited by the user."
BIG = "".join(f"build line {i}: compiling module {i}\n" for i in range(60))
TRUNCATED = BIG[:120] + "[... output truncated by the agent ...]"


def openai_edited_reply(client: Any, system: str) -> str:
    """Three calls of an OpenAI client (sync); the first reply sent back as EDITED at the second call, then
    "End." at the third. The first reply's text, as the model gave it."""
    msgs: list[Any] = [{"role": "system", "content": system}, {"role": "user", "content": "Start."}]
    first = client.chat.completions.create(model="gpt-4o", messages=msgs).choices[0].message.content
    msgs += [{"role": "assistant", "content": EDITED}, {"role": "user", "content": "Go on."}]
    r = client.chat.completions.create(model="gpt-4o", messages=msgs)
    msgs += [{"role": "assistant", "content": r.choices[0].message.content}, {"role": "user", "content": "End."}]
    client.chat.completions.create(model="gpt-4o", messages=msgs)
    return str(first)


def openai_truncated_result(client: Any, system: str, standin: Any, truncate: str = "edit") -> None:
    """Three calls of an OpenAI client (sync) whose first reply calls `bash` (the stand-in's scripted
    call): its result BIG is sent at the second call; at the third it stands TRUNCATED (`truncate`
    "edit": the agent truncated it where it stood; "start": it was TRUNCATED in the first place, the
    same conversation never edited)."""
    standin.script = [{"bash": "make"}, "Second answer.", "Third answer."]
    msgs: list[Any] = [{"role": "system", "content": system}, {"role": "user", "content": "Build it."}]
    r = client.chat.completions.create(model="gpt-4o", messages=msgs)
    msg = r.choices[0].message
    (call,) = msg.tool_calls
    msgs.append(msg.model_dump(exclude_none=True, exclude={"refusal"}))
    msgs.append({"role": "tool", "tool_call_id": call.id, "content": TRUNCATED if truncate == "start" else BIG})
    r = client.chat.completions.create(model="gpt-4o", messages=msgs)
    msgs[3] = {**msgs[3], "content": TRUNCATED}  # (a new dict: the one sent at the second call stays as sent)
    msgs += [{"role": "assistant", "content": r.choices[0].message.content}, {"role": "user", "content": "End."}]
    client.chat.completions.create(model="gpt-4o", messages=msgs)
