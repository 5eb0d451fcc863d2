"""Settings only the file on the host may change, never a candidate sent over the API.

The API token may tune the bot (labels, planning, limits of a task) but not widen what the
operator set on the host: what commands may reach and run (``sandbox``, ``mcp_servers``,
``web``, ``planning.security``), where a credential is sent (the forges' and the model's
URLs and secret sources, ``planning.user_config_api``, the traces' collector), nor the
server and its storage, nor the bot's own account names (``bot.github_login``,
``bot.gitlab_username``: whose comments, checks and change requests are the bot's own).

``written_changes`` names, key by key, what a candidate would change of them in the file
on disk *as written*: both parsed by the one parser of a configuration file, neither
merged with the environment, a key left out standing for its default. What the
environment sets (an override, a secret, the data directory) cannot hide a change of
the file, and a candidate that loads only with the environment's help is compared the
same way. ``host_only_changes`` compares two loaded settings. Pure.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from typing import Any

from pydantic import BaseModel

from bot.config.sections import Settings

HOST_ONLY: tuple[tuple[str, ...], ...] = (
    ("server",),  # where it listens, whom it trusts (proxies), the API's limits
    ("storage",),  # where everything is kept
    ("github",),  # the API's URL (the token goes there), the app, its secret files
    ("gitlab",),  # the URL (the token goes there), its secret files and webhook secrets
    ("llm", "provider"),  # which key is sent, and how
    ("llm", "base_url"),  # where the key and every prompt go
    ("llm", "script_path"),  # a file the bot would read
    ("planning", "security"),  # tools allowed, forbidden, waiting for approval
    ("planning", "user_config_api"),  # where the user-config token goes
    ("sandbox",),  # what commands may reach and use
    ("mcp_servers",),  # commands run outside the sandbox, URLs given headers
    ("web",),  # the web tools' allow-lists and search service
    ("observability", "traces", "enabled"),  # spans (with the OTLP headers) sent out
    ("observability", "traces", "endpoint"),  # where they go
    ("ci", "trusted_apps"),  # whose checks start a round: their text reaches the agent
    ("eval",),  # a folder on the host the dashboard and the API read
    ("bot", "github_login"),  # who the bot is: its own checks, comments, change requests
    ("bot", "gitlab_username"),
    ("bot", "github_id"),
    ("bot", "gitlab_id"),
)

REFUSED = "only the file on the host may change this: change it in the file on the host"


def _at(value: object, path: tuple[str, ...]) -> object:
    for name in path:
        value = getattr(value, name)
    return value


def _differences(before: object, after: object, key: str) -> Iterator[str]:
    """The dotted keys under ``key`` whose values differ (a model's fields one by one)."""
    if before == after:
        return
    if isinstance(before, BaseModel) and type(before) is type(after):
        for name in type(before).model_fields:
            yield from _differences(getattr(before, name), getattr(after, name), f"{key}.{name}")
        return
    yield key


def host_only_changes(before: Settings, after: Settings) -> list[str]:
    """The keys of ``HOST_ONLY`` whose value ``after`` changes from ``before``."""
    changed: list[str] = []
    for path in HOST_ONLY:
        changed.extend(_differences(_at(before, path), _at(after, path), ".".join(path)))
    return changed


_MISSING: Any = object()


@functools.cache
def _defaults() -> dict[str, Any]:
    """What a file that leaves every key out gives, as plain data (YAML's types)."""
    return Settings().model_dump(mode="json")


def _get(data: object, path: tuple[str, ...]) -> object:
    for name in path:
        if not isinstance(data, Mapping) or name not in data:
            return _MISSING
        data = data[name]
    return data


def _written(before: object, after: object, default: object, key: str) -> Iterator[str]:
    """The dotted keys under ``key`` whose written values differ (a key left out is its
    default; a mapping is compared key by key, any other value as a whole)."""
    before = default if before is _MISSING else before
    after = default if after is _MISSING else after
    if isinstance(before, Mapping) and isinstance(after, Mapping):
        defaults = default if isinstance(default, Mapping) else {}
        for name in dict.fromkeys([*before, *after]):
            yield from _written(
                before.get(name, _MISSING),
                after.get(name, _MISSING),
                defaults.get(name, _MISSING),
                f"{key}.{name}",
            )
        return
    same = before == after if type(before) is type(after) else _same_number(before, after)
    if not same:  # "1" and 1, true and 1 differ: the file would not say the same
        yield key


def _same_number(one: object, other: object) -> bool:
    numbers = (int, float)
    plain = not isinstance(one, bool) and not isinstance(other, bool)
    return plain and isinstance(one, numbers) and isinstance(other, numbers) and one == other


def written_changes(before: Mapping[str, Any] | None, after: Mapping[str, Any]) -> list[str]:
    """The keys of ``HOST_ONLY`` whose value the file ``after`` (parsed, not loaded)
    writes differently from the file ``before``. ``before`` None: the file on disk could
    not be parsed; every host-only key ``after`` writes counts as a change."""
    changed: list[str] = []
    defaults = _defaults()
    for path in HOST_ONLY:
        key = ".".join(path)
        written = _get(after, path)
        if before is None:
            if written is not _MISSING:
                changed.append(key)
            continue
        changed.extend(_written(_get(before, path), written, _get(defaults, path), key))
    return changed
