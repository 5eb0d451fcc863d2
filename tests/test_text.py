"""The one truncation helper: which end is kept, where the note goes, what it counts."""

from __future__ import annotations

import pytest

from bot.text import MORE, clip, omitted_note


def test_text_within_the_limit_is_returned_as_is() -> None:
    assert clip("short", 5) == "short"
    assert clip("short", 100, keep="both", note=omitted_note()) == "short"
    assert clip("", 0, keep="tail") == ""


def test_the_head_is_kept_by_default_and_the_note_counts_what_is_missing() -> None:
    assert MORE == "\n[... {n} more characters]"
    assert clip("y" * 50, 20) == "y" * 20 + "\n[... 30 more characters]"
    assert clip("abcdef", 3, note="...") == "abc..."
    assert clip("abcdef", 3, note="") == "abc"


def test_the_tail_is_kept_after_the_note() -> None:
    assert clip("0123456789", 4, keep="tail", note="[{n} cut]") == "[6 cut]6789"
    assert clip("0123456789", 4, keep="tail", note="") == "6789"
    assert clip("0123456789", 0, keep="tail", note="") == ""


def test_both_ends_are_kept_around_the_note() -> None:
    text = "A" * 50 + "B" * 100 + "C" * 50
    capped = clip(text, 100, keep="both", note=omitted_note("read a range"))
    assert capped.startswith("A" * 50)
    assert capped.endswith("C" * 50)
    assert "[... 100 characters omitted; read a range ...]" in capped
    assert clip("abcdefg", 3, keep="both", note="|{n}|") == "a|5|g"  # limit // 2 each side
    assert omitted_note() == "\n[... {n} characters omitted ...]\n"


@pytest.mark.parametrize("limit", [1, 5, 12, 40, 41])
def test_fit_counts_the_note_against_the_limit(limit: int) -> None:
    cut = clip("x" * 40 + " end", limit, note="…", fit=True)
    assert len(cut) == limit and cut.endswith("…")
    assert clip("x" * 44, 44, note="…", fit=True) == "x" * 44


def test_fit_with_a_counted_note_stays_within_the_limit_and_counts_right() -> None:
    text = "z" * 5000
    cut = clip(text, 100, fit=True)
    kept = cut.index("\n")
    assert len(cut) <= 100
    assert cut.endswith(f"\n[... {len(text) - kept} more characters]")


def test_a_note_longer_than_the_limit_is_all_that_is_left() -> None:
    assert clip("abcdef", 2, note="[cut]", fit=True) == "[cut]"
    assert clip("abcdef", 2, keep="tail", note="[{n}]", fit=True) == "[6]"
