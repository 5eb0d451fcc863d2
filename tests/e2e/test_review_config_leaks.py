"""Security review: the config API must never echo a secret (or a file it read) back."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.test_api import AUTH, WITH_API
from tests.harness import Harness

YAML = {**AUTH, "Content-Type": "application/yaml"}
GITHUB_TOKEN = "ghp_" + "T" * 36
GITLAB_TOKEN = "glpat-" + "G" * 20


async def _validate(bot: Harness, text: str) -> str:
    answer = await bot.client.post("/api/config/validate", content=text, headers=YAML)
    return answer.text


async def test_a_settings_wide_check_does_not_echo_the_environment_secrets(tmp_path: Path) -> None:
    async with Harness(tmp_path, overrides=WITH_API) as bot:
        said = await _validate(bot, "worker:\n  stall_seconds: 1\n")
        assert GITHUB_TOKEN not in said, said
        assert GITLAB_TOKEN not in said, said


async def test_a_candidate_cannot_read_any_file_through_a_secret_file_key(tmp_path: Path) -> None:
    loot = tmp_path / "not-a-secret-file.txt"
    loot.write_text("contents-the-api-must-not-show-0123456789")
    async with Harness(tmp_path, overrides=WITH_API) as bot:
        said = await _validate(
            bot, f"github:\n  private_key_path: {loot}\nworker:\n  stall_seconds: 1\n"
        )
        assert "contents-the-api-must-not-show" not in said, said


async def test_a_candidate_cannot_read_any_environment_variable(tmp_path: Path) -> None:
    async with Harness(tmp_path, overrides=WITH_API) as bot:
        said = await _validate(
            bot,
            "gitlab:\n  webhook_secrets:\n    grp:\n      env: GITHUB_TOKEN\n      file: x\n",
        )
        assert GITHUB_TOKEN not in said, said


async def test_put_answer_does_not_echo_secrets(tmp_path: Path) -> None:
    async with Harness(tmp_path, overrides=WITH_API) as bot:
        shown = (await bot.client.get("/api/config", headers=AUTH)).json()
        answer = await bot.client.put(
            "/api/config",
            content="server:\n  max_body_bytes: 99999999999\n  max_body_bytes_in_flight: 2000\n",
            headers={**YAML, "If-Match": shown["hash"]},
        )
        assert GITHUB_TOKEN not in answer.text and GITLAB_TOKEN not in answer.text, answer.text
