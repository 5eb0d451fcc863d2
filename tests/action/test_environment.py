"""What `bot action` reads from a runner's environment, and the checks before a task runs."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import SecretStr

from bot.action.checks import model_key_problem
from bot.action.environment import ActionError, RunnerEnv, action_settings
from bot.config import ConfigError, Settings


def runner_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        "GITHUB_REPOSITORY": "octo-org/octo-repo",
        "GITHUB_EVENT_NAME": "issues",
        "GITHUB_EVENT_PATH": str(tmp_path / "event.json"),
        "RUNNER_TEMP": str(tmp_path / "temp"),
        **extra,
    }


def test_the_runners_variables(tmp_path: Path) -> None:
    runner = RunnerEnv.from_environ(runner_env(
        tmp_path, GITHUB_RUN_ID="42", GITHUB_RUN_ATTEMPT="2",
        GITHUB_SERVER_URL="https://ghe.example/", GITHUB_API_URL="https://ghe.example/api/v3/",
        GITHUB_STEP_SUMMARY=str(tmp_path / "s.md"),
    ))  # fmt: skip
    assert runner.run_key == "action-42-2"
    assert runner.run_url == "https://ghe.example/octo-org/octo-repo/actions/runs/42"
    assert runner.api_url == "https://ghe.example/api/v3"
    assert runner.step_summary == tmp_path / "s.md" and runner.output is None
    assert runner.data_dir == tmp_path / "temp" / "coding-agent" / "data"


def test_missing_variables_are_named(tmp_path: Path) -> None:
    env = runner_env(tmp_path)
    del env["GITHUB_EVENT_PATH"], env["RUNNER_TEMP"]
    with pytest.raises(ActionError, match="not set: GITHUB_EVENT_PATH, RUNNER_TEMP"):
        RunnerEnv.from_environ(env)
    with pytest.raises(ActionError, match="not owner/name"):
        RunnerEnv.from_environ(runner_env(tmp_path, GITHUB_REPOSITORY="just-a-name"))


def test_settings_come_from_the_servers_variable_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "config.yaml").write_text("not: [a bot configuration\n")  # the repository's own
    env = runner_env(
        tmp_path, BOT_TRIGGER_LABEL="agent please", BOT_COMMAND_PREFIX="/bot", BOT_MAX_COST="2.5",
        BOT_DATA_DIR="/var/lib/elsewhere", GITHUB_TOKEN="ghs_x", LLM_API_KEY="sk-x",
    )  # fmt: skip
    runner = RunnerEnv.from_environ(env)
    settings = action_settings(env, runner)
    assert settings.labels.trigger == "agent please"
    assert settings.commands.prefix == "/bot"
    assert settings.planning.budget.max_cost == 2.5
    assert settings.data_dir == runner.data_dir  # made afresh by each run
    assert settings.llm.base_url == "https://api.openai.com/v1"  # no local model on a runner
    assert settings.github.token is not None


def test_a_chosen_endpoint_and_a_named_file_are_kept(tmp_path: Path) -> None:
    config = tmp_path / "bot.yaml"
    config.write_text("comments:\n  language: ja\n")
    env = runner_env(tmp_path, BOT_CONFIG=str(config), LLM_BASE_URL="http://127.0.0.1:8000/v1")
    settings = action_settings(env, RunnerEnv.from_environ(env))
    assert settings.comments.language == "ja"
    assert settings.llm.base_url == "http://127.0.0.1:8000/v1"
    broken = runner_env(tmp_path, BOT_MAX_COST="free")
    with pytest.raises(ConfigError, match="max_cost"):
        action_settings(broken, RunnerEnv.from_environ(broken))


def llm(**values: object) -> Settings:
    settings = Settings()
    return settings.model_copy(update={"llm": settings.llm.model_copy(update=values)})


def test_a_hosted_model_needs_its_key() -> None:
    problem = model_key_problem(llm(provider="openai", base_url="https://api.openai.com/v1"))
    assert problem is not None and "`llm_api_key`" in problem
    assert model_key_problem(llm(provider="anthropic", base_url="http://localhost:1/")) is not None
    assert model_key_problem(llm(api_key=SecretStr("sk-x"), base_url="https://x.example")) is None
    assert model_key_problem(llm(provider="scripted")) is None
    for local in ("http://localhost:11434/v1", "http://127.0.0.1:8000/v1", "http://[::1]:8/v1"):
        assert model_key_problem(llm(provider="openai", base_url=local)) is None
