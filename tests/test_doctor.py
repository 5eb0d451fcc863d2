from pathlib import Path

from bot.doctor import failed, format_checks, run_checks
from tests.harness import Harness


async def test_doctor_flags_a_bot_name_that_is_not_who_the_credentials_are(
    tmp_path: Path,
) -> None:
    async with Harness(tmp_path) as bot:
        bot.gitlab.bot_login = "ci-helper"
        checks = await run_checks(bot.settings, bot.runtime)
    text = format_checks(checks)
    assert "[ok  ] github: authenticated as coding-agent[bot]" in text
    assert "[FAIL] gitlab: authenticated as ci-helper, but bot.gitlab_username" in text
    assert "set bot.gitlab_username: 'ci-helper'" in text
    assert "[ok  ] llm: scripted" in text
    assert failed(checks)


async def test_doctor_passes_when_everything_is_in_order(tmp_path: Path) -> None:
    async with Harness(tmp_path) as bot:
        checks = await run_checks(bot.settings, bot.runtime)
    assert not failed(checks), format_checks(checks)
