"""A repository's own ``.agent.yaml`` on its default branch.

A repository may name its set-up commands and its quality gate (lint and test
commands), give the planner extra instructions, tighten the tool policy, ask for
network in its sandbox and set ``planning:`` keys (bounded by ``bot.config.overrides``
when a task starts). It can never loosen the server's policy and has no key for
server settings or secrets: unknown keys are errors. Parsing and merging are pure;
``load_repo_config`` is the one function that reads from the forge.
"""

from __future__ import annotations

import logging
import shlex
from dataclasses import dataclass
from typing import Any

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from bot.config import SecuritySettings, Settings
from bot.events import RepoRef
from bot.forges.base import Forge, NotFound
from bot.sandbox.setup_plan import Argv
from bot.tools.ci_includes import load_ci_includes
from bot.tools.policy import ToolPolicy
from bot.tools.web_policy import RepoWeb

log = logging.getLogger(__name__)

REPO_CONFIG_PATH = ".agent.yaml"
MAX_CONFIG_BYTES = 64 * 1024
MAX_INSTRUCTIONS_CHARS = 8_000


class RepoConfigError(Exception):
    """The repository's ``.agent.yaml`` is invalid; the message says what to fix."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def command_argv(value: object) -> Argv:
    """One command: an argv list as is, or a string split like a shell would split it (no
    shell runs it: ``["sh", "-c", "..."]`` asks for one, inside the sandbox)."""
    if isinstance(value, str):
        try:
            argv = shlex.split(value)
        except ValueError as exc:
            raise ValueError(f"cannot split {value!r}: {exc}") from None
    elif isinstance(value, list | tuple) and all(isinstance(p, str) for p in value):
        argv = list(value)
    else:
        raise ValueError("one command: a string or a list of strings")
    if not argv or not argv[0].strip():
        raise ValueError("the command must not be empty")
    return tuple(argv)


class QualityGate(_Strict):
    """The repository's lint and test commands, each one argv (no shell runs them).

    A string is split like a shell would split it. The gate replaces detection: a
    step it leaves out is not run.
    """

    lint: Argv | None = None
    test: Argv | None = None

    @field_validator("lint", "test", mode="before")
    @classmethod
    def _command(cls, value: object) -> Argv | None:
        return None if value is None else command_argv(value)

    @model_validator(mode="after")
    def _some_step(self) -> QualityGate:
        if self.lint is None and self.test is None:
            raise ValueError("name a lint command, a test command or both")
        return self


class RepoPolicy(_Strict):
    forbidden_tools: tuple[str, ...] = ()
    require_approval: tuple[str, ...] = ()
    require_approval_paths: tuple[str, ...] = ()  # added to the server's, never instead
    allowed_tools: tuple[str, ...] | None = None


class RepoSandbox(_Strict):
    network: bool | None = None


MAX_SETUP_COMMANDS = 20


class RepoConfig(_Strict):
    """What a repository may say about how the bot works on it.

    ``setup``: the commands that prepare a fresh clone (run in the sandbox, with network);
    absent: detected from the repository's files; ``[]``: no set-up at all."""

    setup: tuple[Argv, ...] | None = Field(None, max_length=MAX_SETUP_COMMANDS)
    quality_gate: QualityGate | None = None
    instructions: str = Field("", max_length=MAX_INSTRUCTIONS_CHARS)
    policy: RepoPolicy = RepoPolicy()
    sandbox: RepoSandbox = RepoSandbox()
    web: RepoWeb = RepoWeb()  # narrows the server's web tools (bot/tools/web_policy.py)
    lfs: bool = False  # LFS content in the clone, from the forge's own endpoint (gitcmd)
    # Checked against the server's bounds per task (bot.config.overrides.merge_planning).
    planning: dict[str, Any] = {}

    @field_validator("setup", mode="before")
    @classmethod
    def _setup(cls, value: object) -> tuple[Argv, ...] | None:
        if value is None:
            return None
        if not isinstance(value, list | tuple):
            raise ValueError("a list of commands, each a string or a list of strings")
        return tuple(command_argv(item) for item in value)


@dataclass(frozen=True, slots=True)
class EffectivePolicy:
    """The server policy tightened by the repository, and the sandbox's network."""

    policy: ToolPolicy
    network: bool
    notes: tuple[str, ...] = ()


def server_policy(security: SecuritySettings) -> ToolPolicy:
    """The tool policy of ``planning.security``."""
    return ToolPolicy(
        allowed=security.allowed_tools,
        forbidden=security.forbidden_tools,
        require_approval=security.require_approval,
        approval_paths=security.require_approval_paths,
    )


def parse_repo_config(text: str) -> RepoConfig:
    """Parse ``.agent.yaml``; every problem is a ``RepoConfigError`` naming the key."""
    if len(text.encode("utf-8")) > MAX_CONFIG_BYTES:
        raise RepoConfigError(f"{REPO_CONFIG_PATH} is larger than {MAX_CONFIG_BYTES} bytes")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise RepoConfigError(f"{REPO_CONFIG_PATH} is not valid YAML: {exc}") from None
    if data is None:
        return RepoConfig()
    if not isinstance(data, dict):
        raise RepoConfigError(f"{REPO_CONFIG_PATH}: the top level must be a mapping of keys")
    try:
        return RepoConfig.model_validate(data)
    except ValidationError as exc:
        raise RepoConfigError(_describe(exc)) from None


def _describe(exc: ValidationError) -> str:
    server_keys = set(Settings.model_fields)
    lines = [f"{REPO_CONFIG_PATH} is invalid:"]
    for err in exc.errors():
        key = ".".join(str(part) for part in err["loc"])
        if err["type"] == "extra_forbidden" and len(err["loc"]) == 1 and key in server_keys:
            lines.append(f"  {key}: a server setting; a repository cannot change it")
        elif err["type"] == "extra_forbidden":
            lines.append(f"  {key}: unknown key")
        else:
            lines.append(f"  {key}: {err['msg']}")
    allowed = ", ".join(RepoConfig.model_fields)
    lines.append(f"  (allowed top-level keys: {allowed})")
    return "\n".join(lines)


def apply_repo_config(settings: Settings, repo: RepoConfig) -> EffectivePolicy:
    """The server policy tightened by ``repo``; network only if both allow it."""
    rules = repo.policy
    policy = server_policy(settings.planning.security).tightened(
        forbidden=rules.forbidden_tools,
        require_approval=rules.require_approval,
        allowed=rules.allowed_tools,
        approval_paths=rules.require_approval_paths,
    )
    notes: list[str] = []
    # The agent's commands get network only when the server and the repository both allow
    # it; set-up always has it (bot/sandbox/setup.py).
    network = settings.sandbox.network and repo.sandbox.network is True
    if repo.sandbox.network is True and not settings.sandbox.network:
        notes.append(
            f"{REPO_CONFIG_PATH} asks for network in the sandbox, "
            "but this server does not allow it (sandbox.network is false): ignored"
        )
    for note in notes:
        log.info("%s", note)
    return EffectivePolicy(policy=policy, network=network, notes=tuple(notes))


async def load_repo_config(forge: Forge, repo: RepoRef, ref: str) -> RepoConfig | None:
    """Read and parse ``.agent.yaml`` at ``ref``; None when the repository has none and
    its pipeline includes no file of its own.

    The files a GitLab pipeline includes from the repository (``ci_includes``) join
    ``policy.require_approval_paths``: they are CI definitions too.
    Raises ``RepoConfigError`` for an invalid file; other forge errors propagate.
    """
    config = await _read_repo_config(forge, repo, ref)
    included = await load_ci_includes(forge, repo, ref)
    if not included:
        return config
    config = config or RepoConfig()
    paths = config.policy.require_approval_paths + included
    policy = config.policy.model_copy(update={"require_approval_paths": paths})
    return config.model_copy(update={"policy": policy})


async def _read_repo_config(forge: Forge, repo: RepoRef, ref: str) -> RepoConfig | None:
    try:
        found = await forge.get_file(repo, REPO_CONFIG_PATH, ref=ref)
    except NotFound:
        return None
    try:
        text = found.content.decode("utf-8")
    except UnicodeDecodeError:
        raise RepoConfigError(f"{REPO_CONFIG_PATH} is not UTF-8 text") from None
    return parse_repo_config(text)
