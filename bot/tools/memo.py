"""The agent's memo: notes it keeps for itself during a task (``memo`` tool).

What a multi-step task learns on the way (where a function lives, what a failing test
needs, what is left to do) is written down with ``write``, read with ``list`` and
dropped with ``clear`` (one entry, or all). The memo is bounded (``MAX_ENTRIES`` entries,
``MAX_BYTES`` of UTF-8 in all, ``MAX_ENTRY_BYTES`` each): a write past a bound fails with
the reason and changes nothing. The entries live in the task's checkpoint
(``AgentState.memo``, bound with ``MemoPad.bind``), so they survive a restart, and the
run's report shows them. Nothing here touches the repository or the host.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from bot.tools.registry import Tool, ToolResult

__all__ = ["MAX_BYTES", "MAX_ENTRIES", "MAX_ENTRY_BYTES", "MemoAction", "MemoPad", "memo_tool"]

MAX_ENTRIES = 20
MAX_ENTRY_BYTES = 1000
MAX_BYTES = 8000
MEMO = "memo"


class MemoAction(StrEnum):
    WRITE = "write"
    LIST = "list"
    CLEAR = "clear"


def _size(entries: list[str]) -> int:
    return sum(len(entry.encode("utf-8")) for entry in entries)


@dataclass
class MemoPad:
    """The memo's entries, oldest first; ``bind`` shares the checkpoint's own list."""

    entries: list[str] = field(default_factory=list)

    def bind(self, entries: list[str]) -> None:
        self.entries = entries

    def write(self, text: str) -> str | None:
        """Add ``text`` as an entry; why it was refused (None: written)."""
        entry = text.strip()
        if not entry:
            return "the memo entry is empty"
        size = len(entry.encode("utf-8"))
        if size > MAX_ENTRY_BYTES:
            return f"the entry has {size} bytes; at most {MAX_ENTRY_BYTES} per entry"
        if len(self.entries) >= MAX_ENTRIES:
            return f"the memo is full ({MAX_ENTRIES} entries): clear an entry first"
        if _size(self.entries) + size > MAX_BYTES:
            return f"the memo would pass {MAX_BYTES} bytes: clear an entry first"
        self.entries.append(entry)
        return None

    def clear(self, number: int | None) -> str | None:
        """Drop entry ``number`` (from 1), or every entry; why not (None: done)."""
        if number is None:
            self.entries.clear()
            return None
        if not 1 <= number <= len(self.entries):
            return f"there is no entry {number} (the memo has {len(self.entries)})"
        del self.entries[number - 1]
        return None

    def text(self) -> str:
        """The entries, numbered ("(empty)" when there is none)."""
        lines = [f"{n}. {entry}" for n, entry in enumerate(self.entries, start=1)]
        return "\n".join(lines) or "(empty)"


_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "action": {"type": "string", "enum": [a.value for a in MemoAction]},
        "text": {"type": "string", "description": "the note (write)"},
        "entry": {
            "type": "integer",
            "minimum": 1,
            "description": "the entry to drop (clear; without it every entry)",
        },
    },
    "required": ["action"],
    "additionalProperties": False,
}


def memo_tool(pad: MemoPad) -> Tool:
    """The ``memo`` tool over ``pad``."""

    async def memo(args: dict[str, Any]) -> ToolResult:
        action = MemoAction(args["action"])  # the schema admits only these
        refused: str | None = None
        if action is MemoAction.WRITE:
            refused = pad.write(str(args.get("text") or ""))
        elif action is MemoAction.CLEAR:
            entry = args.get("entry")
            refused = pad.clear(int(entry) if entry is not None else None)
        if refused is not None:
            return ToolResult.fail(refused)
        size = _size(pad.entries)
        used = f"{len(pad.entries)} of {MAX_ENTRIES} entries, {size} of {MAX_BYTES} bytes"
        return ToolResult.success(f"memo ({used}):\n{pad.text()}")

    purpose = (
        "Your own notes for this task, kept across steps and restarts: write one "
        "(text), list them, or clear one (entry) or all. Not part of the repository."
    )
    return Tool(MEMO, purpose, _SCHEMA, handler=memo)
