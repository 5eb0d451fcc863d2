"""Read-only views of loaded settings: forge status, secret values, a masked dump.

Pure functions of a ``Settings``: what ``doctor`` / ``serve`` tell the operator
about disabled forges, the one list of secret values that logs, comments, prompts
and tool output redact, the effective configuration with every secret shown
as ``***`` (credentials written into a URL included), and its digest (task.json).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit, urlunsplit

from bot.config.env import SECRET_KEYS
from bot.config.sections import Settings
from bot.events import ForgeKind

_MASK = "***"
_PLACEHOLDERS = ("{user}", "{forge}")
_URL_KEYS = (
    ("llm", "base_url"),
    ("github", "api_url"),
    ("gitlab", "url"),
    ("server", "public_url"),
)
MIN_REDACTED_CHARS = 8

# The settings now (a reload replaces them): what a long-lived part is handed instead of
# the whole runtime.
CurrentSettings = Callable[[], Settings]


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


def _urls(settings: Settings) -> list[str]:
    """The settings that hold a URL someone may have written a credential into."""
    s = settings
    urls = [s.llm.base_url, s.github.api_url, s.gitlab.url, s.server.public_url]
    urls += [s.planning.user_config_api.url]
    return urls + [server.url for server in s.mcp_servers if server.url]


def _url_credentials(url: str) -> list[str]:
    """What of ``url`` may be a credential: its user name and password, and its query's
    values that are long enough to be a key (short ones such as ``v=1`` would make the
    redaction hide ordinary words)."""
    try:
        parts = urlsplit(url)
        found = [parts.username or "", parts.password or ""]
        found += [value for _, value in parse_qsl(parts.query, keep_blank_values=True)]
    except ValueError:
        return []
    return [unquote(v) for v in found if len(v) >= MIN_REDACTED_CHARS]


def masked_url(url: str) -> str:
    """``url`` with its user name, password, query values and fragment shown as ``***``
    (``{user}`` and ``{forge}`` placeholders stay readable)."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
        port = parts.port
    except ValueError:
        return _MASK if url else url
    if not (parts.username or parts.password or parts.query or parts.fragment):
        return url
    netloc = parts.netloc
    if parts.username is not None or parts.password is not None:
        bracketed = f"[{host}]" if host and ":" in host else (host or "")
        netloc = f"{_MASK}@{bracketed}" + (f":{port}" if port is not None else "")
    query = "&".join(
        f"{key}={value if value in _PLACEHOLDERS else _MASK}"
        for key, value in parse_qsl(parts.query, keep_blank_values=True)
    )
    fragment = _MASK if parts.fragment else ""
    return urlunsplit((parts.scheme, netloc, parts.path, query, fragment))


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
    for url in _urls(s):
        values += _url_credentials(url)
    return tuple(dict.fromkeys(v for v in values if v))


def secrets_in_file(settings: Settings) -> list[tuple[str, str]]:
    """The settings of a configuration file that hold a secret the loader lets a file
    hold (an MCP server's env and header values, a credential written into a URL), key
    by key: what a file sent over the API may not carry (``PUT /api/config``). The keys
    of ``SECRET_KEYS`` the loader refuses in any file."""
    found = []
    for i, server in enumerate(settings.mcp_servers):
        for part, values in (("env", server.env), ("headers", server.headers)):
            for name, value in values.items():
                if value:
                    found.append((f"mcp_servers.{i}.{part}.{name}", "holds a value"))
    urls = [
        (f"{section}.{key}", getattr(getattr(settings, section), key)) for section, key in _URL_KEYS
    ]
    urls.append(("planning.user_config_api.url", settings.planning.user_config_api.url))
    urls += [(f"mcp_servers.{i}.url", s.url) for i, s in enumerate(settings.mcp_servers) if s.url]
    for key, url in urls:
        if _url_credentials(url):
            found.append((key, "holds a credential (a user name, password or key in the URL)"))
    return [
        (
            key,
            f"{what}: secrets are not accepted over the API; keep them in the environment "
            "or a secret file",
        )
        for key, what in found
    ]


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
        if server.get("url"):
            server["url"] = masked_url(server["url"])
    for section, key in _URL_KEYS:
        block = data[section]
        block[key] = masked_url(block[key])
    api = data["planning"]["user_config_api"]
    api["url"] = masked_url(api["url"])
    return data


def settings_digest(settings: Settings) -> str:
    """A short digest of the effective settings (secrets masked first, so it tells
    nothing of them): two tasks with the same digest ran with the same settings."""
    text = json.dumps(masked(settings), sort_keys=True, default=str, ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()[:16]


# (login, account id) -> whether that account is the bot's own (``is_bot_account`` with
# the settings and the forge bound): what a pure decision is handed
IsBot = Callable[[str, str], bool]


def bot_account(settings: Settings, forge: ForgeKind) -> tuple[str, str]:
    """The bot's account on ``forge``: (its login, its id; "" while not known)."""
    if forge is ForgeKind.GITHUB:
        return settings.bot.github_login, settings.bot.github_id
    return settings.bot.gitlab_username, settings.bot.gitlab_id


def is_bot_account(settings: Settings, forge: ForgeKind, *, login: str, account_id: str) -> bool:
    """Whether an account is the bot's own: by its id when both ids are known, else by the
    whole login, exactly (case aside: forges treat logins so). Never a login compared
    loosely: ``coding-agent`` is a person, ``coding-agent[bot]`` the App."""
    own_login, own_id = bot_account(settings, forge)
    if own_id and account_id:
        return account_id == own_id
    return bool(login) and login.lower() == own_login.lower()


def bot_names(settings: Settings, forge: ForgeKind) -> tuple[str, ...]:
    """The bot's own account names on ``forge`` (its comments, mentions and branches)."""
    if forge is ForgeKind.GITHUB:
        return (settings.bot.github_login,)
    return (settings.bot.gitlab_username,)
