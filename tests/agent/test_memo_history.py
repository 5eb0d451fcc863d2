"""The agent's memory in a task, through the real loop and the scripted model: the memo it
keeps for itself (``memo`` tool: write, list, clear; bounded; in the checkpoint, so a
restarted worker's run sees it; in report.md), and older calls folded into a summary past
``planning.history.max_turns``, never splitting a call from its result."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from bot.comments.render import agent_comment
from bot.config import secret_values
from bot.llm.scripted import ScriptedLLM
from bot.record.folding import digest, turns_to_fold
from bot.record.state import ActionRecord, ActionStatus, AgentState
from bot.storage.base import TaskState
from bot.tools.factory import build_tools
from bot.tools.memo import MAX_BYTES, MAX_ENTRIES, MAX_ENTRY_BYTES, MemoPad, memo_tool
from tests.agent import docs
from tests.agent.conftest import Harness, make_harness, planning_settings

WRITE = {"path": "README.md", "content": docs.README_WITH_INSTALL, "message": "Add"}
READ = {"path": "README.md"}


def step(tool: str, arguments: dict[str, object]) -> dict[str, object]:
    return docs.execution("open_loop", tool, arguments)


FINISH = step("finish", {})


async def open_harness(tmp_path: Path, stack: contextlib.AsyncExitStack, **history: int) -> Harness:
    planning = planning_settings(enabled=False, history=history) if history else None
    harness = await make_harness(tmp_path, stack, planning=planning)
    if not history:
        harness.settings = harness.settings.model_copy(
            update={"planning": planning_settings(enabled=False)}
        )
    return harness


async def checkpoint(harness: Harness) -> AgentState:
    data = await harness.store.load_checkpoint(harness.task.id)
    assert data is not None
    return AgentState.from_dict(data)


def prompt(llm: ScriptedLLM, number: int) -> str:
    return llm.requests[number].messages[-1].content


async def test_the_memo_is_written_shown_cleared_and_reported(
    tmp_path: Path, stack: contextlib.AsyncExitStack
) -> None:
    harness = await open_harness(tmp_path, stack)
    llm = ScriptedLLM(
        [
            step("memo", {"action": "write", "text": "README has no install section"}),
            step("memo", {"action": "write", "text": "scratch: line 3"}),
            step("memo", {"action": "clear", "entry": 2}),
            step("memo", {"action": "list"}),
            step("github_create_or_update_file", WRITE),
            FINISH,
            docs.completion(done=5),
        ]
    )

    outcome = await harness.run(llm)

    assert outcome.state is TaskState.DONE, outcome
    assert "memo" in prompt(llm, 0) and "Your memo" not in prompt(llm, 0)  # offered, empty
    second = prompt(llm, 2)
    assert "Your memo" in second and "2. scratch: line 3" in second
    assert "scratch" not in prompt(llm, 3).split("Your memo")[-1]  # cleared
    listed = [a for a in harness.actions("done") if a["tool"] == "memo"][-1]
    assert "1. README has no install section" in listed["result"]
    assert (await checkpoint(harness)).memo == ["README has no install section"]
    report = (harness.settings.data_dir / "runs" / harness.task.id / "report.md").read_text()
    assert "## Memo\n\n1. README has no install section" in report


async def test_the_memo_survives_a_restart(
    tmp_path: Path, stack: contextlib.AsyncExitStack
) -> None:
    harness = await open_harness(tmp_path, stack)
    outage = {"error": "unavailable", "message": "connection refused"}
    llm = ScriptedLLM(
        [
            step("memo", {"action": "write", "text": "the tests live in tests/unit"}),
            outage,
            step("github_create_or_update_file", WRITE),
            FINISH,
            docs.completion(done=2),
        ]
    )
    paused = await harness.run(llm)
    assert paused.state is TaskState.PAUSED, paused
    harness.built = await build_tools(  # a new worker: new tools, the memo from the checkpoint
        settings=harness.settings, forge=harness.forge, issue=harness.issue,
        task_id=harness.task.id, base_branch="main", repo_config=None, stack=stack,
        finish_comment=agent_comment(harness.task.id, secret_values(harness.settings)),
    )  # fmt: skip
    assert harness.built.memo.entries == []

    done = await harness.run(llm)

    assert done.state is TaskState.DONE, done
    assert "1. the tests live in tests/unit" in prompt(llm, 2)
    assert harness.built.memo.entries == ["the tests live in tests/unit"]


async def test_the_memo_is_bounded_and_a_refused_write_changes_nothing() -> None:
    pad = MemoPad()
    tool = memo_tool(pad)
    for n in range(MAX_ENTRIES):
        assert (await tool.handler({"action": "write", "text": f"note {n}"})).ok
    full = await tool.handler({"action": "write", "text": "one more"})
    assert not full.ok and "full" in full.output and len(pad.entries) == MAX_ENTRIES
    big = await tool.handler({"action": "write", "text": "x" * (MAX_ENTRY_BYTES + 1)})
    assert not big.ok and "bytes" in big.output
    assert (await tool.handler({"action": "clear"})).ok and pad.entries == []
    for _ in range(MAX_BYTES // MAX_ENTRY_BYTES):
        assert pad.write("é" * (MAX_ENTRY_BYTES // 2)) is None  # two bytes each
    assert pad.write("é") is not None and "8000 bytes" in (pad.write("é") or "")
    missing = await tool.handler({"action": "clear", "entry": 99})
    assert not missing.ok and "no entry 99" in missing.output
    empty = await tool.handler({"action": "write", "text": "  "})
    assert not empty.ok and "empty" in empty.output


async def test_older_calls_are_folded_into_the_models_summary(
    tmp_path: Path, stack: contextlib.AsyncExitStack
) -> None:
    harness = await open_harness(tmp_path, stack, max_turns=3, keep_turns=1)
    read = step("github_get_file_contents", READ)
    llm = ScriptedLLM(
        [read, read, read, read,
         "Read README.md four times: it has no install section.",  # the summary of 1-3
         step("github_create_or_update_file", WRITE), FINISH, docs.completion(done=5)]
    )  # fmt: skip

    outcome = await harness.run(llm)

    assert outcome.state is TaskState.DONE, outcome
    assert [r.phase for r in llm.requests][3:6] == ["execution", "history_summary", "execution"]
    asked = prompt(llm, 4)
    assert "[step_1]" in asked and "[step_3]" in asked and "[step_4]" not in asked
    after = prompt(llm, 5)
    assert "Summary of the 3 earlier calls:\nRead README.md four times" in after
    assert "[step_1]" not in after and "[step_4]" in after  # the newest call kept whole
    state = await checkpoint(harness)
    assert state.folded == ["step_1", "step_2", "step_3"]
    assert state.history_summary.startswith("Read README.md four times")


async def test_an_empty_summary_gives_the_bots_own_digest(
    tmp_path: Path, stack: contextlib.AsyncExitStack
) -> None:
    harness = await open_harness(tmp_path, stack, max_turns=2, keep_turns=1)
    read = step("github_get_file_contents", READ)
    llm = ScriptedLLM(
        [read, read, read, "", step("github_create_or_update_file", WRITE), FINISH,
         docs.completion(done=4)]
    )  # fmt: skip

    outcome = await harness.run(llm)

    assert outcome.state is TaskState.DONE, outcome
    after = prompt(llm, 4)
    assert "Summary of the 2 earlier calls:\n- [step_1] github_get_file_contents(" in after


def _record(key: str, status: ActionStatus = ActionStatus.DONE) -> ActionRecord:
    return ActionRecord(key, key, "read_file", status=status, output=f"output of {key}")


@pytest.mark.parametrize(
    ("statuses", "folded"),
    [
        ("ddddd", ["a", "b", "c"]),  # 5 > 4: all but the newest 2
        ("dddd", []),  # within the bound
        ("drddd", ["a"]),  # b has no result yet: it and what follows stay
        ("rdddd", []),
    ],
)
def test_a_call_is_never_folded_apart_from_its_result(statuses: str, folded: list[str]) -> None:
    kinds = {"d": ActionStatus.DONE, "r": ActionStatus.RUNNING}
    records = [_record(k, kinds[s]) for k, s in zip("abcde", statuses, strict=False)]
    found = turns_to_fold(records, set(), max_turns=4, keep_turns=2)
    assert [r.key for r in found] == folded
    assert turns_to_fold(records, set(), max_turns=0, keep_turns=2) == []  # 0: never
    assert digest("", found).count("\n") == max(0, len(found) - 1)
