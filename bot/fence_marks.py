"""What a model may read as a fence tag's brackets, slash and letters. Pure.

The bot fences outside text for the model in ``<untrusted>`` tags (``untrusted``,
``tools/web_tools``) and tool output in ``<tool_output>`` tags (``agent/briefing``).
A model reads ``＜/tool_output＞``, ``‹/untrusted›``, ``〈/tool_output〉`` or
``⟨／ｕｎｔｒｕｓｔｅｄ⟩`` as the tag it looks like, so the text inside a fence must not
hold any of them: these are the characters each escape treats as the ASCII one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# <, fullwidth, small, single angle quotation, CJK, mathematical (single and double),
# the deprecated angle brackets, ornaments, modifier arrowheads, Canadian syllabics,
# curved, dotted, vertical presentation forms, double angle quotation and CJK double.
OPEN_BRACKETS = (
    "<\uff1c\ufe64\u2039\u3008\u27e8\u27ea\u2329\u276c\u276e\u2770\u02c2\u1438"
    "\u29fc\u2991\u2993\ufe3f\ufe3d\u00ab\u300a"
)
CLOSE_BRACKETS = (
    ">\uff1e\ufe65\u203a\u3009\u27e9\u27eb\u232a\u276d\u276f\u2771\u02c3\u1433"
    "\u29fd\u2992\u2994\ufe40\ufe3e\u00bb\u300b"
)
# /, fullwidth, fraction, division, big solidus
SLASHES = "/\uff0f\u2044\u2215\u29f8"
_FULLWIDTH = 0xFEE0  # fullwidth ASCII (U+FF01..U+FF5E) is ASCII moved by this
# What a model does not see between a tag's characters: white space and the invisible
# format characters (soft hyphen, zero-width, bidirectional controls, word joiners,
# variation selectors, BOM). ``untrusted`` removes them; an escape must read past them.
_GAP = (
    "[\\s\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f"
    "\u202a-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0]*"
)


def ascii_of(char: str) -> str:
    """``char`` with a fullwidth ASCII form read as the ASCII character (else itself)."""
    return chr(ord(char) - _FULLWIDTH) if "\uff01" <= char <= "\uff5e" else char


def _letters(word: str) -> str:
    """A pattern for ``word`` whose letters may be fullwidth too (any case)."""
    parts = []
    for char in word:
        forms = {char.lower(), char.upper()}
        forms |= {chr(ord(form) + _FULLWIDTH) for form in forms if "!" <= form <= "~"}
        parts.append("[" + "".join(re.escape(form) for form in sorted(forms)) + "]")
    return _GAP.join(parts)


def tag_head(words: Iterable[str]) -> re.Pattern[str]:
    """The opening bracket of anything that reads as a fence tag for one of ``words``
    (``<tool_output``, ``</ untrusted``, ``＜／ｔｏｏｌ＿ｏｕｔｐｕｔ``, ``</tool\u200b_output``:
    invisible characters anywhere between its characters...): the match is the
    bracket alone (the rest is a look-ahead), for an escape to replace."""
    names = "|".join(_letters(word) for word in words)
    slash = "[" + re.escape(SLASHES) + "]"
    pattern = f"[{re.escape(OPEN_BRACKETS)}](?={_GAP}(?:{slash}{_GAP})?(?:{names}))"
    return re.compile(pattern, re.IGNORECASE)
