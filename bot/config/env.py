"""Values from outside ``config.yaml``: environment overrides and secrets.

The tables here name every environment variable the settings read and every
secret key; the functions merge those sources into the raw (not yet validated)
configuration mapping, refusing secrets written inline in the file. The caller
passes the environment: nothing here reads ``os.environ``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bot.config.sections import ConfigError

# Keys that hold secrets: refused in config.yaml, read from the environment or named files.
SECRET_KEYS: dict[tuple[str, str], str] = {
    ("github", "private_key"): "GITHUB_PRIVATE_KEY or github.private_key_path",
    ("github", "webhook_secret"): "GITHUB_WEBHOOK_SECRET or github.webhook_secret_file",
    ("github", "token"): "GITHUB_TOKEN",
    ("gitlab", "token"): "GITLAB_TOKEN or gitlab.token_file",
    ("gitlab", "webhook_secret"): "GITLAB_WEBHOOK_SECRET or gitlab.webhook_secret_file",
    ("llm", "api_key"): "LLM_API_KEY (or OPENAI_API_KEY / ANTHROPIC_API_KEY)",
    ("storage", "postgres_dsn"): "BOT_POSTGRES_DSN",
    ("server", "api_token"): "BOT_API_TOKEN",
}

# The one nested secret: the user-config service's bearer token (planning.user_config_api).
USER_CONFIG_ENV = "BOT_USER_CONFIG_TOKEN"
USER_CONFIG_PATH = ("planning", "user_config_api")

# Plain environment overrides: variable -> (section path, key).
ENV_OVERRIDES: dict[str, tuple[tuple[str, ...], str]] = {
    "PLANNING_ENABLED": (("planning",), "enabled"),
    "PLANNING_STRATEGY": (("planning",), "strategy"),
    "PLANNING_MAX_SUBTASKS": (("planning",), "max_subtasks"),
    "REFLECTION_ENABLED": (("planning", "reflection"), "enabled"),
    "REFLECTION_INTERVAL": (("planning", "reflection"), "trigger_interval"),
    "MAX_PLAN_REVISIONS": (("planning", "revision"), "max_revisions"),
    "BOT_DATA_DIR": (("storage",), "data_dir"),
    "GITHUB_APP_ID": (("github",), "app_id"),
    "GITHUB_PRIVATE_KEY_PATH": (("github",), "private_key_path"),
    "GITHUB_API_URL": (("github",), "api_url"),
    "GITLAB_URL": (("gitlab",), "url"),
    "LLM_PROVIDER": (("llm",), "provider"),
    "LLM_BASE_URL": (("llm",), "base_url"),
    "LLM_MODEL": (("llm",), "model"),
    "LLM_STRUCTURED_OUTPUT": (("llm",), "structured_output"),
    "BOT_TRIGGER_LABEL": (("labels",), "trigger"),
    "BOT_COMMAND_PREFIX": (("commands",), "prefix"),
    "BOT_MAX_COST": (("planning", "budget"), "max_cost"),
    "BOT_TRACES_ENABLED": (("observability", "traces"), "enabled"),
}

# Secret environment variables: variable -> (section, key).
ENV_SECRETS: dict[str, tuple[str, str]] = {
    "GITHUB_PRIVATE_KEY": ("github", "private_key"),
    "GITHUB_WEBHOOK_SECRET": ("github", "webhook_secret"),
    "GITHUB_TOKEN": ("github", "token"),
    "GITLAB_TOKEN": ("gitlab", "token"),
    "GITLAB_WEBHOOK_SECRET": ("gitlab", "webhook_secret"),
    "BOT_POSTGRES_DSN": ("storage", "postgres_dsn"),
    "BOT_API_TOKEN": ("server", "api_token"),
}

# Secrets read from files: (section, key naming the file, secret key it fills).
FILE_SECRETS: tuple[tuple[str, str, str], ...] = (
    ("github", "private_key_path", "private_key"),
    ("github", "webhook_secret_file", "webhook_secret"),
    ("gitlab", "token_file", "token"),
    ("gitlab", "webhook_secret_file", "webhook_secret"),
)


def refuse_inline_secrets(raw: dict[str, Any], where: str) -> None:
    """Raise ``ConfigError`` if ``config.yaml`` sets any key of ``SECRET_KEYS`` (or the
    user-config service's token)."""
    for (section, key), source in SECRET_KEYS.items():
        block = raw.get(section)
        if isinstance(block, dict) and block.get(key) not in (None, ""):
            raise ConfigError(
                f"{where}: {section}.{key}: secrets are not read from the configuration file; "
                f"set {source}"
            )
    planning = raw.get("planning")
    block = planning.get("user_config_api") if isinstance(planning, dict) else None
    if isinstance(block, dict) and block.get("token") not in (None, ""):
        raise ConfigError(
            f"{where}: planning.user_config_api.token: secrets are not read from the "
            f"configuration file; set {USER_CONFIG_ENV}"
        )


def _webhook_secret_sources(raw: dict[str, Any], where: str) -> dict[str, Any]:
    """The ``gitlab.webhook_secrets`` mapping (empty when absent); a wrong shape raises."""
    gitlab = raw.get("gitlab")
    sources = gitlab.get("webhook_secrets") if isinstance(gitlab, dict) else None
    if sources is None:
        return {}
    if not isinstance(sources, dict):
        raise ConfigError(f"{where}: gitlab.webhook_secrets: must map a project or group path "
                          "to {file: PATH} or {env: VARIABLE}")  # fmt: skip
    for path, source in sources.items():
        if not isinstance(source, dict):
            raise ConfigError(f"{where}: gitlab.webhook_secrets.{path}: must be "
                              "{file: PATH} or {env: VARIABLE}")  # fmt: skip
    return sources


def refuse_inline_webhook_secrets(raw: dict[str, Any], where: str) -> None:
    """Raise ``ConfigError`` if ``gitlab.webhook_secrets`` writes a secret itself."""
    for path, source in _webhook_secret_sources(raw, where).items():
        if source.get("secret") not in (None, ""):
            raise ConfigError(
                f"{where}: gitlab.webhook_secrets.{path}.secret: secrets are not read from the "
                "configuration file; name a file (file:) or an environment variable (env:)"
            )


def apply_webhook_secrets(raw: dict[str, Any], where: str, environ: Mapping[str, str]) -> None:
    """Fill each ``gitlab.webhook_secrets`` entry's secret from its file or variable; a
    missing, unreadable or empty source raises ``ConfigError`` naming the entry."""
    base = Path(where).parent if where != "<defaults>" else Path(".")
    for path, source in _webhook_secret_sources(raw, where).items():
        key = f"{where}: gitlab.webhook_secrets.{path}"
        if source.get("env"):
            value = environ.get(str(source["env"]), "").strip()
            if not value:
                raise ConfigError(f"{key}.env: the environment variable {source['env']} is not set")
        elif source.get("file"):
            file_path = Path(os.path.expanduser(str(source["file"])))
            file_path = file_path if file_path.is_absolute() else base / file_path
            try:
                value = file_path.read_text(encoding="utf-8").strip()
            except OSError as exc:
                raise ConfigError(f"{key}.file: cannot read {file_path}: {exc.strerror}") from None
            if not value:
                raise ConfigError(f"{key}.file: {file_path} is empty")
        else:
            continue  # the schema names what is missing
        source["secret"] = value


def _section(raw: dict[str, Any], path: tuple[str, ...], where: str = "") -> dict[str, Any]:
    node = raw
    for name in path:
        child = node.get(name)
        if child is None:
            child = {}
            node[name] = child
        if not isinstance(child, dict):
            raise ConfigError(f"{where}: {'.'.join(path)}: must be a mapping")
        node = child
    return node


# Ollama's own variable, as the specification names it: llm.base_url when LLM_BASE_URL is unset.
OLLAMA_HOST = "OLLAMA_HOST"
OLLAMA_PORT = 11434


def ollama_base_url(value: str) -> str:
    """The OpenAI-compatible base URL of the Ollama ``OLLAMA_HOST`` names, written as
    Ollama reads it: ``host`` or ``host:port`` (http, port 11434 when none is given), or
    a URL (its scheme's port when none is given)."""
    text = value.strip().rstrip("/")
    bare = "://" not in text
    scheme, _, rest = ("http://" + text if bare else text).partition("://")
    host, slash, path = rest.partition("/")
    if bare and ":" not in host.rsplit("]", 1)[-1]:
        host = f"{host}:{OLLAMA_PORT}"
    path = path.removesuffix("v1").rstrip("/")
    return f"{scheme}://{host}{slash}{path}".rstrip("/") + "/v1"


def without_overrides(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` without the variables of ``ENV_OVERRIDES`` (its secrets kept): loaded
    with it, settings say what the file itself sets."""
    overrides = {*ENV_OVERRIDES, OLLAMA_HOST}
    return {name: value for name, value in environ.items() if name not in overrides}


def apply_env(raw: dict[str, Any], environ: Mapping[str, str]) -> None:
    """Write the overrides and secrets that ``environ`` sets into ``raw``."""
    for var, (path, key) in ENV_OVERRIDES.items():
        value = environ.get(var)
        if value is not None and value != "":
            _section(raw, path, f"environment {var}")[key] = value
    ollama = environ.get(OLLAMA_HOST, "").strip()
    if ollama and not environ.get("LLM_BASE_URL"):  # LLM_BASE_URL wins when both are set
        _section(raw, ("llm",), f"environment {OLLAMA_HOST}")["base_url"] = ollama_base_url(ollama)
    for var, (section, key) in ENV_SECRETS.items():
        value = environ.get(var)
        if value:
            _section(raw, (section,))[key] = value
    api_key = (
        environ.get("LLM_API_KEY")
        or (environ.get("ANTHROPIC_API_KEY") if _llm_provider(raw) == "anthropic" else None)
        or environ.get("OPENAI_API_KEY")
    )
    if api_key:
        _section(raw, ("llm",))["api_key"] = api_key
    if environ.get(USER_CONFIG_ENV):
        where = f"environment {USER_CONFIG_ENV}"
        _section(raw, USER_CONFIG_PATH, where)["token"] = environ[USER_CONFIG_ENV]


def _llm_provider(raw: dict[str, Any]) -> str:
    llm = raw.get("llm")
    return str(llm.get("provider", "openai")) if isinstance(llm, dict) else "openai"


def apply_secret_files(raw: dict[str, Any], where: str, environ: Mapping[str, str]) -> None:
    """Fill each secret not already set from the file its ``FILE_SECRETS`` key names.

    Relative paths are resolved against the directory of the configuration file.
    """
    base = Path(where).parent if where != "<defaults>" else Path(".")
    for section, path_key, secret_key in FILE_SECRETS:
        block = raw.get(section)
        if not isinstance(block, dict) or not block.get(path_key) or block.get(secret_key):
            continue
        file_path = Path(os.path.expanduser(str(block[path_key])))
        if not file_path.is_absolute():
            file_path = base / file_path
        try:
            value = file_path.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ConfigError(
                f"{where}: {section}.{path_key}: cannot read {file_path}: {exc.strerror}"
            ) from None
        if not value:
            raise ConfigError(f"{where}: {section}.{path_key}: {file_path} is empty")
        block[secret_key] = value
