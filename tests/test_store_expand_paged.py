"""expand a page at a time: a huge item no longer comes back whole, and the pages join to the whole.

ContextStore.expand_page(id, offset, limit) returns at most `limit` characters and says what is left;
`ctx expand` pages a text over 100,000 characters by default (stdout: the page as stored; stderr: what
is left and the --offset of the next page).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from engine.store import ContextStore, ExpandPage, Kind
from engine.store.paging import EXPAND_PAGE_CHARS
from inspector.ctx_cli import ctx_app

REPO = Path(__file__).resolve().parents[1]


def _pages(s: ContextStore, item_id: int, limit: int) -> list[ExpandPage]:
    out = [s.expand_page(item_id, 0, limit)]
    while out[-1].next_offset is not None:
        out.append(s.expand_page(item_id, out[-1].next_offset, limit))  # type: ignore[arg-type]
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    body=st.text(alphabet=st.sampled_from(["a", "b", " ", "\n", "\x00", "é", "😀", "\r"]), max_size=400)
    | st.text(max_size=200),
    limit=st.integers(min_value=1, max_value=120),
    reopen=st.booleans(),
)
def test_pages_join_to_exactly_what_expand_returns(
    tmp_path_factory: pytest.TempPathFactory, body: str, limit: int, reopen: bool
) -> None:
    path = tmp_path_factory.mktemp("p") / "p.db"
    with ContextStore(path) as s:
        s.add("first", Kind.USER)
        m = s.add("note: " + body[:40], Kind.MEMORY, source="notes.md")  # an original with a header
        i = s.add(body, Kind.TOOL_RESULT)
        sid = s.collapse_subtask([1, m], i)  # a summary item over originals
    with ContextStore(path) as s:
        if not reopen:
            s.get(i)  # the body cached in memory: sliced there instead of by SQLite
        for item in (i, sid):
            pages = _pages(s, item, limit)
            whole = s.expand(item)
            assert "".join(p.text for p in pages) == whole
            assert all(len(p.text) <= limit for p in pages)
            assert all(p.text for p in pages[:-1])  # every page but an empty text's one moves on
            assert pages[-1].left == 0 and pages[-1].total == len(whole)
            assert all(p.left == len(whole) - p.end for p in pages)


def test_a_page_ends_at_a_line_and_says_what_is_left(tmp_path: Path) -> None:
    body = "".join(f"line {n:04d}\n" for n in range(100))  # 10 characters a line
    with ContextStore(tmp_path / "s.db") as s:
        i = s.add(body, Kind.TOOL_RESULT)
        p = s.expand_page(i, 0, 95)
        assert p.text == body[:90] and p.next_offset == 90 and p.left == 910
        assert p.note() == f"[#{i}: characters 0-90 of 1,000; 910 left: expand({i}, offset=90) for the next page]"
        assert p.tool_result().endswith(p.note()) and p.tool_result().startswith(body[:90])
        last = s.expand_page(i, 990, 95)
        assert last.text == body[990:] and last.next_offset is None and "this is the end" in last.note()
        assert s.expand_page(i, 0, 5000).note() == ""  # the whole text: nothing to say
        with pytest.raises(ValueError, match="offset 1,001 is past the end of #1 \\(1,000 characters\\)"):
            s.expand_page(i, 1001)
        with pytest.raises(ValueError, match="limit must be at least 1"):
            s.expand_page(i, 0, 0)
        with pytest.raises(TypeError, match="offset must be a whole number"):
            s.expand_page(i, "10")  # type: ignore[arg-type]
        assert s.expand_page(str(i), 0, 10).text == body[:10]  # type: ignore[arg-type]  # an agent's id as text
        assert "offset" in s.expand_tool_schema()["function"]["parameters"]["properties"]


def test_a_page_of_a_huge_item_does_not_read_it_whole(tmp_path: Path) -> None:
    # A 60 MB body: a page of it in a fresh process must cost nowhere near the body in memory.
    db = tmp_path / "big.db"
    body = ("x" * 99 + "\n") * 600_000
    with ContextStore(db) as s:
        i = s.add(body, Kind.TOOL_RESULT)
    code = (
        "import resource, sys\n"
        "from engine.store import ContextStore\n"
        f"s = ContextStore({str(db)!r})\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        f"p = s.expand_page({i}, 1000, 500)\n"
        "grew = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before\n"
        "print(len(p.text), p.total, p.left, grew)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120,
                         env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    n, total, left, grew_kb = map(int, out.stdout.split())
    assert (n, total, left) == (500, len(body), len(body) - 1500)
    assert grew_kb < 30_000  # streamed a megabyte at a time; expand() of it grows by ~120 MB


def test_ctx_expand_pages_a_big_text_and_the_pages_join_to_it(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    body = "".join(f"row {n:06d} of the dump\n" for n in range(12_000))  # 276,000 characters
    with ContextStore(db) as s:
        i = s.add(body, Kind.TOOL_RESULT)
        small = s.add("a short one", Kind.TOOL_RESULT)
    r = CliRunner().invoke(ctx_app, ["expand", "--db", str(db), str(small)])
    assert r.exit_code == 0 and r.stdout == "a short one\n" and r.stderr == ""
    got, offset, seen = "", 0, 0
    while True:
        args = ["expand", "--db", str(db), str(i)] + (["--offset", str(offset)] if offset else [])
        r = CliRunner().invoke(ctx_app, args)
        assert r.exit_code == 0, r.output
        assert len(r.stdout) <= EXPAND_PAGE_CHARS
        got += r.stdout
        seen += 1
        if "next page:" not in r.stderr:
            assert "this is the end" in r.stderr
            break
        assert f"left: expand({i}, offset=" in r.stderr
        offset = int(r.stderr.rsplit("--offset ", 1)[1].split()[0])
    assert got == body and seen == 3
    r = CliRunner().invoke(ctx_app, ["expand", "--db", str(db), str(i), "--all"])
    assert r.exit_code == 0 and r.stdout == body + "\n" and r.stderr == ""
    r = CliRunner().invoke(ctx_app, ["expand", "--db", str(db), str(i), "--offset", "999999"])
    assert r.exit_code == 2 and "past the end" in r.output
    r = CliRunner().invoke(ctx_app, ["expand", "--db", str(db), str(i), "--all", "--limit", "5"])
    assert r.exit_code == 2 and "not both" in r.output


def test_a_page_of_a_summary_does_not_build_its_originals_whole(tmp_path: Path) -> None:
    # A summary over a 60 MB tool result and a memory: expand_page of the summary built the whole joined
    # text (the originals read whole, then joined: ~120 MB more) to return 500 characters of it.
    db = tmp_path / "sum.db"
    body = ("y" * 99 + "\n") * 600_000
    with ContextStore(db) as s:
        first = s.add("first", Kind.USER)
        big = s.add(body, Kind.TOOL_RESULT)
        mem = s.add("the cache key is the path plus mtime", Kind.MEMORY)
        sid = s.collapse_subtask([first, big], mem)
        assert big in s.state.originals(sid)
        assert s.expand(sid).endswith("the cache key is the path plus mtime")  # a memory keeps its header
    code = (
        # VmHWM, not ru_maxrss: a child's ru_maxrss starts at this process's peak, which the 60 MB add
        # and expand() above set, and would hide what the page costs.
        "import re\n"
        "hwm = lambda: int(re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1))\n"
        "from engine.store import ContextStore\n"
        f"s = ContextStore({str(db)!r})\n"
        "before = hwm()\n"
        f"p = s.expand_page({sid}, 1000, 500)\n"
        f"q = s.expand_page({sid}, p.total - 60, 500)\n"
        "grew = hwm() - before\n"
        "print(repr((p.text, p.total, p.left, q.text, grew)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120,
                         env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    text, total, left, tail, grew_kb = ast.literal_eval(out.stdout)
    with ContextStore(db) as s:
        whole = s.expand(sid)
    assert 250 <= len(text) <= 500 and text == whole[1000 : 1000 + len(text)]  # ends after a newline
    assert (total, left) == (len(whole), len(whole) - 1000 - len(text))
    assert tail == whole[-60:]
    assert grew_kb < 30_000  # the tool result streamed a megabyte at a time
