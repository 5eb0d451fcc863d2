"""The eval runs in the dashboard (headless Chromium) and in the API, from a real run folder:
``bot eval run`` on two of the suite's tasks (``tests/eval/suite.py``) with the scripted
model, one writing the reference fix (resolved), one changing nothing (unresolved).

The screenshots of a run's page and a task's page go to the test's directory, and to
``BOT_SCREENSHOTS_DIR`` when it is set (``scripts/dashboard-screenshots``)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from bot.record.snapshot import checklist, status_snapshot
from bot.storage.sqlite import SqliteStore
from tests.e2e.support import served
from tests.e2e.test_api import AUTH, WITH_API
from tests.e2e.test_dashboard import CHROMIUM
from tests.e2e.test_dashboard_commands import log_in, shoot
from tests.eval.suite import PROJECTS, build
from tests.eval.test_eval_run import bot_eval, results, scripts, some_tasks
from tests.harness import Harness

playwright = pytest.importorskip("playwright.async_api", reason="playwright is not installed")
pytestmark = [
    pytest.mark.sandbox,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap missing"),
]
RUN = "calc-and-textutil"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A runs folder holding one real run of two tasks: calc fixed, textutil left alone."""
    base = tmp_path_factory.mktemp("eval")
    suite = base / "suite"
    build(suite, PROJECTS[:2])
    chosen = scripts(suite, base / "scripts", {"calc": "fix", "textutil": "nothing"})
    tasks = some_tasks(suite, base / "tasks.jsonl", ["calc", "textutil"])
    folder = base / "runs"
    code = bot_eval(base, chosen, "run", str(tasks), "--out", str(folder / RUN))
    assert code == 0
    return folder


async def plan_of_checkpoint(folder: Path) -> list[tuple[str, str]]:
    """The plan checklist of the task's last checkpoint in its kept store: what the task's
    page shows (``record/snapshot.py``), as (description, status)."""
    store = SqliteStore(folder / "bot.sqlite3")
    await store.open()
    try:
        [task] = await store.list_tasks()
        checkpoint = await store.load_checkpoint(task.id)
    finally:
        await store.close()
    items = checklist(status_snapshot(checkpoint) or {})
    return [(item["description"], item["status"]) for item in items]


def with_runs(runs: Path) -> dict[str, dict[str, object]]:
    return {**WITH_API, "eval": {"runs_dir": runs}}


@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (scripts/test-deps)")
async def test_the_dashboard_lists_the_runs_shows_one_and_a_tasks_trajectory(
    tmp_path: Path, runs: Path
) -> None:
    written = results(runs / RUN)
    assert written["suite__calc-1"]["resolved"] and not written["suite__textutil-1"]["resolved"]
    async with (
        Harness(tmp_path, overrides=with_runs(runs)) as bot,
        served(bot) as base,
        playwright.async_playwright() as driver,
    ):
        browser, page = await log_in(driver, base)
        await page.click("#nav-eval")
        assert page.url == f"{base}/dashboard/eval"
        listed = await page.inner_text("#runs")
        assert RUN in listed and "scripted" in listed and "1 (50.0%)" in listed

        await page.click(f"#runs a:text-is('{RUN}')")
        assert page.url == f"{base}/dashboard/eval/{RUN}"
        assert await page.inner_text("#resolved") == "1 / 2"
        rows = await page.locator("#results tr").all_inner_texts()
        calc = next(r for r in rows if "suite__calc-1" in r)
        text = next(r for r in rows if "suite__textutil-1" in r)
        assert "yes" in calc and "done" in calc
        tokens = written["suite__textutil-1"]
        assert "no" in text and str(tokens["reason"]) in text
        total = int(tokens["prompt_tokens"]) + int(tokens["completion_tokens"])  # type: ignore[call-overload]
        assert f"{total:,}" in text
        await shoot(page, tmp_path, "dashboard-eval-run.png")

        await page.click("#results a:text-is('suite__calc-1')")
        assert page.url == f"{base}/dashboard/eval/{RUN}/tasks/suite__calc-1"
        assert await page.inner_text("#verdict") == "resolved"
        history = [
            json.loads(line)
            for line in (runs / RUN / "tasks" / "suite__calc-1" / "trajectory.jsonl")
            .read_text()
            .splitlines()
        ]
        timeline = await page.locator("#timeline tr").all_inner_texts()
        assert len(timeline) == len(history) > 2  # every entry, as a task's page shows it
        assert all(e["timestamp"] in row for e, row in zip(history, timeline, strict=True))
        # the plan checklist the task's own page would show from its checkpoint (the task's
        # store is kept in its folder), here read from its trajectory
        checkpoint_plan = await plan_of_checkpoint(runs / RUN / "tasks" / "suite__calc-1")
        assert checkpoint_plan and any(status == "done" for _, status in checkpoint_plan)
        items = page.locator("#plan li")
        shown_plan = [
            ((await items.nth(n).inner_text()).split(" ", 1)[1],
             await items.nth(n).get_attribute("data-status"))
            for n in range(await items.count())
        ]  # fmt: skip
        assert shown_plan == checkpoint_plan
        tests = await page.locator("#tests tr[data-status]").all_inner_texts()
        line = written["suite__calc-1"]
        assert len(tests) == len(line["fail_to_pass"]) + len(line["pass_to_pass"]) > 0  # type: ignore[arg-type]
        assert all("passed" in row for row in tests)
        assert "tests.log" in await page.inner_text("#test-log-path")
        await shoot(page, tmp_path, "dashboard-eval-task.png")
        report = (runs / RUN / "tasks" / "suite__calc-1" / "report.md").read_text()
        assert (await page.inner_text("#report")).strip() == report.strip()
        await page.click("#run-link")
        assert page.url == f"{base}/dashboard/eval/{RUN}"
        await browser.close()


async def test_the_api_lists_the_runs_and_shows_one(tmp_path: Path, runs: Path) -> None:
    written = results(runs / RUN)
    async with Harness(tmp_path, overrides=with_runs(runs)) as bot:
        refused = await bot.client.get("/api/eval/runs")
        assert refused.status_code == 401
        listed = (await bot.client.get("/api/eval/runs", headers=AUTH)).json()["runs"]
        assert [(r["id"], r["finished"], r["resolved"]) for r in listed] == [(RUN, 2, 1)]
        assert listed[0]["model"] == "scripted" and listed[0]["started"].endswith("Z")
        shown = await bot.client.get(f"/api/eval/runs/{RUN}", headers=AUTH)
        assert shown.status_code == 200
        run = shown.json()
        summary = json.loads((runs / RUN / "summary.json").read_text())
        assert run["interval_95"] == summary["interval_95"]
        assert run["outcomes"] == summary["outcomes"] and run["tokens"] == summary["tokens"]
        by_id = {r["instance_id"]: r for r in run["results"]}
        assert by_id.keys() == written.keys()
        for instance_id, row in by_id.items():
            line = written[instance_id]
            assert row["resolved"] == line["resolved"] and row["reason"] == line["reason"]
            assert row["outcome"] == line["outcome"] and row["cost"] == line["cost"]
            assert row["tokens_by_phase"] == line["tokens_by_phase"]
        unknown = await bot.client.get("/api/eval/runs/no-such-run", headers=AUTH)
        assert unknown.status_code == 404
