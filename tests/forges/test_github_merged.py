"""The GitHub adapter's merged pull requests (``bot eval mine``) against a mocked GitHub
(respx at the httpx transport): pages of GitHub's own ``pull-request-simple-items``
example (tests/fixtures/github/rest), with the fields a test needs overridden."""

# ruff: noqa: F811  (the fixtures imported from the adapter tests are parameters here)
from __future__ import annotations

from typing import Any

import httpx
import pytest
import respx

from bot.forges.base import ForgeError
from bot.forges.github import GitHubForge
from tests.forges.test_github import (  # noqa: F401  (fixtures)
    REPO,
    REPO_PATH,
    clock,
    forge,
    http,
    mock,
    rest,
    sleeps,
)

PULLS = f"{REPO_PATH}/pulls"


def pull(number: int, *, merged: bool = True, updated: str = "2024-03-05T10:00:00Z") -> Any:
    """GitHub's example pull request, closed: merged (``merged_at``), or closed without
    merging (``merged_at`` null; ``merge_commit_sha`` is then the test merge commit GitHub
    made, which is on no branch)."""
    item: dict[str, Any] = rest("pull-request-simple-items")[0]
    sha = f"{number:040x}"
    return item | {
        "number": number,
        "state": "closed",
        "title": f"Change {number}",
        "body": f"Fixes #{number + 1000}" if number % 2 else None,
        "html_url": f"https://github.com/octocat/Hello-World/pull/{number}",
        "updated_at": updated,
        "closed_at": updated,
        "merged_at": updated if merged else None,
        "merge_commit_sha": sha,
    }


def pages(route: respx.Route, *answers: list[Any]) -> None:
    route.side_effect = [httpx.Response(200, json=answer) for answer in answers]


async def test_merged_pull_requests_are_read_page_by_page_and_unmerged_ones_skipped(
    forge: GitHubForge, mock: respx.MockRouter
) -> None:
    route = mock.get(PULLS)
    first = [pull(n, merged=n % 3 != 0) for n in range(300, 200, -1)]  # 100: a full page
    pages(route, first, [pull(7), pull(6, merged=False)])
    found = await forge.list_merged_change_requests(REPO)
    assert route.call_count == 2
    params = route.calls[0].request.url.params
    assert dict(params) == {"state": "closed", "sort": "updated", "direction": "desc",
                            "per_page": "100", "page": "1"}  # fmt: skip
    assert route.calls[1].request.url.params["page"] == "2"
    numbers = [f.number for f in found]
    assert numbers == [n for n in range(300, 200, -1) if n % 3 != 0] + [7]
    seven = found[-1]
    assert (seven.title, seven.body, seven.merge_commit) == ("Change 7", "Fixes #1007", f"{7:040x}")
    assert seven.web_url == "https://github.com/octocat/Hello-World/pull/7"
    assert seven.merged_at == "2024-03-05T10:00:00Z"
    assert found[1].number == 298 and found[1].body == ""  # a null body


async def test_the_pages_read_are_bounded(forge: GitHubForge, mock: respx.MockRouter) -> None:
    route = mock.get(PULLS)
    full = [pull(n) for n in range(100)]
    pages(route, full, full, full)
    found = await forge.list_merged_change_requests(REPO, max_pages=2)
    assert route.call_count == 2 and len(found) == 200  # the third full page is never asked


async def test_since_keeps_the_merged_from_that_date_and_stops_the_pages(
    forge: GitHubForge, mock: respx.MockRouter
) -> None:
    route = mock.get(PULLS)
    recent = [pull(n, updated="2024-03-02T00:00:00Z") for n in range(200, 150, -1)]
    older = [pull(n, updated="2024-02-28T23:59:59Z") for n in range(150, 100, -1)]
    pages(route, recent + older, [pull(1)])
    found = await forge.list_merged_change_requests(REPO, since="2024-03-01")
    assert [f.number for f in found] == list(range(200, 150, -1))
    assert route.call_count == 1  # the page ended before the date: no further page


async def test_a_refused_list_is_a_forge_error(forge: GitHubForge, mock: respx.MockRouter) -> None:
    mock.get(PULLS).respond(404, json={"message": "Not Found"})
    with pytest.raises(ForgeError):
        await forge.list_merged_change_requests(REPO)
