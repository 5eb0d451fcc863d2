"""What an approval request shows: nothing the model wrote can hide anything. Pure.

A tool call waiting for approval is shown with its FULL arguments as JSON in a
code fence (longer than any backtick run inside, so nothing closes it) in a
``<details>`` block; invisible, zero-width and bidirectional control characters
are shown as ``\\uXXXX`` escapes, so the text people read is the text that runs.
Arguments longer than ``MAX_SHOWN_CHARS`` are shown up to there, with a pointer to
the file that holds them whole. Lines outside the fence (a purpose, a goal) are
made plain: ``<`` cannot open an HTML comment or tag there.
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any

from bot.text import clip

MAX_SHOWN_CHARS = 4000
_HIDING = frozenset({"Cf", "Cc", "Co", "Cs", "Zl", "Zp"})
_BACKTICKS = re.compile(r"`+")


def plain(text: str) -> str:
    """One line of model-written text, safe outside a code fence."""
    flat = " ".join(text.split())
    return "".join(_escape(ch) for ch in flat).replace("<", "&lt;")


def _escape(char: str) -> str:
    if unicodedata.category(char) in _HIDING:
        return json.dumps(char)[1:-1]  # \\uXXXX (a surrogate pair beyond the BMP)
    return char


def arguments_json(arguments: dict[str, Any]) -> str:
    """The arguments as indented JSON, every invisible character escaped."""
    text = json.dumps(arguments, ensure_ascii=False, indent=2, sort_keys=True, default=str)
    return "".join(ch if ch == "\n" else _escape(ch) for ch in text)


def code_fence(text: str, language: str = "") -> str:
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{language}\n{text}\n{ticks}"


def tool_call_text(
    tool: str, purpose: str, arguments: dict[str, Any], *, saved_to: str = ""
) -> str:
    """The details of a tool call approval request (Markdown)."""
    shown = arguments_json(arguments)
    cut = len(shown) > MAX_SHOWN_CHARS
    shown = clip(shown, MAX_SHOWN_CHARS, note="\n…")
    summary = f"Arguments of {plain(tool)} ({len(arguments)} keys)"
    lines = [plain(purpose)] if purpose.strip() else []
    lines += ["", f"<details open><summary>{summary}</summary>", "", code_fence(shown, "json")]
    lines += ["", "</details>"]
    if cut:
        where = f" in `{saved_to}`" if saved_to else " in the run directory"
        lines += [
            "",
            f"The arguments are {len(arguments_json(arguments)):,} characters long: only the "
            f"first {MAX_SHOWN_CHARS:,} are shown. The full arguments are{where}; read them "
            "before you approve.",
        ]
    return "\n".join(lines).strip()
