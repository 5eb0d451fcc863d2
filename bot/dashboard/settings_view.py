"""What the settings page shows of the settings, pure: each key's description as the
configuration file's comments give it, and the effective settings (already masked) as
rows grouped by section, each marked when only the file on the host may change it."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from bot.config.host_only import HOST_ONLY

_KEY = re.compile(r"([A-Za-z_][\w-]*):(.*)$")


def _keys(text: str) -> Iterator[tuple[str, int, int, str]]:
    """Each ``key:`` line of a YAML text: dotted key, line index, indent, what follows the
    colon. Comment lines come as key ``"#"``; list items and the like as key ``""``."""
    stack: list[tuple[int, str]] = []
    for index, line in enumerate(text.splitlines()):
        stripped = line.lstrip()
        indent = len(line) - len(stripped)
        if not stripped:
            continue
        if stripped.startswith("#"):
            yield "#", index, indent, stripped
            continue
        match = _KEY.match(stripped)
        if match is None:  # a list item or a flow mapping: no key of its own
            yield "", index, indent, stripped
            continue
        while stack and stack[-1][0] >= indent:
            stack.pop()
        key = ".".join([name for _, name in stack] + [match.group(1)])
        stack.append((indent, match.group(1)))
        yield key, index, indent, match.group(2)


def descriptions(text: str) -> dict[str, str]:
    """Dotted key -> the comment written beside it (and on the comment lines that carry
    it on, indented past the key), from a ``config.yaml`` text."""
    found: dict[str, str] = {}
    last: tuple[str, int] | None = None  # the key whose comment may go on, its indent
    for key, _, indent, rest in _keys(text):
        if key == "#":
            if last is not None and indent > last[1] and last[0] in found:
                found[last[0]] += " " + rest.lstrip("#").strip()
            continue
        if not key:
            last = None
            continue
        _, hash_mark, comment = rest.partition(" #")
        if hash_mark and comment.strip():
            found[key] = comment.strip()
        last = (key, indent)
    return found


def with_values(text: str, changes: dict[str, str]) -> tuple[str, list[tuple[str, str]]]:
    """``text`` with each changed key's value (as YAML, one line) written in its line,
    the comment beside it kept; the keys that cannot be changed so, and why."""
    lines = text.splitlines(keepends=True)
    where = {key: (index, rest) for key, index, _, rest in _keys(text) if key not in ("#", "")}
    problems = []
    for key, value in changes.items():
        found = where.get(key)
        if any(c in value for c in "\r\n") or " #" in value or value.startswith("#"):
            problems.append((key, "give one line, without a comment"))
        elif found is None:
            problems.append((key, "not written in the file: add it in the file's text"))
        elif not found[1].partition(" #")[0].strip():
            problems.append((key, "written over several lines: change it in the file's text"))
        else:
            index, rest = found
            line = lines[index]
            head = line[: len(line) - len(line.lstrip())] + key.rsplit(".", 1)[-1] + ":"
            _, hash_mark, comment = rest.partition(" #")
            ending = line[len(line.rstrip("\r\n")) :]
            written = f"{head} {value}"
            column = line.find(" #", len(head)) + 1  # where the comment stood
            pad = " " * max(2, column - len(written))
            tail = f"{pad}#{comment.rstrip()}" if hash_mark else ""
            lines[index] = f"{written}{tail}{ending}"
    return "".join(lines), problems


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
