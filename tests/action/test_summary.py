"""The step's outputs and summary: what each task state concludes, the runner's output
file format, and no secret in the summary."""

from __future__ import annotations

from pathlib import Path

from bot.action.summary import (
    Conclusion,
    Result,
    conclusion_of,
    outputs,
    summary_markdown,
    write_outputs,
)
from bot.events import ForgeKind, IssueRef, RepoRef, TaskState
from tests.e2e.test_action import read_outputs

ISSUE = IssueRef(RepoRef(ForgeKind.GITHUB, "o/r"), 3, title="Fix it",
                 web_url="https://github.com/o/r/issues/3")  # fmt: skip


def test_every_task_state_has_a_conclusion() -> None:
    assert {state: conclusion_of(state).value for state in TaskState} == {
        TaskState.QUEUED: "waiting", TaskState.RUNNING: "failed",
        TaskState.AWAITING_INPUT: "waiting", TaskState.AWAITING_APPROVAL: "waiting",
        TaskState.PAUSED: "waiting", TaskState.DONE: "done",
        TaskState.NEEDS_HUMAN: "needs_human", TaskState.FAILED: "failed",
        TaskState.STOPPED: "stopped",
    }  # fmt: skip
    assert Result(Conclusion.FAILED).exit_code == 1
    assert {Result(c).exit_code for c in Conclusion if c is not Conclusion.FAILED} == {0}


def test_outputs_of_a_task_with_a_branch_and_a_cost() -> None:
    snapshot = {
        "total_tokens": 1234,
        "cost": 0.0123,
        "links": {
            "branch": "agent/3-fix-it",
            "change_request_url": "https://github.com/o/r/pull/4",
        },
    }
    result = Result(Conclusion.DONE, issue=ISSUE, task_id="t1", state=TaskState.DONE,
                    snapshot=snapshot)  # fmt: skip
    assert outputs(result) == {
        "conclusion": "done", "branch": "agent/3-fix-it",
        "change_request_url": "https://github.com/o/r/pull/4", "tokens": "1234",
        "cost": "0.0123",
    }  # fmt: skip


def test_the_output_file_holds_any_value_whole(tmp_path: Path) -> None:
    path = tmp_path / "output"
    tricky = "two\nlines\nghadelimiter_0\nbranch=evil"
    write_outputs(path, {"reason": tricky, "conclusion": "failed"})
    write_outputs(path, {"tokens": "5"})  # appended, as the runner's file is
    assert read_outputs(path) == {"reason": tricky, "conclusion": "failed", "tokens": "5"}


def test_the_summary_shows_the_task_and_hides_secrets() -> None:
    snapshot = {
        "total_tokens": 10,
        "plan": {
            "task_decomposition": {
                "subtasks": [{"id": "task_1", "description": "Read ghs_SECRETSECRET"}]
            }
        },
        "statuses": {"task_1": "done"},
        "gate": {"result": "passed", "steps": []},
    }
    result = Result(Conclusion.WAITING, reason="waiting for approval", issue=ISSUE,
                    task_id="t1", state=TaskState.AWAITING_APPROVAL, snapshot=snapshot,
                    notes=["The state is kept as artifact coding-agent-state-3."])  # fmt: skip
    text = summary_markdown(result, language="en", run_url="https://github.com/o/r/actions/runs/9",
                            secrets=("ghs_SECRETSECRET",))  # fmt: skip
    assert text.startswith("## Coding agent: waiting\n\nIssue: https://github.com/o/r/issues/3")
    assert "### Coding agent — ✋ Waiting for your approval" in text
    assert "- [x] ✅ Read " in text and "ghs_SECRETSECRET" not in text
    assert "Task `t1` · tokens 10 · cost not priced" in text
    assert "- The state is kept as artifact coding-agent-state-3." in text
    assert text.endswith("Run: https://github.com/o/r/actions/runs/9\n")
