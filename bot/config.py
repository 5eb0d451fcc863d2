"""Typed settings: ``config.yaml`` plus environment overrides.

``load_settings(environ, path)`` is the only entry point. Nothing here reads the
process environment by itself: callers pass it. Unknown keys, wrong types and
out-of-range values raise ``ConfigError`` naming the key and the file. Secrets
never come from ``config.yaml``: only from environment variables or from files
whose paths the configuration (or environment) names.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError


class ConfigError(Exception):
    """The configuration is invalid; the message names the key and the file."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# --- planning (seed 004: 9.1, 11.1.2, 11.2.2, 12.1.1) ---------------------------------


class ComplexityThreshold(_Section):
    simple: int = Field(100, ge=1)
    moderate: int = Field(500, ge=1)
    complex: int = Field(9999, ge=1)


class ReflectionSettings(_Section):
    enabled: bool = True
    trigger_on_error: bool = True
    trigger_interval: int = Field(3, ge=0, le=1000)
    depth: Literal["deep", "moderate", "shallow"] = "moderate"


class RevisionSettings(_Section):
    max_revisions: int = Field(3, ge=0, le=100)
    require_human_approval: bool = False
    approval_timeout: int = Field(3600, ge=1)


class CacheSettings(_Section):
    enabled: bool = True
    ttl: int = Field(86400, ge=0)


class EarlyTermination(_Section):
    enabled: bool = True
    max_consecutive_failures: int = Field(3, ge=1, le=100)


class ExecutionSettings(_Section):
    action_timeout: int = Field(60, ge=1)
    total_timeout: int = Field(3600, ge=1)
    max_parallel: int = Field(4, ge=1, le=64)
    early_termination: EarlyTermination = EarlyTermination()


class SecuritySettings(_Section):
    allowed_tools: tuple[str, ...] = ("*",)
    forbidden_tools: tuple[str, ...] = (
        "*_delete_*",
        "*_admin_*",
        "*_merge_pull_request",
        "*_merge_merge_request",
    )
    require_approval: tuple[str, ...] = ()


class PlanningSettings(_Section):
    enabled: bool = True
    strategy: Literal["chain_of_thought", "hierarchical", "simple"] = "chain_of_thought"
    max_subtasks: int = Field(100, ge=1, le=1000)
    decomposition_level: Literal["detailed", "moderate", "minimal"] = "moderate"
    auto_adjust_level: bool = True
    complexity_threshold: ComplexityThreshold = ComplexityThreshold()
    reflection: ReflectionSettings = ReflectionSettings()
    revision: RevisionSettings = RevisionSettings()
    cache: CacheSettings = CacheSettings()
    execution: ExecutionSettings = ExecutionSettings()
    security: SecuritySettings = SecuritySettings()


# --- server, storage, worker --------------------------------------------------------------


class ServerSettings(_Section):
    host: str = "127.0.0.1"
    port: int = Field(8080, ge=1, le=65535)
    max_body_bytes: int = Field(25 * 1024 * 1024, ge=1024)
    public_url: str = ""


class StorageSettings(_Section):
    backend: Literal["sqlite", "postgres"] = "sqlite"
    data_dir: Path = Path(".data")
    postgres_dsn: SecretStr | None = None


class WorkerSettings(_Section):
    max_workers: int = Field(2, ge=1, le=64)
    lease_seconds: int = Field(60, ge=5, le=3600)
    poll_interval: float = Field(0.5, gt=0, le=60)


# --- forges --------------------------------------------------------------------------------


class GitHubSettings(_Section):
    api_url: str = "https://api.github.com"
    app_id: str | None = None
    private_key_path: Path | None = None
    webhook_secret_file: Path | None = None
    # Filled from the environment or the files above, never from config.yaml.
    private_key: SecretStr | None = None
    webhook_secret: SecretStr | None = None
    token: SecretStr | None = None

    @property
    def enabled(self) -> bool:
        has_auth = (self.app_id is not None and self.private_key is not None) or (
            self.token is not None
        )
        return has_auth and self.webhook_secret is not None


class GitLabSettings(_Section):
    url: str = "https://gitlab.com"
    token_file: Path | None = None
    webhook_secret_file: Path | None = None
    token: SecretStr | None = None
    webhook_secret: SecretStr | None = None

    @property
    def enabled(self) -> bool:
        return self.token is not None and self.webhook_secret is not None


# --- llm -----------------------------------------------------------------------------------


class LLMSettings(_Section):
    provider: Literal["openai", "anthropic", "scripted"] = "openai"
    base_url: str = "http://127.0.0.1:11434/v1"
    model: str = "qwen2.5-coder"
    api_key: SecretStr | None = None
    script_path: Path | None = None
    request_timeout: float = Field(120.0, gt=0)
    max_retries: int = Field(3, ge=0, le=10)
    max_tokens_per_call: int = Field(4096, ge=64)
    max_tokens_per_task: int = Field(200_000, ge=1000)
    temperature: float = Field(0.2, ge=0, le=2)
    health_interval: float = Field(30.0, gt=0)


# --- issue interface -------------------------------------------------------------------------


class LabelSettings(_Section):
    trigger: str = "coding agent"
    processing: str = "coding agent processing"
    done: str = "coding agent done"
    help_needed: str = "coding agent help needed"
    paused: str = "coding agent paused"
    stopped: str = "coding agent stopped"
    awaiting_input: str = "coding agent waiting"


class CommandSettings(_Section):
    prefix: str = Field("/agent", min_length=1)


class BotIdentity(_Section):
    github_login: str = "coding-agent[bot]"
    gitlab_username: str = "coding-agent-bot"


class CommentSettings(_Section):
    language: Literal["auto", "en", "ja"] = "auto"
    edit_interval: float = Field(3.0, ge=0)
    max_length: int = Field(65_000, ge=1000, le=1_000_000)


# --- tools -------------------------------------------------------------------------------------


class SandboxSettings(_Section):
    allow_unsandboxed_DANGEROUS: bool = False
    network: bool = False
    timeout: int = Field(300, ge=1)
    cpu_seconds: int = Field(600, ge=1)
    memory_mb: int = Field(2048, ge=64)
    max_processes: int = Field(256, ge=8)
    max_file_mb: int = Field(100, ge=1)
    max_output_chars: int = Field(20_000, ge=1000)
    expose_paths: tuple[Path, ...] = ()


class WorkspaceSettings(_Section):
    branch_prefix: str = "agent/"
    max_file_bytes: int = Field(10 * 1024 * 1024, ge=1024)
    draft_change_requests: bool = True


class McpServer(_Section):
    name: str = Field(..., pattern=r"^[A-Za-z0-9_-]+$")
    command: str | None = None
    args: tuple[str, ...] = ()
    env: dict[str, str] = {}
    url: str | None = None
    headers: dict[str, str] = {}
    timeout: float = Field(30.0, gt=0)


class Settings(_Section):
    """Every setting of the bot; ``config.yaml`` documents each one."""

    server: ServerSettings = ServerSettings()
    storage: StorageSettings = StorageSettings()
    worker: WorkerSettings = WorkerSettings()
    github: GitHubSettings = GitHubSettings()
    gitlab: GitLabSettings = GitLabSettings()
    llm: LLMSettings = LLMSettings()
    labels: LabelSettings = LabelSettings()
    commands: CommandSettings = CommandSettings()
    bot: BotIdentity = BotIdentity()
    comments: CommentSettings = CommentSettings()
    planning: PlanningSettings = PlanningSettings()
    sandbox: SandboxSettings = SandboxSettings()
    workspace: WorkspaceSettings = WorkspaceSettings()
    mcp_servers: tuple[McpServer, ...] = ()
    source_path: Path | None = None

    @property
    def data_dir(self) -> Path:
        return self.storage.data_dir


# --- loading ------------------------------------------------------------------------------------

# Keys that hold secrets: refused in config.yaml, read from the environment or named files.
_SECRET_KEYS: dict[tuple[str, str], str] = {
    ("github", "private_key"): "GITHUB_PRIVATE_KEY or github.private_key_path",
    ("github", "webhook_secret"): "GITHUB_WEBHOOK_SECRET or github.webhook_secret_file",
    ("github", "token"): "GITHUB_TOKEN",
    ("gitlab", "token"): "GITLAB_TOKEN or gitlab.token_file",
    ("gitlab", "webhook_secret"): "GITLAB_WEBHOOK_SECRET or gitlab.webhook_secret_file",
    ("llm", "api_key"): "LLM_API_KEY (or OPENAI_API_KEY / ANTHROPIC_API_KEY)",
    ("storage", "postgres_dsn"): "BOT_POSTGRES_DSN",
}

# Plain environment overrides: variable -> (section path, key, kind).
_ENV_OVERRIDES: dict[str, tuple[tuple[str, ...], str]] = {
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
}

_ENV_SECRETS: dict[str, tuple[str, str]] = {
    "GITHUB_PRIVATE_KEY": ("github", "private_key"),
    "GITHUB_WEBHOOK_SECRET": ("github", "webhook_secret"),
    "GITHUB_TOKEN": ("github", "token"),
    "GITLAB_TOKEN": ("gitlab", "token"),
    "GITLAB_WEBHOOK_SECRET": ("gitlab", "webhook_secret"),
    "BOT_POSTGRES_DSN": ("storage", "postgres_dsn"),
}

_FILE_SECRETS: tuple[tuple[str, str, str], ...] = (
    ("github", "private_key_path", "private_key"),
    ("github", "webhook_secret_file", "webhook_secret"),
    ("gitlab", "token_file", "token"),
    ("gitlab", "webhook_secret_file", "webhook_secret"),
)

DEFAULT_CONFIG_NAME = "config.yaml"


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
    where = str(config_path) if config_path else "<defaults>"
    raw = _read_yaml(config_path) if config_path else {}
    _refuse_inline_secrets(raw, where)
    _apply_env(raw, environ)
    _apply_secret_files(raw, where, environ)
    if config_path is not None:
        raw["source_path"] = str(config_path)
    try:
        settings = Settings.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(_format_errors(exc, where)) from None
    _check_consistency(settings, where)
    return settings


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the configuration file: {exc.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of sections")
    return data


def _refuse_inline_secrets(raw: dict[str, Any], where: str) -> None:
    for (section, key), source in _SECRET_KEYS.items():
        block = raw.get(section)
        if isinstance(block, dict) and block.get(key) not in (None, ""):
            raise ConfigError(
                f"{where}: {section}.{key}: secrets are not read from the configuration file; "
                f"set {source}"
            )


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


def _apply_env(raw: dict[str, Any], environ: Mapping[str, str]) -> None:
    for var, (path, key) in _ENV_OVERRIDES.items():
        value = environ.get(var)
        if value is not None and value != "":
            _section(raw, path, f"environment {var}")[key] = value
    for var, (section, key) in _ENV_SECRETS.items():
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


def _llm_provider(raw: dict[str, Any]) -> str:
    llm = raw.get("llm")
    return str(llm.get("provider", "openai")) if isinstance(llm, dict) else "openai"


def _apply_secret_files(raw: dict[str, Any], where: str, environ: Mapping[str, str]) -> None:
    base = Path(where).parent if where != "<defaults>" else Path(".")
    for section, path_key, secret_key in _FILE_SECRETS:
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


def _format_errors(exc: ValidationError, where: str) -> str:
    lines = [f"{where}: invalid configuration:"]
    for err in exc.errors():
        key = ".".join(str(p) for p in err["loc"])
        if err["type"] == "extra_forbidden":
            lines.append(f"  {key}: unknown key (check the spelling against config.yaml)")
        else:
            lines.append(f"  {key}: {err['msg']} (got {err.get('input')!r})")
    return "\n".join(lines)


def _check_consistency(settings: Settings, where: str) -> None:
    if settings.storage.backend == "postgres" and settings.storage.postgres_dsn is None:
        raise ConfigError(f"{where}: storage.backend is postgres: set BOT_POSTGRES_DSN")
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
            "GitLab is disabled: set GITLAB_TOKEN and GITLAB_WEBHOOK_SECRET (and GITLAB_URL)"
        )
    return lines


def secret_values(settings: Settings) -> tuple[str, ...]:
    """Every configured secret value (and MCP env / header values), for redaction."""
    s = settings
    secrets = [s.github.private_key, s.github.webhook_secret, s.github.token, s.gitlab.token]
    secrets += [s.gitlab.webhook_secret, s.llm.api_key, s.storage.postgres_dsn]
    values = [v.get_secret_value() for v in secrets if v is not None]
    for server in s.mcp_servers:
        values += [*server.env.values(), *server.headers.values()]
    return tuple(v for v in values if v)


def masked(settings: Settings) -> dict[str, Any]:
    """The effective configuration as plain data, secrets shown as ``***``."""
    data = settings.model_dump(mode="json")
    for section, key in _SECRET_KEYS:
        block = data.get(section)
        if isinstance(block, dict) and block.get(key):
            block[key] = "***"
    for server in data.get("mcp_servers", []):
        server["env"] = {k: "***" for k in server.get("env", {})}
        server["headers"] = {k: "***" for k in server.get("headers", {})}
    return data
