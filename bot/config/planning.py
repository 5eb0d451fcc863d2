"""The ``planning:`` section (docs/planning.md#settings): how the agent plans, reflects,
revises and executes, the tool policy (``security``), the cost budget and the per-person
user-config service. Its keys are the ones a repository's ``.agent.yaml`` and a person's
keys may override within bounds (``bot.config.overrides``). Pure: nothing here reads
files or the environment.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator


class _Section(BaseModel):
    # Errors never carry the input: by validation, secrets are merged into it.
    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)


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
