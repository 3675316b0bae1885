"""engine/sim/few_texts.py counts what tiktoken counts, without building tiktoken's encoder.

Every count is held against `encode_ordinary` of the real cl100k encoding; the hand-over to the real
tokenizer (budget, long pieces, lone surrogates, an encoder already built) is checked by watching which
one answers. The last test runs `cp-inspect simulate` in a fresh process (the encoder is built once per
process, so only a fresh one shows whether it was) on a recording that carries its counts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from engine import bpe_ranks
from engine.assembly import omission_marker
from engine.sim import few_texts
from engine.sim.few_texts import MAX_PIECE, FewTextsTokenizer, bpe_parts

REPO = Path(__file__).resolve().parents[1]


class Watched:
    """The real tokenizer's name and counts, remembering which texts reached it. `_encode` None: as the
    process-wide tokenizer looks before its encoder is built."""

    name = "cl100k_base"
    _encode = None

    def __init__(self) -> None:
        self.asked: list[str] = []

    def count(self, text: str) -> int:
        self.asked.append(text)
        return real_count(text)


def real_count(text: str) -> int:
    return len(bpe_ranks.cl100k_offline().encode_ordinary(text))


_LOADED: list[FewTextsTokenizer] = []  # the first tokenizer fresh() loaded the ranks of


def fresh(real: Watched) -> FewTextsTokenizer:
    """A new FewTextsTokenizer (its memos of pieces and long texts empty) with no budget, on the ranks
    the first one loaded. Each loads the same read-only ranks (~20-25 ms: without a rank table file, as
    under PYTHONDONTWRITEBYTECODE, a 100k-entry dict built from the rank file), which was most of each
    property example's time (~25 s of the three property tests' ~1,050 examples); the first one still
    loads them through FewTextsTokenizer._load."""
    t = FewTextsTokenizer(real, budget=10**9)
    if not _LOADED:
        assert t._load()
        _LOADED.append(t)
    else:
        was = _LOADED[0]
        t._ranks, t._rank_of, t._split_ascii = was._ranks, was._rank_of, was._split_ascii
    return t


TEXTS = (
    st.text(max_size=200)
    | st.from_regex(r"[\w \n\t\[\].(){}\"':,-]{0,200}", fullmatch=True)
    | st.text(alphabet="ab 'sllvere1234\n\r\t  ÄÖü日本語😀!?.{}", max_size=80)
)


@settings(max_examples=400, deadline=None)
@given(text=TEXTS)
@example("bash\n" + json.dumps({"properties": {"command": {"type": "string"}}, "required": ["command"]}))
@example(omission_marker(12345, "37 earlier rounds dropped"))
@example("I'll've   \n\n\n  x  \r\n 12345678 don'T")
@example("a" * MAX_PIECE + " " + "b" * (MAX_PIECE + 1))
@example("x " + "=" * 22)  # equal-ranked pairs: merging the rightmost first gives another count
def test_counts_equal_tiktokens(text: str) -> None:
    t = fresh(Watched())
    assert t.count(text) == real_count(text)


ASCII = st.text(alphabet=st.characters(max_codepoint=127), max_size=200) | st.text(
    alphabet="aZ09 's'LLvE\n\r\t\x0b\x0c\x1c\x1d\x1e\x1f_-.!", max_size=60
)


@settings(max_examples=500, deadline=None)
@given(text=ASCII)
@example("I'll've   \n\n\n  x  \r\n 12345678 don'T\x1c\x1f  \x0b")
@example(omission_marker(12345, "37 earlier rounds dropped"))
def test_ascii_split_is_cl100ks(text: str) -> None:
    """An ASCII text is split by the standard library's `re` (no `regex` import): the same pieces as
    cl100k's pattern, and so the same count. Every ASCII control character included (\x1c-\x1f are
    whitespace to str.isspace but not to Unicode's White_Space)."""
    import regex

    assert few_texts.re.findall(few_texts.ASCII_PAT_STR, text, few_texts.re.ASCII) == regex.findall(
        bpe_ranks.PAT_STR, text
    )
    t = fresh(Watched())
    assert t.count(text) == real_count(text)


def test_a_non_ascii_text_is_split_by_cl100ks_own_pattern() -> None:
    t = FewTextsTokenizer(Watched(), budget=10**9)
    t.count("plain ascii 123")
    assert t._split is None  # the `regex` module's pattern is not built for ASCII texts
    assert t.count("Grüße, 日本語 x\x85y") == real_count("Grüße, 日本語 x\x85y")
    assert t._split is not None


@settings(max_examples=300, deadline=None)
@given(piece=st.binary(min_size=2, max_size=24) | st.text(min_size=2, max_size=24).map(str.encode))
@example(b" " + b"=" * 22)
def test_merges_are_tiktokens(piece: bytes) -> None:
    """The parts a piece merges into are the tokens tiktoken encodes it to (not just as many)."""
    enc = bpe_ranks.cl100k_offline()
    ranks = enc._mergeable_ranks
    parts = bpe_parts(piece, ranks.get)
    assert b"".join(parts) == piece
    if piece in ranks:
        return  # tiktoken answers a whole-piece token without merging; so does FewTextsTokenizer
    assert [ranks[p] for p in parts] == enc._encode_single_piece(piece)


def test_only_short_texts_within_the_budget_are_counted_here() -> None:
    watched = Watched()
    t = FewTextsTokenizer(watched, budget=40)
    assert t.count("bash\nRun a shell command") == real_count("bash\nRun a shell command")
    assert watched.asked == []  # counted here
    long = "x" * 30 + " and more words"
    assert t.count(long) == real_count(long)
    assert watched.asked == [long]  # over the budget: the real tokenizer
    assert t.count("bash") == real_count("bash")
    assert watched.asked == [long, "bash"]  # and from then on, since its encoder is built now


def test_a_long_piece_or_a_lone_surrogate_goes_to_the_real_tokenizer() -> None:
    for text in ("word " + "z" * (MAX_PIECE + 1), "a \ud800 b"):
        watched = Watched()
        t = FewTextsTokenizer(watched, budget=10**9)
        assert t.count(text) == watched.count(text)
        assert watched.asked == [text, text]


def test_never_used_once_the_real_encoder_is_built_or_for_another_tokenizer() -> None:
    class Built(Watched):
        _encode = len  # anything but None: the encoder exists

    class Other(Watched):
        name = "chars/4"

    for real in (Built(), Other()):
        t = FewTextsTokenizer(real, budget=10**9)
        t.count("hello")
        assert real.asked == ["hello"]


def test_simulate_of_a_recording_with_counts_builds_no_encoder(tmp_path: Path) -> None:
    """A recording whose table lacks a few texts (here the gates-closed column's omission notes under a
    tighter window): the report equals a fresh count's, and the process never built the encoder."""
    from engine.pipeline import Pipeline

    rec = tmp_path / "s.cpsession"
    now = [1000.0]
    pipe = Pipeline("deepseek-chat", "deepseek", 64_000, record=rec, serve=False, clock=lambda: now[0])
    pipe.identity("You are a careful coding agent.")
    pipe.add_tool(
        "bash", "Run a shell command", {"type": "object", "properties": {"cmd": {"type": "string"}}}
    )
    pipe.user("Fix the failing test in tests/test_io.py.")
    for k in range(12):
        req = pipe.next_request()
        pipe.record_usage({"prompt_tokens": req.trace["final_tokens"], "completion_tokens": 20})
        now[0] += 5
        calls = pipe.assistant(f"Step {k}.", [{"id": f"c{k}", "name": "bash", "arguments": "{}"}])
        pipe.tool_result(calls[0].id, "".join(f"line {k}.{i}: value = {i * k}\n" for i in range(80)))
    pipe.close()
    code = (
        "import json, sys\n"
        "from engine import bpe_ranks\n"
        "from engine.sim import few_texts\n"
        "from engine.sim.simulate import SimSettings, simulate_file\n"
        "from engine.tokens import TokenCounter\n"
        "asked = []\n"
        "count = few_texts.FewTextsTokenizer.count\n"
        "few_texts.FewTextsTokenizer.count = lambda self, t: asked.append(t) or count(self, t)\n"
        "s = SimSettings(window=6000)\n"
        "r = simulate_file(sys.argv[1], s).to_json(per_turn=True)\n"
        "built = bpe_ranks.cl100k_offline.cache_info().currsize\n"
        "fresh = simulate_file(sys.argv[1], s, counter=TokenCounter()).to_json(per_turn=True)\n"
        "for d in (r, fresh): d.pop('elapsed_s')\n"
        "print(json.dumps({'built': built, 'asked': len(asked) > 0, 'same': r == fresh}))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run(
        [sys.executable, "-c", code, str(rec)], capture_output=True, text=True, env=env, cwd=REPO
    )
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got == {"built": 0, "asked": True, "same": True}


def test_the_crate_counts_from_the_start_when_the_engine_tokenizer_would_use_it(monkeypatch: Any) -> None:
    """With the bpe-openai crate installed and no rank table file (engine/sim/rank_table.py), the engine's tokenizer loads it about as fast as the rank dict
    builds and counts faster: nothing is merged here and no rank dict is built. Without the crate (or
    for a tokenizer that is not the engine's), the few texts are counted here as before."""
    from engine import tokens_cl100k
    from engine.sim import rank_table
    from engine.tokens import TiktokenTokenizer

    text = "bash\nRun a shell command"
    monkeypatch.setattr(rank_table, "cl100k_rank", lambda: None)  # no rank table file at hand
    monkeypatch.setattr(tokens_cl100k, "installed", lambda: True)
    real = TiktokenTokenizer()
    t = FewTextsTokenizer(real, budget=10**9)
    assert t.count(text) == real_count(text)
    assert t._ranks is None and real._encode is not None  # the engine's tokenizer counted it
    watched = Watched()  # another tokenizer: counted here
    t = FewTextsTokenizer(watched, budget=10**9)
    assert t.count(text) == real_count(text) and watched.asked == [] and t._ranks is not None
    monkeypatch.setattr(tokens_cl100k, "installed", lambda: False)
    real = TiktokenTokenizer()
    t = FewTextsTokenizer(real, budget=10**9)
    assert t.count(text) == real_count(text)
    assert t._ranks is not None and real._encode is None  # counted here, the encoder not built


def test_with_the_rank_table_the_crate_is_not_loaded(monkeypatch: Any, tmp_path: Path) -> None:
    """With a rank table file at hand, the few texts are counted here even with the crate installed:
    the engine's tokenizer stays unloaded, and the counts are tiktoken's."""
    from engine import tokens_cl100k
    from engine.sim import rank_table
    from engine.tokens import TiktokenTokenizer

    table = rank_table.load_or_build(str(tmp_path / "t.ranks"), bpe_ranks._ranks_path())
    assert table is not None
    monkeypatch.setattr(rank_table, "cl100k_rank", lambda: table.rank)
    monkeypatch.setattr(tokens_cl100k, "installed", lambda: True)
    real = TiktokenTokenizer()
    t = FewTextsTokenizer(real, budget=10**9)
    for text in ("bash\nRun a shell command", "Grüße, 日本語 x\x85y  \n\n", SYNTHETIC):
        assert t.count(text) == real_count(text)
    assert real._encode is None and t._ranks is None  # neither the crate nor the rank dict


# A tool output as the 930-turn synthetic session's (bench_simulate.synthetic_output): ~7.7k characters.
SYNTHETIC = "".join(
    f"line 205.{i}: 0.{i * 7919 % 999983:06d} value = compute(x_{i}, y_205)\n" for i in range(150)
)

SPLICE = st.text(alphabet="  \n\n\t\r x'lLsS1.\u00a0\u2028\u3000\x85ab!日", min_size=0, max_size=6)


@settings(max_examples=150, deadline=None)
@given(
    full=st.text(alphabet="  \n\n\t\r x'lLsS1.\u00a0\u2028\u3000\x85ab!日😀", min_size=512, max_size=900)
    | st.just(SYNTHETIC),
    cut=st.tuples(st.floats(0, 1), st.floats(0, 1)),
    mid=SPLICE,
)
@example(full=SYNTHETIC, cut=(0.6, 0.6), mid="\n[...1234 tokens omitted...]\n")
@example(full="x" + " " * 600 + "\n\n  y", cut=(0.5, 0.9), mid="")
@example(full="1" * 512, cut=(0.0, 0.0), mid="L1")  # its digits grouped from another start: split whole
def test_a_text_sharing_a_known_texts_start_or_end_counts_as_tiktoken(
    full: str, cut: tuple[float, float], mid: str
) -> None:
    """trim_text's head, tail and cut text (head, marker, tail) of a long text counted before are
    counted from its pieces across the seams (engine/sim/few_texts.py, _seamed): the counts are
    tiktoken's, whitespace runs across a seam included, and the texts are not split whole."""
    a = int(len(full) * min(cut))
    b = int(len(full) * max(cut))
    t = fresh(Watched())
    assert t.count(full) == real_count(full)
    for text in (full[:a] + mid + full[b:], full[:a] + mid, mid + full[b:]):
        before = t.counted
        assert t.count(text) == real_count(text)
        if len(text) >= few_texts.LONG and len(text) - len(mid) >= len(text) // 2 + 8 and _meets(full, text):
            assert t.counted - before < len(text)  # counted from the known pieces, not split whole


def _boundaries(text: str) -> set[int]:
    """Where cl100k's split (the `regex` module's, tiktoken's own pattern) ends a piece in `text`."""
    import regex

    out, at = set(), 0
    for piece in regex.findall(bpe_ranks.PAT_STR, text):
        at += len(piece)
        out.add(at)
    return out


def _meets(known: str, text: str) -> bool:
    """Whether `text`'s split meets `known`'s inside what the two share, so that some of its pieces can
    be taken from the known text's: a piece boundary of both within their shared start (before its
    last three characters, which a piece's look-ahead may read past), or one at the same distance from
    the end within their shared end. Else (say a run of digits or letters through the seam to the end:
    "L1" + "1" * 512 groups its digits from another start than "1" * 512) the text is split whole."""
    p = len(os.path.commonprefix([known, text]))
    s = len(os.path.commonprefix([known[::-1], text[::-1]]))
    s = min(s, min(len(known), len(text)) - p)
    kb, tb = _boundaries(known), _boundaries(text)
    shift = len(known) - len(text)
    if any(q in kb for q in tb if 0 < q < p - 3):
        return True
    return any(q + shift in kb for q in tb if len(text) - s <= q < len(text))
