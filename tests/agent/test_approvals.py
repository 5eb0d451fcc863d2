"""Approval requests show exactly what runs, and an approval answers the request it follows."""

from __future__ import annotations

import contextlib
import json
import re
from pathlib import Path
from typing import Any

from bot.comments.milestones import milestone_body
from bot.events import TaskMode
from bot.llm.scripted import ScriptedLLM
from bot.record.inbox import Decision, read_inbox
from bot.record.state import Feedback
from bot.record.texts import MAX_SHOWN_CHARS, plain, tool_call_text
from bot.run_events import ProgressEvent, ProgressKind, progress_event
from bot.storage.base import TaskMessage, TaskState
from tests.agent import docs
from tests.agent.conftest import Harness, make_harness, planning_settings

WRITE = "github_create_or_update_file"
SNEAKY = (
    "# Widgets\n<!-- hidden: also delete SECURITY.md -->\n"
    "```\n</details>\n"  # a fence and a details end that must not close anything
    "safe\u202e txt.exe\u200b\n"  # bidi override and a zero-width space
)


def _fenced(body: str) -> tuple[str, str, str]:
    """(before, inside, after) the one json code fence of ``body``."""
    match = re.search(r"^(`{3,})json\n(.*?)\n\1$", body, re.DOTALL | re.MULTILINE)
    assert match is not None, body
    return body[: match.start()], match.group(2), body[match.end() :]


async def _tool_harness(tmp_path: Path, stack: contextlib.AsyncExitStack, **kw: Any) -> Harness:
    planning = planning_settings(security={"require_approval": [WRITE]})
    return await make_harness(tmp_path, stack, planning=planning, **kw)


def _write_plan(content: str, purpose: str = "Write the README") -> dict[str, Any]:
    arguments = {"path": "README.md", "content": content, "message": "Update the README"}
    return docs.plan([docs.action("task_1", WRITE, arguments=arguments, purpose=purpose)])


def _comment(data: dict[str, Any]) -> str:
    event = progress_event(ProgressKind.APPROVAL_REQUEST, data)
    body = milestone_body(event, "en", prefix="/agent", links={})
    assert body is not None
    return body


async def test_the_request_shows_the_full_arguments_in_a_fence_nothing_can_close(
    tmp_path: Path, stack: contextlib.AsyncExitStack
) -> None:
    harness = await _tool_harness(tmp_path, stack)
    llm = ScriptedLLM([_write_plan(SNEAKY, purpose="<!-- hide the rest"), docs.completion(done=1)])

    waiting = await harness.run(llm)

    assert waiting.state is TaskState.AWAITING_APPROVAL
    [request] = harness.of(ProgressKind.APPROVAL_REQUEST)
    body = _comment(request)
    before, inside, after = _fenced(body)
    # every argument, whole: the fenced JSON is the call that will run
    shown = json.loads(inside)
    assert shown == {"path": "README.md", "content": SNEAKY, "message": "Update the README"}
    assert "\u202e" not in inside and "\\u202e" in inside and "\\u200b" in inside
    assert "<!--" not in before and "&lt;!-- hide the rest" in before
    assert "<details open><summary>Arguments of github_create_or_update_file" in before
    assert after.lstrip("\n").startswith("</details>")
    assert "<!--" not in after and "Reply `/agent approve`" in after

    await harness.command("approve")
    done = await harness.run(llm)
    assert done.state is TaskState.DONE, done
    assert harness.branch_file("README.md") == SNEAKY  # what ran is what was shown


async def test_long_arguments_show_their_start_and_where_the_whole_call_is(
    tmp_path: Path, stack: contextlib.AsyncExitStack
) -> None:
    harness = await _tool_harness(tmp_path, stack)
    content = "x" * 9000 + "\nrm -rf / # at the very end\n"
    llm = ScriptedLLM([_write_plan(content), docs.completion(done=1)])

    await harness.run(llm)

    [request] = harness.of(ProgressKind.APPROVAL_REQUEST)
    _before, inside, after = _fenced(_comment(request))
    assert len(inside) <= MAX_SHOWN_CHARS + 2 and "rm -rf" not in inside
    saved = harness.settings.data_dir / "runs" / harness.task.id / "approval-task_1.json"
    assert f"The full arguments are in `{saved}`" in after
    assert json.loads(saved.read_text(encoding="utf-8"))["content"] == content


def test_text_outside_the_fence_is_plain_and_on_one_line() -> None:
    assert plain("a <!-- b\n\n<script>") == "a &lt;!-- b &lt;script>"
    assert plain("left\u202eright\u2066") == "left\\u202eright\\u2066"
    text = tool_call_text("t", "", {"k": "````"})
    assert "`````json\n" in text and text.count("`````") == 2  # longer than any run inside


async def test_a_late_approve_for_the_plan_does_not_approve_a_later_tool_call(
    tmp_path: Path, stack: contextlib.AsyncExitStack
) -> None:
    harness = await _tool_harness(tmp_path, stack, mode=TaskMode.PLAN_ONLY)
    llm = ScriptedLLM([_write_plan(docs.README_WITH_INSTALL), docs.completion(done=1)])
    assert (await harness.run(llm)).state is TaskState.AWAITING_APPROVAL  # the plan
    await harness.command("approve", author="alice")

    late: list[str] = []

    async def emit(event: ProgressEvent) -> None:  # bob approves the plan too, late
        harness.events.append(event)
        running = event.kind is ProgressKind.ACTION and event.data.get("status") == "running"
        if running and not late:
            late.append("bob")
            await harness.command("approve", author="bob")

    harness.emit = emit  # type: ignore[method-assign]
    tool_wait = await harness.run(llm)

    assert tool_wait.state is TaskState.AWAITING_APPROVAL
    assert [r["subject"] for r in harness.of(ProgressKind.APPROVAL_REQUEST)] == ["plan", "tool"]
    # bob's approve was sent before the call was shown: it approves nothing
    still = await harness.run(llm)
    assert still.state is TaskState.AWAITING_APPROVAL, still
    assert harness.forge.repo(harness.repo).commits == []

    await harness.command("approve", author="carol")
    done = await harness.run(llm)
    assert done.state is TaskState.DONE, done
    assert harness.branch_file("README.md") == docs.README_WITH_INSTALL


def test_decisions_sent_before_the_request_are_kept_but_decide_nothing() -> None:
    messages = [
        TaskMessage(4, "t", "command", {"name": "approve", "author": "bob"}),
        TaskMessage(5, "t", "command", {"name": "reject", "args": "no", "author": "eve"}),
        TaskMessage(6, "t", "feedback", {"author": "eve", "body": "why?"}),
    ]

    stale = read_inbox(messages, 3, decisions_after=5)
    assert stale.decision is None and stale.last_seq == 6
    assert [c.stale for c in stale.commands] == [True, True]
    assert stale.feedback == [Feedback("eve", "why?", 6)]

    fresh = read_inbox(messages, 3, decisions_after=4)
    assert fresh.decision == Decision(False, "eve", "no")
