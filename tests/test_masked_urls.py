"""Credentials written into a URL (``llm.base_url``, an MCP server's ``url``, the user-config
service's) are masked wherever the settings are shown, ``bot config show`` and
``/api/settings/effective``, and are among the values logs and tool output redact."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import SecretStr

from bot.config import LLMSettings, McpServer, Settings, masked, secret_values
from bot.config.views import masked_url
from tests.harness import Harness
from tests.test_cli import base_env, bot
from tests.test_logins import TOKEN

PASSWORD = "hunter2-very-secret"
KEY = "sk-query-key-0123456789abcdef"
MCP_TOKEN = "mcp-user-token-abcdef123456"
LLM_URL = f"https://bob:{PASSWORD}@llm.example:8443/v1?api-key={KEY}"
MCP_URL = f"https://{MCP_TOKEN}@mcp.example/mcp?v=1"
SECRETS = (PASSWORD, KEY, MCP_TOKEN)


def with_urls() -> Settings:
    return Settings(
        llm=LLMSettings(base_url=LLM_URL),
        mcp_servers=(McpServer(name="docs", url=MCP_URL),),
    )


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (LLM_URL, "https://***@llm.example:8443/v1?api-key=***"),
        (MCP_URL, "https://***@mcp.example/mcp?v=***"),
        ("https://[::1]:8080/v1#tok", "https://[::1]:8080/v1#***"),
        ("https://user@host/x", "https://***@host/x"),
        (
            "https://cfg.example/u?user={user}&f={forge}&k=s3",
            "https://cfg.example/u?user={user}&f={forge}&k=***",
        ),
        ("http://127.0.0.1:11434/v1", "http://127.0.0.1:11434/v1"),
        ("", ""),
        ("http://[broken/", "***"),
    ],
)
def test_a_url_is_shown_without_its_credentials(url: str, shown: str) -> None:
    assert masked_url(url) == shown


def test_the_masked_settings_hold_no_credential_of_a_url() -> None:
    data = masked(with_urls())
    assert data["llm"]["base_url"] == "https://***@llm.example:8443/v1?api-key=***"
    assert data["mcp_servers"][0]["url"] == "https://***@mcp.example/mcp?v=***"
    text = repr(data)
    assert not [s for s in SECRETS if s in text]


def test_the_credentials_are_redacted_too() -> None:
    values = secret_values(with_urls())
    assert set(SECRETS) <= set(values)
    assert "1" not in values and "bob" not in values  # too short to hide everywhere


def test_bot_config_show_masks_a_credential_in_llm_base_url(tmp_path: Path) -> None:
    result = bot("config", "show", env=base_env(tmp_path, LLM_BASE_URL=LLM_URL))
    assert result.returncode == 0, result.stderr
    assert "base_url: https://***@llm.example:8443/v1?api-key=***" in result.stdout
    assert PASSWORD not in result.stdout and KEY not in result.stdout


async def test_the_effective_settings_api_masks_them(tmp_path: Path) -> None:
    overrides = {
        "llm": {"base_url": LLM_URL},
        "server": {"api_token": SecretStr(TOKEN)},
    }
    async with Harness(tmp_path, overrides=overrides) as harness:
        mcp = (McpServer(name="docs", url=MCP_URL),)
        harness.runtime.settings = harness.runtime.settings.model_copy(update={"mcp_servers": mcp})
        response = await harness.client.get(
            "/api/settings/effective", headers={"Authorization": f"Bearer {TOKEN}"}
        )
    assert response.status_code == 200, response.text
    assert not [s for s in SECRETS if s in response.text]
    assert response.json()["settings"]["mcp_servers"][0]["url"].startswith("https://***@")
