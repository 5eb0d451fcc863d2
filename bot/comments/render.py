"""Render comment templates (en, ja): strict, redacted, marked and cut to fit.

Every comment the bot posts ends with a hidden marker naming the task, the kind
of comment and its sequence number, so a restarted worker finds and edits what it
already posted instead of posting it twice.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import jinja2
import yaml

from bot.redact import redact

LANGUAGES = ("en", "ja")
MARKER_RE = re.compile(
    r"<!-- coding-agent:task=(?P<task>[\w-]+) kind=(?P<kind>[\w-]+) seq=(?P<seq>\d+) -->"
)


@dataclass(frozen=True, slots=True)
class Marker:
    task_id: str
    kind: str
    seq: int = 0

    @property
    def key(self) -> str:
        return f"{self.kind}:{self.seq}"

    def render(self) -> str:
        return f"<!-- coding-agent:task={self.task_id} kind={self.kind} seq={self.seq} -->"


def find_markers(body: str) -> list[Marker]:
    return [
        Marker(m.group("task"), m.group("kind"), int(m.group("seq")))
        for m in MARKER_RE.finditer(body)
    ]


@cache
def _catalog(language: str) -> dict[str, str]:
    if language not in LANGUAGES:
        raise ValueError(f"no comment templates for language {language!r}")
    text = resources.files("bot.comments").joinpath(f"templates/{language}.yaml").read_text("utf-8")
    data = yaml.safe_load(text)
    if not isinstance(data, dict):
        raise ValueError(f"templates/{language}.yaml is not a mapping")
    return {str(k): str(v) for k, v in data.items()}


# Markdown, not HTML: the forge sanitises what it renders, so no HTML escaping here.
_ENV = jinja2.Environment(
    undefined=jinja2.StrictUndefined,
    autoescape=False,  # noqa: S701
    keep_trailing_newline=False,
)


def template_keys(language: str) -> set[str]:
    return set(_catalog(language))


def render(key: str, language: str, **values: Any) -> str:
    """One template filled strictly (a missing variable raises ``jinja2.UndefinedError``)."""
    source = _catalog(language)[key]
    return _ENV.from_string(source).render(**values).strip()


QUOTE_LINES = 5
QUOTE_LINE_CHARS = 200
ELLIPSIS = "\u2026"
# "@name" (a person or a group) at the start of a word: a zero-width space after the "@"
# keeps the text readable and stops the forge from notifying anyone.
_MENTION = re.compile(r"(?<!\w)@(?=[\w-])")


def unmention(text: str) -> str:
    """``text`` with every ``@mention`` neutralised (``@\u200bname``): a quote never pings."""
    return _MENTION.sub("@\u200b", text)


def excerpt(text: str, *, limit: int = QUOTE_LINE_CHARS) -> str:
    """One line of what someone wrote, for inline use: at most ``limit`` characters (an
    ellipsis where it was cut), mentions neutralised."""
    line = " ".join(text.split())
    if len(line) > limit:
        line = line[:limit].rstrip() + ELLIPSIS
    return unmention(line)


def quote(text: str) -> str:
    """A short Markdown quote of what a reply answers, followed by a blank line: at most
    ``QUOTE_LINES`` lines of at most ``QUOTE_LINE_CHARS`` characters each (an ellipsis
    says where it was cut), with mentions neutralised so the quote pings nobody."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return ""
    shown = [excerpt(line) for line in lines[:QUOTE_LINES]]
    if len(lines) > QUOTE_LINES:
        shown.append(ELLIPSIS)
    return "\n".join(f"> {line}" for line in shown) + "\n\n"


def fits(text: str, *, marker: Marker, max_length: int) -> bool:
    """Whether ``text`` and its marker fit in one comment of ``max_length`` characters."""
    return len(text) + 2 + len(marker.render()) <= max_length


def finish(
    body: str,
    *,
    marker: Marker,
    language: str,
    max_length: int,
    secrets: tuple[str, ...] = (),
    report_url: str = "",
) -> str:
    """Redact, cut to ``max_length`` with a pointer to the run report (a link with
    ``server.public_url``, never a path on the bot's host), append the marker."""
    text = redact(body, known=secrets)
    tail = "\n\n" + marker.render()
    if not fits(text, marker=marker, max_length=max_length):
        note = render("truncated", language, report_url=report_url)
        keep = max(0, max_length - len(tail) - len(note) - 2)
        text = _cut(text, keep) + "\n\n" + note
    return text + tail


def _cut(text: str, limit: int) -> str:
    """Cut at a line boundary (or a word boundary, when the last line is very long),
    closing an open code fence or details block (room for those is kept)."""
    room = max(0, limit - len("\n```\n</details>"))
    cut = text[:room]
    keep = int(room * 0.8)
    for boundary in ("\n", " "):
        at = cut.rfind(boundary)
        if at >= keep:
            cut = cut[:at]
            break
    if cut.count("```") % 2 == 1:
        cut += "\n```"
    if cut.count("<details>") > cut.count("</details>"):
        cut += "\n</details>"
    return cut


def agent_comment(task_id: str, secrets: tuple[str, ...]) -> Callable[[str, int], str]:
    """How a comment the agent writes (a forge tool) goes out: its text, marked as the
    bot's own (so it can never trigger the bot), fitted to the forge's limit, redacted."""

    def finish_comment(text: str, seq: int) -> str:
        marker = Marker(task_id, "agent-comment", seq)
        return finish(text, marker=marker, language="en", max_length=65_000, secrets=secrets)

    return finish_comment
