"""Cleaning text from people: one linear pass to a fixed point, on a text cut first, and
off the event loop when it is long. (What it removes: tests/agent/test_context_builder.py.)"""

from __future__ import annotations

import re
import time
import unicodedata
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot import offload, untrusted
from bot.fence_marks import CLOSE_BRACKETS, OPEN_BRACKETS, SLASHES
from bot.untrusted import (
    LARGE,
    MAX_CHARS,
    MAX_PERSON_CHARS,
    clean_off_loop,
    clean_untrusted,
    fence,
    fence_off_loop,
)

# One pass of the patterns cleaning removes (the code before bot/untrusted.py repeated it
# until nothing changed): a fixed point is a text this pass leaves as it is.
_COMMENT = re.compile(r"<!--.*?(?:-->|$)", re.DOTALL)
_OPEN, _CLOSE = re.escape(OPEN_BRACKETS), re.escape(CLOSE_BRACKETS)
_TAG = re.compile(
    f"[{_OPEN}]\\s*(?:[{re.escape(SLASHES)}]\\s*)?untrusted(?:[^{_OPEN}{_CLOSE}]*[{_CLOSE}])?",
    re.IGNORECASE,
)


_INVISIBLE = {"Cf", "Cc", "Co", "Cs"}


def one_pass(text: str) -> str:
    text = _COMMENT.sub("", text)
    text = "".join(ch for ch in text if ch in "\n\t" or unicodedata.category(ch) not in _INVISIBLE)
    return _TAG.sub("", text)


def nested(depth: int) -> str:
    """Fence tags and HTML comments, each split by the next one inside it, ``depth`` deep:
    removing the innermost joins the pieces of the one around it, and so on out."""
    text = "</untrusted>"
    for level in range(depth):
        text = f"</unt{text}rusted>" if level % 2 == 0 else f"<!{text}-- x -->"
    return text


def test_a_flood_nested_6000_deep_is_cleaned_to_nothing_in_linear_time() -> None:
    flood = nested(5_900)  # 64,912 characters: within MAX_CHARS, so nothing is cut
    assert len(flood) <= MAX_CHARS
    started = time.perf_counter()
    assert clean_untrusted(flood) == ""
    # The pass repeated until nothing changed took 25 s for this on an idle machine.
    assert time.perf_counter() - started < 1.0
    wrapped = f"before {flood} after"
    assert clean_untrusted(wrapped) == "before  after"


def test_the_time_grows_linearly_with_the_depth() -> None:
    def seconds(depth: int) -> float:
        text = nested(depth)
        best = float("inf")
        for _ in range(3):
            started = time.perf_counter()
            clean_untrusted(text)
            best = min(best, time.perf_counter() - started)
        return best

    small, large = seconds(500), seconds(4_000)
    assert large < 8 * small * 3  # eight times the text, at most three times slower each


@pytest.mark.parametrize(
    "text",
    [
        "</unt</unt</untrusted>rusted>rusted>",
        "<!<!<!-- a -->-- b -->-- c -->",
        "<" + " " * 30_000 + "/" + " " * 30_000 + "untrusted>",
        "x" + (" " * 1_000 + "untrusted") * 60,  # spaces before a word without a bracket
        "<untrusted" * 6_000,  # heads without their closing bracket
        "<" * 30_000 + "untrusted" * 3_000,  # a head formed again and again at one bracket
    ],
)
def test_pathological_text_is_cleaned_quickly_to_a_fixed_point(text: str) -> None:
    started = time.perf_counter()
    cleaned = clean_untrusted(text)
    assert time.perf_counter() - started < 1.0
    assert one_pass(cleaned) == cleaned and not _TAG.search(cleaned)


ALPHABET = st.sampled_from(
    [
        *"<>!-/ \n\tuntrsedUNTRSED\u017fx\uff1c\uff1e\ufe64\ufe65\u200b\u202e\ufeff\r",
        *"\u2039\u203a\u3008\u3009\u27e8\u27e9\u00ab\u00bb\uff0f\u2044",  # look-alikes
        *("untrusted", "<!--", "-->", "</untrusted>", "<untrusted source='x'>"),
    ]
)


@settings(max_examples=500, deadline=None)
@given(st.lists(ALPHABET, max_size=40).map("".join))
def test_the_result_is_a_fixed_point_and_cleaning_it_again_changes_nothing(text: str) -> None:
    cleaned = clean_untrusted(text)
    assert one_pass(cleaned) == cleaned
    assert "<!--" not in cleaned and not _TAG.search(cleaned)
    assert clean_untrusted(cleaned) == cleaned


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200).filter(lambda t: not re.search(f"[{_OPEN}]", t)))
def test_text_without_an_opening_bracket_only_loses_invisible_characters(text: str) -> None:
    expected = one_pass(text.replace("\r\n", "\n"))
    expected = re.sub(r"\n{3,}", "\n\n", expected).strip()
    assert clean_untrusted(text) == expected


def test_a_persons_text_is_cut_before_it_is_cleaned_saying_how_much_is_left_out() -> None:
    block = fence("y" * 66_000, "answer by eve", limit=MAX_PERSON_CHARS)
    body = block.split("\n", 1)[1].rsplit("\n", 1)[0]
    assert len(body) <= MAX_PERSON_CHARS
    assert body.endswith(f"\n[... {66_000 - body.count('y')} more characters]")
    assert len(clean_untrusted("z" * 100_000)) <= MAX_CHARS  # nothing is cleaned whole


async def test_a_long_text_is_cleaned_in_a_worker_process_a_short_one_on_the_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sent: list[int] = []
    real = offload.compute

    async def compute(fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        sent.append(len(args[0]))
        return await real(fn, *args, **kwargs)

    monkeypatch.setattr(offload, "compute", compute)
    short = await fence_off_loop("a <!-- b --> c", "comment by eve")
    assert short == '<untrusted source="comment by eve">\na  c\n</untrusted>' and sent == []
    flood = nested(5_900)
    assert await fence_off_loop(f"keep {flood}", "comment by eve", limit=MAX_CHARS) == (
        '<untrusted source="comment by eve">\nkeep\n</untrusted>'
    )
    assert await clean_off_loop("x" * 66_000, limit=MAX_PERSON_CHARS) == clean_untrusted(
        "x" * 66_000, limit=MAX_PERSON_CHARS
    )
    # cut before it is sent: the worker gets at most the limit
    assert sent == [len(flood) + 5, MAX_PERSON_CHARS] and LARGE < MAX_PERSON_CHARS
    assert untrusted.LARGE == offload.LARGE_TEXT
