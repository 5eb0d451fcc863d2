"""The same on GitLab: a merge request pipeline fails (the job's trace names the failing
test), one round fixes it, the next pipeline passes; review notes in the merge request's
discussions, collected until they stop coming, make one round that answers each
discussion and resolves it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bot.change_state import ThreadAnswer
from bot.events import Check, CheckKind, CheckState, RoundKind
from bot.forges.base import NotFound
from bot.storage.base import TaskState
from tests.agent import docs
from tests.e2e.after import (
    FIXED,
    PROJECT,
    SETTLE,
    bot_with_clock,
    fix_script,
    later,
    opening_script,
    pipeline,
    project,
)
from tests.e2e.support import GL_OWNER, GL_REPO, gl_note, settle, status_comment
from tests.harness import Harness
from tests.tools.conftest import Remote

pytestmark = pytest.mark.sandbox

TITLE = "Add calc.sh"
BRANCH = "agent/17-add-calc-sh"
TRACE = """\
\x1b[0KRunning with gitlab-runner 16.11.0 (91a27b2a)\x1b[0;m
$ sh tests/test_calc.sh
FAILED tests/test_calc.sh::test_sub: sub 5 3 gave 8, expected 2
\x1b[31;1mERROR: Job failed: exit code 1\x1b[0;m
"""


async def opened_merge_request(bot: Harness, remote: Remote) -> tuple[Any, str]:
    ref = bot.gitlab.add_repo(GL_REPO, dict(PROJECT), clone_url=remote.url, writers=(GL_OWNER,))
    bot.gitlab.add_issue(ref, 17, title=TITLE, author=GL_OWNER)
    note = gl_note("/agent run")
    note["issue"].update(title=TITLE, description="")
    await bot.send_gitlab("Note Hook", note)
    await settle(bot)
    [change] = bot.gitlab.repos[GL_REPO].change_requests
    return change, remote.rev(BRANCH)


def job(state: CheckState, job_id: int) -> Check:
    words = {CheckState.FAILED: "failed", CheckState.PASSED: "success"}
    return Check(
        name="test",
        state=state,
        kind=CheckKind.JOB,
        conclusion=words[state],
        id=str(job_id),
        log_id=str(job_id),
    )


def discussion_note(
    change: Any, body: str, *, note_id: int, discussion: str, path: str, line: int
) -> dict[str, Any]:
    payload = gl_note(body, kind="merge_request")
    position = {
        "base_sha": "a" * 40,
        "start_sha": "a" * 40,
        "head_sha": "b" * 40,
        "old_path": path,
        "new_path": path,
        "position_type": "text",
        "old_line": None,
        "new_line": line,
    }
    payload["object_attributes"].update(
        id=note_id, type="DiffNote", discussion_id=discussion, position=position
    )
    payload["merge_request"].update(
        iid=change.number,
        source_branch=BRANCH,
        url=change.web_url,
        target_branch="main",
        title=f"{TITLE} (#17)",
    )
    return payload


async def test_a_failed_pipeline_gets_one_fix_round_from_the_job_trace(tmp_path: Path) -> None:
    remote = project(tmp_path)
    async with bot_with_clock(tmp_path, [*opening_script(), *fix_script()]) as bot:
        change, first = await opened_merge_request(bot, remote)
        bot.gitlab.set_checks(first, job(CheckState.FAILED, 31))
        bot.gitlab.logs["31"] = TRACE
        await bot.send_gitlab("Pipeline Hook", pipeline(first, change.number, BRANCH))
        ran = await later(bot)

        [fix] = ran
        assert fix.request.round is not None and fix.request.round.kind is RoundKind.CI
        assert (await bot.store.get_task(fix.id)).state is TaskState.DONE  # type: ignore[union-attr]
        planning = bot.llm.requests[2].messages[-1].content
        assert "FAILED tests/test_calc.sh::test_sub: sub 5 3 gave 8, expected 2" in planning
        assert "\x1b" not in planning  # the trace's colours are not the model's business
        assert bot.gitlab.calls_of("get_job_log") == [(GL_REPO, "31", 65536)]
        second = remote.rev(BRANCH)
        assert second != first and remote.show(BRANCH, "calc.sh").decode() == FIXED

        bot.gitlab.set_checks(second, job(CheckState.PASSED, 32))
        passed = pipeline(
            second, change.number, BRANCH, status="success", job=(32, "test", "success")
        )
        await bot.send_gitlab("Pipeline Hook", passed)
        assert await later(bot) == []
        issue = bot.gitlab.issue(bot.gitlab.repos[GL_REPO].ref, 17)
        status = status_comment(issue)
        assert "Checks of `" + second[:7] + "`: ✅ test" in status
        assert "✅ Every check passed." in status  # ready stays a person's call (setting off)
        assert bot.gitlab.calls_of("mark_ready_for_review") == []


@pytest.mark.parametrize("answering", ["graphql", "thread refused", "no graphql"])
async def test_merge_request_discussions_make_one_round_that_answers_each(
    tmp_path: Path, answering: str
) -> None:
    """``graphql``: one GraphQL request answers (and resolves) both discussions; ``thread
    refused``: GitLab refuses one reply in it, so that discussion stays unanswered and open
    and the status comment says so; ``no graphql``: the instance refuses GraphQL (404), and
    the REST notes and updates answer."""
    remote = project(tmp_path)
    fix = docs.action(
        "task_1",
        "write_file",
        purpose="Fix sub (T1, T2)",
        arguments={"path": "calc.sh", "content": FIXED},
    )
    answered = docs.completion(done=1)
    answered["summary"]["threads"] = [
        {"thread": "T1", "changed": True, "reply": "sub subtracts."},
        {"thread": "T2", "changed": True, "reply": "covered by the same fix."},
    ]
    script = [*opening_script(), docs.plan([fix], objective="Answer the review"), answered]
    async with bot_with_clock(tmp_path, script) as bot:
        change, head = await opened_merge_request(bot, remote)
        notes = [
            discussion_note(
                change,
                "sub adds instead of subtracting",
                note_id=501,
                discussion="d1" * 20,
                path="calc.sh",
                line=2,
            ),
            discussion_note(
                change,
                "and 5 - 3 should be 2",
                note_id=502,
                discussion="d2" * 20,
                path="calc.sh",
                line=2,
            ),
        ]
        if answering == "thread refused":
            bot.gitlab.graphql_errors[("createNote", "d2" * 20)] = "Note can't be blank"
        elif answering == "no graphql":
            bot.gitlab.fail("graphql", NotFound("404 Not Found", status=404))
        await bot.send_gitlab("Note Hook", notes[0])
        await settle(bot)
        bot.clock.advance(SETTLE / 2)  # type: ignore[attr-defined]
        await bot.send_gitlab("Note Hook", notes[1])  # still coming: the round waits
        assert await settle(bot) == []
        bot.clock.advance(SETTLE / 2 + 1)  # type: ignore[attr-defined]
        assert await settle(bot) == []  # quiet since the first, not since the second
        # the merge request is watched: its author (GitLab names it by id) needs no look-up;
        # and with no task on it, the notes only bring the look at its discussions, which
        # reads them (and their authors' access) from the API: they are not read back
        assert (GL_REPO, change.number) not in bot.gitlab.calls_of("get_issue")
        read_back = [c[1] for c in bot.gitlab.calls_of("get_comment")]
        assert 501 not in read_back and 502 not in read_back and read_back  # the command's was
        ran = await later(bot, SETTLE)

        [review] = ran
        assert review.request.round is not None
        assert review.request.round.kind is RoundKind.REVIEW
        assert review.request.round.threads == ("d1" * 20, "d2" * 20)
        assert (await bot.store.get_task(review.id)).state is TaskState.DONE  # type: ignore[union-attr]
        pushed = remote.rev(BRANCH)
        assert pushed != head
        [call] = bot.gitlab.calls_of("answer_threads")
        answers: tuple[ThreadAnswer, ...] = call[2]
        assert [(a.thread_id, a.resolve) for a in answers] == [("d1" * 20, True), ("d2" * 20, True)]
        [(document, variables), *reopened] = bot.gitlab.calls_of("graphql")  # ONE for both
        assert document.count("createNote(") == 2
        assert document.count("discussionToggleResolve(") == 2
        assert [variables["d0"], variables["d1"]] == [
            f"gid://gitlab/Discussion/{'d1' * 20}",
            f"gid://gitlab/Discussion/{'d2' * 20}",
        ]
        assert bot.gitlab.calls_of("get_merge_request") == []  # its id came with the threads
        held = bot.gitlab.change(bot.gitlab.repos[GL_REPO].ref, change.number).threads
        assert held[0].resolved
        assert held[0].comments[-1].body == f"Changed in {pushed[:12]}: sub subtracts."
        assert held[0].comments[-1].author == "coding-agent-bot"
        status = status_comment(bot.gitlab.issue(bot.gitlab.repos[GL_REPO].ref, 17))
        if answering == "thread refused":
            assert not held[1].resolved  # resolved with the reply, then opened again
            assert held[1].comments[-1].author != "coding-agent-bot"
            assert "2 thread(s), 1 not answered" in status
            [(opened_again, _)] = reopened
            assert "discussionToggleResolve(input: {id: $d0, resolve: false})" in opened_again
            assert bot.gitlab.calls_of("reply_to_thread") == []
            return
        assert held[1].resolved and held[1].comments[-1].author == "coding-agent-bot"
        assert reopened == []
        assert "2 thread(s)" in status and "not answered" not in status
        rest = bot.gitlab.calls_of("reply_to_thread"), bot.gitlab.calls_of("resolve_thread")
        if answering == "no graphql":
            assert [len(calls) for calls in rest] == [2, 2]  # a note and an update each
        else:
            assert rest == ([], [])
