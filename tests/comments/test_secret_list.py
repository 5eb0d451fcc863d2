"""One secret list (``bot.config.secret_values``) for logs, comments and prompts: an MCP
server's env or header value configured in the settings is hidden everywhere."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot import cli
from bot.comments.replies import Replier
from bot.config import McpServer, Settings, secret_values
from bot.events import ForgeKind
from bot.llm.scripted import ScriptedLLM
from bot.redact import REDACTED
from bot.runtime import Runtime
from bot.storage.sqlite import SqliteStore
from bot.triggers import Reply, ReplyKind
from tests.fakes import FakeForge

MCP_ENV = "mcp-env-value-1234"  # no token shape: only the configured list can hide it
MCP_HEADER = "mcp-header-value-5678"
CONFIG = f"""\
mcp_servers:
  - name: docs
    command: docs-server
    env: {{DOCS_KEY: {MCP_ENV}}}
  - name: search
    url: https://search.example/mcp
    headers: {{X-Search-Key: {MCP_HEADER}}}
"""


@pytest.fixture
def root_logging() -> Iterator[None]:
    """``bot`` replaces the root logger's handlers; put pytest's back afterwards."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def mcp_settings() -> Settings:
    return Settings(
        mcp_servers=(
            McpServer(name="docs", command="docs-server", env={"DOCS_KEY": MCP_ENV}),
            McpServer(
                name="search", url="https://search.example/mcp", headers={"X-Key": MCP_HEADER}
            ),
        )
    )


def test_the_list_has_every_configured_secret() -> None:
    assert set(secret_values(mcp_settings())) == {MCP_ENV, MCP_HEADER}


def test_an_mcp_secret_is_redacted_in_a_log_line(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    root_logging: None,
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG)
    monkeypatch.setenv("BOT_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("BOT_LOG_LEVEL", "INFO")
    assert cli.main(["--config", str(config), "config", "show"]) == 0  # installs the log filter
    capsys.readouterr()
    logging.getLogger("bot.mcp").info("docs said %s, search said %s", MCP_ENV, MCP_HEADER)
    logged = capsys.readouterr().err
    assert "docs said [REDACTED], search said [REDACTED]" in logged
    assert MCP_ENV not in logged and MCP_HEADER not in logged


async def test_an_mcp_secret_is_redacted_in_a_comment(tmp_path: Path) -> None:
    forge = FakeForge(ForgeKind.GITHUB)
    issue = forge.add_issue(forge.add_repo("octo/app"), 7, title="Docs")
    runtime = Runtime(
        mcp_settings(),
        store=SqliteStore(tmp_path / "bot.sqlite3"),
        forges={ForgeKind.GITHUB: forge},
        llm=ScriptedLLM([]),
    )
    action = Reply(ReplyKind.HELP, quote=f"/agent help {MCP_ENV} {MCP_HEADER}")
    await Replier(runtime.current_settings, runtime.forge).reply(issue, action, None)
    [comment] = forge.issue(issue.repo, 7).comments
    assert f"{REDACTED} {REDACTED}" in comment.body
    assert MCP_ENV not in comment.body and MCP_HEADER not in comment.body
