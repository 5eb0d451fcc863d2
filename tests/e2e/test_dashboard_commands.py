"""The dashboard as the operator's command center, in headless Chromium: a task started
from an issue's address runs to its end; a waiting plan rejected with a reason, then
approved, from the task's page; a setting changed, validated, saved and reloaded; a key
only the host's file may change refused; the model's health shown. Every action is also
refused without the login cookie and from another origin.

Screenshots of the overview, a task, the command form and the settings page go to the
test's directory, and to ``BOT_SCREENSHOTS_DIR`` when it is set
(``scripts/dashboard-screenshots`` sets it to docs/images)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from bot.dashboard.commands import STEERING
from bot.llm.factory import make_llm
from bot.storage.base import TaskState
from tests.agent import docs
from tests.e2e.support import GH_BRANCH, github_repo, of_kind, served, settle
from tests.e2e.test_api import TOKEN, WITH_API
from tests.e2e.test_api_config import scripted
from tests.e2e.test_api_tasks import ISSUE_URL, closed_port
from tests.e2e.test_approval import NOTES, write_plan
from tests.e2e.test_dashboard import CHROMIUM, CHROMIUM_ARGS
from tests.e2e.test_success import readme_script
from tests.harness import Harness
from tests.tools.conftest import Remote

playwright = pytest.importorskip("playwright.async_api", reason="playwright is not installed")
pytestmark = [
    pytest.mark.sandbox,
    pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (scripts/test-deps)"),
]
EVIL = {"Origin": "https://evil.example"}


async def shoot(page: Any, tmp_path: Path, name: str) -> None:
    await page.screenshot(path=str(tmp_path / name), full_page=True)
    assert (tmp_path / name).stat().st_size > 10_000
    wanted = os.environ.get("BOT_SCREENSHOTS_DIR")
    if wanted:
        shutil.copyfile(tmp_path / name, Path(wanted) / name)


async def set_key(page: Any, key: str, value: str) -> None:
    """Type ``value`` for ``key`` in the settings' form, its section opened first."""
    section = key.split(".")[0]
    if await page.locator(f"#section-{section}:not([open])").count():
        await page.click(f"#section-{section} summary")
    await page.fill(f"tr[data-key='{key}'] input", value)


async def log_in(driver: Any, base: str) -> tuple[Any, Any]:
    browser = await driver.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    page = await browser.new_page(viewport={"width": 1100, "height": 900})
    await page.goto(f"{base}/dashboard/login")
    await page.fill("input[name=token]", TOKEN)
    await page.click("button[type=submit]")
    assert page.url == f"{base}/dashboard"
    return browser, page


async def refused_without_session_or_from_elsewhere(
    browser: Any, page: Any, url: str, form: dict[str, str]
) -> None:
    """``url`` refuses the form from another origin (with the cookie) and without it."""
    forged = await page.request.post(url, form=form, headers=EVIL)
    assert forged.status == 403, url
    stranger = await browser.new_context()
    anonymous = await stranger.request.post(url, form=form)
    assert anonymous.status == 403, url
    await stranger.close()


async def test_a_task_started_from_its_address_runs_to_its_end(
    tmp_path: Path, remote: Remote
) -> None:
    async with Harness(tmp_path, script=readme_script(), overrides=WITH_API) as bot:
        github_repo(bot, remote, labels=("bug",))
        async with served(bot) as base, playwright.async_playwright() as driver:
            browser, page = await log_in(driver, base)
            new = {"issue_url": ISSUE_URL, "mode": "run"}
            await refused_without_session_or_from_elsewhere(
                browser, page, f"{base}/dashboard/new", new
            )
            assert await bot.tasks() == []

            await page.click("#nav-new")
            assert page.url == f"{base}/dashboard/new"
            assert (await page.inner_text("#model-state")).startswith("Ready")
            await page.fill("#issue_url", ISSUE_URL)
            await page.fill("#instructions", "Keep it short.")
            await shoot(page, tmp_path, "dashboard-command.png")
            await page.fill("#issue_url", "https://elsewhere.example/a/b/issues/1")
            await page.click("#start")
            assert "not an issue this bot serves" in await page.inner_text("#error")
            assert await bot.tasks() == []  # refused: nothing started
            assert await page.input_value("#instructions") == "Keep it short."  # kept

            await page.fill("#issue_url", ISSUE_URL)
            await page.select_option("#mode", "run")
            await page.click("#start")
            [task] = await bot.tasks()
            assert page.url == f"{base}/dashboard?started={task.id}"
            rows = await page.inner_text("#tasks")  # in the list at once
            assert task.id[:8] in rows and "queued" in rows
            assert task.request.requested_by == "ops (dashboard)"
            assert task.request.instructions == "Keep it short."

            await settle(bot)
            await page.click("#started a")
            assert await page.inner_text("#state") == "done"
            assert "goal achieved" in await page.inner_text("#report")
            assert await page.locator("#retry").count() == 1  # an ended task: retry only
            await shoot(page, tmp_path, "dashboard-task.png")
            await page.goto(f"{base}/dashboard")
            assert await page.inner_text("#queued") == "0"
            await shoot(page, tmp_path, "dashboard-overview.png")

            # A new issue, labelled to start a task, from the same page.
            await page.goto(f"{base}/dashboard/new")
            await page.select_option("#forge", "github")
            await page.fill("#repository", "Codertocat/Hello-World")
            await page.fill("#title", "Add a licence file")
            await page.fill("#body", "MIT, please.")
            await page.click("#open-ticket")
            assert "labelled 'coding agent'" in await page.inner_text("#notice")
            opened = [i for i in bot.github.issues.values() if i.ref.title == "Add a licence file"]
            assert len(opened) == 1 and opened[0].labels == ["coding agent"]
            assert opened[0].ref.body == "MIT, please."
            started = [t for t in await bot.tasks() if t.id != task.id]
            assert [t.request.issue.number for t in started] == [opened[0].ref.number]
            ticket = {"forge": "github", "repository": "Codertocat/Hello-World", "title": "x"}
            await refused_without_session_or_from_elsewhere(
                browser, page, f"{base}/dashboard/tickets", ticket
            )
            assert len(await bot.tasks()) == 2
            await browser.close()


async def test_a_waiting_plan_is_rejected_with_a_reason_then_approved_from_its_page(
    tmp_path: Path, remote: Remote
) -> None:
    revised = docs.revision(
        [docs.action("task_2", "write_file", arguments={"path": "docs/NOTES.md", "content": NOTES},
                     purpose="Write docs/NOTES.md")],
        reason="put the notes under docs/ as asked",
    )  # fmt: skip
    script = [write_plan(), revised, docs.completion(done=1)]
    async with Harness(tmp_path, script=script, overrides=WITH_API) as bot:
        issue = github_repo(bot, remote)
        async with served(bot) as base, playwright.async_playwright() as driver:
            browser, page = await log_in(driver, base)
            await page.goto(f"{base}/dashboard/new")
            await page.fill("#issue_url", ISSUE_URL)
            await page.select_option("#mode", "plan")
            await page.click("#start")
            await settle(bot)
            [task] = await bot.tasks()
            assert task.state is TaskState.AWAITING_APPROVAL
            await page.goto(f"{base}/dashboard/tasks/{task.id}")

            for action in STEERING:
                await refused_without_session_or_from_elsewhere(
                    browser,
                    page,
                    f"{base}/dashboard/tasks/{task.id}/{action}",
                    {"reason": "x", "text": "y"},
                )
            await settle(bot)  # the refusals left the task nothing to act on
            assert await bot.tasks() == [task]
            assert of_kind(issue, "revision") == []

            await page.fill("#reason", "notes belong in docs/")
            await page.click("#reject")
            assert "Sent: reject" in await page.inner_text("#action-done")
            await settle(bot)
            [task] = await bot.tasks()
            assert task.state is TaskState.AWAITING_APPROVAL
            [revision] = of_kind(issue, "revision")
            assert "put the notes under docs/" in revision
            assert "notes belong in docs/" in bot.llm.requests[1].messages[-1].content

            await page.goto(f"{base}/dashboard/tasks/{task.id}")
            await page.click("#approve")
            await settle(bot)
            [task] = await bot.tasks()
            assert task.state is TaskState.DONE
            assert remote.show(GH_BRANCH, "docs/NOTES.md").decode() == NOTES
            await page.goto(f"{base}/dashboard/tasks/{task.id}")
            assert await page.inner_text("#state") == "done"

            # An ended task cannot be approved: the operation's refusal is shown.
            answer = await page.request.post(f"{base}/dashboard/tasks/{task.id}/approve")
            assert answer.status == 409 and "has ended" in await answer.text()
            assert 'id="action-error"' in await answer.text()
            await browser.close()


async def test_a_setting_is_validated_saved_and_reloaded_and_a_host_key_refused(
    tmp_path: Path,
) -> None:
    async with Harness(tmp_path, overrides=WITH_API) as bot:
        path = bot.settings.source_path
        assert path is not None
        before = path.read_text()
        async with served(bot) as base, playwright.async_playwright() as driver:
            browser, page = await log_in(driver, base)
            await page.click("#nav-settings")
            assert page.url == f"{base}/dashboard/settings"

            # The model's health, and the settings grouped with their descriptions.
            assert await page.inner_text("#model-ready") == "ready"
            assert "scripted" in await page.inner_text("#model-server")
            await page.click("#test-model")
            assert await page.inner_text("#tested") == "checked just now"
            row = page.locator("tr[data-key='worker.lease_seconds']")
            assert "re-queued" in (await row.text_content() or "")  # config.yaml's comment
            port = page.locator("tr[data-key='server.port']")
            assert "host file only" in (await port.text_content() or "")
            assert await page.input_value("#config-text") == before
            await shoot(page, tmp_path, "dashboard-settings.png")

            candidate = scripted(bot) + "labels:\n  done: finished\n"
            await page.fill("#config-text", candidate + "worker:\n  max_workrs: 2\n")
            await page.click("#validate")
            assert await page.inner_text("#outcome") == "Not valid."
            assert "worker.max_workrs" in await page.inner_text("#problems")
            await page.click("#save")
            assert "not valid" in await page.inner_text("#outcome")
            assert path.read_text() == before  # nothing written

            await page.fill("#config-text", candidate + "server:\n  port: 9999\n")
            await page.click("#validate")
            assert await page.inner_text("#outcome") == "Valid."
            assert "server.port" in await page.inner_text("#refused")
            assert "server" in await page.inner_text("#restart")
            await page.click("#save")
            assert "Not saved" in await page.inner_text("#outcome")
            assert "server.port" in await page.inner_text("#refused")
            assert path.read_text() == before

            # A change in the settings' form: written in its line, its comment kept.
            await set_key(page, "labels.done", "done # and more")
            await page.click("#validate-keys")
            assert await page.inner_text("#outcome") == "Not valid."
            assert "labels.done" in await page.inner_text("#problems")
            await set_key(page, "worker.lease_seconds", "ninety")
            await page.click("#validate-keys")
            assert "worker.lease_seconds" in await page.inner_text("#problems")
            await set_key(page, "worker.lease_seconds", "90")
            await set_key(page, "labels.done", "finished")
            await page.click("#validate-keys")
            assert await page.inner_text("#outcome") == "Valid."
            assert path.read_text() == before  # only checked
            await set_key(page, "worker.lease_seconds", "90")
            await set_key(page, "labels.done", "finished")
            await page.click("#save-keys")
            assert (await page.inner_text("#outcome")).startswith("Saved and reloaded")
            assert "labels: reloaded" in await page.inner_text("#reload")
            after = path.read_text()
            changed = [line for line in after.splitlines() if line not in before.splitlines()]
            assert changed == [
                "  lease_seconds: 90          # a task whose worker stops renewing for this long"
                " is re-queued",
                "  done: finished",
            ]
            assert bot.runtime.settings.labels.done == "finished"
            assert bot.runtime.settings.worker.lease_seconds == 90
            assert await page.input_value("tr[data-key='labels.done'] input") == "finished"
            lease = page.locator("tr[data-key='worker.lease_seconds']")
            assert "re-queued" in (await lease.text_content() or "")

            save = {"do": "save", "text": "labels:\n  done: stolen\n", "hash": "x"}
            await refused_without_session_or_from_elsewhere(
                browser, page, f"{base}/dashboard/settings", save
            )
            assert path.read_text() == after
            await browser.close()


async def test_the_form_and_the_settings_show_a_model_that_is_not_ready_and_its_steps(
    tmp_path: Path, remote: Remote
) -> None:
    async with Harness(tmp_path, overrides=WITH_API) as bot:
        github_repo(bot, remote)
        down = bot.settings.llm.model_copy(
            update={"provider": "openai", "base_url": f"http://127.0.0.1:{closed_port()}/v1",
                    "model": "qwen2.5-coder:7b", "max_retries": 0}
        )  # fmt: skip
        bot.runtime.llm = make_llm(down)  # a real client; nothing listens there
        async with served(bot) as base, playwright.async_playwright() as driver:
            browser, page = await log_in(driver, base)
            await page.goto(f"{base}/dashboard/new")
            assert (await page.inner_text("#model-state")).startswith("Not ready")
            assert "ollama pull qwen2.5-coder:7b" in await page.inner_text("#model-steps")
            await page.fill("#issue_url", ISSUE_URL)
            await page.click("#start")  # refused before anything starts, with the steps
            assert "the model is not ready" in await page.inner_text("#error")
            assert "ollama pull qwen2.5-coder:7b" in await page.inner_text("#steps")
            assert await bot.tasks() == []

            await page.goto(f"{base}/dashboard/settings")
            assert await page.inner_text("#model-ready") == "not ready"
            assert "ollama pull qwen2.5-coder:7b" in await page.inner_text("#setup-steps")
            assert "127.0.0.1" in await page.inner_text("#model-server")
            await browser.close()
