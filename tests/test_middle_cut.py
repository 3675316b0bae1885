"""panels/middle_cut.py: the one middle cut behind the status bar's names ("…") and the fleet report's
session column ("..."): the length stays `limit` and both ends of the name stay."""

from panels.middle_cut import middle_cut


def test_short_names_are_kept_whole() -> None:
    assert middle_cut("abc", 3) == "abc"
    assert middle_cut("abc", 3, "...") == "abc"


def test_ellipsis_cut_keeps_limit_and_both_ends() -> None:
    name = "deepseek_reasoner_dev__marshmallow-code__marshmallow-1343"
    cut = middle_cut(name, 32)
    assert len(cut) == 32
    assert cut == name[:15] + "…" + name[-16:]


def test_dots_cut_keeps_limit_and_both_ends() -> None:
    name = "deepseek_reasoner_dev__marshmallow-code__marshmallow-1343"
    cut = middle_cut(name, 33, "...")
    assert cut == "deepseek_reason...arshmallow-1343"
    assert len(cut) == 33


def test_head_share_moves_the_cut() -> None:
    assert (
        middle_cut("abcdefghijklmnopqrstuvwxyz0123456789ABCDEF", 20, head_share=1 / 3)
        == "abcdef…3456789ABCDEF"
    )
