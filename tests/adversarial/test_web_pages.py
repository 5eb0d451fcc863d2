"""A fetched page is text from anyone: reading it (HTML to text, the charset) must take
time linear in the page, whatever the page, and never raise."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.tools.web_html import html_text
from bot.tools.web_text import page_text

SIZE = 200_000

# The first two made the standard library's html.parser take 14 s for 90 KB (and raise
# AssertionError); nesting made lexbor (selectolax) take 3.5 s for 100 KB.
PATHOLOGICAL = {
    "start tags that never end": "<a " * (SIZE // 3),
    "marked sections": "<![" * (SIZE // 3),
    "nesting 40,000 deep": "<div>" * (SIZE // 5),
    "comments that never end": "<!--" * (SIZE // 4),
    "brackets": "<" * SIZE,
    "attributes without end": "<a " + "x=" * (SIZE // 2),
    "quotes without end": '<a x="' * (SIZE // 6),
    "one tag of many attributes": "<a " + "x=1 " * (SIZE // 4) + ">",
    "script that never ends": "<script>" + "</scrip" * (SIZE // 7),
    "raw text elements back to back": "<style></style " * (SIZE // 15),
    "references": "&#" * (SIZE // 2),
    "preformatted nesting": "<pre>" * (SIZE // 5),
    "line breaks": "<br>" * (SIZE // 4),
    "meta tags": "<meta " * (SIZE // 6),
}


@pytest.mark.parametrize("page", list(PATHOLOGICAL.values()), ids=list(PATHOLOGICAL))
def test_pathological_pages_are_read_in_linear_time(page: str) -> None:
    started = time.perf_counter()
    page_text(page.encode(), "text/html", cut=False)
    assert time.perf_counter() - started < 2  # linear: ~0.05-0.2 s; the libraries: 3-14 s+


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("<>/!-=\"' ab&#;\n")) | st.characters(), max_size=300))
def test_any_text_reads_without_an_error(page: str) -> None:
    found = html_text(page)
    assert "\ue000" not in found.text and "\ue001" not in found.text


def test_what_reading_keeps_and_leaves_out() -> None:
    page = """<!DOCTYPE html><html><head><title> A &amp; B </title>
    <style>p { color: red }</style><script>if (a < b) { document.write("</div>") }</script>
    </head><body><h2>Install</h2><p>Run   <code>pip install x</code>&nbsp;now.</p>
    <!-- <p>hidden</p> --><ul><li>one<li>two</ul><pre>  indented
      more</pre><p title='a > b'>after a quoted &gt;</p>
    <template><p>inert</p></template><textarea>kept &lt;as text&gt;</textarea>
    <p>cut here <a href="x"""
    found = html_text(page)
    assert found.title == "A & B"
    assert found.text == (
        "## Install\n\nRun pip install x now.\n\n- one\n- two\n\n  indented\n      more\n\n"
        "after a quoted >\nkept <as text>\ncut here"
    )


def test_a_limit_stops_reading_a_long_page() -> None:
    page = "<p>" + "word " * 100_000 + "</p><p>end</p>"
    found = html_text(page, limit=1000)
    assert found.cut and "end" not in found.text and len(found.text) < 10_000
    assert not html_text(page).cut
