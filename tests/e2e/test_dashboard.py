"""The dashboard in a real browser: headless Chromium (Debian's ``chromium``, driven by
Playwright) logs in, reads the overview and the page of a task the scripted model ran,
and pulls the emergency stop and releases it. Screenshots go to the test's directory."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from bot.worker import operator
from tests.e2e.support import OWNER, gh_comment, run_labelled_issue, served, settle
from tests.e2e.test_api import TOKEN, WITH_API
from tests.e2e.test_success import readme_script
from tests.harness import Harness
from tests.tools.conftest import Remote

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
playwright = pytest.importorskip("playwright.async_api", reason="playwright is not installed")
pytestmark = [
    pytest.mark.sandbox,
    pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (scripts/test-deps)"),
]
# What the machine's probe found Chromium needs here: no sandbox as root, and none of
# its background connections to the outside (refused on a closed network).
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip


async def test_a_person_logs_in_reads_a_task_and_pulls_the_emergency_stop(
    tmp_path: Path, remote: Remote
) -> None:
    async with Harness(tmp_path, script=readme_script(), overrides=WITH_API) as bot:
        task = await run_labelled_issue(bot, remote)

        async with served(bot) as base, playwright.async_playwright() as driver:
            browser = await driver.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = await browser.new_page(viewport={"width": 1100, "height": 900})

            await page.goto(f"{base}/dashboard")
            assert page.url == f"{base}/dashboard/login"  # nothing without logging in
            await page.fill("input[name=token]", "not the token")
            await page.click("button[type=submit]")
            assert await page.inner_text("#error") == "Wrong token."
            await page.fill("input[name=token]", TOKEN)
            await page.click("button[type=submit]")
            assert page.url == f"{base}/dashboard"
            [cookie] = await page.context.cookies()
            assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"

            rows = await page.inner_text("#tasks")
            assert task.id[:8] in rows and "Codertocat/Hello-World#1" in rows and "done" in rows
            assert await page.inner_text("#queued") == "0"
            assert "reachable" in await page.inner_text("#llm")
            await page.screenshot(path=str(tmp_path / "overview.png"), full_page=True)

            await page.click(f"text={task.id[:8]}")
            assert page.url == f"{base}/dashboard/tasks/{task.id}"
            assert await page.inner_text("#state") == "done"
            items = page.locator("#plan li")
            assert await items.all_inner_texts() == [
                "✔ Read README.md",
                "✔ Add an Installation section",
            ]
            assert await items.evaluate_all("els => els.map(e => e.dataset.status)") == [
                "done",
                "done",
            ]
            assert await page.inner_text("#gate-result") == "passed"
            assert "make lint" in await page.inner_text("#gate")
            assert "goal achieved" in await page.inner_text("#report")
            assert "plan" in await page.inner_text("#timeline")
            await page.screenshot(path=str(tmp_path / "task.png"), full_page=True)

            await page.goto(f"{base}/dashboard")
            await page.click("#pause-all")
            assert "All tasks are paused" in await page.inner_text("#paused-banner")
            assert (await operator.read_switch(bot.store)).paused
            ready = await page.request.get(f"{base}/readyz")
            assert (await ready.text()).startswith("ready; all tasks paused by ops (dashboard)")
            await page.screenshot(path=str(tmp_path / "paused.png"), full_page=True)
            await page.click("#resume-all")
            assert await page.locator("#paused-banner").count() == 0
            assert not (await operator.read_switch(bot.store)).paused

            # A form posted from another site is refused even with the cookie.
            forged = await page.request.post(
                f"{base}/dashboard/pause-all", headers={"Origin": "https://evil.example"}
            )
            assert forged.status == 403 and not (await operator.read_switch(bot.store)).paused
            await browser.close()
        for name in ("overview.png", "task.png", "paused.png"):
            assert (tmp_path / name).stat().st_size > 10_000


async def test_the_pages_refresh_every_five_seconds_reading_only_what_they_show(
    tmp_path: Path, remote: Remote
) -> None:
    async with Harness(tmp_path, script=readme_script(), overrides=WITH_API) as bot:
        first = await run_labelled_issue(bot, remote)
        repo = bot.github.issue(first.request.issue.repo, 1).ref.repo
        bot.github.add_issue(repo, 2, title="Another issue", author=OWNER)

        async with served(bot) as base, playwright.async_playwright() as driver:
            browser = await driver.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = await browser.new_page()
            polls: list[tuple[float, int, str]] = []
            page.on(
                "response",
                lambda r: (
                    polls.append((time.monotonic(), r.status, r.url))
                    if "live.json" in r.url
                    else None
                ),
            )
            await page.goto(f"{base}/dashboard/login")
            await page.fill("input[name=token]", TOKEN)
            await page.click("button[type=submit]")
            assert await page.inner_text("#queued") == "0"
            await page.evaluate("window.stayed = true")  # gone if the page reloads

            # A task queued while the page is open shows up without a reload.
            await bot.send_github("issue_comment", gh_comment("/agent run", number=2))
            await bot.dispatch_all()
            [new] = [t for t in await bot.tasks() if t.id != first.id]
            await page.wait_for_function(
                "document.getElementById('queued').textContent === '1'", timeout=8_000
            )
            rows = await page.inner_text("#tasks")
            assert new.id[:8] in rows and "Codertocat/Hello-World#2" in rows
            assert first.id[:8] in rows
            assert await page.evaluate("window.stayed === true")  # updated in place

            # Nothing changed since: the next poll is answered 304, without a body.
            await page.wait_for_function("Number(document.body.dataset.refreshed) >= 2")
            statuses = [status for _, status, _ in polls]
            assert statuses[:2] == [200, 304], polls
            gap = polls[1][0] - polls[0][0]
            assert 4.0 <= gap <= 7.0, gap  # every 5 s

            # A task's page reloads itself when the task changes, and only then.
            await page.goto(f"{base}/dashboard/tasks/{new.id}")
            assert await page.inner_text("#state") == "queued"
            await operator.command(bot.store, new.id, operator.TaskCommand.STOP, by="ops")
            await settle(bot)
            await page.wait_for_function(
                "document.getElementById('state').textContent === 'stopped'", timeout=8_000
            )
            await browser.close()
