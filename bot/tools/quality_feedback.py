"""Read lint and test output the way a person skims it: pure functions, no I/O.

``problems`` picks the lines that point somewhere (``file:line[:col]: message``, ruff's
``--> file:line:col`` under its message, pytest's ``FAILED test_id - reason``, jest's
``FAIL`` / ``●`` lines); ``summary_counts`` reads the totals tools print at the end
(pytest, jest and vitest, mocha, ``node --test``; ruff's ``Found N errors`` and
``All checks passed!``, eslint's ``N problems (E errors, W warnings)``);
``warning_count`` the warnings among them, and ``coverage_percent`` the total coverage a
test tool reports (pytest-cov and coverage.py, jest and vitest, ``node --test``, go).
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
_RUFF_CLEAN = re.compile(r"^All checks passed!", re.MULTILINE)
_MOCHA = re.compile(r"^\s*(\d+) (passing|failing|pending)\b", re.MULTILINE)
_MOCHA_WORDS = {"passing": "passed", "failing": "failed", "pending": "skipped"}
_NODE_TEST = re.compile(r"^(?:ℹ|#)\s*(pass|fail|skipped|todo|cancelled)\s+(\d+)\s*$", re.MULTILINE)
_NODE_WORDS = {"pass": "passed", "fail": "failed", "skipped": "skipped", "todo": "skipped"}
_ESLINT = re.compile(r"(\d+) problems? \((\d+) errors?, (\d+) warnings?\)")
_NUMBER = r"(\d+(?:\.\d+)?)"
_COVERAGE = (  # the total, most specific first; one group: the percentage (of lines)
    re.compile(rf"Total coverage: {_NUMBER}%"),  # pytest-cov's --cov-fail-under line
    re.compile(rf"^TOTAL\s.*?{_NUMBER}%\s*$", re.MULTILINE),  # coverage.py, pytest-cov
    # jest / vitest: All files | % Stmts | % Branch | % Funcs | % Lines
    re.compile(rf"^\s*All files\s*\|(?:\s*[\d.]+\s*\|){{3}}\s*{_NUMBER}\s*\|", re.MULTILINE),
    re.compile(rf"^(?:ℹ|#)\s*all files\s*\|\s*{_NUMBER}\s*\|", re.MULTILINE),  # node --test
    re.compile(rf"coverage: {_NUMBER}% of statements"),  # go test -cover
)


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
    """Totals from the tool's summary line: pytest's ``2 passed, 1 failed`` (jest's and
    vitest's lines read the same), mocha's ``2 passing`` / ``1 failing``, ``node --test``'s
    ``ℹ pass 2`` / ``ℹ fail 1``; ruff's ``Found 3 errors`` or ``All checks passed!``."""
    text = "\n".join(_clean(output))
    if kind == "lint":
        eslint = _ESLINT.findall(text)
        if eslint:
            _problems, errors, warnings = eslint[-1]
            return {"errors": int(errors), "warning": int(warnings)}
        found = _FOUND.findall(text)
        if found:
            return {"errors": int(found[-1])}
        return {"errors": 0} if _RUFF_CLEAN.search(text) else {}
    return _node_counts(text) or _mocha_counts(text) or _pytest_counts(text)


def warning_count(counts: dict[str, int]) -> int | None:
    """The warnings a step's summary told (0 when it told its totals without warnings;
    None when it told nothing)."""
    return counts.get("warning", 0) if counts else None


def coverage_percent(output: str) -> float | None:
    """The total coverage a test tool printed, in percent (of lines where it tells
    several kinds); None when it printed none."""
    text = "\n".join(_clean(output))
    for pattern in _COVERAGE:
        found = pattern.findall(text)
        if found:
            return float(found[-1])
    return None


def _pytest_counts(text: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    summary = [line for line in text.splitlines() if _COUNT.search(line)]
    if summary:
        for number, word in _COUNT.findall(summary[-1]):
            key = word.rstrip("s") if word.endswith(("errors", "warnings")) else word
            counts[key] = int(number)
    return counts


def _mocha_counts(text: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for number, word in _MOCHA.findall(text):
        counts[_MOCHA_WORDS[word]] = int(number)
    return counts


def _node_counts(text: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for word, number in _NODE_TEST.findall(text):
        if word in _NODE_WORDS:
            key = _NODE_WORDS[word]
            counts[key] = counts.get(key, 0) + int(number)
    return {k: v for k, v in counts.items() if v or k != "skipped"}


def tail_lines(output: str) -> list[str]:
    """The last ``TAIL_LINES`` lines that are not blank, each cut to ``MAX_LINE_CHARS``."""
    lines = [clip(line, MAX_LINE_CHARS, note="") for line in _clean(output) if line.strip()]
    return lines[-TAIL_LINES:]
