"""Each forge request is a client span: its method, its route's template (never the
repository's values, never the query), its status and its retries, and never a token:
GitHub through the real adapter over respx, GitLab through python-gitlab over responses."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
import respx
from opentelemetry.trace import SpanKind, StatusCode

from bot.events import ForgeKind, IssueRef, RepoRef
from bot.forges.base import NotFound
from bot.forges.github import GitHubForge
from bot.forges.github_auth import GitHubSession
from bot.forges.gitlab import GitLabForge
from bot.forges.gitlab_client import GitLabClient
from bot.forges.retry import WritePacer
from bot.forges.routes import route_template
from tests.tracing.conftest import Spans

API = "https://api.github.com"
GH_TOKEN = "ghp_" + "k" * 36
GH_REPO = RepoRef(forge=ForgeKind.GITHUB, full_name="octocat/Hello-World", scope_id="1")
GH_ISSUE = IssueRef(repo=GH_REPO, number=1347, title="Found a bug")
GL_TOKEN = "glpat-" + "q" * 20
HOST = "https://gitlab.example.com"
GL_REPO = RepoRef(forge=ForgeKind.GITLAB, full_name="acme/widgets", project_id=42)
GL_ISSUE = IssueRef(repo=GL_REPO, number=7)
COMMENT = {
    "id": 1, "body": "hi", "user": {"login": "bot"},
    "html_url": "https://github.com/octocat/Hello-World/issues/1347#issuecomment-1",
}  # fmt: skip
NOTE = {"id": 310, "body": "hi", "author": {"username": "bot"}, "noteable_iid": 7}


@pytest.fixture
async def github() -> AsyncIterator[GitHubForge]:
    async def no_wait(seconds: float) -> None:
        return None

    async with httpx.AsyncClient() as http:
        yield GitHubForge(GitHubSession(api_url=API, http=http, token=GH_TOKEN,
                                        pacer=WritePacer(interval=0.0), sleep=no_wait))  # fmt: skip


async def test_a_github_request_is_a_span_named_by_its_route(
    github: GitHubForge, spans: Spans
) -> None:
    with respx.mock(base_url=API) as router:
        comments = router.post("/repos/octocat/Hello-World/issues/1347/comments")
        comments.side_effect = [httpx.Response(502), httpx.Response(201, json=COMMENT)]
        router.get("/repos/octocat/Hello-World/issues/99").respond(404, json={"message": "no"})
        await github.create_comment(GH_ISSUE, "hi")
        with pytest.raises(NotFound):
            await github.get_issue(GH_REPO, 99, change_request=False)

    posted = spans.one("POST /repos/{owner}/{repo}/issues/{id}/comments")
    assert posted.kind is SpanKind.CLIENT
    assert dict(posted.attributes or {}) == {
        "bot.forge": "github", "http.request.method": "POST",
        "url.template": "/repos/{owner}/{repo}/issues/{id}/comments",
        "server.address": "api.github.com", "http.response.status_code": 201,
        "bot.forge.retries": 1,
    }  # fmt: skip
    assert posted.status.status_code is not StatusCode.ERROR
    missing = spans.one("GET /repos/{owner}/{repo}/issues/{id}")
    assert (missing.attributes or {})["http.response.status_code"] == 404
    assert missing.status.status_code is StatusCode.ERROR
    assert (missing.attributes or {})["error.type"] == "404"
    assert not any(GH_TOKEN in value or "Hello-World" in value for value in spans.values())


async def test_a_gitlab_call_is_a_span_named_by_the_request_it_made(spans: Spans) -> None:
    import responses

    forge = GitLabForge(GitLabClient(url=HOST, token=GL_TOKEN, sleep=lambda s: None))
    try:
        with responses.RequestsMock() as api:
            api.post(f"{HOST}/api/v4/projects/42/issues/7/notes", json=NOTE, status=201)
            await forge.create_comment(GL_ISSUE, "hi")
    finally:
        await forge.aclose()
    [call] = spans.all
    assert call.name == "POST /api/v4/projects/{project}/issues/{id}/notes"
    attributes = dict(call.attributes or {})
    assert attributes["http.response.status_code"] == 201
    assert attributes["server.address"] == "gitlab.example.com"
    assert GL_TOKEN not in "\n".join(spans.values())


def test_a_route_keeps_the_kind_of_call_and_none_of_its_values() -> None:
    sha = "a" * 40
    repo, project = "/repos/{owner}/{repo}", "/api/v4/projects/{project}"
    cases = {
        f"{API}/repos/o/r/issues/12/comments?per_page=100": f"{repo}/issues/{{id}}/comments",
        "/repos/o/r/contents/docs/secret-plans.md?ref=main": f"{repo}/contents/{{path}}",
        "/repos/o/r/git/refs/heads/feature/x": f"{repo}/git/refs/{{path}}",
        f"/repos/o/r/commits/{sha}/check-runs": f"{repo}/commits/{{sha}}/check-runs",
        "/repos/o/r/issues/1/labels/coding%20agent": f"{repo}/issues/{{id}}/labels/{{name}}",
        "/app/installations/123/access_tokens": "/app/installations/{id}/access_tokens",
        f"{HOST}/api/v4/projects/acme%2Fw/merge_requests/3": f"{project}/merge_requests/{{id}}",
        f"{HOST}/api/v4/projects/42/repository/files/a%2Fb.py/raw?ref=x":
            f"{project}/repository/files/{{name}}/raw",
        "/graphql": "/graphql",
    }  # fmt: skip
    assert {url: route_template(url) for url in cases} == cases
