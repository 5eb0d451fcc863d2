"""What the settings page shows of the settings, pure: each key's description as the
configuration file's comments give it, and the effective settings (already masked) as
rows grouped by section, each marked when only the file on the host may change it."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from bot.config.host_only import HOST_ONLY

_KEY = re.compile(r"([A-Za-z_][\w-]*):(.*)$")


def descriptions(text: str) -> dict[str, str]:
    """Dotted key -> the comment written beside it (and on the comment lines that carry
    it on, indented past the key), from a ``config.yaml`` text."""
    found: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    last: tuple[str, int] | None = None  # the key whose comment may go on, its indent
    for line in text.splitlines():
        stripped = line.lstrip()
        indent = len(line) - len(stripped)
        if not stripped:
            continue
        if stripped.startswith("#"):
            if last is not None and indent > last[1] and last[0] in found:
                found[last[0]] += " " + stripped.lstrip("#").strip()
            continue
        match = _KEY.match(stripped)
        if match is None:  # a list item or a flow mapping: no key of its own
            last = None
            continue
        while stack and stack[-1][0] >= indent:
            stack.pop()
        key = ".".join([name for _, name in stack] + [match.group(1)])
        stack.append((indent, match.group(1)))
        _, hash_mark, comment = match.group(2).partition(" #")
        if hash_mark and comment.strip():
            found[key] = comment.strip()
        last = (key, indent)
    return found


@dataclass(frozen=True, slots=True)
class Row:
    key: str
    value: str
    description: str
    host_only: bool


def host_only(key: str) -> bool:
    parts = tuple(key.split("."))
    return any(parts[: len(path)] == path for path in HOST_ONLY)


def _leaves(prefix: str, value: Any) -> list[tuple[str, Any]]:
    if isinstance(value, dict) and value:
        return [pair for k, v in value.items() for pair in _leaves(f"{prefix}.{k}", v)]
    return [(prefix, value)]


def sections(settings: dict[str, Any], described: dict[str, str]) -> list[tuple[str, list[Row]]]:
    """The masked ``settings`` as (section, rows), each row a leaf key and its value."""
    grouped = []
    for section, block in settings.items():
        rows = [
            Row(
                key=key,
                value=value if isinstance(value, str) else json.dumps(value),
                description=described.get(key, ""),
                host_only=host_only(key),
            )
            for key, value in _leaves(section, block)
        ]
        grouped.append((section, rows))
    return grouped
