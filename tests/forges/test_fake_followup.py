"""The one FakeForge's after-opening state: what a test scripts is what the bot reads,
and what the bot does (replies, resolutions, ready for review) is what a test sees."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.change_state import Mergeable, ThreadAnswer
from bot.events import Check, CheckState, ForgeKind
from bot.forges.base import Forge, NotFound
from tests.fakes import WRITES, FakeForge
from tests.tools.conftest import git, make_remote


async def test_the_fake_scripts_checks_logs_state_and_threads() -> None:
    forge = FakeForge(ForgeKind.GITLAB)
    assert isinstance(forge, Forge)
    repo = forge.add_repo("g/p")
    opened = await forge.open_change_request(
        repo, head="agent/1-x", base="main", title="t", body="b"
    )
    forge.change(repo, opened.number).mergeable = Mergeable.CONFLICTING
    forge.change(repo, opened.number).head_sha = "c" * 40
    forge.set_checks("c" * 40, Check("test", CheckState.FAILED, id="9", log_id="9"))
    forge.logs["9"] = "line\n" * 10 + "boom\n"
    thread = forge.add_thread(repo, opened.number, ("alice", "fix it"), path="a.py", line=2)

    state = await forge.get_change_request_state(repo, opened.number)
    assert state.mergeable is Mergeable.CONFLICTING and state.draft
    assert [c.name for c in (await forge.get_commit_checks(repo, "c" * 40)).checks] == ["test"]
    tail = await forge.get_job_log(repo, "9", max_bytes=5)
    assert tail.text == "boom\n" and tail.truncated
    (listed,) = await forge.list_open_change_requests(repo, branch_prefix="agent/")
    assert listed.head_sha == "c" * 40

    await forge.reply_to_thread(repo, opened.number, thread.id, "Fixed in ccccccc.")
    await forge.resolve_thread(repo, opened.number, thread.id)
    await forge.mark_ready_for_review(repo, opened.number)
    (after,) = await forge.list_review_threads(repo, opened.number)
    assert after.resolved and after.last_author == forge.bot_login
    assert not (await forge.get_change_request_state(repo, opened.number)).draft
    assert forge.calls_of("mark_ready_for_review") == [("g/p", opened.number)]
    assert {"reply_to_thread", "resolve_thread", "mark_ready_for_review"} <= WRITES


async def test_the_fake_refuses_what_does_not_exist() -> None:
    forge = FakeForge()
    repo = forge.add_repo("o/r")
    with pytest.raises(NotFound):
        await forge.get_job_log(repo, "1")
    with pytest.raises(NotFound):
        await forge.get_change_request_state(repo, 5)
    opened = await forge.open_change_request(repo, head="agent/2", base="main", title="t", body="")
    with pytest.raises(NotFound):
        await forge.resolve_thread(repo, opened.number, "no-such-thread")
    forge.fail("get_commit_checks", NotFound("gone", status=404))
    with pytest.raises(NotFound):
        await forge.get_commit_checks(repo, "d" * 40)


async def test_unscripted_the_fake_reads_head_base_mergeability_from_the_real_remote(
    tmp_path: Path,
) -> None:
    remote = make_remote(tmp_path / "origin", {"README.md": b"one\n"})
    forge = FakeForge(ForgeKind.GITHUB)
    repo = forge.add_repo("o/r", clone_url=remote.url)
    seed = tmp_path / "seed"
    git("clone", "--quiet", remote.url, str(seed), cwd=tmp_path)
    git("checkout", "--quiet", "-b", "agent/1-x", cwd=seed)
    (seed / "README.md").write_text("branch\n")
    git("commit", "--quiet", "-am", "on the branch", cwd=seed)
    git("push", "--quiet", "origin", "agent/1-x", cwd=seed)
    opened = await forge.open_change_request(
        repo, head="agent/1-x", base="main", title="t", body="b"
    )
    state = await forge.get_change_request_state(repo, opened.number)
    assert (state.head_sha, state.base_sha) == (remote.rev("agent/1-x"), remote.rev("main"))
    assert state.mergeable is Mergeable.MERGEABLE
    assert [c.email for c in state.commits] == ["test@example.invalid"]
    git("checkout", "--quiet", "main", cwd=seed)
    (seed / "README.md").write_text("main\n")
    git("commit", "--quiet", "-am", "on main", cwd=seed)
    git("push", "--quiet", "origin", "main", cwd=seed)
    moved = await forge.get_change_request_state(repo, opened.number)
    assert moved.mergeable is Mergeable.CONFLICTING  # as git merge-tree says


async def test_answers_are_one_call_that_replies_and_resolves() -> None:
    forge = FakeForge(ForgeKind.GITHUB)
    repo = forge.add_repo("o/r")
    opened = await forge.open_change_request(
        repo, head="agent/1-x", base="main", title="t", body=""
    )
    one = forge.add_thread(repo, opened.number, ("alice", "a"))
    two = forge.add_thread(repo, opened.number, ("alice", "b"))
    await forge.answer_threads(
        repo,
        opened.number,
        [ThreadAnswer(one.id, "done", resolve=True), ThreadAnswer(two.id, "no")],
    )
    first, second = await forge.list_review_threads(repo, opened.number)
    assert first.resolved and first.comments[-1].body == "done"
    assert not second.resolved and second.comments[-1].body == "no"
    assert len(forge.calls_of("answer_threads")) == 1 and "answer_threads" in WRITES
