"""What the bot can see for itself of a workspace write (docs/planning.md#unexpected-results).

``PathWatch`` compares the paths a file tool's call changed with the paths it meant to
change: what each changed path of the working tree holds (``content_digest``), before and
after the call. ``read_back`` is the evidence the bot gathers itself when the model
could not judge a write: the written file read back against what was written, and the
diff of its paths. ``exists`` answers whether a workspace path exists, for a
precondition. None of them follows a link out of the workspace.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot.paths import PathRefused
from bot.sandbox.gitcmd import WorkspaceError
from bot.sandbox.workspace import Workspace, content_digest
from bot.text import clip
from bot.tools.policy import repo_path
from bot.tools.registry import Tool

# The file tools whose intended paths the watch compares (a folder is not in git's view).
COMPARED = frozenset({"write_file", "replace_in_file", "move_path", "delete_file"})
MAX_WATCHED = 500  # changed paths in the working tree; more: no comparison
READ_BACK_BYTES = 64 * 1024
DIFF_CHARS = 1500
CLEAN = "as committed"


def _inside(ws: Workspace, rel: str) -> Path | None:
    """``rel`` in the workspace, or None when it is no workspace path."""
    norm = repo_path(rel)
    if not norm or norm.startswith(".."):
        return None
    try:
        return ws.resolve(norm)
    except PathRefused:
        return None


def exists(ws: Workspace, rel: str) -> bool | None:
    """Whether ``rel`` exists in the workspace (None: it names no workspace path)."""
    where = _inside(ws, rel)
    return None if where is None else where.exists() or where.is_symlink()


def _digests(root: Path, paths: Iterable[str]) -> dict[str, str]:
    return {p: content_digest(root, p) for p in paths}


async def _tree_state(ws: Workspace, intended: list[str]) -> dict[str, str] | None:
    """What each changed path and each intended path holds; None when the tree has too
    many changes to compare."""
    changed = await ws.changed_files()
    if len(changed) > MAX_WATCHED:
        return None
    paths = sorted(set(changed) | set(intended))
    return await asyncio.to_thread(_digests, ws.path, paths)


def intended_paths(ws: Workspace, tool: Tool, arguments: dict[str, Any]) -> list[str] | None:
    """The workspace paths a call means to change (None: not a compared file tool)."""
    if tool.name not in COMPARED or tool.paths is None:
        return None
    paths = [repo_path(p) for p in tool.paths(arguments)]
    valid = [p for p in paths if _inside(ws, p) is not None]
    return valid if valid and len(valid) == len(paths) else None


@dataclass
class PathWatch:
    """The working tree before one file tool's call, to compare with after it."""

    ws: Workspace
    intended: list[str]
    before: dict[str, str] = field(default_factory=dict)

    @classmethod
    async def start(
        cls, ws: Workspace | None, tool: Tool | None, arguments: dict[str, Any]
    ) -> PathWatch | None:
        if ws is None or tool is None or not (ws.path / ".git").is_dir():
            return None
        intended = intended_paths(ws, tool, arguments)
        if intended is None:
            return None
        try:
            before = await _tree_state(ws, intended)
        except WorkspaceError:
            return None
        return None if before is None else cls(ws, intended, before)

    def _meant(self, path: str) -> bool:
        return any(path == i or path.startswith(i + "/") for i in self.intended)

    async def compare(self) -> tuple[list[str], list[str]] | None:
        """(intended paths left unchanged, paths changed without being meant), or None
        when the tree cannot be compared."""
        try:
            after = await _tree_state(self.ws, self.intended)
        except WorkspaceError:
            return None
        if after is None:
            return None
        keys = set(self.before) | set(after)
        changed = {p for p in keys if self.before.get(p, CLEAN) != after.get(p, CLEAN)}
        unchanged = [
            i for i in self.intended
            if i not in changed and not any(c.startswith(i + "/") for c in changed)
        ]  # fmt: skip
        unexpected = sorted(p for p in changed if not self._meant(p))
        return unchanged, unexpected


def _read(where: Path) -> str | None:
    if not where.is_file() or where.is_symlink():
        return None
    with where.open("rb") as handle:
        return handle.read(READ_BACK_BYTES).decode("utf-8", errors="replace")


async def read_back(ws: Workspace, tool: str, arguments: dict[str, Any]) -> tuple[list[str], bool]:
    """What the workspace holds after a file tool's call, as facts, and whether they bear
    the call out (the content written is there, a deleted path is gone, a moved one moved)."""
    facts: list[str] = []
    holds = True

    async def text_of(rel: str) -> str | None:
        where = _inside(ws, rel)
        return None if where is None else await asyncio.to_thread(_read, where)

    path = str(arguments.get("path") or "")
    if tool == "write_file":
        found = await text_of(path)
        same = found is not None and found == str(arguments.get("content", ""))[:READ_BACK_BYTES]
        holds = same
        facts.append(f"{path} holds exactly the content written" if same
                     else f"{path} does not hold the content written")  # fmt: skip
    elif tool == "replace_in_file":
        found = await text_of(path)
        new = str(arguments.get("new_text", ""))
        holds = found is not None and new in found
        facts.append(f"{path} now holds the new text" if holds
                     else f"{path} does not hold the new text")  # fmt: skip
    elif tool == "delete_file":
        holds = exists(ws, path) is False
        facts.append(f"{path} is gone" if holds else f"{path} is still there")
    elif tool == "move_path":
        source, target = str(arguments.get("source", "")), str(arguments.get("destination", ""))
        holds = exists(ws, source) is False and bool(exists(ws, target))
        moved = "moved" if holds else "did not move"
        facts.append(f"{source} {moved} to {target}")
    paths = [repo_path(p) for p in (path, arguments.get("source"), arguments.get("destination"))
             if isinstance(p, str) and p and _inside(ws, p) is not None]  # fmt: skip
    if paths:
        try:
            diff = await ws.push_diff(paths)
        except WorkspaceError:
            diff = ""
        facts.append("diff:\n" + clip(diff, DIFF_CHARS, note="\n[...]") if diff.strip()
                     else "the diff of these paths is empty")  # fmt: skip
    return facts, holds
