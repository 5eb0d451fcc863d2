"""An eval task's page (headless Chromium) and ``GET /api/eval/runs/{run}/tasks/{task}``,
from a run folder the test writes: ``results.jsonl`` with tests that passed, failed, erred
and went missing, ``score/tests.log`` longer than the excerpt shown, and a
``trajectory.jsonl`` written by the planning history's own writer, whose plan has three
steps: one done, one failed, one not run. Page and API show the same."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from bot.api.eval_task import LOG_BYTES
from bot.dashboard import session
from bot.record.history import HistoryKind, PlanningHistory
from bot.record.plan import parse_plan
from bot.record.snapshot import checklist, history_snapshot
from tests.agent import docs
from tests.e2e.support import served
from tests.e2e.test_api import AUTH, TOKEN, WITH_API
from tests.e2e.test_dashboard import CHROMIUM
from tests.e2e.test_dashboard_commands import log_in
from tests.harness import Harness

playwright = pytest.importorskip("playwright.async_api", reason="playwright is not installed")
RUN, TASK = "mixed", "proj__calc-7"
MARKUP = "<script>alert(1)</script>"
SECRET = "SECRET-outside-the-runs-folder"
FAIL_TO_PASS = {"tests/test_calc.py::test_divide": "passed",
                "tests/test_calc.py::test_modulo": "failed"}  # fmt: skip
PASS_TO_PASS = {"tests/test_calc.py::test_add": "passed",
                "tests/test_calc.py::test_sub": "error",
                f"tests/test_calc.py::test_{MARKUP}": "missing"}  # fmt: skip
LOG_END = "FAILED tests/test_calc.py::test_modulo - ZeroDivisionError\n1 failed, 3 passed\n"
RESULT: dict[str, Any] = {
    "instance_id": TASK, "resolved": False, "outcome": "done", "agent_reason": "",
    "reason": f"FAIL_TO_PASS failed: tests/test_calc.py::test_modulo {MARKUP}",
    "prompt_tokens": 1200, "completion_tokens": 345, "cost": 0.0123, "model_calls": 4,
    "revisions": 0, "tokens_by_phase": {"planning": {"prompt_tokens": 700, "calls": 1},
                                        "execution": {"prompt_tokens": 500, "calls": 3}},
    "setup_seconds": 1.5, "agent_seconds": 12.25, "test_seconds": 3.0, "harness_seconds": 0.25,
    "fail_to_pass": FAIL_TO_PASS, "pass_to_pass": PASS_TO_PASS,
}  # fmt: skip


def trajectory(data_dir: Path, path: Path) -> None:
    """A planning history as the agent writes one: a plan of three steps, the first done,
    the second failed, the third not run yet (its writer's own file, copied)."""
    history = PlanningHistory(data_dir, "t-1")
    document = docs.plan(
        [docs.action("t1", "read_file"), docs.action("t2", "write_file"),
         docs.action("t3", "run_tests")],
        subtasks=[{"id": "t1", "description": "Read calc.py"},
                  {"id": "t2", "description": f"Fix modulo {MARKUP}"},
                  {"id": "t3", "description": "Run the tests"}],
    )  # fmt: skip
    history.append(HistoryKind.PLAN, plan=parse_plan(document).to_document(), cached=False)
    history.append(HistoryKind.ACTION, key="t1", task_id="t1", tool="read_file", ok=True)
    history.append(HistoryKind.ACTION, key="t2", task_id="t2", tool="write_file", ok=False)
    history.append(HistoryKind.COMPLETION, status="requires_human_intervention")
    shutil.copyfile(history.path, path)


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    root = tmp_path / "runs"
    run = root / RUN
    task = run / "tasks" / TASK
    (task / "score").mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"model": "m", "started": 1_700_000_000}))
    other = {"instance_id": "other", "resolved": True, "outcome": "done", "reason": ""}
    lines = [json.dumps(other), json.dumps(RESULT), '{"instance_id": "cut']  # a crash cut
    (run / "results.jsonl").write_text("\n".join(lines))
    (task / "score" / "tests.log").write_text("x" * 80 + "\n" + "y\n" * LOG_BYTES + LOG_END)
    (task / "report.md").write_text("# Run report\n")
    trajectory(tmp_path / "data", task / "trajectory.jsonl")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "tests.log").write_text(SECRET)
    linked = run / "tasks" / "linked" / "score"
    linked.mkdir(parents=True)
    (linked / "tests.log").symlink_to(outside / "tests.log")
    return root


def overrides(runs: Path) -> dict[str, Any]:
    return {**WITH_API, "eval": {"runs_dir": runs}}


EXPECTED_TESTS = [
    *({"id": k, "group": "FAIL_TO_PASS", "status": v} for k, v in FAIL_TO_PASS.items()),
    *({"id": k, "group": "PASS_TO_PASS", "status": v} for k, v in PASS_TO_PASS.items()),
]
EXPECTED_PLAN = [
    {"id": "t1", "description": "Read calc.py", "status": "done"},
    {"id": "t2", "description": f"Fix modulo {MARKUP}", "status": "failed"},
    {"id": "t3", "description": "Run the tests", "status": "pending"},
]


async def test_the_api_gives_each_tests_status_the_log_the_plan_and_the_times(
    tmp_path: Path, runs: Path
) -> None:
    async with Harness(tmp_path, overrides=overrides(runs)) as bot:
        path = f"/api/eval/runs/{RUN}/tasks/{TASK}"
        assert (await bot.client.get(path)).status_code == 401
        answer = await bot.client.get(path, headers=AUTH)
        assert answer.status_code == 200
        task = answer.json()
        assert task["tests"] == EXPECTED_TESTS
        assert task["plan"] == EXPECTED_PLAN
        assert [e["type"] for e in task["timeline"]] == ["plan", "action", "action", "completion"]
        result = task["result"]
        assert result["reason"] == RESULT["reason"] and result["outcome"] == "done"
        assert (result["setup_seconds"], result["agent_seconds"]) == (1.5, 12.25)
        assert (result["test_seconds"], result["harness_seconds"]) == (3.0, 0.25)
        assert result["seconds"] == 17.0 and result["tokens"] == 1545
        assert result["tokens_by_phase"] == RESULT["tokens_by_phase"]
        log = task["test_log"]
        size = (runs / RUN / "tasks" / TASK / "score" / "tests.log").stat().st_size
        assert log["path"] == f"tasks/{TASK}/score/tests.log" and log["size"] == size
        assert log["cut"] and log["excerpt"].endswith(LOG_END)
        assert len(log["excerpt"].encode()) <= LOG_BYTES and log["excerpt"].startswith("y\n")

        linked = await bot.client.get(f"/api/eval/runs/{RUN}/tasks/linked", headers=AUTH)
        assert linked.status_code == 200 and SECRET not in linked.text  # a link is not read
        assert linked.json()["test_log"] is None and linked.json()["result"] is None
        for run_id, instance_id in (
            (RUN, "%2E%2E"), (RUN, "..%2F..%2Foutside"), ("%2E%2E", TASK),
            (RUN, "no-such-task"), ("no-such-run", TASK),
        ):  # fmt: skip
            refused = await bot.client.get(
                f"/api/eval/runs/{run_id}/tasks/{instance_id}", headers=AUTH
            )
            assert refused.status_code == 404, (run_id, instance_id)
            assert SECRET not in refused.text


async def test_the_page_shows_text_never_markup_and_refuses_a_way_out(
    tmp_path: Path, runs: Path
) -> None:
    async with Harness(tmp_path, overrides=overrides(runs)) as bot:
        cookie = {"Cookie": f"{session.COOKIE}={session.issue(TOKEN, time.time())}"}
        page = await bot.client.get(f"/dashboard/eval/{RUN}/tasks/{TASK}", headers=cookie)
        assert page.status_code == 200 and MARKUP not in page.text
        escaped = "&lt;script&gt;alert(1)&lt;/script&gt;"
        assert page.text.count(escaped) == 3  # a test's id, the reason, a plan step
        for path in (
            f"/dashboard/eval/{RUN}/tasks/..%2F..%2Foutside",
            f"/dashboard/eval/{RUN}/tasks/%2E%2E",
            f"/dashboard/eval/%2E%2E/tasks/{TASK}",
        ):
            refused = await bot.client.get(path, headers=cookie)
            assert refused.status_code == 404, path
        linked = await bot.client.get(f"/dashboard/eval/{RUN}/tasks/linked", headers=cookie)
        assert linked.status_code == 200 and SECRET not in linked.text
        assert "No test log." in linked.text


@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (scripts/test-deps)")
async def test_the_page_shows_the_tests_the_log_the_plan_and_the_figures(
    tmp_path: Path, runs: Path
) -> None:
    async with (
        Harness(tmp_path, overrides=overrides(runs)) as bot,
        served(bot) as base,
        playwright.async_playwright() as driver,
    ):
        answer = await bot.client.get(f"/api/eval/runs/{RUN}/tasks/{TASK}", headers=AUTH)
        api = answer.json()
        browser, page = await log_in(driver, base)
        await page.goto(f"{base}/dashboard/eval/{RUN}")
        await page.click(f"#results a:text-is('{TASK}')")
        assert page.url == f"{base}/dashboard/eval/{RUN}/tasks/{TASK}"
        assert await page.inner_text("#verdict") == "unresolved"

        rows = await page.locator("#tests tr[data-status]").all_inner_texts()
        shown = [[cell.strip() for cell in row.split("\t")] for row in rows]
        assert shown == [[t["group"], t["id"], t["status"]] for t in api["tests"]]
        assert await page.inner_text("#reason") == RESULT["reason"]
        assert await page.inner_text("#test-log-path") == f"tasks/{TASK}/score/tests.log"
        log = await page.inner_text("#test-log")
        assert log.strip() == api["test_log"]["excerpt"].strip() and LOG_END.strip() in log

        items = page.locator("#plan li")
        assert await items.count() == 3
        for n, step in enumerate(api["plan"]):
            item = items.nth(n)
            assert await item.get_attribute("data-status") == step["status"]
            assert step["description"] in await item.inner_text()
        assert [step["status"] for step in api["plan"]] == ["done", "failed", "pending"]

        figures = await page.locator("#figures tr").all_inner_texts()
        assert len(figures) == 2
        values = [cell.strip() for cell in figures[1].split("\t")]
        assert values == ["done", "1,545", "$0.0123", "4", "0", "1.5 s", "12.2 s", "3.0 s",
                          "0.25 s", "17.0 s"]  # fmt: skip
        phases = await page.inner_text("#phases")
        assert "planning" in phases and "prompt_tokens 700" in phases
        assert len(await page.locator("#timeline tr").all_inner_texts()) == 4
        await browser.close()


def test_the_checklist_of_a_history_follows_its_revised_plan() -> None:
    """As a checkpoint's: a revised plan's steps not run yet are pending again, whatever an
    earlier plan's action did; a plan entry that is not a plan is passed over."""
    steps = [{"id": f"t{n}", "description": f"step {n}"} for n in (1, 2, 3)]
    first = docs.plan(
        [docs.action("t1", "read_file"), docs.action("t2", "write_file"),
         docs.action("t3", "run_tests")], subtasks=steps,
    )  # fmt: skip
    revised = docs.plan(
        [docs.action("t2", "write_file"), docs.action("t3", "run_tests")], subtasks=steps
    )
    entries: list[dict[str, Any]] = [
        {"type": "plan", "plan": parse_plan(first).to_document()},
        {"type": "action", "key": "t1", "task_id": "t1", "ok": True},
        {"type": "action", "key": "t2", "task_id": "t2", "ok": False},
        {"type": "revision", "number": 1, "plan": parse_plan(revised, revision=1).to_document()},
        {"type": "revision", "number": 2, "plan": None},  # the open tool loop's
        {"type": "plan", "plan": {"not": "a plan"}},
    ]

    def statuses(entries: list[dict[str, Any]]) -> list[str]:
        return [item["status"] for item in checklist(history_snapshot(entries))]

    assert statuses(entries[:3]) == ["done", "failed", "pending"]
    assert statuses(entries) == ["done", "pending", "pending"]
    ran = {"type": "action", "key": "r1/t2", "task_id": "t2", "ok": True}
    assert statuses([*entries, ran]) == ["done", "done", "pending"]
    assert checklist(history_snapshot([])) == []
