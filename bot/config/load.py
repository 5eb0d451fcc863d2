"""Loading: find ``config.yaml``, read it, merge the environment, validate.

``load_settings(environ, path)`` is the one entry point that builds a ``Settings``;
``settings_from_text`` checks a candidate file's text the same way, as if it stood at
``path`` (``POST /api/config/validate``, ``PUT /api/config``). Every failure
(unreadable file, bad YAML, unknown key, wrong type, out-of-range or inconsistent value)
raises ``ConfigError`` naming the key and the file; ``problems_of`` reads it key by key.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from bot.config.env import (
    apply_env,
    apply_secret_files,
    apply_webhook_secrets,
    refuse_inline_secrets,
    refuse_inline_webhook_secrets,
)
from bot.config.sections import ConfigError, Settings
from bot.config.sources import refuse_new_secret_sources

DEFAULT_CONFIG_NAME = "config.yaml"
MAX_EXPANDED_NODES = 100_000
MAX_DEPTH = 64
MAX_TEXT_BYTES = 256 * 1024  # a candidate from outside; config.yaml with comments is ~20 KiB
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_KEYED = re.compile(r"(?P<key>[\w.\-/]+): (?P<message>.+)", re.DOTALL)


def previous_config_path(path: Path) -> Path:
    """Where ``PUT /api/config`` keeps the file it replaced: beside it."""
    return path.with_name(path.name + ".previous")


def config_path_from(environ: Mapping[str, str], explicit: str | Path | None = None) -> Path | None:
    """The config file to read: ``--config``, else ``BOT_CONFIG``, else ./config.yaml if present."""
    if explicit:
        return Path(explicit)
    if environ.get("BOT_CONFIG"):
        return Path(environ["BOT_CONFIG"])
    default = Path(DEFAULT_CONFIG_NAME)
    return default if default.exists() else None


def load_settings(environ: Mapping[str, str], path: str | Path | None = None) -> Settings:
    """Read ``path`` (or the file ``BOT_CONFIG`` names), apply the environment, validate."""
    config_path = config_path_from(environ, path)
    raw = _read_yaml(config_path) if config_path else {}
    return _validated(raw, environ, config_path)


def settings_from_text(
    environ: Mapping[str, str], text: str, path: Path, *, running: Settings | None = None
) -> Settings:
    """``text`` as the configuration file at ``path`` would load: the same checks, the
    same environment, secret files found from ``path``'s directory. Text from outside
    (the API) larger than ``MAX_TEXT_BYTES`` or whose aliases would expand past
    ``MAX_EXPANDED_NODES`` is refused before anything parses or walks it. Given the
    ``running`` settings, a secret source (a file or an environment variable) they do not
    already use is refused before anything is read."""
    size = len(text.encode("utf-8"))
    if size > MAX_TEXT_BYTES:
        raise ConfigError(f"{path}: {size} bytes: a configuration file may hold {MAX_TEXT_BYTES}")
    raw = parse_config(text, str(path))
    if running is not None:
        refuse_new_secret_sources(raw, running, str(path))
    return _validated(raw, environ, path)


def parse_config(text: str, where: str) -> dict[str, Any]:
    """The mapping of sections the configuration ``text`` holds (none for an empty file),
    its aliases' cost checked first (``check_expansion``). The one parser of a
    configuration file: the file read at start-up or a reload, a candidate over the API
    and the file on disk it is compared with all go through it, with the same loader, so
    what passes the API's check also starts the bot (libyaml and pure-Python PyYAML
    differ: a tab after a colon is a value to one and an error to the other)."""
    root = check_expansion(text, where)
    return _mapping(_construct(root, where), where)


def check_expansion(text: str, where: str, limit: int = MAX_EXPANDED_NODES) -> yaml.Node | None:
    """Refuse YAML ``text`` that would cost more to load than a configuration can need:
    more than ``limit`` values with its aliases expanded (an alias bomb), an alias
    inside itself, or nesting deeper than ``MAX_DEPTH``. Counted on the composed node
    graph, each node once, without recursion. Returns that graph (None: empty)."""
    try:
        root = yaml.compose(text, Loader=_Loader)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{where}: not valid YAML: {exc}") from None
    if root is None:
        return None
    sizes: dict[int, int] = {}
    path: set[int] = set()  # the nodes from the root to the one being counted
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, counted = stack.pop()
        key, children = id(node), _children(node)
        if counted:
            path.discard(key)
            sizes[key] = min(limit + 1, 1 + sum(sizes[id(child)] for child in children))
            continue
        if key in sizes:
            continue
        if key in path:
            raise ConfigError(f"{where}: an alias refers to a value inside itself")
        path.add(key)
        if len(path) > MAX_DEPTH:
            raise ConfigError(f"{where}: nested deeper than {MAX_DEPTH} levels")
        stack.append((node, True))
        stack.extend((child, False) for child in children if id(child) not in sizes)
    if sizes[id(root)] > limit:
        raise ConfigError(f"{where}: its aliases expand to more than {limit} values")
    return root


def _construct(root: yaml.Node | None, where: str) -> object:
    """The values of a composed (and checked) document, as ``yaml.safe_load`` gives them,
    without parsing the text again (with the C loader, a seventh of the time)."""
    if root is None:
        return None
    loader = _Loader("")
    try:
        return loader.construct_document(root)
    except (yaml.YAMLError, ValueError) as exc:  # ValueError: a date like 2001-13-45
        raise ConfigError(f"{where}: not valid YAML: {exc}") from None
    finally:
        loader.dispose()


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def _validated(raw: dict[str, Any], environ: Mapping[str, str], path: Path | None) -> Settings:
    where = str(path) if path else "<defaults>"
    refuse_inline_secrets(raw, where)
    refuse_inline_webhook_secrets(raw, where)
    apply_env(raw, environ)
    apply_secret_files(raw, where, environ)
    apply_webhook_secrets(raw, where, environ)
    if path is not None:
        raw["source_path"] = str(path)
    try:
        settings = Settings.model_validate(raw)
    except ValidationError as exc:
        problems = _problems(exc)
        lines = [f"{where}: invalid configuration:", *(f"  {k}: {m}" for k, m in problems)]
        raise ConfigError("\n".join(lines), problems) from None
    _check_consistency(settings, where)
    return settings


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the configuration file: {exc.strerror}") from None
    return parse_config(text, str(path))


def _mapping(data: object, where: str) -> dict[str, Any]:
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: the top level must be a mapping of sections")
    return data


def _problems(exc: ValidationError) -> tuple[tuple[str, str], ...]:
    found = []
    for err in exc.errors():
        key = ".".join(str(p) for p in err["loc"])
        if err["type"] == "extra_forbidden":
            found.append((key, "unknown key (check the spelling against config.yaml)"))
        else:
            found.append((key, err["msg"]))  # never the input: secrets are merged in by now
    return tuple(found)


def problems_of(exc: ConfigError, where: str) -> list[tuple[str, str]]:
    """``exc`` key by key: (key, what is wrong); the key is "" for the file as a whole
    (not YAML, not a mapping). ``where`` is the file name the messages begin with."""
    if exc.problems:
        return list(exc.problems)
    message = str(exc)
    message = message.removeprefix(f"{where}: ")
    keyed = _KEYED.fullmatch(message)
    if keyed is None:
        return [("", message)]
    return [(keyed["key"], keyed["message"])]


def _check_consistency(settings: Settings, where: str) -> None:
    if settings.storage.backend == "postgres" and settings.storage.postgres_dsn is None:
        raise ConfigError(
            f"{where}: storage.postgres_dsn: required when storage.backend is postgres: "
            "set BOT_POSTGRES_DSN"
        )
    if settings.llm.provider == "scripted" and settings.llm.script_path is None:
        raise ConfigError(f"{where}: llm.script_path: required when llm.provider is scripted")
    names = [server.name for server in settings.mcp_servers]
    for server in settings.mcp_servers:
        if (server.command is None) == (server.url is None):
            raise ConfigError(
                f"{where}: mcp_servers.{server.name}: give exactly one of command or url"
            )
        if names.count(server.name) > 1:
            raise ConfigError(f"{where}: mcp_servers.{server.name}: duplicate name")
