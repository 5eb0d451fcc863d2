"""A web page's readable text, in time linear in the page, whatever the page. Pure.

Why not a parser library: the page comes from outside, and both candidates take time
far beyond linear on hostile input (measured on Python 3.11.7, see docs/tools.md, "The web"):
the standard library's ``html.parser`` took 14 s for 90 KB of ``<a `` repeated and raised
``AssertionError`` on ``<![`` repeated; selectolax (lexbor) took 3.5 s for 100 KB of
``<div>`` nested 20,000 deep, like every HTML5 tree builder (each start tag looks down the
stack of open elements). The agent needs the text, not a tree, so this is a tokenizer
without one: each step finds the next ``<`` or the end of what it is in with ``str.find``
or a regular expression that stops at the first match, and moves past what it scanned.

What comes out: the text outside tags with character references decoded, white space
collapsed (kept inside ``<pre>``), a line break for block elements and ``<br>``, "- "
before list items and "#" before headings; ``<script>``, ``<style>`` and the other raw-text
elements, comments, doctype and processing instructions are left out; ``<title>`` gives
the title. A tag that never closes ends the text (as HTML ends a tag cut by the end).
"""

from __future__ import annotations

import functools
import html
import re
from dataclasses import dataclass

# Elements whose content is not markup: skipped to their end tag (title and textarea kept).
_RAW = frozenset(
    {"script", "style", "xmp", "iframe", "noembed", "noframes", "template", "title", "textarea"}
)
_BLOCK = frozenset(
    {"address", "article", "aside", "blockquote", "body", "caption", "dd", "details"}
    | {"dialog", "div", "dl", "dt", "fieldset", "figcaption", "figure", "footer", "form"}
    | {"header", "hr", "html", "li", "main", "nav", "ol", "option", "p", "pre", "section"}
    | {"summary", "table", "tbody", "td", "tfoot", "th", "thead", "tr", "ul"}
    | {"h1", "h2", "h3", "h4", "h5", "h6"}
)
_CELLS = frozenset({"td", "th"})
_ITEMS = frozenset({"li", "dt", "dd", "option"})
_PRE = frozenset({"pre", "listing"})
_MAX_PRE = 64  # nesting counted, bounded
_TAG = re.compile(r"<(/?)([A-Za-z][A-Za-z0-9:_-]{0,63})")
_OPENING = re.compile(r"<[A-Za-z/!?]")  # what may start markup; any other "<" is text
_TAG_STOP = re.compile(r"[>=]")
_SPACES = re.compile(r"\s*")
_COLLAPSE = re.compile(r"\s+")
_BLANK_LINES = re.compile(r"\n{3,}")
_TRAILING = re.compile(r"[ \t]+\n")
MAX_TITLE_CHARS = 300
# With a limit, the text outside tags read at most this many times the limit (white
# space and references shrink it).
OVERREAD = 4


@dataclass(frozen=True, slots=True)
class HtmlText:
    title: str
    text: str
    cut: bool = False  # the reading stopped early (``limit``)


@functools.cache
def _end_tag(name: str) -> re.Pattern[str]:
    return re.compile(rf"</{name}(?=[\s/>])", re.IGNORECASE)


def _tag_end(page: str, at: int) -> int:
    """Past the ``>`` that ends the tag whose attributes start at ``at``, or -1 when the
    tag never ends. A quoted attribute value may hold ``>``."""
    end = len(page)
    while at < end:
        stop = _TAG_STOP.search(page, at)
        if stop is None:
            return -1
        if stop.group() == ">":
            return stop.end()
        at = _SPACES.match(page, stop.end()).end()  # type: ignore[union-attr]
        if at < end and page[at] in "\"'":
            close = page.find(page[at], at + 1)
            if close < 0:
                return -1
            at = close + 1
    return -1


# Marks in the collected text (private-use characters, removed from the page first): a
# line break, and the start and end of preformatted text.
_BREAK, _PRE_ON, _PRE_OFF = "\ue000", "\ue001", "\ue002"
_MARKS = str.maketrans("", "", _BREAK + _PRE_ON + _PRE_OFF)
_PRE_SPLIT = re.compile(f"([{_PRE_ON}{_PRE_OFF}])")
_LINE_EDGES = re.compile(rf"[ \t]*{_BREAK}[ \t]*")


def _open_mark(name: str) -> str:
    if name == "li":
        return _BREAK + "- "
    if len(name) == 2 and name[0] == "h" and name[1].isdigit():
        return _BREAK + "#" * int(name[1]) + " "
    return _BREAK


def _mark(name: str, closing: bool) -> str:
    """The marks a tag stands for (line breaks, list and heading marks, preformatted)."""
    if name in _PRE:
        return _PRE_OFF + _BREAK if closing else _BREAK + _PRE_ON
    if name == "br":
        return _BREAK
    if name in _CELLS:
        return "" if closing else " "
    if name in _BLOCK:
        if closing:  # the next item starts its own line; a list's end still breaks
            return "" if name in _ITEMS else _BREAK
        return _open_mark(name)
    return ""


def html_text(page: str, *, limit: int | None = None) -> HtmlText:
    """The readable text and the title of ``page`` (module docstring). With ``limit``,
    the reading stops once the text outside tags passed ``OVERREAD`` times ``limit``
    characters (``cut`` is then true): what follows would be cut anyway."""
    page = page.translate(_MARKS)
    parts: list[str] = []
    title = ""
    room = len(page) if limit is None else OVERREAD * limit  # text characters left to read
    at, look, end = 0, 0, len(page)
    while look < end and room > 0:
        opening = _OPENING.search(page, look)
        if opening is None:
            break
        lt = opening.start()
        if page[lt + 1 : lt + 2] in ("!", "?"):
            if page.startswith("<!--", lt):
                close = page.find("-->", lt + 4)
                after = end if close < 0 else close + 3
            else:  # doctype, CDATA, processing instruction
                close = page.find(">", lt + 2)
                after = end if close < 0 else close + 1
            parts.append(page[at : min(lt, at + room)])
            room -= lt - at
            at = look = after
            continue
        tag = _TAG.match(page, lt)
        if tag is None:  # a "<" that starts no tag is text
            look = lt + 1
            continue
        parts.append(page[at : min(lt, at + room)])
        room -= lt - at
        after = _tag_end(page, tag.end())
        at = look = end if after < 0 else after
        closing, name = tag.group(1) == "/", tag.group(2).lower()
        if not closing and name in _RAW:
            found = _end_tag(name).search(page, at)
            content = page[at : found.start() if found else end]
            close = page.find(">", found.end()) if found else -1
            at = look = end if close < 0 else close + 1
            if name == "title" and not title:
                title = _COLLAPSE.sub(" ", html.unescape(content)).strip()[:MAX_TITLE_CHARS]
            elif name == "textarea":
                parts.append(content[: max(room, 0)])
                room -= len(content)
            continue
        if name == "plaintext" and not closing:  # the rest of the page is text, as is
            rest = page[at : at + max(room, 0)]
            parts += [_PRE_ON, rest.replace("&", "&amp;")]
            room -= end - at
            at = look = end
            break
        parts.append(_mark(name, closing))
    if room > 0 and at < end:
        parts.append(page[at : at + room])
        room -= end - at
    return HtmlText(title=title, text=_finish("".join(parts)), cut=room < 0)


def _finish(marked: str) -> str:
    """The collected text with its marks turned into lines: references decoded, white
    space collapsed and lines trimmed outside preformatted parts, blank lines at most one."""
    pieces: list[str] = []
    depth = 0
    for piece in _PRE_SPLIT.split(marked):
        if piece == _PRE_ON:
            depth = min(depth + 1, _MAX_PRE)
        elif piece == _PRE_OFF:
            depth = max(depth - 1, 0)
        elif depth:
            pieces.append(html.unescape(piece).replace(_BREAK, "\n"))
        else:
            flowing = _COLLAPSE.sub(" ", html.unescape(piece))
            pieces.append(_LINE_EDGES.sub("\n", flowing).replace(_BREAK, "\n"))
    text = _TRAILING.sub("\n", "".join(pieces))
    return _BLANK_LINES.sub("\n\n", text).strip()
