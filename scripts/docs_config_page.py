"""MkDocs hook: ``configuration.md``, every key of ``config.yaml`` with its default and its own
comment, read from the file itself when the site is built, so the file and the page cannot
disagree. ``mkdocs.yml`` names this file under ``hooks:``; ``tests/test_docs.py`` builds the
site with ``--strict`` and checks that the page documents every setting once.
"""

from __future__ import annotations

import html
import itertools
import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CONFIG_PAGE = "configuration.md"

_KEY = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z_][\w]*):(?P<rest>.*)$")
_COMMENT = re.compile(r"^(?P<indent> *)#(?P<text>.*)$")


# --- configuration.md from config.yaml ------------------------------------------------------


@dataclass
class Row:
    """One key: its dotted name, its default as written, and its comment."""

    key: str
    default: str
    text: list[str] = field(default_factory=list)
    indent: int = 0
    parent: bool = False  # a mapping of further keys


@dataclass
class Section:
    name: str
    intro: list[str] = field(default_factory=list)
    items: list[Row | list[str]] = field(default_factory=list)  # rows, notes and examples


def _split_value(rest: str) -> tuple[str, str | None]:
    """``value  # comment`` -> (value, comment); a ``#`` inside quotes is the value's."""
    quote = ""
    for index, char in enumerate(rest):
        if quote:
            quote = "" if char == quote else quote
        elif char in "\"'":
            quote = char
        elif char == "#" and (index == 0 or rest[index - 1] == " "):
            return rest[:index].strip(), rest[index + 1 :].strip()
    return rest.strip(), None


def parse_config(text: str) -> tuple[list[str], list[Section]]:
    """The header comment and the sections of ``config.yaml``, in the file's order."""
    header: list[str] = []
    sections: list[Section] = []
    pending: list[str] = []  # comment lines at a key's indentation, waiting for what follows
    stack: list[tuple[int, str]] = []
    last: Row | None = None
    lines = text.splitlines()
    at = 0
    while at < len(lines) and lines[at].startswith("#"):
        header.append(lines[at][1:].strip())
        at += 1
    for line in lines[at:]:
        if not line.strip():
            if pending and sections and stack:
                sections[-1].items.append(pending)
                pending = []
            last = None if not stack else last
            continue
        comment = _COMMENT.match(line)
        if comment:
            column, body = len(comment["indent"]), comment["text"]
            if last is not None and column > last.indent and not pending:
                last.text.append(body.strip())  # a key's comment, continued below it
            else:
                pending.append(body[1:] if body.startswith(" ") else body)
            continue
        match = _KEY.match(line)
        if match is None:
            raise ValueError(f"config.yaml: a line that is neither a key nor a comment: {line!r}")
        indent = len(match["indent"])
        value, note = _split_value(match["rest"])
        while stack and stack[-1][0] >= indent:
            stack.pop()
        key = ".".join([*(name for _, name in stack), match["key"]])
        if indent == 0:
            sections.append(Section(key, intro=pending))
            pending = []
        elif pending:
            sections[-1].items.append(pending)
            pending = []
        row = Row(key, value, [note] if note else [], indent, parent=not value)
        if indent or value:
            sections[-1].items.append(row)
        elif note:
            sections[-1].intro.append(note)
        if not value:
            stack.append((indent, match["key"]))
        last = row
    if pending and sections:
        sections[-1].items.append(pending)
    return header, sections


def config_keys(text: str) -> list[str]:
    """Every key the page documents (a mapping's own key included), in the file's order."""
    _, sections = parse_config(text)
    return [item.key for section in sections for item in section.items if isinstance(item, Row)]


def _html(text: str) -> str:
    return html.escape(text, quote=False)


def _note(lines: list[str]) -> str:
    """Comment lines as paragraphs, and the indented ones (commented-out examples) as code."""
    parts: list[str] = []
    for example, run in itertools.groupby(lines, key=lambda line: line.startswith(" ")):
        chunk = list(run)
        if example:
            code = textwrap.dedent("\n".join(chunk))
            parts.append(f"<pre><code>{_html(code)}</code></pre>")
        else:
            parts.append(f"<p>{_html(' '.join(line.strip() for line in chunk))}</p>")
    return "".join(parts)


def _row(row: Row) -> str:
    key = f'<code class="config-key" id="{row.key}">{row.key}</code>'
    default = "" if row.parent else f"<code>{_html(row.default)}</code>"
    text = _html(" ".join(row.text))
    return f"<tr><td>{key}</td><td>{default}</td><td>{text}</td></tr>"


def configuration_page(text: str) -> str:
    """The page: the file's header, then a table per section (key, default, comment)."""
    header, sections = parse_config(text)
    out = [
        "# Configuration",
        "",
        "Generated from `config.yaml` (its keys, defaults and comments) when the documentation "
        "is built: the file is the reference and this page is the file. Secrets are never read "
        "from it: [Environment variables](environment.md).",
        "",
        f"<blockquote><p>{_html(' '.join(line for line in header if line))}</p></blockquote>",
        "",
    ]
    for section in sections:
        out += [f"## `{section.name}` {{ #section-{section.name} }}", ""]
        if section.intro:
            out += [_note(section.intro), ""]
        table = ["<table>", "<tr><th>key</th><th>default</th><th>what it does</th></tr>"]
        for item in section.items:
            if isinstance(item, Row):
                table.append(_row(item))
            else:
                table.append(f'<tr><td colspan="3">{_note(item)}</td></tr>')
        out += [*table, "</table>", ""]
    return "\n".join(out)


def on_files(files: Any, config: Any) -> Any:
    """Add the page to the site (MkDocs calls this once per build)."""
    from mkdocs.structure.files import File

    text = (ROOT / "config.yaml").read_text(encoding="utf-8")
    files.append(File.generated(config, CONFIG_PAGE, content=configuration_page(text)))
    return files
