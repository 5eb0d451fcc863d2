"""Read-only views of loaded settings: forge status, secret values, a masked dump.

Pure functions of a ``Settings``: what ``doctor`` / ``serve`` tell the operator
about disabled forges, the one list of secret values that logs, comments, prompts
and tool output redact, and the effective configuration with every secret shown
as ``***``.
"""

from __future__ import annotations

from typing import Any

from bot.config.env import SECRET_KEYS
from bot.config.sections import Settings
from bot.events import ForgeKind

_MASK = "***"


def disabled_forges(settings: Settings) -> list[str]:
    """One line per disabled forge, naming the settings that enable it."""
    lines = []
    if not settings.github.enabled:
        lines.append(
            "GitHub is disabled: set GITHUB_WEBHOOK_SECRET and either GITHUB_APP_ID with "
            "GITHUB_PRIVATE_KEY / GITHUB_PRIVATE_KEY_PATH (GitHub App) or GITHUB_TOKEN"
        )
    if not settings.gitlab.enabled:
        lines.append(
            "GitLab is disabled: set GITLAB_TOKEN and GITLAB_WEBHOOK_SECRET or "
            "gitlab.webhook_secrets (and GITLAB_URL)"
        )
    return lines


def secret_values(settings: Settings) -> tuple[str, ...]:
    """Every configured secret value, MCP servers' env and header values included: the
    one list that logs, comments, the run log (prompts) and tool output redact."""
    s = settings
    secrets = [s.github.private_key, s.github.webhook_secret, s.github.token, s.gitlab.token]
    secrets += [s.gitlab.webhook_secret, s.llm.api_key, s.storage.postgres_dsn, s.server.api_token]
    secrets += [source.secret for source in s.gitlab.webhook_secrets.values()]
    secrets += [s.planning.user_config_api.token]
    values = [v.get_secret_value() for v in secrets if v is not None]
    for server in s.mcp_servers:
        values += [*server.env.values(), *server.headers.values()]
    return tuple(v for v in values if v)


def masked(settings: Settings) -> dict[str, Any]:
    """The effective configuration as plain data, secrets shown as ``***``."""
    data = settings.model_dump(mode="json")
    for section, key in SECRET_KEYS:
        block = data.get(section)
        if isinstance(block, dict) and block.get(key):
            block[key] = "***"
    if data["planning"]["user_config_api"].get("token"):
        data["planning"]["user_config_api"]["token"] = _MASK
    for source in data["gitlab"]["webhook_secrets"].values():
        if source.get("secret"):
            source["secret"] = _MASK
    for server in data.get("mcp_servers", []):
        server["env"] = {k: "***" for k in server.get("env", {})}
        server["headers"] = {k: "***" for k in server.get("headers", {})}
    return data


def bot_names(settings: Settings, forge: ForgeKind) -> tuple[str, ...]:
    """The bot's own account names on ``forge`` (its comments, mentions and branches)."""
    if forge is ForgeKind.GITHUB:
        return (settings.bot.github_login,)
    return (settings.bot.gitlab_username,)
