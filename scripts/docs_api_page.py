"""MkDocs hook: ``api-reference.md``, the OpenAPI description ``/api/openapi.json`` serves,
asked of the app's own routes when the site is built (``api_description``; nothing is
downloaded) and rendered as tables (``api_page``). ``mkdocs.yml`` names this file under
``hooks:``; ``tests/test_docs.py`` builds the site with ``--strict``.
"""

from __future__ import annotations

import json
import secrets
from typing import Any

API_PAGE = "api-reference.md"
API_PREFIX = "/api"


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


def on_files(files: Any, config: Any) -> Any:
    """Add the page to the site (MkDocs calls this once per build)."""
    from mkdocs.structure.files import File

    files.append(File.generated(config, API_PAGE, content=api_page(api_description())))
    return files
