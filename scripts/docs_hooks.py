"""MkDocs hooks: the pages the documentation builds from the code, never written by hand.

- ``configuration.md``: every key of ``config.yaml`` with its default and its own comment, read
  from the file itself (``configuration_page``), so the file and the page cannot disagree.
- ``api-reference.md``: the OpenAPI description ``/api/openapi.json`` serves, taken from the
  app's own routes (``api_description``) and rendered as tables (``api_page``).

Nothing is downloaded: both come from this checkout. ``mkdocs.yml`` names this file under
``hooks:``; ``tests/test_docs.py`` builds the site with ``--strict`` and reads the pages back.
"""

from __future__ import annotations

import html
import itertools
import json
import re
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CONFIG_PAGE = "configuration.md"
API_PAGE = "api-reference.md"
API_PREFIX = "/api"

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
            code = "\n".join(line[1:] for line in chunk)
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


# --- api-reference.md from the app's OpenAPI description -----------------------------------


def api_description() -> dict[str, Any]:
    """What ``/api/openapi.json`` serves, asked of the app's own routes (no store, forge or
    model behind them: describing the operations calls none of them)."""
    from starlette.applications import Starlette
    from starlette.testclient import TestClient

    from bot.api.config_file import ConfigApi
    from bot.api.operations import Guard
    from bot.api.routes import TaskApi, api_routes
    from bot.config import Settings

    def settings() -> Settings:
        return Settings()

    config = ConfigApi(settings=settings, environ={}, reload=list)
    api = TaskApi(
        None,  # type: ignore[arg-type]
        settings=settings,
        forges=None,  # type: ignore[arg-type]
        user_config=None,  # type: ignore[arg-type]
        llm_health=None,  # type: ignore[arg-type]
        wake=lambda: None,
        config=config,
    )
    guard = Guard(token=secrets.token_urlsafe(32), throttle=None)  # type: ignore[arg-type]
    with TestClient(Starlette(routes=api_routes(api, guard))) as client:
        answer = client.get("/openapi.json")
    answer.raise_for_status()
    description: dict[str, Any] = answer.json()
    return description


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _type(schema: dict[str, Any]) -> str:
    """A schema in a few words: a model as a link to its table."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{name.lower()})"
    if "anyOf" in schema:
        return " or ".join(_type(option) for option in schema["anyOf"])
    if "enum" in schema:
        return " \\| ".join(f"`{value}`" for value in schema["enum"])
    if "const" in schema:
        return f"`{schema['const']}`"
    kind = schema.get("type", "any")
    if kind == "array":
        return f"list of {_type(schema.get('items', {}))}"
    if kind == "object" and "additionalProperties" in schema:
        extra = schema["additionalProperties"]
        return f"object of {_type(extra)}" if isinstance(extra, dict) else "object"
    return f"`{kind}`"


def _limits(schema: dict[str, Any]) -> str:
    words = ("minimum", "maximum", "minLength", "maxLength", "pattern", "default")
    shown = {word: schema[word] for word in words if word in schema}
    if "default" in shown:
        shown["default"] = json.dumps(shown["default"])
    found = [f"{word} `{value}`" for word, value in shown.items()]
    return ", ".join(found)


def _properties(schema: dict[str, Any]) -> list[str]:
    required = set(schema.get("required", ()))
    rows = ["| field | type | required | notes |", "| --- | --- | --- | --- |"]
    for name, prop in schema.get("properties", {}).items():
        notes = _cell(" ".join(x for x in (prop.get("description", ""), _limits(prop)) if x))
        needed = "yes" if name in required else ""
        rows.append(f"| `{name}` | {_cell(_type(prop))} | {needed} | {notes} |")
    return rows if len(rows) > 2 else ["No fields."]


def _operation(method: str, path: str, entry: dict[str, Any]) -> list[str]:
    out = [f"## {method.upper()} {API_PREFIX}{path}", "", entry.get("description", ""), ""]
    parameters = entry.get("parameters", [])
    if parameters:
        out += ["| parameter | in | type | required |", "| --- | --- | --- | --- |"]
        for param in parameters:
            needed = "yes" if param.get("required") else ""
            kind = _cell(_type(param.get("schema", {})))
            out.append(f"| `{param['name']}` | {param['in']} | {kind} | {needed} |")
        out.append("")
    body = entry.get("requestBody")
    if body:
        for media, content in body["content"].items():
            out += [f"Body (`{media}`):", ""]
            schema = content.get("schema", {})
            out += [*(_properties(schema) if "properties" in schema else [_type(schema)]), ""]
    out += ["| status | when | body |", "| --- | --- | --- |"]
    for status, answer in entry.get("responses", {}).items():
        kinds = [
            f"`{media}`: {_type(content.get('schema', {}))}"
            for media, content in answer.get("content", {}).items()
        ]
        out.append(f"| {status} | {_cell(answer['description'])} | {_cell(', '.join(kinds))} |")
    return [*out, ""]


def api_page(description: dict[str, Any]) -> str:
    """Every operation (parameters, body, answers), then every schema the answers use."""
    info = description["info"]
    out = [
        "# API reference",
        "",
        f"Generated from the OpenAPI {description['openapi']} description the app serves at "
        f"`{API_PREFIX}/openapi.json` ({info['title']}, version {info['version']}) when the "
        "documentation is built. Every operation needs `Authorization: Bearer $BOT_API_TOKEN`; "
        "what they do and how to call them: [REST API](api.md).",
        "",
    ]
    for path, methods in description["paths"].items():
        for method, entry in methods.items():
            out += _operation(method, path, entry)
    out += ["## Schemas", ""]
    for name, schema in description["components"]["schemas"].items():
        out += [f"### {name}", "", _cell(schema.get("description", "")), ""]
        out += [*(_properties(schema) if "properties" in schema else [_type(schema)]), ""]
    return "\n".join(out)


# --- the hook ---------------------------------------------------------------------------------


def on_files(files: Any, config: Any) -> Any:
    """Add the generated pages to the site (MkDocs calls this once per build)."""
    from mkdocs.structure.files import File

    config_text = (ROOT / "config.yaml").read_text(encoding="utf-8")
    pages = {
        CONFIG_PAGE: configuration_page(config_text),
        API_PAGE: api_page(api_description()),
    }
    for name, content in pages.items():
        files.append(File.generated(config, name, content=content))
    return files
