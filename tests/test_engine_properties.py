"""Property tests for the engine core: random sessions through the public Pipeline API.

A session is drawn as data (anchors, tools, sources, rounds of assistant calls and tool results of
random sizes, latches with flips, emergent items, usage or errors, a window from tiny to huge, random
thresholds and gates), then played into a Pipeline. Every turn must keep the engine's contracts:

- determinism: two pipelines fed the same events produce byte-identical request bodies every turn;
- audit completeness: every rule of engine.optimize.RULES is in trace["steps"]; every closed gate of
  a rule the tier reaches is in trace["skipped"] with a reason;
- failure atomicity: record_error leaves the usage statistics and the emergent queue unchanged;
  a failing binder degrades its section, a failing Never binder raises BindError;
- budget: trace["final_tokens"] <= trace["ceiling"], or BudgetExceededError when what may never be
  evicted does not fit;
- anchors first and never evicted: identity, constraints and goal appear verbatim every turn;
- pairing: every tool result answers a call in the preceding assistant message and vice versa;
- replay: Replayer(journal).verify() reproduces every request hash;
- the provider's own request type: each body fits the SDK's request TypedDict (anthropic, openai) or
  botocore's Converse input shape (bedrock), is strict JSON (no NaN), and has no empty text block.

The strategies reach the hard cases: windows of 1 token and of 100,000,000, a reply limit past the
window (refused at construction), single messages larger than most windows, up to five parallel calls
answered in any order, results of no output, call arguments that are not JSON / not an object / hold
NaN, empty assistant replies (refused at the call), and text that tokenizes and escapes oddly (ZWJ
emoji, combining marks, right-to-left script, NUL, line separators).

The checkers (`check_request`, ...) are reused by tests/test_engine_trajectories.py on real content.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from engine.errors import BindError, BudgetExceededError, ConfigError, ContentError, UnpairedToolResultError
from engine.optimize import RULES, OptimizeLimits
from engine.pipeline import Pipeline, Request
from engine.plan import Thresholds
from engine.policy import cost_aware
from engine.recording.replay import Replayer
from engine.spill import MemorySpill
from engine.tokens import CharTokenizer, TokenCounter
from engine.types import CacheScope, Priority, Tier

WORDS = (
    "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma "
    "tau upsilon phi chi psi omega def return import class self None True False for while if else "
    "src/engine/pipeline.py line 42 AssertionError: expected 3 got 4 {} [] () => ; ü 漢字"
).split() + [
    # Text that tokenizes and escapes oddly: a ZWJ emoji sequence, a combining accent, right-to-left
    # script, zero-width and line/paragraph separators, a NUL, a tab, a backslash and a quote.
    "\U0001f469\u200d\U0001f469\u200d\U0001f467",
    "e\u0301",
    "\u05e9\u05dc\u05d5\u05dd",
    "a\u200bb",
    "x\u2028y\u2029z",
    "nul\x00byte",
    "tab\tbed",
    'back\\slash"quote',
]

TIERS = ["Normal", "TrimSchemas", "CompactHistory", "AggressivePrune"]
# One shared counter per tokenizer: counts are a pure function of the text, so sharing only saves time.
CHAR_COUNTER = TokenCounter(CharTokenizer())
TIKTOKEN_COUNTER = TokenCounter()  # cl100k_base, offline


def make_text(seed: int, n_words: int, tag: str = "") -> str:
    """Deterministic text of about n_words words (cheap to draw, however large)."""
    body = " ".join(WORDS[(seed + i * 7) % len(WORDS)] for i in range(n_words))
    return f"{tag}{body}" if tag else body


# ----------------------------------------------------------------------------- session model
@dataclass
class Round:
    """One agent step: the assistant's reply (with calls), their results, then extra events."""

    text_words: int
    calls: list[int]  # result size in words per call
    error_results: list[bool]
    shuffle_results: bool
    user_words: int  # 0 = no extra user text
    latch: tuple[str, int] | None  # (name, value seed): a flip when the value changes
    emergent: list[tuple[str, int]]
    outcome: str  # "usage" | "error" | "prompt_too_long" | "none"
    output_tokens: int
    thinking_words: int = 0
    # How each call's arguments are written: 0 an object, 1 not JSON, 2 JSON but not an object,
    # 3 an object with NaN (json.loads takes it; it is not JSON); cycled over the calls.
    arg_forms: list[int] = field(default_factory=lambda: [0])
    empty_results: bool = False  # results of no output (a command that printed nothing)


@dataclass
class Session:
    provider: str
    window: int
    thresholds: tuple[float, float, float]
    gates: dict[str, bool]
    max_reorder_moves: int
    max_clear_tokens: int
    keep_recent_results: int
    identity_words: int
    constraints_words: int  # 0 = none
    goal_words: int  # 0 = none
    tools: list[int]  # schema size in words per tool
    context_words: list[tuple[int, int]]  # (words, priority) per extra static source
    task_words: int
    rounds: list[Round]
    seed: int = 0
    default_response_reserve: int = 1024
    context_scopes: list[int] = field(default_factory=list)
    tiktoken: bool = False
    policy: str = "cost_aware"
    max_output_tokens: int | None = None  # None: the default (4096, not held to the window)

    def limits(self) -> OptimizeLimits:
        return OptimizeLimits(
            **self.gates,
            max_reorder_moves=self.max_reorder_moves,
            max_clear_tokens=self.max_clear_tokens,
            keep_recent_results=self.keep_recent_results,
        )


def sizes(small: int = 120, big: int = 14_000) -> st.SearchStrategy[int]:
    """Mostly small, sometimes huge (over the 10k-token spill threshold with 4-char tokens)."""
    return st.one_of(
        st.integers(1, small), st.integers(1, small), st.integers(1, small), st.integers(2_000, big)
    )


rounds_st = st.builds(
    Round,
    text_words=st.one_of(st.just(0), st.integers(0, 60)),  # often none: calls or thinking only
    calls=st.lists(sizes(), max_size=5),
    error_results=st.lists(st.booleans(), min_size=5, max_size=5),
    shuffle_results=st.booleans(),
    # Sometimes a single message bigger than most windows (a pasted log).
    user_words=st.one_of(st.just(0), st.just(0), st.integers(1, 80), st.integers(8_000, 20_000)),
    latch=st.one_of(st.none(), st.tuples(st.sampled_from(["cwd", "model_mode"]), st.integers(0, 2))),
    emergent=st.lists(st.tuples(st.sampled_from(["todo", "files"]), st.integers(0, 6)), max_size=3),
    outcome=st.sampled_from(["usage", "usage", "usage", "error", "prompt_too_long", "none"]),
    output_tokens=st.integers(0, 3_000),
    thinking_words=st.one_of(st.just(0), st.integers(1, 50)),
    arg_forms=st.lists(st.sampled_from([0, 0, 0, 1, 2, 3]), min_size=1, max_size=3),
    empty_results=st.booleans(),
)

windows_st = st.one_of(
    st.sampled_from([1, 2, 100_000_000]),  # the smallest and the largest windows a Pipeline takes
    st.integers(1, 400),  # tiny: anchors may not fit
    st.integers(400, 6_000),
    st.integers(2_000, 12_000),
    st.integers(6_000, 60_000),
    st.integers(6_000, 60_000),
    st.integers(60_000, 100_000_000),  # huge
)


@st.composite
def thresholds_st(draw: st.DrawFn) -> tuple[float, float, float]:
    vals = sorted(draw(st.lists(st.floats(0.05, 1.6), min_size=3, max_size=3)))
    return (vals[0], vals[1], vals[2])


sessions_st = st.builds(
    Session,
    provider=st.sampled_from(["anthropic", "openai", "bedrock", "prefix"]),
    window=windows_st,
    thresholds=thresholds_st(),
    gates=st.fixed_dictionaries({g: st.booleans() for g in OptimizeLimits.GATES}),
    max_reorder_moves=st.integers(0, 8),
    max_clear_tokens=st.one_of(st.integers(0, 500), st.just(60_000)),
    keep_recent_results=st.integers(0, 4),
    identity_words=st.integers(1, 400),
    constraints_words=st.integers(0, 200),
    goal_words=st.integers(0, 120),
    tools=st.lists(st.integers(1, 200), max_size=4),
    context_words=st.lists(st.tuples(st.integers(1, 3_000), st.sampled_from([1, 2, 3])), max_size=2),
    task_words=st.integers(1, 300),
    rounds=st.lists(rounds_st, max_size=12),
    seed=st.integers(0, 50),
    default_response_reserve=st.sampled_from([0, 256, 1024, 8192]),
    context_scopes=st.lists(st.sampled_from([0, 1, 2]), min_size=2, max_size=2),
    tiktoken=st.booleans(),
    policy=st.sampled_from(["cost_aware", "wave1", "cost_aware:target=0.3,trigger=0.8,early=off"]),
    # The agent's own reply limit: small, large, or past the window (then refused at construction).
    max_output_tokens=st.one_of(st.none(), st.integers(1, 64), st.integers(1, 300_000)),
)


# ----------------------------------------------------------------------------- playing a session
@dataclass
class Turn:
    request: Request | None
    error: Exception | None
    outcome: str
    emerged: list[str] = field(default_factory=list)  # emergent items accepted before this request


def anchor_texts(s: Session) -> dict[str, str]:
    out = {"identity": make_text(s.seed, s.identity_words, "IDENTITY: ")}
    if s.constraints_words:
        out["constraints"] = make_text(s.seed + 1, s.constraints_words, "CONSTRAINTS: ")
    if s.goal_words:
        out["goal"] = make_text(s.seed + 2, s.goal_words, "GOAL: ")
    return out


def output_fits(s: Session) -> bool:
    return s.max_output_tokens is None or s.max_output_tokens < s.window


def new_pipeline(s: Session, counter: TokenCounter | None = None, **kw: Any) -> Pipeline:
    if s.max_output_tokens is not None and output_fits(s):
        kw.setdefault("max_output_tokens", s.max_output_tokens)
    return Pipeline(
        "test-model",
        s.provider,
        s.window,
        thresholds=Thresholds(*s.thresholds),
        limits=s.limits(),
        default_response_reserve=s.default_response_reserve,
        counter=counter or (TIKTOKEN_COUNTER if s.tiktoken else CHAR_COUNTER),
        serve=False,
        clock=lambda: 1_700_000_000.0,
        policy=s.policy,
        **kw,
    )


def play(s: Session, pipe: Pipeline) -> Iterator[Turn]:
    """Feed the session into `pipe`, yielding after every request attempt and its feedback."""
    anchors = anchor_texts(s)
    pipe.identity(anchors["identity"])
    if "constraints" in anchors:
        pipe.constraints(anchors["constraints"])
    if "goal" in anchors:
        pipe.goal(anchors["goal"])
    for k, n in enumerate(s.tools):
        props = {f"p{j}": {"type": "string", "description": make_text(k + j, 3)} for j in range(n // 8 + 1)}
        pipe.add_tool(f"tool_{k}", make_text(s.seed + k, n % 40 + 1), {"type": "object", "properties": props})
    for k, (n, prio) in enumerate(s.context_words):
        pipe.add_source(
            f"ctx{k}",
            "context",
            text=make_text(s.seed + 10 + k, n),
            priority=Priority(prio),
            scope=CacheScope(s.context_scopes[k] if k < len(s.context_scopes) else 1),
        )
    pipe.user(make_text(s.seed + 3, s.task_words, "TASK: "))
    call_seq = 0
    for r_i, r in enumerate([None, *s.rounds]):
        emerged: list[str] = []
        if r is not None:
            names = [f"tool_{k % max(1, len(s.tools))}" for k in range(len(r.calls))]
            calls: list[dict[str, Any]] = []
            for k, name in enumerate(names):
                call_seq += 1
                form = r.arg_forms[k % len(r.arg_forms)]
                args: Any = (
                    {"arg": make_text(k, 3)},
                    '{"arg": "' + make_text(k, 2),  # cut off mid-string, as a model's output can be
                    "[1, 2]",
                    '{"arg": NaN}',
                )[form]
                calls.append({"id": f"call_{call_seq}", "name": name, "arguments": args})
            thinking = make_text(r_i, r.thinking_words, "THINKING: ") if r.thinking_words else None
            text = make_text(r_i, r.text_words)
            if thinking and not (text or calls) and s.provider in ("anthropic", "bedrock"):
                # Anthropic takes thinking back only with its signature, and with nothing else in the
                # message the engine cannot leave it out: the reply is given as the SDK's block.
                thinking = {"type": "thinking", "thinking": thinking, "signature": f"sig-{r_i}"}
            if not (text or calls or thinking):
                # An empty assistant message is refused at the call (the providers refuse it), and
                # nothing is journaled; the round goes on without it.
                n_events = len(pipe.journal.events)
                with pytest.raises(ContentError, match="empty assistant message"):
                    pipe.assistant(text, calls, thinking=thinking)
                assert len(pipe.journal.events) == n_events
            else:
                pipe.assistant(text, calls, thinking=thinking)
            order = list(zip(calls, r.calls, r.error_results, strict=False))
            if r.shuffle_results:
                order.reverse()
            for c, n, err in order:
                out = "" if r.empty_results else make_text(r_i * 31 + n, n, f"RESULT {c['id']}: ")
                pipe.tool_result(c["id"], out, is_error=err)
            if r.user_words:
                pipe.user(make_text(r_i + 5, r.user_words, "USER: "))
            if r.latch is not None:
                pipe.latch(r.latch[0], f"value-{r.latch[1]}")
            for lst, v in r.emergent:
                if pipe.emerge(lst, f"finding {v} in round {r_i}"):
                    emerged.append(f"- [{lst}] finding {v} in round {r_i}")
        try:
            req: Request | None = pipe.next_request()
            err_: Exception | None = None
        except BudgetExceededError as exc:
            req, err_ = None, exc
        outcome = r.outcome if r is not None else "usage"
        if req is not None:
            if outcome == "usage":
                out = r.output_tokens if r is not None else 100
                pipe.record_usage(
                    {
                        "input_tokens": req.trace["final_tokens"] + 7,
                        "output_tokens": out,
                        "cache_read_tokens": 0,
                    }
                )
            elif outcome in ("error", "prompt_too_long"):
                pipe.record_error(outcome, "provider said no")
        yield Turn(req, err_, outcome, emerged)


# ----------------------------------------------------------------------------- invariant checkers
def strings_in(obj: Any) -> Iterator[str]:
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from strings_in(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from strings_in(v)


def system_texts(body: dict[str, Any], provider: str) -> list[str]:
    """The system prompt blocks in wire order."""
    if provider == "anthropic":
        return [b["text"] for b in body.get("system", [])]
    if provider == "bedrock":
        return [b["text"] for b in body.get("system", []) if "text" in b]
    return [m["content"] for m in body["messages"] if m["role"] == "system"]


def check_anchors(body: dict[str, Any], provider: str, anchors: dict[str, str]) -> None:
    """Identity then constraints lead the system prompt, verbatim; the goal is in it, verbatim."""
    sys_texts = system_texts(body, provider)
    assert sys_texts and sys_texts[0] == anchors["identity"], "identity is not the first system block"
    if "constraints" in anchors:
        assert len(sys_texts) > 1 and sys_texts[1] == anchors["constraints"], "constraints not second"
    if "goal" in anchors:
        assert anchors["goal"] in sys_texts, "the goal was evicted or altered"


def check_pairing(body: dict[str, Any], provider: str) -> None:
    """Every result answers a call of the assistant message right before it; every call (but in the
    newest assistant message) gets its result right after."""
    msgs = body["messages"]
    if provider in ("openai", "prefix"):
        open_calls: set[str] = set()
        answered: set[str] = set()
        for m in msgs:
            if m["role"] == "tool":
                assert m["tool_call_id"] in open_calls, f"orphan tool message {m['tool_call_id']}"
                assert m["tool_call_id"] not in answered, "a call answered twice"
                answered.add(m["tool_call_id"])
                continue
            assert open_calls <= answered, f"calls without results: {sorted(open_calls - answered)}"
            open_calls = {c["id"] for c in m.get("tool_calls") or []}
            answered = set()
        return
    use_key, res_key, id_key = (
        ("tool_use", "tool_result", "tool_use_id")
        if provider == "anthropic"
        else ("toolUse", "toolResult", "toolUseId")
    )

    def calls_of(m: dict[str, Any]) -> set[str]:
        if provider == "anthropic":
            return {b["id"] for b in m["content"] if b.get("type") == use_key}
        return {b[use_key]["toolUseId"] for b in m["content"] if use_key in b}

    def results_of(m: dict[str, Any]) -> list[str]:
        if provider == "anthropic":
            return [b[id_key] for b in m["content"] if b.get("type") == res_key]
        return [b[res_key][id_key] for b in m["content"] if res_key in b]

    for i, m in enumerate(msgs):
        if m["role"] == "user":
            res = results_of(m)
            assert len(res) == len(set(res)), "duplicate results"
            if res:
                assert i > 0 and msgs[i - 1]["role"] == "assistant", (
                    "tool results without a preceding assistant"
                )
                assert set(res) <= calls_of(msgs[i - 1]), "a result answers no call of the previous message"
                if provider == "anthropic":
                    kinds = [b.get("type") for b in m["content"]]
                    assert kinds[: len(res)] == ["tool_result"] * len(res), "tool results must lead"
        else:
            calls = calls_of(m)
            if calls and i + 1 < len(msgs):
                assert msgs[i + 1]["role"] == "user", "calls not followed by a user message"
                assert calls == set(results_of(msgs[i + 1])), "a call lost its result"


def check_emergent(req: Request, due: list[str], expired: list[str]) -> None:
    """Emergent items reach the very next request, and no later one (one-turn TTL)."""
    lines = set("\n".join(strings_in(req.body)).split("\n"))
    sec = next((x for x in req.trace["sections"] if x["id"] == "emergent"), None)
    if due and sec is not None and sec["form"] == "full":
        for line in due:
            assert line in lines, f"emergent item missing from the next request: {line}"
    elif due:
        assert sec is not None, "emergent items due but no emergent section"
    for line in expired:
        assert line not in lines, f"expired emergent item injected again: {line}"


def check_markers(body: dict[str, Any], raw: bytes, provider: str) -> None:
    if provider == "anthropic":
        assert raw.count(b'"cache_control"') <= 4
    elif provider == "bedrock":
        assert raw.count(b'"cachePoint"') <= 4
    else:
        assert b"cache_control" not in raw and b"cachePoint" not in raw


def check_audit(trace: dict[str, Any], limits: OptimizeLimits) -> None:
    steps = [s["step"] for s in trace["steps"]]
    rules = RULES
    if "compaction" in trace:  # the cost_aware policy: stable rules, the compaction step, the guarantee
        rules = cost_aware.STABLE_RULES + cost_aware.GUARANTEE_RULES
        assert steps == list(cost_aware.STEP_NAMES), f"trace steps {steps} differ from the cost_aware steps"
    else:
        assert steps == [r.name for r in RULES], f"trace steps {steps} differ from RULES"
    for s in trace["steps"]:
        assert s["status"] in ("applied", "skipped", "not_needed")
        if s["status"] != "applied":
            assert s.get("reason"), f"{s['step']} {s['status']} without a reason"
    tier = Tier(TIERS.index(trace["tier"]))
    skipped = {s["step"]: s for s in trace["skipped"]}
    for rule in rules:
        if rule.gate is not None and not getattr(limits, rule.gate) and tier >= rule.min_tier:
            rec = skipped.get(rule.name)
            assert rec is not None, f"closed gate {rule.gate} missing from trace['skipped']"
            assert rule.gate in rec["reason"] and isinstance(rec["tokens_saved"], int)
    applied = [s["step"] for s in trace["steps"] if s["status"] == "applied"]
    assert applied == [a["step"] for a in trace["actions"]]


def check_budget(trace: dict[str, Any]) -> None:
    assert trace["final_tokens"] <= trace["ceiling"], (trace["final_tokens"], trace["ceiling"])


def _not_json(name: str) -> Any:
    raise AssertionError(f"the body holds {name}, which is not JSON (a provider refuses the request)")


def check_request(req: Request, provider: str, anchors: dict[str, str] | None) -> None:
    """Every per-request invariant that needs only the request itself."""
    body = json.loads(req.bytes, parse_constant=_not_json)
    assert body == req.body
    assert req.bytes == json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    if anchors is not None:
        check_anchors(body, provider, anchors)
    check_pairing(body, provider)
    check_markers(body, req.bytes, provider)
    check_budget(req.trace)
    assert req.trace["tier"] in TIERS
    # Prediction only escalates: the tier is never below the raw-pressure tier.
    assert TIERS.index(req.trace["tier"]) >= TIERS.index(req.trace["tier_reason"]["raw"])


def check_sdk_types(body: dict[str, Any], provider: str) -> None:
    """The body against the provider SDK's own request type (anthropic, openai) or service model
    (botocore's Converse input shape for bedrock), where the SDK is installed."""
    if provider == "bedrock":
        botocore_session = pytest.importorskip("botocore.session")
        from botocore.validate import ParamValidator

        shape = botocore_session.get_session().get_service_model("bedrock-runtime").operation_model("Converse")
        report = ParamValidator().validate(body, shape.input_shape)
        assert not report.has_errors(), report.generate_report()[:2000]
        return
    from .test_providers_sdk import type_errors  # (that module imports this one)

    if provider == "anthropic":
        from anthropic.types.message_create_params import MessageCreateParamsNonStreaming as Params
    else:
        from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming as Params
    errs = type_errors(body, Params)
    assert errs == [], errs[:5]
    if provider == "openai":
        # The type allows content null on any assistant message; the API only beside tool calls.
        for m in body["messages"]:
            if m["role"] == "assistant" and not m.get("tool_calls"):
                assert isinstance(m["content"], str), "an assistant message with neither content nor calls"
    if provider == "anthropic":
        # The API's own rules beyond the type: no text block of nothing or of whitespace only, and no
        # cache_control on an empty text block.
        for m in body["messages"]:
            for b in m["content"]:
                if b["type"] == "text":
                    assert b["text"].strip(), f"an empty text block in a {m['role']} message"


def verify_replay(pipe: Pipeline, counter: TokenCounter | None = None) -> None:
    report = Replayer(pipe.journal.events, counter=counter or pipe.counter).verify()
    assert report.ok, [str(m) for m in report.mismatches]


def protected_tokens(s: Session, counter: TokenCounter) -> int:
    """A generous upper bound of what may never be evicted: anchors, latches, the task, and the newest
    round cut to its bones (calls, thinking and ~20 tokens per part), with message overheads."""
    texts = [*anchor_texts(s).values(), make_text(s.seed + 3, s.task_words, "TASK: ")]
    newest = s.rounds[-1] if s.rounds else None
    slack = 600
    if newest is not None:
        slack += counter.count(make_text(0, newest.thinking_words)) + 60 * (len(newest.calls) + 2)
    return sum(counter.count(t) for t in texts) + slack


PROP = settings(
    max_examples=int(os.environ.get("CP_HYPOTHESIS_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


# ----------------------------------------------------------------------------- properties
@PROP
@given(s=sessions_st)
def test_every_turn_keeps_the_contracts(s: Session) -> None:
    """Budget, anchors, pairing, markers and audit on every turn; replay verifies at the end."""
    anchors = anchor_texts(s)
    if not output_fits(s):
        # A reply limit at or past the window leaves no room for a prompt: refused at construction.
        with pytest.raises(ConfigError, match="not below the window"):
            new_pipeline(s, max_output_tokens=s.max_output_tokens)
        event("max_output_tokens refused")
    pipe = new_pipeline(s)
    turns = 0
    due: list[str] = []  # emergent lines waiting for a successful request
    expired: list[str] = []
    for t in play(s, pipe):
        turns += 1
        due += t.emerged
        if t.request is None:
            assert isinstance(t.error, BudgetExceededError)
            event("BudgetExceededError")
            assert "ceiling" in str(t.error) and "window" in str(t.error)
            # Only when what can never be evicted is big against the window.
            assert protected_tokens(s, pipe.counter) > pipe.config.budget.usable // 2, str(t.error)
            continue
        check_request(t.request, s.provider, anchors)
        if s.provider != "prefix":
            check_sdk_types(t.request.body, s.provider)
        check_audit(t.request.trace, s.limits())
        check_emergent(t.request, due, expired)
        expired, due = expired + due, []
        event(f"tier {t.request.trace['tier']}")
        for a in t.request.trace["actions"]:
            event(f"applied {a['step']}")
        for a in t.request.trace["skipped"]:
            event(f"skipped {a['step']}")
    assert turns == len(s.rounds) + 1
    verify_replay(pipe)


@PROP
@given(s=sessions_st)
def test_same_events_give_byte_identical_requests(s: Session) -> None:
    """Two pipelines (separate counters and spill stores) fed the same events agree byte for byte."""
    pa = new_pipeline(s, TokenCounter(CharTokenizer()), spill=MemorySpill())
    pb = new_pipeline(s, TokenCounter(CharTokenizer()), spill=MemorySpill())
    for ta, tb in zip(play(s, pa), play(s, pb), strict=True):
        assert (ta.request is None) == (tb.request is None)
        if ta.request is not None and tb.request is not None:
            assert ta.request.bytes == tb.request.bytes
            assert ta.request.trace == tb.request.trace
        assert len(pa.journal.events) == len(pb.journal.events)
    assert pa.journal.events == pb.journal.events


@PROP
@given(s=sessions_st)
def test_record_error_leaves_statistics_and_emergent_unchanged(s: Session) -> None:
    pipe = new_pipeline(s)
    anchors = anchor_texts(s)
    for t in play(s, pipe):
        if t.request is None:
            continue
        if t.outcome != "none":
            continue  # play() already fed usage or an error back; probe turns left open
        stats = copy.deepcopy(pipe.stats)
        emergent = copy.deepcopy(pipe.emergent)
        events = len([e for e in pipe.journal.events if e["k"] == "error"])
        usage_events = len([e for e in pipe.journal.events if e["k"] == "usage"])
        pipe.record_error("overloaded", "529 overloaded")
        assert pipe.stats == stats
        assert pipe.emergent == emergent
        assert len([e for e in pipe.journal.events if e["k"] == "error"]) == events + 1
        assert len([e for e in pipe.journal.events if e["k"] == "usage"]) == usage_events
        assert pipe.traces[-1]["error"].startswith("overloaded")
        # prompt_too_long only starts recovery: no usage sample, no calibration, emergent untouched.
        try:
            req = pipe.next_request()
        except BudgetExceededError:
            continue  # no request, nothing to fail
        check_request(req, s.provider, anchors)
        before = copy.deepcopy(pipe.stats)
        emergent = copy.deepcopy(pipe.emergent)
        pipe.record_error("prompt_too_long", "prompt is too long")
        assert pipe.stats.completions == before.completions
        assert pipe.stats.calibration == before.calibration
        assert pipe.stats.recovery_turns_left == 3
        assert pipe.emergent == emergent
    verify_replay(pipe)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    fail=st.lists(st.booleans(), min_size=3, max_size=3),
    prio=st.lists(st.sampled_from([0, 1, 2, 3]), min_size=3, max_size=3),
    words=st.lists(st.integers(1, 300), min_size=3, max_size=3),
    provider=st.sampled_from(["anthropic", "openai"]),
)
def test_failing_binder_degrades_unless_never(
    fail: list[bool], prio: list[int], words: list[int], provider: str
) -> None:
    pipe = Pipeline("m", provider, 50_000, counter=CHAR_COUNTER, serve=False)
    pipe.identity("You are a test agent.")

    def binder(k: int) -> Any:
        def bind() -> str:
            if fail[k]:
                raise RuntimeError(f"source {k} is down")
            return make_text(k, words[k], f"BOUND{k}: ")

        return bind

    for k in range(3):
        pipe.add_source(f"src{k}", "context", binder=binder(k), priority=Priority(prio[k]))
    pipe.user("go")
    n_events = len(pipe.journal.events)
    if any(f and p == Priority.NEVER for f, p in zip(fail, prio, strict=True)):
        with pytest.raises(BindError, match="Never-priority"):
            pipe.next_request()
        assert pipe.turn == 0 and not pipe.traces
        assert not [e for e in pipe.journal.events[n_events:] if e["k"] == "request"]
        return
    req = pipe.next_request()
    forms = {s["id"]: s for s in req.trace["sections"]}
    for k in range(3):
        sec = forms[f"src{k}"]
        if fail[k]:
            assert sec["form"] == "degraded" and f"source {k} is down" in sec["note"]
        else:
            assert sec["form"] != "degraded"
            assert make_text(k, words[k], f"BOUND{k}: ") in strings_in_list(req.body)
    if any(fail):
        assert "bind_degraded" in {a["rule"] for a in req.trace["alerts"]}
    verify_replay(pipe)


def strings_in_list(body: dict[str, Any]) -> list[str]:
    return list(strings_in(body))


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    ("window", "needle"),
    [
        (0, "window is 0"),
        (-1, "out of range"),
        (-100_000, "out of range"),
        (10**12, "out of range"),
        (1.5, "integer"),
        (True, "integer"),
        ("200000", "integer"),
    ],
)
def test_bad_window_is_a_config_error(window: Any, needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        Pipeline("m", "anthropic", window, serve=False)


def test_bad_window_through_set_window_keeps_the_old_one() -> None:
    pipe = Pipeline("m", "anthropic", 10_000, counter=CHAR_COUNTER, serve=False)
    with pytest.raises(ConfigError):
        pipe.set_window(-5)
    assert pipe.config.window == 10_000


def test_unknown_provider_names_the_known_ones() -> None:
    with pytest.raises(ConfigError, match="unknown provider 'gemini'.*anthropic, openai, bedrock, prefix"):
        Pipeline("m", "gemini", 10_000, serve=False)
    assert Pipeline("m", "DeepSeek", 10_000, serve=False).config.provider == "openai"


@pytest.mark.parametrize(
    "vals",
    [(0.9, 0.8, 0.95), (0.0, 0.5, 0.6), (-1.0, 0.5, 0.6), (float("nan"), 0.5, 0.6), (0.5, 0.6, 11.0)],
)
def test_bad_thresholds_are_config_errors(vals: tuple[float, float, float]) -> None:
    with pytest.raises(ConfigError, match="thresholds"):
        Thresholds(*vals)


@pytest.mark.parametrize(
    "kw",
    [
        {"margin": 0.6},
        {"margin": -0.1},
        {"max_output_tokens": -1},
        {"default_response_reserve": 10**9},
        {"limits": "no"},
    ],
)
def test_bad_settings_are_config_errors(kw: dict[str, Any]) -> None:
    if kw.get("limits") == "no":
        with pytest.raises(ConfigError, match="unknown optimizer gate"):
            OptimizeLimits().with_gates({"compress_everything": True})
        with pytest.raises(ConfigError):
            OptimizeLimits(max_clear_tokens=-1)
        return
    with pytest.raises(ConfigError):
        Pipeline("m", "anthropic", 10_000, serve=False, **kw)


def test_unpaired_tool_result_is_rejected_at_once() -> None:
    pipe = Pipeline("m", "anthropic", 10_000, counter=CHAR_COUNTER, serve=False)
    pipe.identity("x")
    pipe.user("task")
    n = len(pipe.journal.events)
    with pytest.raises(UnpairedToolResultError, match="'ghost'") as exc:
        pipe.tool_result("ghost", "output")
    assert exc.value.call_id == "ghost"
    assert len(pipe.journal.events) == n  # nothing journaled
    pipe.assistant("", [{"id": "c1", "name": "bash", "arguments": "{}"}])
    pipe.tool_result("c1", "ok")
    with pytest.raises(UnpairedToolResultError, match="already has a result"):
        pipe.tool_result("c1", "again")
    with pytest.raises(ConfigError, match="duplicate tool call ids"):
        pipe.assistant("", [{"id": "d", "name": "a", "arguments": "{}"}, {"id": "d", "name": "b"}])


def test_call_without_result_is_rejected_by_the_serializer() -> None:
    pipe = Pipeline("m", "anthropic", 10_000, counter=CHAR_COUNTER, serve=False)
    pipe.identity("x")
    pipe.user("task")
    pipe.assistant("", [{"id": "c1", "name": "bash", "arguments": "{}"}, {"id": "c2", "name": "bash"}])
    pipe.tool_result("c1", "ok")
    # Refused at the call that leaves c2 unanswered (Pipeline._check_answered), nothing journaled...
    with pytest.raises(UnpairedToolResultError, match="c2"):
        pipe.assistant("next", [])
    # ...and, for a pipeline that rebuilds another agent's conversation as sent, by the serializer.
    pipe.check_pairing = False
    pipe.assistant("next", [])
    with pytest.raises(UnpairedToolResultError, match="c2"):
        pipe.next_request()


def test_tiny_window_raises_budget_exceeded_with_the_numbers() -> None:
    pipe = Pipeline("m", "anthropic", 300, counter=CHAR_COUNTER, serve=False)
    pipe.identity("word " * 400)
    pipe.user("hi")
    n = len(pipe.journal.events)
    with pytest.raises(BudgetExceededError, match=r"ceiling of \d+ .*identity \d+"):
        pipe.next_request()
    with pytest.raises(BudgetExceededError):
        pipe.explain()
    assert not [e for e in pipe.journal.events[n:] if e["k"] == "request"]
    pipe.set_window(20_000)  # the session carries on once the window is fixed
    check_request(pipe.next_request(), "anthropic", {"identity": "word " * 400})
    verify_replay(pipe)
