"""The ``bot`` command, run as a real process (``python -m bot``)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from bot.events import ForgeKind

ROOT = Path(__file__).resolve().parent.parent


def bot(*args: str, env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bot", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def base_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "GITLAB_", "LLM_"))}
    env.update(BOT_DATA_DIR=str(tmp_path / "data"), BOT_CONFIG=str(ROOT / "config.yaml"))
    env.update(extra)
    return env


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_config_show_masks_secrets(tmp_path: Path) -> None:
    env = base_env(tmp_path, GITHUB_WEBHOOK_SECRET="s3cret-hook", LLM_API_KEY="sk-live-xyz")
    result = bot("config", "show", env=env)
    assert result.returncode == 0, result.stderr
    assert "s3cret-hook" not in result.stdout and "sk-live-xyz" not in result.stdout
    assert "webhook_secret: '***'" in result.stdout
    assert "max_revisions: 3" in result.stdout


def test_config_error_exits_2_naming_key_and_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("planning:\n  max_subtask: 5\n")
    result = bot("--config", str(bad), "status", env=base_env(tmp_path))
    assert result.returncode == 2
    assert str(bad) in result.stderr and "planning.max_subtask: unknown key" in result.stderr


def test_doctor_reports_problems_with_fixes_and_fails(tmp_path: Path) -> None:
    port = free_port()  # nothing listens there
    env = base_env(tmp_path, LLM_BASE_URL=f"http://127.0.0.1:{port}/v1")
    result = bot("doctor", env=env)
    assert result.returncode == 1
    out = result.stdout
    assert "[ok  ] configuration" in out
    assert "[ok  ] store: sqlite" in out
    assert "[warn] forge: GitHub is disabled" in out
    assert "[FAIL] llm:" in out and "ollama serve" in out


def test_status_lists_tasks_as_text_and_json(tmp_path: Path) -> None:
    import asyncio

    from bot.events import IssueRef, RepoRef, TaskRequest
    from bot.storage.sqlite import SqliteStore

    async def seed() -> None:
        store = SqliteStore(tmp_path / "data" / "bot.sqlite3")
        await store.open()
        repo = RepoRef(ForgeKind.GITHUB, "octo/hello")
        await store.create_task(TaskRequest(issue=IssueRef(repo, 42), requested_by="alice"))
        await store.close()

    asyncio.run(seed())
    text = bot("status", env=base_env(tmp_path))
    assert text.returncode == 0 and "octo/hello#42" in text.stdout and "queued" in text.stdout
    rows = json.loads(bot("status", "--json", env=base_env(tmp_path)).stdout)
    assert rows[0]["repository"] == "octo/hello" and rows[0]["issue"] == 42
    assert rows[0]["state"] == "queued" and rows[0]["forge"] == "github"


def test_history_prints_a_timeline_by_id_prefix(tmp_path: Path) -> None:
    from bot.record.history import PlanningHistory

    task_id = "3f2a9c1e-0000-4000-8000-000000000000"
    history = PlanningHistory(tmp_path / "data", task_id, clock=lambda: 1_700_000_000.0)
    history.append("plan", plan={"task_decomposition": {"subtasks": [{"id": "task_1"}]}})
    history.append(
        "action",
        tool="read_file",
        arguments={"path": "README.md"},
        result="ok",
        duration=0.01,
        ok=True,
    )
    history.append("completion", summary={"goal_achieved": True})
    result = bot("history", task_id[:8], env=base_env(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "2023-11-14T22:13:20" in result.stdout
    assert "read_file" in result.stdout
    assert result.stdout.index("plan") < result.stdout.index("read_file")


def test_history_of_an_unknown_task(tmp_path: Path) -> None:
    result = bot("history", "nope", env=base_env(tmp_path))
    assert result.returncode == 1 and "no planning history" in result.stderr


def wait_ready(port: int) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, f"nothing became ready on port {port}"
        time.sleep(0.2)


def test_serve_starts_on_defaults_and_says_once_which_forges_are_disabled(
    tmp_path: Path,
) -> None:
    port, llm_port = free_port(), free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "bot", "serve", "--port", str(port)],
        cwd=ROOT,
        env=base_env(tmp_path, LLM_BASE_URL=f"http://127.0.0.1:{llm_port}/v1"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_ready(port)
        assert httpx.get(f"http://127.0.0.1:{port}/healthz").text == "ok"
        assert (tmp_path / "data" / "bot.sqlite3").exists()
    finally:
        proc.terminate()
        output, _ = proc.communicate(timeout=20)
    assert output.count("GitHub is disabled") == 1
    assert f"LLM endpoint http://127.0.0.1:{llm_port}/v1: cannot connect" in output
    assert output.count("GitLab is disabled") == 1
    assert "GITHUB_WEBHOOK_SECRET" in output


def test_a_worker_with_a_port_serves_health_and_metrics_but_no_webhooks(tmp_path: Path) -> None:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "bot", "serve", "--role", "worker", "--port", str(port)],
        cwd=ROOT,
        env=base_env(tmp_path, GITHUB_WEBHOOK_SECRET="s", GITHUB_TOKEN="t"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_ready(port)
        metrics = httpx.get(f"http://127.0.0.1:{port}/metrics")
        assert metrics.status_code == 200 and "bot_tasks_finished_total" in metrics.text
        hook = httpx.post(f"http://127.0.0.1:{port}/webhooks/github", content=b"{}")
        assert hook.status_code == 404  # webhooks go to the web replicas
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_bad_issue_url(tmp_path: Path) -> None:
    result = bot("run", "https://example.com/x", env=base_env(tmp_path))
    assert result.returncode == 2
    assert "example.com is neither the configured GitHub (github.com)" in result.stderr


def test_action_outside_a_runner_names_what_is_missing(tmp_path: Path) -> None:
    result = bot("action", env=base_env(tmp_path))
    assert result.returncode == 2
    assert "not set: GITHUB_REPOSITORY, GITHUB_EVENT_NAME, GITHUB_EVENT_PATH, RUNNER_TEMP" in (
        result.stderr
    )


def test_action_on_an_event_that_needs_nothing_writes_its_summary_and_outputs(
    tmp_path: Path,
) -> None:
    payload = json.loads((ROOT / "tests/fixtures/github/issue_comment.created.json").read_text())
    payload["sender"]["type"] = "Bot"
    (tmp_path / "event.json").write_text(json.dumps(payload))
    env = base_env(
        tmp_path,
        GITHUB_REPOSITORY="Codertocat/Hello-World",
        GITHUB_EVENT_NAME="issue_comment",
        GITHUB_EVENT_PATH=str(tmp_path / "event.json"),
        RUNNER_TEMP=str(tmp_path),
        GITHUB_STEP_SUMMARY=str(tmp_path / "summary.md"),
        GITHUB_OUTPUT=str(tmp_path / "output"),
        GITHUB_TOKEN="ghs_" + "Q" * 36,
    )
    result = bot("action", env=env)
    assert result.returncode == 0, result.stderr
    assert (
        (tmp_path / "summary.md")
        .read_text()
        .startswith("## Coding agent: skipped\n\nNothing to do: sent by a bot (Codertocat).")
    )
    assert "conclusion<<ghadelimiter_" in (tmp_path / "output").read_text()
    assert "ghs_QQQQ" not in result.stderr
