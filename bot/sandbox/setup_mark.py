"""What marks a workspace as set up, where no sandboxed command can write: the marker in
``.git`` (the key and the paths set-up left, so a later run of the task does not set it
up again) and git's own per-clone ignore file (``.git/info/exclude``), which keeps what
set-up left out of the agent's commits. Synchronous file work: call it in a thread."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

MARKER = "agent-setup.json"  # in .git: read-only for every sandboxed command


def read_marker(root: Path) -> dict[str, Any]:
    try:
        data = json.loads((root / ".git" / MARKER).read_text("utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) and isinstance(data.get("paths"), list) else {}


def write_marker(root: Path, key: str, paths: list[str]) -> None:
    text = json.dumps({"key": key, "paths": paths})
    (root / ".git" / MARKER).write_text(text, "utf-8")


def exclude(root: Path, paths: list[str]) -> None:
    """Keep what set-up made out of the agent's commits (git's own per-clone ignore file)."""
    if not paths:
        return
    exclude = root / ".git" / "info" / "exclude"
    exclude.parent.mkdir(parents=True, exist_ok=True)
    current = exclude.read_text("utf-8").splitlines() if exclude.exists() else []
    lines = [f"/{_escaped(p)}" for p in paths if f"/{_escaped(p)}" not in current]
    if lines:
        with exclude.open("a", encoding="utf-8") as handle:
            handle.write("".join(f"{line}\n" for line in lines))


def _escaped(path: str) -> str:
    """A path as a literal gitignore pattern."""
    out = "".join(f"\\{c}" if c in "*?[]\\!#" else c for c in path)
    return out if not out.endswith(" ") else out[:-1] + "\\ "
