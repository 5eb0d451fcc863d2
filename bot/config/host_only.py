"""Settings only the file on the host may change, never a candidate sent over the API.

The API token may tune the bot (labels, planning, limits of a task) but not widen what the
operator set on the host: what commands may reach and run (``sandbox``, ``mcp_servers``,
``web``, ``planning.security``), where a credential is sent (the forges' and the model's
URLs and secret sources, ``planning.user_config_api``, the traces' collector), nor the
server and its storage. ``host_only_changes`` names, key by key, what a candidate would
change of them. Pure: it compares two loaded settings.
"""

from __future__ import annotations

from collections.abc import Iterator

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
