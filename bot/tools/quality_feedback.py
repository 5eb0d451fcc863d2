"""Read lint and test output the way a person skims it: pure functions, no I/O.

``problems`` picks the lines that point somewhere (``file:line[:col]: message``, ruff's
``--> file:line:col`` under its message, pytest's ``FAILED test_id - reason``, jest's
``FAIL`` / ``●`` lines); ``summary_counts`` reads the totals tools print at the end.
"""

from __future__ import annotations

import re

from bot.text import clip

MAX_PROBLEMS = 20
MAX_LINE_CHARS = 240
TAIL_LINES = 30

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_LOCATION = re.compile(
    r"^\s*(?:-->\s*)?(?P<path>[^\s:'\"()]*[./][^\s:'\"()]*):(?P<line>\d+)(?::(?P<col>\d+))?"
    r"(?::\s*|\s+|$)(?P<msg>.*)$"
)
_TEST_LINE = re.compile(r"^\s*(?:FAILED|ERROR|FAIL|✕|×|●)\s+\S")
_COUNT = re.compile(r"(\d+) (passed|failed|errors?|skipped|warnings?|xfailed|xpassed)\b")
_FOUND = re.compile(r"Found (\d+) errors?")


def _clean(output: str) -> list[str]:
    return [_ANSI.sub("", line).rstrip() for line in output.splitlines()]


def _location(line: str, previous: str) -> str | None:
    match = _LOCATION.match(line)
    if match is None or match["path"].startswith(("http://", "https://")):
        return None
    where = f"{match['path']}:{match['line']}" + (f":{match['col']}" if match["col"] else "")
    message = match["msg"].strip()
    if line.lstrip().startswith("-->") and previous:
        message = previous.strip()  # ruff's full format: the message is on the line above
    return f"{where}: {message}" if message else where


def problems(kind: str, output: str) -> list[str]:
    """The first problems worth showing (test ids first for tests), each one line."""
    lines = _clean(output)
    found: list[str] = []
    if kind == "test":
        found += [line.strip() for line in lines if _TEST_LINE.match(line)]
    previous = ""
    for line in lines:
        located = _location(line, previous)
        if located is not None:
            found.append(located)
        if line.strip():
            previous = line
    unique = list(dict.fromkeys(clip(item, MAX_LINE_CHARS, note="") for item in found))
    if len(unique) > MAX_PROBLEMS:
        return [*unique[:MAX_PROBLEMS], f"... and {len(unique) - MAX_PROBLEMS} more"]
    return unique


def summary_counts(kind: str, output: str) -> dict[str, int]:
    """Totals from the tool's summary line: pytest's ``2 passed, 1 failed``, ruff's
    ``Found 3 errors``."""
    counts: dict[str, int] = {}
    text = "\n".join(_clean(output))
    if kind == "lint":
        found = _FOUND.findall(text)
        if found:
            counts["errors"] = int(found[-1])
        return counts
    summary = [line for line in text.splitlines() if _COUNT.search(line)]
    if summary:
        for number, word in _COUNT.findall(summary[-1]):
            key = word.rstrip("s") if word.endswith(("errors", "warnings")) else word
            counts[key] = int(number)
    return counts


def tail_lines(output: str) -> list[str]:
    """The last ``TAIL_LINES`` lines that are not blank, each cut to ``MAX_LINE_CHARS``."""
    lines = [clip(line, MAX_LINE_CHARS, note="") for line in _clean(output) if line.strip()]
    return lines[-TAIL_LINES:]
