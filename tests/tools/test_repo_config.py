"""The per-repository ``.agent.yaml``: parsing, merging with the server, loading."""

from __future__ import annotations

import logging

import pytest

from bot.config import PlanningSettings, SandboxSettings, SecuritySettings, Settings
from bot.forges.base import AccessDenied
from bot.tools.repo_config import (
    RepoConfig,
    RepoConfigError,
    apply_repo_config,
    load_repo_config,
    parse_repo_config,
)
from tests.fakes import FakeForge

FULL = """
quality_gate:
  lint: "mypy --strict 'src dir'"
  test: [pytest, -q]
instructions: |
  Use type hints. Keep functions short.
policy:
  forbidden_tools: ["*_push_files"]
  require_approval: ["*_create_pull_request"]
  allowed_tools: ["github_*", "fs_*"]
sandbox:
  network: true
"""


def _settings(*, network: bool = False, **security: tuple[str, ...]) -> Settings:
    return Settings(
        sandbox=SandboxSettings(network=network),
        planning=PlanningSettings(security=SecuritySettings(**security)),
    )


def test_parse_full_config() -> None:
    config = parse_repo_config(FULL)
    assert config.quality_gate is not None
    assert config.quality_gate.lint == ("mypy", "--strict", "src dir")
    assert config.quality_gate.test == ("pytest", "-q")
    assert config.instructions == "Use type hints. Keep functions short.\n"
    assert config.policy.forbidden_tools == ("*_push_files",)
    assert config.policy.allowed_tools == ("github_*", "fs_*")
    assert config.sandbox.network is True


@pytest.mark.parametrize("text", ["", "# only a comment\n", "---\n"])
def test_empty_file_is_the_default(text: str) -> None:
    assert parse_repo_config(text) == RepoConfig()


def test_one_step_only() -> None:
    config = parse_repo_config("quality_gate:\n  test: pytest -x\n")
    assert config.quality_gate is not None
    assert config.quality_gate.test == ("pytest", "-x")
    assert config.quality_gate.lint is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("colour: blue\n", "colour: unknown key"),
        ("policy:\n  forbiden_tools: [x]\n", "policy.forbiden_tools: unknown key"),
        ("llm:\n  model: gpt\n", "llm: a server setting; a repository cannot change it"),
        ("github:\n  token: abc\n", "github: a server setting; a repository cannot change it"),
        ("sandbox:\n  allow_unsandboxed_DANGEROUS: true\n", "sandbox.allow_unsandboxed"),
        ("quality_gate:\n  test: []\n", "the command must not be empty"),
        ("quality_gate:\n  test: '  '\n", "the command must not be empty"),
        ("quality_gate:\n  test: [pytest, 3]\n", "one command: a string or a list of strings"),
        ("quality_gate:\n  test: [[pytest], [ruff]]\n", "one command: a string or a list"),
        ("quality_gate: {}\n", "name a lint command, a test command or both"),
        ("quality_gate:\n  lint: ruff\n  typecheck: mypy\n", "quality_gate.typecheck"),
        ("quality_gate:\n  test: 'pytest \"unclosed'\n", "cannot split"),
        ("sandbox:\n  network: maybe\n", "sandbox.network"),
        ("instructions: [a, b]\n", "instructions"),
        ("- just\n- a list\n", "the top level must be a mapping"),
        ("policy: [\n", "not valid YAML"),
        ("web:\n  enabled: true\n", "web.enabled: unknown key"),
        ("web:\n  allowed_domains: [https://x.org/]\n", "not a host name"),
        ("web:\n  max_bytes: 10\n", "web.max_bytes"),
    ],
)
def test_invalid_config_names_the_problem(text: str, message: str) -> None:
    with pytest.raises(RepoConfigError) as caught:
        parse_repo_config(text)
    assert message in str(caught.value)


def test_unknown_key_error_lists_the_allowed_keys() -> None:
    with pytest.raises(RepoConfigError) as caught:
        parse_repo_config("colour: blue\n")
    assert "allowed top-level keys: setup, quality_gate, instructions, policy, sandbox" in str(
        caught.value
    )


def test_too_long_instructions_and_file() -> None:
    with pytest.raises(RepoConfigError, match="instructions"):
        parse_repo_config("instructions: " + "x" * 9000 + "\n")
    with pytest.raises(RepoConfigError, match="larger than 65536 bytes"):
        parse_repo_config("# " + "x" * 70_000)


# --- merging -------------------------------------------------------------------------------


def test_repo_tightens_the_server_policy() -> None:
    effective = apply_repo_config(_settings(), parse_repo_config(FULL))
    policy = effective.policy
    assert not policy.decide("github_push_files").allowed  # repo forbids
    assert not policy.decide("github_delete_file").allowed  # server forbids (defaults)
    assert not policy.decide("shell_run").allowed  # outside the repo's allowed list
    assert policy.decide("fs_read_file").allowed
    approval = policy.decide("github_create_pull_request")
    assert approval.allowed and approval.needs_approval


def test_repo_cannot_allow_what_the_server_forbids_or_does_not_allow() -> None:
    settings = _settings(allowed_tools=("github_get_*",), forbidden_tools=("*_delete_*",))
    repo = parse_repo_config("policy:\n  allowed_tools: ['*']\n")
    policy = apply_repo_config(settings, repo).policy
    assert not policy.decide("github_push_files").allowed
    assert not policy.decide("github_delete_file").allowed
    assert policy.decide("github_get_issue").allowed


def test_server_approval_stays() -> None:
    settings = _settings(require_approval=("github_create_or_update_file",))
    policy = apply_repo_config(settings, RepoConfig()).policy
    assert policy.decide("github_create_or_update_file").needs_approval


def test_network_only_when_the_server_allows(caplog: pytest.LogCaptureFixture) -> None:
    asks = parse_repo_config("sandbox:\n  network: true\n")
    with caplog.at_level(logging.INFO, logger="bot.tools.repo_config"):
        refused = apply_repo_config(_settings(network=False), asks)
    assert refused.network is False
    assert refused.notes and "does not allow it" in refused.notes[0]
    assert "does not allow it" in caplog.text
    allowed = apply_repo_config(_settings(network=True), asks)
    assert allowed.network is True and allowed.notes == ()


def test_the_agent_has_network_only_when_the_server_and_the_repository_allow_it() -> None:
    off = parse_repo_config("sandbox:\n  network: false\n")
    assert apply_repo_config(_settings(network=True), off).network is False
    # a repository that says nothing keeps its agent offline, even on a server that allows it
    assert apply_repo_config(_settings(network=True), RepoConfig()).network is False
    assert apply_repo_config(_settings(network=False), RepoConfig()).network is False


# --- loading -------------------------------------------------------------------------------


async def test_load_from_the_ref() -> None:
    forge = FakeForge()
    repo = forge.add_repo("acme/demo", {".agent.yaml": "instructions: be brief\n"})
    config = await load_repo_config(forge, repo, "main")
    assert config is not None and config.instructions == "be brief"
    assert forge.calls_of("get_file") == [("acme/demo", ".agent.yaml", "main")]


async def test_load_without_a_file_is_none() -> None:
    forge = FakeForge()
    repo = forge.add_repo("acme/demo", {"README.md": "hi"})
    assert await load_repo_config(forge, repo, "main") is None


async def test_load_invalid_file_raises() -> None:
    forge = FakeForge()
    repo = forge.add_repo("acme/demo", {".agent.yaml": "llm:\n  api_key: x\n"})
    with pytest.raises(RepoConfigError, match="a repository cannot change it"):
        await load_repo_config(forge, repo, "main")
    binary = forge.add_repo("acme/bin", {".agent.yaml": b"\xff\xfe\x00"})
    with pytest.raises(RepoConfigError, match="not UTF-8"):
        await load_repo_config(forge, binary, "main")


async def test_load_passes_other_forge_errors_on() -> None:
    forge = FakeForge()
    repo = forge.add_repo("acme/demo")
    forge.fail("get_file", AccessDenied("403", status=403))
    with pytest.raises(AccessDenied):
        await load_repo_config(forge, repo, "main")


def test_setup_commands_are_argv_lists_and_an_empty_list_turns_detection_off() -> None:
    config = parse_repo_config(
        "setup:\n  - python3 -m venv .venv\n  - [sh, -c, 'make deps && make data']\n"
    )
    assert config.setup == (
        ("python3", "-m", "venv", ".venv"),
        ("sh", "-c", "make deps && make data"),
    )
    assert parse_repo_config("setup: []\n").setup == ()
    assert parse_repo_config("instructions: hi\n").setup is None  # detected


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("setup: make setup\n", "setup"),
        ("setup:\n  - ''\n", "setup"),
        ("setup:\n  - 'echo \"unterminated'\n", "setup"),
        ("setup:\n  - [1, 2]\n", "setup"),
    ],
)
def test_invalid_setup_commands_are_refused_with_the_key(text: str, where: str) -> None:
    with pytest.raises(RepoConfigError, match=where):
        parse_repo_config(text)
