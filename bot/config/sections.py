"""The settings schema: frozen pydantic models for every section of ``config.yaml``.

Each section forbids unknown keys and checks types and ranges; ``Settings`` gathers
them. ``ConfigError`` is the one error type for a configuration that does not fit.
Nothing here reads files or the environment (``bot.config.load`` does).
"""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from bot.config.observability import ObservabilitySettings
from bot.config.web import WebSettings


class ConfigError(Exception):
    """The configuration is invalid; the message names the key and the file.
    ``problems``: (key, what is wrong) each, when the error knows them one by one."""

    def __init__(self, message: str, problems: tuple[tuple[str, str], ...] = ()) -> None:
        super().__init__(message)
        self.problems = problems


def is_http_url(value: str) -> bool:
    """Whether ``value`` is an http:// or https:// URL with a host."""
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 (a port that is not a number raises here)
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)


class _Section(BaseModel):
    # Errors never carry the input: by validation, secrets are merged into it.
    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)


# --- planning (docs/planning.md#settings) ----------------------------------------------


class ComplexityThreshold(_Section):
    simple: int = Field(100, ge=1)
    moderate: int = Field(500, ge=1)
    complex: int = Field(9999, ge=1)


class ReflectionSettings(_Section):
    enabled: bool = True
    trigger_on_error: bool = True
    trigger_interval: int = Field(3, ge=0, le=1000)
    depth: Literal["deep", "moderate", "shallow"] = "moderate"
    # A result nobody could judge (the model's reflection unreadable twice, the bot's own
    # check not bearing it out): ask the author, or judge it failed and revise the plan.
    unjudged: Literal["ask", "revise"] = "ask"


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


class HistorySettings(_Section):
    """The calls the model is shown (docs/planning.md#history): past ``max_turns`` calls,
    the older ones but the last ``keep_turns`` are folded into one summary the model
    writes (a call and its result are one turn, never split); 0: never folded."""

    max_turns: int = Field(30, ge=0, le=10000)
    keep_turns: int = Field(10, ge=1, le=10000)

    @model_validator(mode="after")
    def _keeps_fewer_than_the_bound(self) -> HistorySettings:
        if self.max_turns and self.keep_turns >= self.max_turns:
            raise ValueError("planning.history.keep_turns must be below max_turns")
        return self


CI_PATHS = (
    ".github/workflows/**",
    ".github/actions/**",
    # Actions a workflow runs from the repository (uses: ./path): composite actions too.
    "action.yml",
    "action.yaml",
    "**/action.yml",
    "**/action.yaml",
    ".gitlab-ci.yml",
    # GitLab: files a pipeline includes (include: local:) by the usual names; the ones
    # .gitlab-ci.yml names are added per task (bot/tools/ci_includes.py).
    "*.gitlab-ci.yml",
    "*.gitlab-ci.yaml",
    ".gitlab/**",
    ".circleci/**",
    "Jenkinsfile",
    "azure-pipelines.yml",
    ".buildkite/**",
)


class SecuritySettings(_Section):
    allowed_tools: tuple[str, ...] = ("*",)
    forbidden_tools: tuple[str, ...] = (
        "*_delete_*",
        "*_admin_*",
        "*_merge_pull_request",
        "*_merge_merge_request",
    )
    require_approval: tuple[str, ...] = ()
    # Writing a CI definition waits for /agent approve: pushed, it would run with the
    # repository's CI secrets (docs/planning.md#tool-policy).
    require_approval_paths: tuple[str, ...] = CI_PATHS


class BudgetSettings(_Section):
    # US dollars a task may spend on model calls, priced by llm.prices; none: no limit.
    max_cost: float | None = Field(None, gt=0)


class UserConfigApiSettings(_Section):
    """Per-person ``planning`` overrides from a user-config service (docs/planning.md)."""

    enabled: bool = False
    # GET this URL; {user} is the requesting person's login, {forge} github or gitlab.
    url: str = ""
    timeout: float = Field(5.0, gt=0, le=60)
    cache_ttl: int = Field(300, ge=0, le=86400)
    # Sent as a bearer token; only from BOT_USER_CONFIG_TOKEN, never from config.yaml.
    token: SecretStr | None = None

    @model_validator(mode="after")
    def _url_names_the_person(self) -> UserConfigApiSettings:
        if self.enabled and not self.url.startswith(("http://", "https://")):
            raise ValueError("planning.user_config_api.url must be an http(s) URL when enabled")
        if self.enabled and "{user}" not in self.url:
            raise ValueError("planning.user_config_api.url must contain {user}")
        return self


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
    history: HistorySettings = HistorySettings()
    security: SecuritySettings = SecuritySettings()
    budget: BudgetSettings = BudgetSettings()
    user_config_api: UserConfigApiSettings = UserConfigApiSettings()


# --- server, storage, worker --------------------------------------------------------------


MIN_API_TOKEN_CHARS = 32  # a guessed token must be out of reach even without throttling


class ServerSettings(_Section):
    host: str = "127.0.0.1"
    port: int = Field(8080, ge=1, le=65535)
    max_body_bytes: int = Field(25 * 1024 * 1024, ge=1024)
    # Webhook bodies being read at once reserve their Content-Length (max_body_bytes when
    # they declare none) from this budget; a request that does not fit gets 503 at once.
    max_body_bytes_in_flight: int = Field(64 * 1024 * 1024, ge=1024)
    # Seconds a client has to send its whole body; a slower one gets 408.
    body_timeout: float = Field(10.0, gt=0, le=3600)
    public_url: str = ""
    # The REST API under /api (and the dashboard) answer only with this bearer token
    # (BOT_API_TOKEN); without it /api answers 404. Actions taken with it are recorded
    # as api_token_name's.
    api_token: SecretStr | None = None
    api_token_name: str = Field("api", min_length=1, max_length=64, pattern=r"^[\w .@-]+$")
    # Seconds a client has, from connecting (or from its last answer on a kept-alive
    # connection), to send a request's line and headers; a slower one is closed.
    header_timeout: float = Field(10.0, gt=0, le=300)
    # Seconds an idle kept-alive connection stays open between requests.
    keep_alive_timeout: int = Field(5, ge=1, le=300)
    # Connections open at once (and requests in hand); beyond it a connection gets 503
    # and is closed. Lowered at start to fit the process's open-file limit.
    limit_concurrency: int = Field(1000, ge=16, le=1_000_000)
    # The reverse proxies (addresses or networks) whose X-Forwarded-For and
    # X-Forwarded-Proto are believed; empty: nobody's (the peer is the client).
    forwarded_allow_ips: tuple[str, ...] = ()
    # Failed logins and wrong bearer tokens one client may send within
    # auth_failure_window seconds; beyond them it gets 429 with Retry-After.
    auth_max_failures: int = Field(10, ge=1, le=10_000)
    auth_failure_window: float = Field(300.0, gt=0, le=86_400)

    @field_validator("forwarded_allow_ips")
    @classmethod
    def _addresses(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for item in value:
            try:
                ipaddress.ip_network(item, strict=False)
            except ValueError:
                raise ValueError(
                    f"{item!r} is not an IP address or network (e.g. 10.0.0.5, 10.0.0.0/8)"
                ) from None
        return value

    def api_token_problem(self) -> str | None:
        """Why ``api_token`` may not serve the API and dashboard (None: it may, or unset)."""
        if self.api_token is None:
            return None
        length = len(self.api_token.get_secret_value())
        if 0 < length < MIN_API_TOKEN_CHARS:
            return (
                f"BOT_API_TOKEN (server.api_token) is {length} characters long; it must have "
                f"at least {MIN_API_TOKEN_CHARS} (make one with: python3 -c "
                "'import secrets; print(secrets.token_urlsafe(32))')"
            )
        return None

    @model_validator(mode="after")
    def _one_body_fits_the_budget(self) -> ServerSettings:
        if self.max_body_bytes_in_flight < self.max_body_bytes:
            raise ValueError(
                f"server.max_body_bytes_in_flight ({self.max_body_bytes_in_flight}) must be "
                f"at least server.max_body_bytes ({self.max_body_bytes})"
            )
        return self


class StorageSettings(_Section):
    backend: Literal["sqlite", "postgres"] = "sqlite"
    data_dir: Path = Path(".data")
    postgres_dsn: SecretStr | None = None
    # The most one task's run directory (data_dir/runs/<task>) may hold: command and
    # set-up logs and artifacts stop there (the record of the run is always written).
    run_dir_mb: int = Field(256, ge=1)
    # Run directories of tasks that ended this many days ago are deleted (0: never).
    runs_retention_days: float = Field(30.0, ge=0)


class WorkerSettings(_Section):
    max_workers: int = Field(2, ge=1, le=64)
    lease_seconds: int = Field(60, ge=5, le=3600)
    poll_interval: float = Field(0.5, gt=0, le=60)
    # A run that makes no progress (no store, forge, model or tool call starts or ends)
    # for this long is stuck: the watchdog logs what it awaits and retries it.
    stall_seconds: int = Field(1200, ge=1, le=86400)
    # GitHub App mode: on start, how far back to look for webhook deliveries that failed
    # while the bot was down, to ask GitHub for them again (0: never). GitHub keeps
    # deliveries for three days.
    redeliver_hours: float = Field(24.0, ge=0, le=72)


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


class WebhookSecretSource(_Section):
    """Where one project's or group's webhook secret comes from: a file or a variable."""

    file: Path | None = None
    env: str | None = Field(None, min_length=1)
    # Filled from ``file`` or ``env`` when the settings are loaded, never from config.yaml.
    secret: SecretStr | None = None

    @model_validator(mode="after")
    def _one_source(self) -> WebhookSecretSource:
        if (self.file is None) == (self.env is None):
            raise ValueError("give exactly one of file or env")
        return self


class GitLabSettings(_Section):
    url: str = "https://gitlab.com"
    token_file: Path | None = None
    webhook_secret_file: Path | None = None
    token: SecretStr | None = None
    webhook_secret: SecretStr | None = None
    # Project path or group path (a prefix of project paths) -> its own secret token.
    webhook_secrets: dict[str, WebhookSecretSource] = {}

    @property
    def enabled(self) -> bool:
        has_secret = self.webhook_secret is not None or bool(self.webhook_secrets)
        return self.token is not None and has_secret

    def scoped_webhook_secrets(self) -> dict[str, str]:
        """``webhook_secrets`` as path -> secret value (the entries whose secret is loaded)."""
        return {
            path: source.secret.get_secret_value()
            for path, source in self.webhook_secrets.items()
            if source.secret is not None
        }


# --- llm -----------------------------------------------------------------------------------


class ModelPrice(_Section):
    """US dollars per million tokens (bot/llm/prices.py)."""

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cached_input: float | None = Field(None, ge=0)
    cache_write: float | None = Field(None, ge=0)


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
    # the longest wait before a task paused by an outage tries again (the wait doubles from
    # health_interval each time the model fails the same way right after a resume)
    max_pause_interval: float = Field(1800.0, gt=0)
    # auto: probe the endpoint once (JSON schema, the server's own schema form, JSON mode,
    # instructions) and keep what works; or pin one mode
    structured_output: Literal["auto", "json_schema", "json_object", "none"] = "auto"
    # Model name -> price; wins over the published prices built in (bot/llm/prices.py).
    prices: dict[str, ModelPrice] = Field(default_factory=dict)
    # The execution phase's call as the endpoint's own function call (OpenAI tools,
    # Anthropic tool_use): auto falls back to the JSON document when the endpoint refuses.
    native_tools: Literal["auto", "on", "off"] = "auto"
    prompt_cache: bool = True  # Anthropic: mark the stable prompt prefix cacheable

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not is_http_url(value):
            raise ValueError("must be an http(s) URL with a host, e.g. http://127.0.0.1:11434/v1")
        return value

    @field_validator("model")
    @classmethod
    def _named(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must name the model (e.g. qwen2.5-coder, gpt-4o-mini)")
        return value


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
    setup_timeout: int = Field(900, ge=1)  # the whole set-up of a fresh clone
    cpu_seconds: int = Field(600, ge=1)
    memory_mb: int = Field(2048, ge=64)
    max_processes: int = Field(256, ge=8)
    max_file_mb: int = Field(100, ge=1)
    tmp_mb: int = Field(512, ge=8)
    shm_mb: int = Field(64, ge=1)  # /dev/shm (a tmpfs: memory); the rest of /dev is read-only
    workspace_mb: int = Field(4096, ge=16)
    workspace_files: int = Field(200_000, ge=100)  # files and folders, .git included
    # The most one command may write into the workspace: held in memory (a tmpfs under
    # an overlay) until the command ends, then written to disk.
    write_mb: int = Field(1024, ge=1)
    max_output_chars: int = Field(20_000, ge=1000)
    expose_paths: tuple[Path, ...] = ()
    # hosts a command with network may reach besides the package indexes the host's pip
    # and npm configuration names: host, host:port, *.domain, or * (any public host)
    egress_allow: tuple[
        Annotated[str, Field(pattern=r"^(\*|(\*\.)?[A-Za-z0-9][A-Za-z0-9.-]*)(:[0-9]{1,5})?$")], ...
    ] = ()


class WorkspaceSettings(_Section):
    branch_prefix: str = "agent/"
    max_file_bytes: int = Field(10 * 1024 * 1024, ge=1024)
    draft_change_requests: bool = True
    ready_when_green: bool = False  # mark the draft ready when the gate and every check passed


# --- after the change request (CI results and review rounds) ---------------------------------


class CiSettings(_Section):
    """The CI results of the bot's own change requests."""

    settle_seconds: int = Field(60, ge=0, le=86_400)  # quiet time before one decision
    max_fix_rounds: int = Field(3, ge=0, le=20)  # CI fix rounds per change request
    poll_seconds: int = Field(600, ge=30, le=86_400)  # re-read unsettled checks (lost events)


class ReviewSettings(_Section):
    """Review rounds on the bot's own change requests."""

    quiet_seconds: int = Field(60, ge=0, le=86_400)  # collect comments until this much quiet
    resolve_threads: bool = True  # resolve the threads the bot addressed


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
    ci: CiSettings = CiSettings()
    review: ReviewSettings = ReviewSettings()
    mcp_servers: tuple[McpServer, ...] = ()
    web: WebSettings = WebSettings()
    observability: ObservabilitySettings = ObservabilitySettings()
    source_path: Path | None = None

    @model_validator(mode="after")
    def _stall_bound_outlasts_one_step(self) -> Settings:
        sandbox = self.sandbox
        longest = max(sandbox.timeout, sandbox.setup_timeout, self.llm.request_timeout)
        if self.worker.stall_seconds <= longest:
            raise ValueError(
                f"worker.stall_seconds ({self.worker.stall_seconds}) must exceed the longest "
                f"single step a run may wait on: sandbox.timeout ({sandbox.timeout}), "
                f"sandbox.setup_timeout ({sandbox.setup_timeout}) and "
                f"llm.request_timeout ({self.llm.request_timeout:g})"
            )
        return self

    @property
    def data_dir(self) -> Path:
        return self.storage.data_dir
