"""The eval pages and ``/api/eval/runs`` never read outside the runs folder: an id with
``..``, a run folder, a task folder or a file that is a symbolic link to elsewhere are
refused (404) or not read; what a run folder holds is shown as text, never as markup."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from bot.dashboard import session
from tests.e2e.test_api import AUTH, TOKEN, WITH_API
from tests.harness import Harness

SECRET = "SECRET-outside-the-runs-folder"
MARKUP = "<script>alert(1)</script>"


def run_folder(folder: Path, results: list[dict[str, object]]) -> Path:
    folder.mkdir(parents=True)
    (folder / "run.json").write_text(json.dumps({"model": "m", "started": 1_700_000_000}))
    lines = [json.dumps({"resolved": False, "outcome": "error", **r}) for r in results]
    (folder / "results.jsonl").write_text("\n".join(lines) + "\n")
    return folder


def task_folder(run: Path, instance_id: str, report: str) -> Path:
    folder = run / "tasks" / instance_id
    folder.mkdir(parents=True)
    (folder / "report.md").write_text(report)
    entry = {"type": "revision", "timestamp": "2026-01-01T00:00:00.000Z", "number": 1,
             "reason": MARKUP}  # fmt: skip
    (folder / "trajectory.jsonl").write_text(json.dumps(entry) + "\n")
    return folder


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    """``good`` (with tasks ``t1``; ``t2`` whose report and trajectory are links out;
    ``linked``, a link to a task folder outside), ``linked`` (a link to a run folder
    outside) and ``borrowed`` (its results.jsonl a link to a file outside)."""
    outside = tmp_path / "eval" / "outside"
    secret_run = run_folder(outside / "run", [{"instance_id": SECRET}])
    secret_task = task_folder(secret_run, "t9", SECRET)
    (outside / "secret.txt").write_text(SECRET)
    root = tmp_path / "eval" / "runs"
    good = run_folder(root / "good", [{"instance_id": "t1", "reason": MARKUP}])
    task_folder(good, "t1", f"# Run report\n{MARKUP}\n")
    t2 = good / "tasks" / "t2"
    t2.mkdir()
    (t2 / "report.md").symlink_to(outside / "secret.txt")
    (t2 / "trajectory.jsonl").symlink_to(secret_task / "trajectory.jsonl")
    (good / "tasks" / "linked").symlink_to(secret_task)
    (root / "linked").symlink_to(secret_run)
    borrowed = root / "borrowed"
    borrowed.mkdir()
    (borrowed / "run.json").write_text("{}")
    (borrowed / "results.jsonl").symlink_to(secret_run / "results.jsonl")
    return root


async def test_the_api_reads_only_the_runs_folder(tmp_path: Path, runs: Path) -> None:
    overrides = {**WITH_API, "eval": {"runs_dir": runs}}
    async with Harness(tmp_path, overrides=overrides) as bot:
        listed = await bot.client.get("/api/eval/runs", headers=AUTH)
        assert listed.status_code == 200 and SECRET not in listed.text
        assert sorted((r["id"], r["finished"]) for r in listed.json()["runs"]) == [
            ("borrowed", 0),
            ("good", 1),
        ]
        for run_id in ("linked", "%2E%2E", "..%2Foutside%2Frun", ".hidden", "no-such-run"):
            refused = await bot.client.get(f"/api/eval/runs/{run_id}", headers=AUTH)
            assert refused.status_code == 404, run_id
            assert SECRET not in refused.text
        good = (await bot.client.get("/api/eval/runs/good", headers=AUTH)).json()
        assert [r["reason"] for r in good["results"]] == [MARKUP]  # data, as written


async def test_the_pages_read_only_the_runs_folder_and_show_text(
    tmp_path: Path, runs: Path
) -> None:
    overrides = {**WITH_API, "eval": {"runs_dir": runs}}
    async with Harness(tmp_path, overrides=overrides) as bot:
        assert (await bot.client.get("/dashboard/eval")).status_code == 303  # log in first
        assert (await bot.client.get("/dashboard/eval/good/tasks/t1")).status_code == 303
        cookie = {"Cookie": f"{session.COOKIE}={session.issue(TOKEN, time.time())}"}

        async def get(path: str) -> tuple[int, str]:
            response = await bot.client.get(path, headers=cookie)
            return response.status_code, response.text

        for path in (
            "/dashboard/eval/linked",
            "/dashboard/eval/%2E%2E",
            "/dashboard/eval/good/tasks/linked",
            "/dashboard/eval/good/tasks/%2E%2E",
            "/dashboard/eval/%2E%2E/tasks/t1",
            "/dashboard/eval/linked/tasks/t9",
            "/dashboard/eval/good/tasks/..%2F..%2Flinked%2Ftasks%2Ft9",
        ):
            status, text = await get(path)
            assert status == 404, path
            assert SECRET not in text, path
        status, text = await get("/dashboard/eval")
        assert status == 200 and SECRET not in text and "/dashboard/eval/good" in text
        status, text = await get("/dashboard/eval/good")
        assert status == 200 and MARKUP not in text and "&lt;script&gt;alert(1)" in text
        status, text = await get("/dashboard/eval/good/tasks/t1")
        assert status == 200 and MARKUP not in text
        assert text.count("&lt;script&gt;alert(1)&lt;/script&gt;") == 3  # reason, timeline, report
        status, text = await get("/dashboard/eval/good/tasks/t2")  # its files are links out
        assert status == 200 and SECRET not in text and "Nothing recorded yet." in text
        assert "No report yet." in text
