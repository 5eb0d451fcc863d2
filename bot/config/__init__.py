"""Typed settings: ``config.yaml`` plus environment overrides (the public import surface).

``load_settings(environ, path)`` is the only entry point. Nothing here reads the
process environment by itself: callers pass it. Unknown keys, wrong types and
out-of-range values raise ``ConfigError`` naming the key and the file. Secrets
never come from ``config.yaml``: only from environment variables or from files
whose paths the configuration (or environment) names.

This module only re-exports; the code lives in one module per job:

- ``bot.config.sections``: the pydantic models of every section, and ``ConfigError``;
- ``bot.config.env``: environment variables and secret sources merged into the raw data;
- ``bot.config.host_only``: the keys only the file on the host may change (not the API);
- ``bot.config.sources``: the secret sources a candidate from the API may name;
- ``bot.config.load``: finding, reading and validating the file (``load_settings``);
- ``bot.config.web``: the ``web:`` section (the optional web tools);
- ``bot.config.observability``: the ``observability:`` section (traces);
- ``bot.config.views``: views of loaded settings (``disabled_forges``, ``secret_values``,
  ``masked``).

Import from ``bot.config``; the split is an implementation detail.
"""

from __future__ import annotations

from bot.config.env import without_overrides
from bot.config.host_only import HOST_ONLY, host_only_changes
from bot.config.load import (
    DEFAULT_CONFIG_NAME,
    config_path_from,
    load_settings,
    previous_config_path,
    problems_of,
    settings_from_text,
)
from bot.config.observability import ObservabilitySettings, TracesSettings
from bot.config.sections import (
    BotIdentity,
    CacheSettings,
    CiSettings,
    CommandSettings,
    CommentSettings,
    ComplexityThreshold,
    ConfigError,
    EarlyTermination,
    ExecutionSettings,
    GitHubSettings,
    GitLabSettings,
    LabelSettings,
    LLMSettings,
    McpServer,
    PlanningSettings,
    ReflectionSettings,
    ReviewSettings,
    RevisionSettings,
    SandboxSettings,
    SecuritySettings,
    ServerSettings,
    Settings,
    StorageSettings,
    UserConfigApiSettings,
    WebhookSecretSource,
    WorkerSettings,
    WorkspaceSettings,
)
from bot.config.views import (
    CurrentSettings,
    bot_names,
    disabled_forges,
    masked,
    secret_values,
    secrets_in_file,
    settings_digest,
)
from bot.config.web import WebFetchSettings, WebSearchSettings, WebSettings

__all__ = [
    "DEFAULT_CONFIG_NAME",
    "HOST_ONLY",
    "BotIdentity",
    "CacheSettings",
    "CiSettings",
    "CommandSettings",
    "CommentSettings",
    "ComplexityThreshold",
    "ConfigError",
    "CurrentSettings",
    "EarlyTermination",
    "ExecutionSettings",
    "GitHubSettings",
    "GitLabSettings",
    "LLMSettings",
    "LabelSettings",
    "McpServer",
    "ObservabilitySettings",
    "PlanningSettings",
    "ReflectionSettings",
    "ReviewSettings",
    "RevisionSettings",
    "SandboxSettings",
    "SecuritySettings",
    "ServerSettings",
    "Settings",
    "StorageSettings",
    "TracesSettings",
    "UserConfigApiSettings",
    "WebFetchSettings",
    "WebSearchSettings",
    "WebSettings",
    "WebhookSecretSource",
    "WorkerSettings",
    "WorkspaceSettings",
    "bot_names",
    "config_path_from",
    "disabled_forges",
    "host_only_changes",
    "load_settings",
    "masked",
    "previous_config_path",
    "problems_of",
    "secret_values",
    "secrets_in_file",
    "settings_digest",
    "settings_from_text",
    "without_overrides",
]
