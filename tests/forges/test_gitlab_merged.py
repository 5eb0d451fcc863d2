"""The GitLab adapter's merged merge requests (``bot eval mine``) against GitLab's REST API
faked at the transport with ``responses``, through the real python-gitlab client: pages
of the merge request of tests/fixtures/gitlab/api (GitLab's documented shape), merged."""

# ruff: noqa: F811  (the fixtures imported from the adapter tests are parameters here)
from __future__ import annotations

from typing import Any

import pytest
import responses
from responses import matchers

from bot.forges.base import AccessDenied
from bot.forges.gitlab import GitLabForge
from tests.forges.test_gitlab import (  # noqa: F401  (fixtures)
    HOST,
    REPO,
    P,
    api,
    forge,
    load,
    pacer,
    waits,
)

LIST = f"{P}/merge_requests"


def merged(iid: int, *, merge: str | None, squash: str | None = None, at: str = "") -> Any:
    """A merged merge request: a merge commit (``merge_commit_sha``) or, merged by fast
    forward after a squash, only ``squash_commit_sha``; GitLab writes ``description``."""
    when = at or "2024-05-03T10:00:00.000Z"
    return load("merge_request") | {
        "iid": iid,
        "title": f"Change {iid}",
        "description": f"Closes #{iid + 100}",
        "state": "merged",
        "draft": False,
        "work_in_progress": False,
        "merged_at": when,
        "updated_at": when,
        "merge_commit_sha": merge,
        "squash_commit_sha": squash,
        "squash": squash is not None,
        "web_url": f"{HOST}/acme/widgets/-/merge_requests/{iid}",
    }


def query(page: int, **more: str) -> Any:
    return matchers.query_param_matcher(
        {"state": "merged", "order_by": "updated_at", "sort": "desc", "per_page": "100",
         "page": str(page), **more}
    )  # fmt: skip


async def test_merged_merge_requests_with_the_squash_commit_when_no_merge_commit(
    forge: GitLabForge, api: responses.RequestsMock
) -> None:
    page = [merged(9, merge="9" * 40, squash="a" * 40),  # squashed, then a merge commit
            merged(8, merge=None, squash="b" * 40),  # squashed, merged by fast forward
            merged(7, merge=None)]  # fast forward without squash: no commit of its own  # fmt: skip
    api.get(LIST, json=page, match=[query(1)])
    found = await forge.list_merged_change_requests(REPO)
    assert [(f.number, f.merge_commit) for f in found] == [(9, "9" * 40), (8, "b" * 40)]
    nine = found[0]
    assert (nine.title, nine.body) == ("Change 9", "Closes #109")
    assert nine.web_url == f"{HOST}/acme/widgets/-/merge_requests/9"
    assert nine.merged_at == "2024-05-03T10:00:00.000Z"
    assert len(api.calls) == 1  # a short page is the last


async def test_the_pages_read_are_bounded(forge: GitLabForge, api: responses.RequestsMock) -> None:
    full = [merged(n, merge=f"{n:040x}") for n in range(100, 0, -1)]
    api.get(LIST, json=full, match=[query(1)])
    api.get(LIST, json=full, match=[query(2)])
    found = await forge.list_merged_change_requests(REPO, max_pages=2)
    assert len(found) == 200 and len(api.calls) == 2  # a third page is never asked for


async def test_since_asks_for_the_updated_after_it_and_keeps_the_merged_after_it(
    forge: GitLabForge, api: responses.RequestsMock
) -> None:
    page = [merged(5, merge="5" * 40, at="2024-03-01T00:00:00.000Z"),
            merged(4, merge="4" * 40, at="2024-02-29T23:59:59.000Z")]  # fmt: skip
    page[1]["updated_at"] = "2024-03-02T08:00:00.000Z"  # edited after it was merged
    api.get(LIST, json=page, match=[query(1, updated_after="2024-03-01T00:00:00Z")])
    found = await forge.list_merged_change_requests(REPO, since="2024-03-01")
    assert [f.number for f in found] == [5]


async def test_a_refused_list_is_a_forge_error(
    forge: GitLabForge, api: responses.RequestsMock
) -> None:
    api.get(LIST, status=403, json={"message": "403 Forbidden"})
    with pytest.raises(AccessDenied):
        await forge.list_merged_change_requests(REPO)
