"""Cutting text to a length: the one helper every caller uses. Pure.

``clip`` keeps the head, the tail or both ends of a text that is too long and puts a
note where the rest was; ``{n}`` in the note becomes the number of characters left
out. Callers choose the note (or none); the default says how much is missing.
"""

from __future__ import annotations

from typing import Literal

Keep = Literal["head", "tail", "both"]

MORE = "\n[... {n} more characters]"


def omitted_note(hint: str = "") -> str:
    """The note for a text cut in the middle (``keep="both"``): how much was left out
    and, with ``hint``, how to see it."""
    return f"\n[... {{n}} characters omitted{'; ' + hint if hint else ''} ...]\n"


def clip(text: str, limit: int, *, keep: Keep = "head", note: str = MORE, fit: bool = False) -> str:
    """``text`` when it has at most ``limit`` characters; else ``limit`` characters of it
    (the head, the tail, or ``limit // 2`` from each end) with ``note`` where the rest
    was. With ``fit`` the note counts against ``limit`` too, so the result is never
    longer than ``limit`` (unless the note alone is)."""
    if len(text) <= limit:
        return text
    room = max(limit - len(_filled(note, len(text))), 0) if fit else limit
    if keep == "both":
        half = max(room // 2, 1)
        return text[:half] + _filled(note, len(text) - 2 * half) + text[len(text) - half :]
    left_out = _filled(note, len(text) - room)
    if keep == "tail":
        return left_out + text[len(text) - room :]
    return text[:room] + left_out


def _filled(note: str, left_out: int) -> str:
    return note.replace("{n}", str(left_out))
