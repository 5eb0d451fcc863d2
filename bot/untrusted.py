"""Text from people (issues, comments, instructions, answers, feedback, reviews) made safe
to quote to a model: cleaned, fenced, and never long. Pure, apart from the ``*_off_loop``
functions.

What cleaning removes, and why:

- HTML comments (``<!-- ... -->``, or from ``<!--`` to the end when it never closes):
  the forge does not show them, so people would not see what the model is told;
- invisible characters: format (zero-width, bidirectional controls, BOM), controls other
  than newline and tab, private use, surrogates;
- fence tags: ``untrusted`` (its letters fullwidth too) after an opening bracket (ASCII
  or a look-alike: fullwidth, small, ``‹``, ``〈``, ``⟨``..., ``bot.fence_marks``), with
  optional spaces and slash (or a look-alike) between, and the rest of the tag up to
  its closing bracket when one follows before any other bracket. ``fence`` wraps text
  in ``<untrusted>`` tags the system prompt declares to be data, never instructions:
  the text inside must not be able to close them.

Removing one of these can join the pieces of another (``</untr</untrusted>usted>``,
``<!<!-- x -->-- hidden -->``, ``</untr\u200busted>``). The result is a fixed point:
it holds no invisible character, no ``<!--`` and no fence tag, however they were
nested. ``clean_untrusted`` gets there in one pass over the text, as a stack: each kept character
goes on the output; when the output then ends with ``<!--`` or with a fence tag's head,
that piece is taken off again (the comment's rest or the tag's rest is skipped in the
input). Before the push the output held none of them, so a new one can only end at the
character just pushed: checking the end is enough, and the output never holds one
(collapsing blank lines and stripping the ends afterwards only shorten runs of white
space, which a tag's head allows anywhere they stand: still none). Each
input character is looked at a bounded number of times (``_Scan``), so the time is
linear in the text. A comment ends at its first ``-->`` as written (characters hidden
inside it do not count), as the forge's own rendering ends it; the rest of a tag (up to
its closing bracket) is looked for in the text as written too. (The code before this
repeated a pass of three patterns until nothing changed: quadratic, 25 s for 66,000
characters nested 6,000 deep. Where the two differ, this one may leave a few more
characters of a broken tag's rest; both results hold no comment, tag or invisible
character.)

Before cleaning, a text is cut to a bound: ``MAX_PERSON_CHARS`` for what one person
wrote to the bot (a command's instructions, an answer, feedback, a review comment) and
at most ``MAX_CHARS`` for anything. A text over ``LARGE`` characters is cleaned in an
offload worker process (``fence_off_loop``), not on the event loop.
"""

from __future__ import annotations

import re
import unicodedata

from bot import offload
from bot.fence_marks import CLOSE_BRACKETS, OPEN_BRACKETS, SLASHES, ascii_of
from bot.text import clip

# A GitHub comment holds at most 65,536 characters: no text is cleaned past this.
MAX_CHARS = 65_536
# What one person wrote to the bot (instructions with a command, an answer, feedback, a
# review comment), as much as an issue body the planner is shown.
MAX_PERSON_CHARS = 4_000
# Characters; a longer text is cleaned in a worker process. Cleaning took 0.15 ms per
# 1,000 characters of English, 0.3 of Japanese (a busy 2-core machine): about as much as
# redaction, whose threshold this is.
LARGE = offload.LARGE_TEXT

_KEEP = frozenset("\n\t")
_INVISIBLE = frozenset({"Cf", "Cc", "Co", "Cs"})
_OPEN = frozenset(OPEN_BRACKETS)  # <, fullwidth <, small <, ‹, 〈, ⟨ ... (bot.fence_marks)
_CLOSE = frozenset(CLOSE_BRACKETS)
_SLASH = frozenset(SLASHES)
_BRACKET = re.compile(f"[{re.escape(OPEN_BRACKETS + CLOSE_BRACKETS)}]")
_WORD = "untrusted"
_WORD_RE = re.compile(_WORD, re.IGNORECASE)
# The characters a case-insensitive "d" matches, fullwidth too: a tag's head ends in one.
_LAST = frozenset("dD\uff44\uff24")
_COMMENT_OPEN = list("<!--")
_COMMENT_CLOSE = "-->"
_BLANK_LINES = re.compile(r"\n{3,}")
_UNKNOWN, _NONE = -2, -1


def clean_untrusted(text: str, *, limit: int = MAX_CHARS) -> str:
    """``text`` cut to ``limit`` (and ``MAX_CHARS``) characters, without HTML comments,
    invisible characters or fence tags, however nested (module docstring); blank lines
    collapsed, ends stripped."""
    return _BLANK_LINES.sub("\n\n", _Scan(_cut(text, limit)).run()).strip()


def fence(text: str, source: str, *, limit: int = MAX_CHARS) -> str:
    """Untrusted text as a fenced data block naming where it came from."""
    label = re.sub(r'["<>]', "", clean_untrusted(source, limit=200))
    return f'<untrusted source="{label}">\n{clean_untrusted(text, limit=limit)}\n</untrusted>'


async def fence_off_loop(text: str, source: str, *, limit: int = MAX_CHARS) -> str:
    """``fence``, in an offload worker process when the text is over ``LARGE`` characters
    after its cut (the event loop only sends and receives it)."""
    if min(len(text), limit) <= LARGE:
        return fence(text, source, limit=limit)
    return await offload.compute(fence, _cut(text, limit), source)


async def clean_off_loop(text: str, *, limit: int = MAX_CHARS) -> str:
    """``clean_untrusted``, in an offload worker process when the text is over ``LARGE``
    characters after its cut."""
    if min(len(text), limit) <= LARGE:
        return clean_untrusted(text, limit=limit)
    return await offload.compute(clean_untrusted, _cut(text, limit))


def _cut(text: str, limit: int) -> str:
    """The text cleaning sees: CRLF as LF, at most ``limit`` (and ``MAX_CHARS``)
    characters, the cut saying how much was left out. A cut text is not cut again."""
    return clip(text.replace("\r\n", "\n"), min(limit, MAX_CHARS), fit=True)


class _Scan:
    """One pass of ``clean`` over an already cut text (module docstring)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.out: list[str] = []
        self.bracket_at = _UNKNOWN  # the next bracket in the input, once looked for

    def run(self) -> str:
        text, out, push, category = self.text, self.out, self.out.append, unicodedata.category
        at, end = 0, len(text)
        while at < end:
            char = text[at]
            at += 1
            if not " " <= char <= "~" and char not in _KEEP and category(char) in _INVISIBLE:
                continue
            push(char)
            if char == "-" and out[-4:] == _COMMENT_OPEN:
                del out[-4:]
                close = text.find(_COMMENT_CLOSE, at)
                at = end if close < 0 else close + len(_COMMENT_CLOSE)
            elif char in _LAST:
                start = self._tag_start()
                if start >= 0:
                    del out[start:]
                    at = self._tag_rest(at)
        return "".join(out)

    def _tag_start(self) -> int:
        """Where the fence tag head that ends the output starts, or -1.

        The look back over white space is linear in all: a look that fails leaves
        ``untrusted`` in the output for good (nothing can remove a word that is not at
        the end of a head or a comment opener), so no later look passes those spaces;
        a look that succeeds removes them."""
        out = self.out
        word = len(out) - len(_WORD)
        if word < 1 or not _WORD_RE.fullmatch("".join(map(ascii_of, out[word:]))):
            return -1
        before = _skip_space(out, word - 1)
        if before >= 0 and out[before] in _SLASH:
            before = _skip_space(out, before - 1)
        return before if before >= 0 and out[before] in _OPEN else -1

    def _tag_rest(self, at: int) -> int:
        """Past the rest of a tag whose head was just removed: up to and including a
        closing bracket that comes before any other bracket (else nothing)."""
        if self.bracket_at == _UNKNOWN or 0 <= self.bracket_at < at:
            # ``at`` only grows: a bracket found earlier at or after ``at`` is still the
            # next one, so each search starts past the last one found (linear in all).
            found = _BRACKET.search(self.text, at)
            self.bracket_at = found.start() if found else _NONE
        if self.bracket_at >= 0 and self.text[self.bracket_at] in _CLOSE:
            return self.bracket_at + 1
        return at


def _skip_space(out: list[str], index: int) -> int:
    """The index of the last character at or before ``index`` that is not white space."""
    while index >= 0 and out[index].isspace():
        index -= 1
    return index
