"""The run directory is written as the task goes: conversation.jsonl and errors.log."""

from __future__ import annotations

import contextlib
import json
import re
from pathlib import Path

from pydantic import SecretStr

from bot.agent.loop import AgentLoop
from bot.llm.base import LLMRequest, LLMResponse, Message
from bot.llm.calls import CONTENT_CHARS, exchange
from bot.llm.scripted import ScriptedLLM
from bot.record.runlog import RunLog
from bot.storage.base import TaskState
from tests.agent.conftest import make_harness, script

SECRET = "llm-key-0123456789abcdef"  # a configured secret, in no known token format
TOKEN = "ghp_" + "Q" * 36  # a token format the redactor knows
BODY = f"Add install steps. (Our key is {SECRET}, our token {TOKEN}.)\n\n" + "Details. " * 600
STAMP = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00"


def _steps() -> list[object]:
    """The failed-read scenario, with an invalid execution answer and an outage."""
    steps = script("tool_failure_revision")
    plan, reflection, revision, execution, completion = steps
    invalid = "Sure! I will write the README now."
    outage = {"error": "unavailable", "message": "connection refused"}
    return [plan, reflection, revision, invalid, execution, outage, completion]


async def test_a_run_logs_every_exchange_and_every_error_without_secrets(
    tmp_path: Path, stack: contextlib.AsyncExitStack
) -> None:
    harness = await make_harness(
        tmp_path, stack, body=BODY, llm_settings={"api_key": SecretStr(SECRET)}
    )
    llm = ScriptedLLM(_steps())

    paused = await harness.run(llm)
    done = await harness.run(llm)

    assert paused.state is TaskState.PAUSED and done.state is TaskState.DONE, done
    run_dir = harness.settings.data_dir / "runs" / harness.task.id
    conversation = (run_dir / "conversation.jsonl").read_text(encoding="utf-8")
    errors = (run_dir / "errors.log").read_text(encoding="utf-8")
    for text in (conversation, errors):
        assert SECRET not in text and TOKEN not in text

    entries = [json.loads(line) for line in conversation.splitlines()]
    assert [e["document"] for e in entries] == [r.phase for r in llm.requests]
    phases = [e["phase"] for e in entries]
    assert phases[:4] == ["planning", "reflection", "revision", "execution"]
    assert phases[-1] == "completion"
    for entry in entries:
        assert re.fullmatch(STAMP, entry["at"]) and entry["duration"] >= 0
        assert entry["messages"] and {m["role"] for m in entry["messages"]} <= {
            "system",
            "user",
            "assistant",
        }
    planning = entries[0]
    prompt = planning["messages"][-1]["content"]
    assert "[REDACTED]" in prompt and "Add install steps" in prompt
    assert len(prompt) < CONTENT_CHARS + 40 and prompt.endswith("more characters]")
    assert json.loads(planning["answer"])["phase"] == "planning"
    assert planning["usage"]["prompt_tokens"] > 0 and planning["usage"]["completion_tokens"] > 0
    invalid, reasked = entries[3], entries[4]
    assert invalid["answer"] == "Sure! I will write the README now."
    assert reasked["messages"][-2] == {"role": "assistant", "content": invalid["answer"]}
    [outage] = [e for e in entries if "error" in e]
    assert outage["error"] == "LLMUnavailable: connection refused" and "answer" not in outage

    lines = errors.splitlines()
    assert all(re.match(STAMP + r" \[", line) for line in lines), lines
    categories = [line.split(" ", 2)[1] for line in lines]
    assert categories == ["[tool]", "[model]", "[model]"], errors
    assert "task_1 (github_get_file_contents) failed: " in lines[0]
    assert "docs/install.md" in lines[0]
    assert "execution: the first answer was not a valid execution document" in lines[1]
    assert lines[2].endswith(": unreachable: LLMUnavailable: connection refused")


async def test_a_dry_run_writes_no_run_directory(
    tmp_path: Path, stack: contextlib.AsyncExitStack
) -> None:
    harness = await make_harness(tmp_path, stack)
    plan = await AgentLoop().plan_only(harness.ctx(ScriptedLLM(script("readme_simple"))))
    assert plan.actions
    assert not (harness.settings.data_dir / "runs").exists()


def test_the_run_log_redacts_nested_values_and_survives_a_missing_directory(
    tmp_path: Path,
) -> None:
    log = RunLog(tmp_path, "task-1", secrets=[SECRET])
    log.conversation({"messages": [{"content": f"key {SECRET}"}], "usage": {"n": 1}})
    saved = log.save_arguments("../k", {"token": TOKEN})
    assert log.directory is not None and Path(saved).parent == log.directory.path
    assert Path(saved).name == "approval-.._k.json"
    assert TOKEN not in Path(saved).read_text()
    line = (tmp_path / "runs" / "task-1" / "conversation.jsonl").read_text()
    assert SECRET not in line and json.loads(line)["usage"] == {"n": 1}

    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    broken = RunLog(blocked, "task-2")
    broken.error("action", "lost, but no crash")
    broken.conversation({"x": 1})
    assert broken.directory is None and broken.save_arguments("k", {}) == ""
    unnamed = RunLog(tmp_path, "../escape")
    assert unnamed.directory is None


def test_a_secret_across_the_cut_is_redacted_before_the_cut() -> None:
    log = RunLog(Path("/nonexistent"), "t", secrets=[SECRET])
    text = "x" * (CONTENT_CHARS - 11) + " " + TOKEN + " and " + SECRET
    request = LLMRequest("planning", (Message("user", text),))
    entry = exchange("planning", request, 0.5, LLMResponse(text), clean=log.redact)

    assert "ghp_" not in entry["messages"][0]["content"] and "ghp_" not in entry["answer"]
    assert SECRET not in entry["answer"] and entry["answer"].endswith("and [REDACTED]")
