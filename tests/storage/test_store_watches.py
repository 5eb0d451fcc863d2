"""Watches: the bot's change requests after they were opened, kept across restarts,
saved with a version check so two workers never lose each other's update."""

from __future__ import annotations

from bot.events import ForgeKind, IssueRef, RepoRef
from bot.storage.base import Watch
from bot.storage.sql_store import SqlStore
from tests.storage.store_support import Clock

REPO = RepoRef(forge=ForgeKind.GITHUB, full_name="o/r")


def watch(number: int = 7, branch: str = "agent/1-fix", task_id: str = "t-1") -> Watch:
    issue = IssueRef(
        repo=REPO, number=number, is_change_request=True, head_branch=branch, head_repo="o/r"
    )
    return Watch(key=issue.key, repo_key=REPO.key, branch=branch, task_id=task_id, issue=issue)


async def test_a_change_request_is_watched_once(store: SqlStore) -> None:
    assert await store.add_watch(watch())
    assert not await store.add_watch(watch(task_id="t-2"))
    found = await store.get_watch(watch().key)
    assert found is not None
    assert (found.task_id, found.autofix, found.is_open, found.version) == ("t-1", True, True, 0)
    assert found.issue == watch().issue
    assert await store.get_watch("github:o/r#cr/99") is None


async def test_a_watch_is_found_by_its_branch(store: SqlStore) -> None:
    await store.add_watch(watch())
    await store.add_watch(watch(number=8, branch="agent/2-other"))
    found = await store.find_watch(REPO.key, "agent/2-other")
    assert found is not None and found.issue.number == 8
    assert await store.find_watch(REPO.key, "agent/3-none") is None
    assert await store.find_watch("gitlab:o/r", "agent/1-fix") is None


async def test_a_save_from_an_older_version_is_refused(store: SqlStore) -> None:
    await store.add_watch(watch())
    key = watch().key
    assert await store.save_watch(key, {"rounds": [1]}, version=0)
    assert not await store.save_watch(key, {"rounds": [2]}, version=0)  # lost the race
    found = await store.get_watch(key)
    assert found is not None and found.data == {"rounds": [1]} and found.version == 1
    assert await store.save_watch(key, {"rounds": [1, 2]}, version=1, is_open=False)
    closed = await store.get_watch(key)
    assert closed is not None and not closed.is_open and closed.data == {"rounds": [1, 2]}


async def test_autofix_is_switched_per_change_request(store: SqlStore) -> None:
    await store.add_watch(watch())
    assert await store.set_autofix(watch().key, False)
    found = await store.get_watch(watch().key)
    assert found is not None and not found.autofix
    assert not await store.set_autofix("github:o/r#cr/99", False)


async def test_the_poll_walks_open_watches_least_recently_updated_first(
    store: SqlStore, clock: Clock
) -> None:
    await store.add_watch(watch(number=1, branch="agent/1-a"))
    clock.advance(1)
    await store.add_watch(watch(number=2, branch="agent/2-b"))
    clock.advance(1)
    await store.add_watch(watch(number=3, branch="agent/3-c"))
    clock.advance(1)
    await store.save_watch(watch(number=1, branch="agent/1-a").key, {}, version=0)
    await store.save_watch(watch(number=3, branch="agent/3-c").key, {}, version=0, is_open=False)
    assert [w.issue.number for w in await store.open_watches()] == [2, 1]
    assert [w.issue.number for w in await store.open_watches(limit=1)] == [2]
