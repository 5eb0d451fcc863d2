"""The settings schema: frozen pydantic models for every section of ``config.yaml``.

Each section forbids unknown keys and checks types and ranges; ``Settings`` gathers
them. The larger sections have modules of their own (``planning``, ``server``,
``forges``, ``sandbox``, ``web``, ``observability``); the model, the issue interface,
the rounds after the change request and the MCP servers are here. ``ConfigError`` is
the one error type for a configuration that does not fit. Nothing here reads files or
the environment (``bot.config.load`` does).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from bot.config.forges import GitHubSettings, GitLabSettings
from bot.config.observability import ObservabilitySettings
from bot.config.planning import PlanningSettings
from bot.config.sandbox import SandboxSettings as SandboxSettings
from bot.config.sandbox import WorkspaceSettings
from bot.config.server import ServerSettings, StorageSettings, WorkerSettings
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
    """Who the bot is on each forge: the account ids decide (empty: asked of the forge at
    start-up, ``bot.runtime``); a login only while its id is unknown, compared exactly."""

    github_login: str = "coding-agent[bot]"
    gitlab_username: str = "coding-agent-bot"
    github_id: str = Field("", pattern=r"^[0-9]*$")
    gitlab_id: str = Field("", pattern=r"^[0-9]*$")


class CommentSettings(_Section):
    language: Literal["auto", "en", "ja"] = "auto"
    edit_interval: float = Field(3.0, ge=0)
    max_length: int = Field(65_000, ge=1000, le=1_000_000)


# --- tools -------------------------------------------------------------------------------------


# --- after the change request (CI results and review rounds) ---------------------------------


class CiSettings(_Section):
    """The CI results of the bot's own change requests."""

    settle_seconds: int = Field(60, ge=0, le=86_400)  # quiet time before one decision
    max_fix_rounds: int = Field(3, ge=0, le=20)  # CI fix rounds per change request
    poll_seconds: int = Field(600, ge=30, le=86_400)  # re-read unsettled checks (lost events)
    # GitHub Apps (their slugs) besides GitHub Actions whose failing checks start a CI fix
    # round; any other app's or person's check is reported, never acted on
    trusted_apps: tuple[Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9-]{0,99}$")], ...] = ()


class ReviewSettings(_Section):
    """Review rounds on the bot's own change requests."""

    quiet_seconds: int = Field(60, ge=0, le=86_400)  # collect comments until this much quiet
    resolve_threads: bool = True  # resolve the threads the bot addressed


class EvalSettings(_Section):
    """Where the dashboard and ``GET /api/eval/runs`` find ``bot eval run``'s run folders."""

    runs_dir: Path | None = None  # None: data_dir/eval-runs


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
    eval: EvalSettings = EvalSettings()
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

    @property
    def eval_runs_dir(self) -> Path:
        """The folder of eval run folders: ``eval.runs_dir``, else data_dir/eval-runs."""
        return self.eval.runs_dir or self.storage.data_dir / "eval-runs"
