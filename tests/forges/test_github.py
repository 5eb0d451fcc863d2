"""The GitHub adapter against a mocked GitHub REST API (respx at the httpx transport).

Response bodies are GitHub's own examples from its OpenAPI description
(tests/fixtures/github/rest), with single fields overridden where a test needs them.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
import respx
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from pydantic import SecretStr

from bot.config import GitHubSettings
from bot.events import ForgeKind, IssueRef, RepoRef
from bot.forges.base import (
    AccessDenied,
    CloneAuth,
    Conflict,
    Forge,
    ForgeError,
    NotFound,
    Permission,
    RateLimited,
    SearchHit,
    TreeEntry,
)
from bot.forges.content import REPO_INFO_TTL
from bot.forges.github import GitHubForge
from bot.forges.github_auth import GitHubSession
from bot.forges.retry import WritePacer
from bot.metrics import REGISTRY

REST = Path(__file__).resolve().parent.parent / "fixtures" / "github" / "rest"
API = "https://api.github.com"
GHES = "https://ghe.example/api/v3"
NOW = 1_700_000_000.0
REPO_PATH = "/repos/octocat/Hello-World"
TOKEN_PATH = "/app/installations/1/access_tokens"
HEAD_SHA = "aa218f56b14c9653891f9e74264a383fa43fefbd"
APP_ID = "12345"

REPO = RepoRef(
    forge=ForgeKind.GITHUB,
    full_name="octocat/Hello-World",
    scope_id="1",
    default_branch="master",
    web_url="https://github.com/octocat/Hello-World",
)
ISSUE = IssueRef(repo=REPO, number=1347, title="Found a bug")


def rest(fixture: str, **overrides: Any) -> Any:
    data = json.loads((REST / f"{fixture}.json").read_text(encoding="utf-8"))
    if isinstance(data, dict):
        data.update(overrides)
    return data


def iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def token_body(token: str, expires: float) -> Any:
    return rest("installation-token", token=token, expires_at=iso(expires))


def sent_json(route: respx.Route, index: int = -1) -> Any:
    return json.loads(route.calls[index].request.content)


NOT_FOUND = {"message": "Not Found", "documentation_url": "https://docs.github.com/rest"}


class Sleeps:
    """The injected ``sleep``: records every wait instead of waiting."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="session")
def key_pair() -> tuple[str, rsa.RSAPublicKey]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    ).decode("ascii")
    return pem, key.public_key()


@pytest.fixture
def pem(key_pair: tuple[str, rsa.RSAPublicKey]) -> str:
    return key_pair[0]


@pytest.fixture
def mock() -> Iterator[respx.MockRouter]:
    with respx.mock(base_url=API, assert_all_called=False) as router:
        yield router


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient() as client:
        yield client


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def forge(http: httpx.AsyncClient, sleeps: Sleeps, clock: Clock) -> GitHubForge:
    """Token mode: most tests are about endpoints, not credentials."""
    return GitHubForge(
        GitHubSession(
            api_url=API,
            http=http,
            token="ghp_test",
            pacer=WritePacer(interval=0.0),
            sleep=sleeps,
            clock=clock,
        )
    )


@pytest.fixture
def app_forge(http: httpx.AsyncClient, sleeps: Sleeps, clock: Clock, pem: str) -> GitHubForge:
    return GitHubForge(
        GitHubSession(
            api_url=API,
            http=http,
            app_id=APP_ID,
            private_key=pem,
            pacer=WritePacer(interval=0.0),
            sleep=sleeps,
            clock=clock,
        )
    )


def test_the_adapter_is_a_forge(forge: GitHubForge) -> None:
    assert isinstance(forge, Forge)
    assert forge.kind is ForgeKind.GITHUB


# --- GitHub App credentials ---------------------------------------------------------------------


async def test_app_fetches_an_installation_token_with_a_jwt(
    app_forge: GitHubForge, mock: respx.MockRouter, key_pair: tuple[str, rsa.RSAPublicKey]
) -> None:
    tokens = mock.post(TOKEN_PATH).respond(201, json=token_body("ghs_first", NOW + 3600))
    perm = mock.get(f"{REPO_PATH}/collaborators/octocat/permission").respond(
        200, json=rest("collaborator-permission")
    )
    assert await app_forge.get_permission(REPO, "octocat") is Permission.ADMIN
    token_request = tokens.calls.last.request
    scheme, _, bearer = token_request.headers["authorization"].partition(" ")
    assert scheme.lower() == "bearer"
    claims = jwt.decode(bearer, key_pair[1], algorithms=["RS256"], options={"verify_exp": False})
    assert claims == {"iss": APP_ID, "iat": int(NOW) - 60, "exp": int(NOW) + 540}
    assert json.loads(token_request.content)["repositories"] == ["Hello-World"]
    api_request = perm.calls.last.request
    assert api_request.headers["authorization"] == "token ghs_first"
    assert api_request.headers["user-agent"] == "coding-agent-bot"
    assert api_request.headers["accept"] == "application/vnd.github+json"
    assert api_request.headers["x-github-api-version"] == "2022-11-28"


async def test_installation_token_is_reused_until_five_minutes_before_it_expires(
    app_forge: GitHubForge, mock: respx.MockRouter, clock: Clock
) -> None:
    tokens = mock.post(TOKEN_PATH)
    tokens.side_effect = [
        httpx.Response(201, json=token_body("ghs_first", NOW + 3600)),
        httpx.Response(201, json=token_body("ghs_second", NOW + 7200)),
    ]
    perm = mock.get(f"{REPO_PATH}/collaborators/octocat/permission").respond(
        200, json=rest("collaborator-permission")
    )
    await app_forge.get_permission(REPO, "octocat")
    clock.now = NOW + 3600 - 301
    await app_forge.get_permission(REPO, "octocat")
    assert tokens.call_count == 1
    clock.now = NOW + 3600 - 299
    await app_forge.get_permission(REPO, "octocat")
    assert tokens.call_count == 2
    used = [call.request.headers["authorization"] for call in perm.calls]
    assert used == ["token ghs_first", "token ghs_first", "token ghs_second"]


async def test_concurrent_calls_fetch_one_token(
    app_forge: GitHubForge, mock: respx.MockRouter
) -> None:
    tokens = mock.post(TOKEN_PATH).respond(201, json=token_body("ghs_first", NOW + 3600))
    mock.get(f"{REPO_PATH}/collaborators/octocat/permission").respond(
        200, json=rest("collaborator-permission")
    )
    await asyncio.gather(*(app_forge.get_permission(REPO, "octocat") for _ in range(3)))
    assert tokens.call_count == 1


async def test_installation_is_looked_up_when_the_repo_has_no_scope(
    app_forge: GitHubForge, mock: respx.MockRouter
) -> None:
    lookup = mock.get(f"{REPO_PATH}/installation").respond(200, json=rest("installation", id=7))
    tokens = mock.post("/app/installations/7/access_tokens").respond(
        201, json=token_body("ghs_seven", NOW + 3600)
    )
    perm = mock.get(f"{REPO_PATH}/collaborators/octocat/permission").respond(
        200, json=rest("collaborator-permission")
    )
    unscoped = RepoRef(forge=ForgeKind.GITHUB, full_name="octocat/Hello-World")
    await app_forge.get_permission(unscoped, "octocat")
    await app_forge.get_permission(unscoped, "octocat")
    assert lookup.call_count == 1
    assert tokens.call_count == 1
    assert lookup.calls.last.request.headers["authorization"].lower().startswith("bearer ")
    assert perm.calls.last.request.headers["authorization"] == "token ghs_seven"


async def test_repository_without_the_app_installed_is_not_found(
    app_forge: GitHubForge, mock: respx.MockRouter
) -> None:
    mock.get(f"{REPO_PATH}/installation").respond(404, json=NOT_FOUND)
    unscoped = RepoRef(forge=ForgeKind.GITHUB, full_name="octocat/Hello-World")
    with pytest.raises(NotFound, match="installation for octocat/Hello-World"):
        await app_forge.get_repo_info(unscoped)


async def test_token_response_without_expiry_is_an_error(
    app_forge: GitHubForge, mock: respx.MockRouter
) -> None:
    mock.post(TOKEN_PATH).respond(201, json={"token": "ghs_x"})
    with pytest.raises(ForgeError, match="without expires_at"):
        await app_forge.get_repo_info(REPO)


async def test_token_mode_sends_the_token_and_no_jwt(
    forge: GitHubForge, mock: respx.MockRouter
) -> None:
    route = mock.get(REPO_PATH).respond(200, json=rest("full-repository"))
    await forge.get_repo_info(REPO)
    assert route.calls.last.request.headers["authorization"] == "token ghp_test"
    assert not [call for call in mock.calls if call.request.url.path.startswith("/app/")]


async def test_enterprise_server_api_url_is_honoured(
    http: httpx.AsyncClient, sleeps: Sleeps, clock: Clock, pem: str
) -> None:
    ghes = GitHubForge(
        GitHubSession(
            api_url=GHES, http=http, app_id=APP_ID, private_key=pem, sleep=sleeps, clock=clock
        )
    )
    with respx.mock(base_url=GHES) as router:
        tokens = router.post(TOKEN_PATH).respond(201, json=token_body("ghs_ghe", NOW + 3600))
        repo = router.get(REPO_PATH).respond(200, json=rest("full-repository"))
        info = await ghes.get_repo_info(REPO)
    assert info.default_branch == "master"
    assert str(tokens.calls.last.request.url) == f"{GHES}{TOKEN_PATH}"
    assert str(repo.calls.last.request.url) == f"{GHES}{REPO_PATH}"


def test_credentials_must_be_one_kind(http: httpx.AsyncClient, pem: str) -> None:
    with pytest.raises(ValueError, match="not both"):
        GitHubForge(GitHubSession(api_url=API, http=http, app_id="1", private_key=pem, token="t"))
    with pytest.raises(ValueError, match="app_id with private_key"):
        GitHubForge(GitHubSession(api_url=API, http=http))
    with pytest.raises(ValueError, match="app_id with private_key"):
        GitHubForge(GitHubSession(api_url=API, http=http, app_id="1"))
    with pytest.raises(ValueError, match="token is empty"):
        GitHubForge(GitHubSession(api_url=API, http=http, token=" "))


def test_private_key_must_be_a_pem_rsa_key(http: httpx.AsyncClient) -> None:
    with pytest.raises(ValueError, match="not a usable PEM key"):
        GitHubForge(
            GitHubSession(api_url=API, http=http, app_id="1", private_key="-----BEGIN nonsense")
        )
    ec_pem = (
        ec.generate_private_key(ec.SECP256R1())
        .private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        .decode("ascii")
    )
    with pytest.raises(ValueError, match="must be an RSA key"):
        GitHubForge(GitHubSession(api_url=API, http=http, app_id="1", private_key=ec_pem))


async def test_from_settings_prefers_the_app(
    http: httpx.AsyncClient, mock: respx.MockRouter, pem: str
) -> None:
    settings = GitHubSettings(app_id="1", private_key=SecretStr(pem), token=SecretStr("ghp_x"))
    tokens = mock.post(TOKEN_PATH).respond(201, json=token_body("ghs_app", 4_000_000_000))
    mock.get(REPO_PATH).respond(200, json=rest("full-repository"))
    await GitHubForge.from_settings(settings, http).get_repo_info(REPO)
    assert tokens.call_count == 1


async def test_from_settings_with_a_token(http: httpx.AsyncClient, mock: respx.MockRouter) -> None:
    settings = GitHubSettings(api_url=GHES, token=SecretStr("ghp_x"))
    with respx.mock(base_url=GHES) as router:
        route = router.get(REPO_PATH).respond(200, json=rest("full-repository"))
        await GitHubForge.from_settings(settings, http).get_repo_info(REPO)
    assert route.calls.last.request.headers["authorization"] == "token ghp_x"


def test_from_settings_without_credentials_names_the_variables(http: httpx.AsyncClient) -> None:
    with pytest.raises(ValueError, match=r"GITHUB_APP_ID.*GITHUB_TOKEN"):
        GitHubForge.from_settings(GitHubSettings(), http)


# --- issues and comments ---------------------------------------------------------------------


def _plain_issue() -> dict[str, Any]:
    issue = rest("issue")
    del issue["pull_request"]
    return dict(issue)


async def test_get_issue_with_paginated_comments(
    forge: GitHubForge, mock: respx.MockRouter
) -> None:
    mock.get(f"{REPO_PATH}/issues/1347").respond(200, json=_plain_issue())
    next_url = f"{API}/repositories/1296269/issues/1347/comments?per_page=100&page=2"
    first = mock.get(f"{REPO_PATH}/issues/1347/comments").respond(
        200,
        json=rest("issue-comment-items"),
        headers={"Link": f'<{next_url}>; rel="next", <{next_url}>; rel="last"'},
    )
    second_page = [{**rest("issue-comment"), "id": 2, "body": "Me three", "html_url": "u2"}]
    mock.get("/repositories/1296269/issues/1347/comments").respond(200, json=second_page)
    details = await forge.get_issue(REPO, 1347, change_request=False)
    assert first.calls.last.request.url.params["per_page"] == "100"
    issue = details.issue
    assert (issue.number, issue.title, issue.state) == (1347, "Found a bug", "open")
    assert issue.body == "I'm having a problem with this."
    assert issue.author == "octocat"
    assert issue.labels == ("bug",)
    assert issue.web_url == "https://github.com/octocat/Hello-World/issues/1347"
    assert not issue.is_change_request and issue.head_branch is None
    assert [(c.id, c.body, c.author) for c in details.comments] == [
        (1, "Me too", "octocat"),
        (2, "Me three", "octocat"),
    ]


async def test_get_issue_without_comments_reads_the_issue_alone(
    forge: GitHubForge, mock: respx.MockRouter
) -> None:
    issue = mock.get(f"{REPO_PATH}/issues/1347").respond(200, json=_plain_issue())
    comments = mock.get(f"{REPO_PATH}/issues/1347/comments").respond(200, json=[])
    details = await forge.get_issue(REPO, 1347, change_request=False, comments=False)
    assert details.issue.labels == ("bug",) and details.comments == ()
    assert (issue.call_count, comments.call_count) == (1, 0)


async def test_get_issue_of_a_pull_request_reads_its_head_branch(
    forge: GitHubForge, mock: respx.MockRouter
) -> None:
    mock.get(f"{REPO_PATH}/issues/1347").respond(200, json=rest("issue"))
    mock.get(f"{REPO_PATH}/pulls/1347").respond(200, json=rest("pull-request"))
    mock.get(f"{REPO_PATH}/issues/1347/comments").respond(200, json=[])
    details = await forge.get_issue(REPO, 1347, change_request=True)
    assert details.issue.is_change_request
    assert details.issue.head_branch == "new-topic"
    assert details.issue.head_repo == "octocat/Hello-World"
    assert details.issue.key == "github:octocat/Hello-World#cr/1347"
    assert details.comments == ()


async def test_get_issue_of_a_pull_request_from_a_deleted_fork(
    forge: GitHubForge, mock: respx.MockRouter
) -> None:
    pull = rest("pull-request")
    pull["head"]["repo"] = None
    mock.get(f"{REPO_PATH}/issues/1347").respond(200, json=rest("issue"))
    mock.get(f"{REPO_PATH}/pulls/1347").respond(200, json=pull)
    mock.get(f"{REPO_PATH}/issues/1347/comments").respond(200, json=[])
    details = await forge.get_issue(REPO, 1347, change_request=True)
    assert (details.issue.head_branch, details.issue.head_repo) == ("new-topic", None)


async def test_create_comment(forge: GitHubForge, mock: respx.MockRouter) -> None:
    route = mock.post(f"{REPO_PATH}/issues/1347/comments").respond(201, json=rest("issue-comment"))
    comment = await forge.create_comment(ISSUE, "Me too")
    assert sent_json(route) == {"body": "Me too"}
    assert (comment.id, comment.body, comment.author) == (1, "Me too", "octocat")
    assert comment.web_url == "https://github.com/octocat/Hello-World/issues/1347#issuecomment-1"


async def test_get_comment(forge: GitHubForge, mock: respx.MockRouter) -> None:
    mock.get(f"{REPO_PATH}/issues/comments/1").respond(200, json=rest("issue-comment"))
    comment = await forge.get_comment(ISSUE, 1)
    assert (comment.id, comment.body, comment.author, comment.internal) == (
        1, "Me too", "octocat", False
    )  # fmt: skip


async def test_edit_comment(forge: GitHubForge, mock: respx.MockRouter) -> None:
    route = mock.patch(f"{REPO_PATH}/issues/comments/1").respond(200, json=rest("issue-comment"))
    await forge.edit_comment(ISSUE, 1, "- [x] step one")
    assert sent_json(route) == {"body": "- [x] step one"}


async def test_reactions_on_issue_and_comment(forge: GitHubForge, mock: respx.MockRouter) -> None:
    on_issue = mock.post(f"{REPO_PATH}/issues/1347/reactions").respond(201, json=rest("reaction"))
    on_comment = mock.post(f"{REPO_PATH}/issues/comments/9/reactions").respond(
        200, json=rest("reaction")
    )
    on_line = mock.post(f"{REPO_PATH}/pulls/comments/10/reactions").respond(
        201, json=rest("reaction")
    )
    await forge.add_reaction(ISSUE, None, "eyes")
    await forge.add_reaction(ISSUE, 9, "thumbsup")
    await forge.add_reaction(ISSUE, 10, "eyes", line_comment=True)
    assert sent_json(on_issue) == {"content": "eyes"}
    assert sent_json(on_comment) == {"content": "+1"}
    assert sent_json(on_line) == {"content": "eyes"}


async def test_unknown_reaction_is_refused_before_any_request(
    forge: GitHubForge, mock: respx.MockRouter
) -> None:
    with pytest.raises(ValueError, match="no reaction 'party'"):
        await forge.add_reaction(ISSUE, None, "party")
    assert not mock.calls


# --- labels and permissions -------------------------------------------------------------------


async def test_ensure_label_leaves_an_existing_label(
    forge: GitHubForge, mock: respx.MockRouter
) -> None:
    mock.get(f"{REPO_PATH}/labels/bug").respond(200, json=rest("label"))
    create = mock.post(f"{REPO_PATH}/labels").respond(201, json=rest("label"))
    await forge.ensure_label(REPO, "bug", color="f29513", description="")
    assert create.call_count == 0


async def test_ensure_label_creates_a_missing_label(
    forge: GitHubForge, mock: respx.MockRouter
) -> None:
    lookup = mock.get(f"{REPO_PATH}/labels/coding%20agent").respond(404, json=NOT_FOUND)
    create = mock.post(f"{REPO_PATH}/labels").respond(201, json=rest("label", name="coding agent"))
    await forge.ensure_label(REPO, "coding agent", color="#1d76db", description="Agent at work")
    assert lookup.calls.last.request.url.raw_path.endswith(b"/labels/coding%20agent")
    body = sent_json(create)
    assert body == {"name": "coding agent", "color": "1d76db", "description": "Agent at work"}


async def test_ensure_label_tolerates_a_label_created_meanwhile(
    forge: GitHubForge, mock: respx.MockRouter
) -> None:
    lookup = mock.get(f"{REPO_PATH}/labels/bug")
    lookup.side_effect = [
        httpx.Response(404, json=NOT_FOUND),
        httpx.Response(200, json=rest("label")),
    ]
    exists = {
        "message": "Validation Failed",
        "errors": [{"resource": "Label", "code": "already_exists", "field": "name"}],
    }
    mock.post(f"{REPO_PATH}/labels").respond(422, json=exists)
    await forge.ensure_label(REPO, "bug", color="f29513", description="")
    assert lookup.call_count == 2


async def test_ensure_label_with_an_invalid_colour_is_a_conflict(
    forge: GitHubForge, mock: respx.MockRouter
) -> None:
    mock.get(f"{REPO_PATH}/labels/bug").respond(404, json=NOT_FOUND)
    invalid = {
        "message": "Validation Failed",
        "errors": [{"resource": "Label", "code": "invalid", "field": "color"}],
    }
    mock.post(f"{REPO_PATH}/labels").respond(422, json=invalid)
    with pytest.raises(Conflict, match="color"):
        await forge.ensure_label(REPO, "bug", color="not-a-colour", description="")


async def test_add_labels(forge: GitHubForge, mock: respx.MockRouter) -> None:
    route = mock.post(f"{REPO_PATH}/issues/1347/labels").respond(200, json=rest("label-items"))
    await forge.add_labels(ISSUE, ["coding agent", "bug"])
    await forge.add_labels(ISSUE, [])
    assert route.call_count == 1
    assert sent_json(route) == {"labels": ["coding agent", "bug"]}


async def test_remove_label_and_a_label_that_is_not_there(
    forge: GitHubForge, mock: respx.MockRouter
) -> None:
    route = mock.delete(f"{REPO_PATH}/issues/1347/labels/coding%20agent")
    route.side_effect = [httpx.Response(200, json=[]), httpx.Response(404, json=NOT_FOUND)]
    await forge.remove_label(ISSUE, "coding agent")
    await forge.remove_label(ISSUE, "coding agent")
    assert route.call_count == 2


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"permission": "admin", "role_name": "admin"}, Permission.ADMIN),
        ({"permission": "write", "role_name": "maintain"}, Permission.MAINTAIN),
        ({"permission": "write", "role_name": "write"}, Permission.WRITE),
        ({"permission": "read", "role_name": "triage"}, Permission.TRIAGE),
        ({"permission": "read", "role_name": "read"}, Permission.READ),
        ({"permission": "write", "role_name": "security-reviewer"}, Permission.WRITE),
        ({"permission": "none", "role_name": ""}, Permission.NONE),
    ],
)
async def test_permission_mapping(
    forge: GitHubForge, mock: respx.MockRouter, body: dict[str, str], expected: Permission
) -> None:
    mock.get(f"{REPO_PATH}/collaborators/alice/permission").respond(
        200, json=rest("collaborator-permission", **body)
    )
    assert await forge.get_permission(REPO, "alice") is expected


async def test_permission_of_a_stranger_is_none(forge: GitHubForge, mock: respx.MockRouter) -> None:
    mock.get(f"{REPO_PATH}/collaborators/mallory/permission").respond(404, json=NOT_FOUND)
    assert await forge.get_permission(REPO, "mallory") is Permission.NONE


# --- repository content -------------------------------------------------------------------------


async def test_get_repo_info(forge: GitHubForge, mock: respx.MockRouter) -> None:
    mock.get(REPO_PATH).respond(200, json=rest("full-repository"))
    bare = RepoRef(forge=ForgeKind.GITHUB, full_name="octocat/Hello-World", scope_id="1")
    info = await forge.get_repo_info(bare)
    assert info.default_branch == "master"
    assert info.clone_url == "https://github.com/octocat/Hello-World.git"
    assert info.web_url == "https://github.com/octocat/Hello-World"
    assert info.description == "This your first repo!"
    assert info.repo.default_branch == "master"
    assert info.repo.scope_id == "1"


def _wrapped_base64(data: bytes) -> str:
    encoded = base64.b64encode(data).decode("ascii")
    return "\n".join(encoded[i : i + 60] for i in range(0, len(encoded), 60)) + "\n"


async def test_get_file_decodes_base64_at_a_ref(forge: GitHubForge, mock: respx.MockRouter) -> None:
    text = ("# Octokit\n" * 20).encode()
    route = mock.get(f"{REPO_PATH}/contents/docs/README.md").respond(
        200, json=rest("content-file", path="docs/README.md", content=_wrapped_base64(text))
    )
    found = await forge.get_file(REPO, "docs/README.md", ref="feature/x")
    assert found.content == text
    assert found.ref == "feature/x"
    assert found.sha == "3d21ec53a331a6f037a91c368710b99387d012c1"
    assert route.calls.last.request.url.params["ref"] == "feature/x"
    await forge.get_file(REPO, "docs/README.md")
    assert "ref" not in route.calls.last.request.url.params


async def test_get_file_over_one_megabyte_reads_the_blob(
    forge: GitHubForge, mock: respx.MockRouter
) -> None:
    big = rest("content-file", encoding="none", content="", sha="3a0f86fb")
    mock.get(f"{REPO_PATH}/contents/big.bin").respond(200, json=big)
    mock.get(f"{REPO_PATH}/git/blobs/3a0f86fb").respond(200, json=rest("blob"))
    found = await forge.get_file(REPO, "big.bin")
    assert found.content == b"Content of the blob"
    assert found.ref == "master"


async def test_get_file_of_a_directory_is_an_error(
    forge: GitHubForge, mock: respx.MockRouter
) -> None:
    mock.get(f"{REPO_PATH}/contents/lib").respond(200, json=rest("content-directory"))
    with pytest.raises(ForgeError, match="lib at master in octocat/Hello-World is a directory"):
        await forge.get_file(REPO, "lib")


async def test_missing_file_is_not_found_naming_the_path(
    forge: GitHubForge, mock: respx.MockRouter, sleeps: Sleeps
) -> None:
    mock.get(f"{REPO_PATH}/contents/src/nope.py").respond(404, json=NOT_FOUND)
    with pytest.raises(NotFound) as caught:
        await forge.get_file(REPO, "src/nope.py", ref="main")
    assert caught.value.status == 404
    message = str(caught.value)
    assert "file src/nope.py at main in octocat/Hello-World not found" in message
    assert f"GET {REPO_PATH}/contents/src/nope.py" in message
    assert sleeps.waits == []


async def test_file_names_are_percent_encoded(forge: GitHubForge, mock: respx.MockRouter) -> None:
    route = mock.get(url__regex=r".*/contents/.*").respond(
        200, json=rest("content-file", content=_wrapped_base64(b"x"))
    )
    await forge.get_file(REPO, "dir with space/{odd}#name?.md")
    assert route.calls.last.request.url.raw_path == (
        b"/repos/octocat/Hello-World/contents/dir%20with%20space/%7Bodd%7D%23name%3F.md"
    )


async def test_list_tree_one_level(forge: GitHubForge, mock: respx.MockRouter) -> None:
    route = mock.get(f"{REPO_PATH}/contents/lib").respond(200, json=rest("content-directory"))
    entries = await forge.list_tree(REPO, path="lib", ref="main")
    assert entries == [
        TreeEntry("lib/octokit.rb", "file", 625),
        TreeEntry("lib/octokit", "dir", None),
    ]
    assert route.calls.last.request.url.params["ref"] == "main"


async def test_list_tree_recursive_under_a_path(forge: GitHubForge, mock: respx.MockRouter) -> None:
    tree = rest("git-tree-recursive")
    tree["tree"] += [
        {"path": "subdir", "mode": "040000", "type": "tree", "sha": "b1"},
        {"path": "README", "mode": "100644", "type": "blob", "size": 12, "sha": "b2"},
        {"path": "subdir/vendor", "mode": "160000", "type": "commit", "sha": "b3"},
    ]
    route = mock.get(f"{REPO_PATH}/git/trees/master").respond(200, json=tree)
    everything = await forge.list_tree(REPO, recursive=True)
    assert everything == [
        TreeEntry("subdir/file.txt", "file", 132),
        TreeEntry("subdir", "dir", None),
        TreeEntry("README", "file", 12),
    ]
    assert route.calls.last.request.url.params["recursive"] == "1"
    under = await forge.list_tree(REPO, path="subdir/", recursive=True)
    assert under == [TreeEntry("subdir/file.txt", "file", 132)]


async def test_search_code_scopes_the_query_to_the_repo(
    forge: GitHubForge, mock: respx.MockRouter
) -> None:
    results = rest("code-search")
    results["items"][0]["text_matches"] = [
        {"fragment": "var rclass = /[\\t\\r\\n\\f]/g;", "matches": []}
    ]
    route = mock.get("/search/code").respond(200, json=results)
    hits = await forge.search_code(REPO, "rclass")
    request = route.calls.last.request
    assert request.url.params["q"] == "rclass repo:octocat/Hello-World"
    assert request.headers["accept"] == "application/vnd.github.text-match+json"
    assert hits[0] == SearchHit("src/attributes/classes.js", "var rclass = /[\\t\\r\\n\\f]/g;")
    assert len(hits) == len(results["items"])


async def test_search_code_needs_a_query(forge: GitHubForge) -> None:
    with pytest.raises(ValueError, match="non-empty query"):
        await forge.search_code(REPO, "  ")


# --- branches, commits, change requests ----------------------------------------------------------


async def test_create_branch_from_a_branch(forge: GitHubForge, mock: respx.MockRouter) -> None:
    mock.get(f"{REPO_PATH}/git/ref/heads/master").respond(200, json=rest("git-ref"))
    create = mock.post(f"{REPO_PATH}/git/refs").respond(201, json=rest("git-ref"))
    await forge.create_branch(REPO, "agent/issue-1347", from_ref="master")
    assert sent_json(create) == {"ref": "refs/heads/agent/issue-1347", "sha": HEAD_SHA}


async def test_create_branch_from_a_commit_needs_no_lookup(
    forge: GitHubForge, mock: respx.MockRouter
) -> None:
    create = mock.post(f"{REPO_PATH}/git/refs").respond(201, json=rest("git-ref"))
    await forge.create_branch(REPO, "agent/x", from_ref=HEAD_SHA)
    assert sent_json(create)["sha"] == HEAD_SHA
    assert len(mock.calls) == 1


async def test_existing_branch_is_a_conflict(forge: GitHubForge, mock: respx.MockRouter) -> None:
    mock.get(f"{REPO_PATH}/git/ref/heads/master").respond(200, json=rest("git-ref"))
    mock.post(f"{REPO_PATH}/git/refs").respond(
        422, json={"message": "Reference already exists", "documentation_url": "x"}
    )
    with pytest.raises(Conflict, match="Reference already exists") as caught:
        await forge.create_branch(REPO, "agent/x", from_ref="master")
    assert caught.value.status == 422


async def test_commit_files_makes_one_commit_with_deletions(
    forge: GitHubForge, mock: respx.MockRouter
) -> None:
    branch = f"{REPO_PATH}/git/ref/heads/agent/issue-1347"
    mock.get(branch).respond(200, json=rest("git-ref"))
    base = mock.get(f"{REPO_PATH}/git/commits/{HEAD_SHA}").respond(200, json=rest("git-commit"))
    blobs = mock.post(f"{REPO_PATH}/git/blobs")
    blobs.side_effect = [
        httpx.Response(201, json=rest("short-blob", sha="blob-text")),
        httpx.Response(201, json=rest("short-blob", sha="blob-binary")),
    ]
    trees = mock.post(f"{REPO_PATH}/git/trees").respond(201, json=rest("git-tree", sha="tree-new"))
    commits = mock.post(f"{REPO_PATH}/git/commits").respond(
        201, json=rest("git-commit", sha="c0ffee")
    )
    update = mock.patch(f"{REPO_PATH}/git/refs/heads/agent/issue-1347").respond(
        200, json=rest("git-ref")
    )
    files = {"src/app.py": b"print('hi')\n", "logo.png": b"\x89PNG\x00\xff", "old.txt": None}
    sha = await forge.commit_files(REPO, branch="agent/issue-1347", message="Fix", files=files)
    assert sha == "c0ffee"
    assert base.call_count == 1 and commits.call_count == 1
    assert [base64.b64decode(sent_json(blobs, i)["content"]) for i in (0, 1)] == [
        b"print('hi')\n",
        b"\x89PNG\x00\xff",
    ]
    assert sent_json(trees) == {
        "base_tree": "827efc6d56897b048c772eb4087f854f46256132",
        "tree": [
            {"path": "src/app.py", "mode": "100644", "type": "blob", "sha": "blob-text"},
            {"path": "logo.png", "mode": "100644", "type": "blob", "sha": "blob-binary"},
            {"path": "old.txt", "mode": "100644", "type": "blob", "sha": None},
        ],
    }
    assert sent_json(commits) == {"message": "Fix", "tree": "tree-new", "parents": [HEAD_SHA]}
    assert sent_json(update) == {"sha": "c0ffee", "force": False}


async def test_commit_files_needs_files(forge: GitHubForge) -> None:
    with pytest.raises(ValueError, match="at least one file"):
        await forge.commit_files(REPO, branch="b", message="m", files={})


async def test_open_change_request(forge: GitHubForge, mock: respx.MockRouter) -> None:
    route = mock.post(f"{REPO_PATH}/pulls").respond(201, json=rest("pull-request", draft=True))
    change = await forge.open_change_request(
        REPO, head="new-topic", base="master", title="Amazing new feature", body="Please pull"
    )
    assert sent_json(route) == {
        "title": "Amazing new feature",
        "head": "new-topic",
        "base": "master",
        "body": "Please pull",
        "draft": True,
    }
    assert change.number == 1347
    assert change.web_url == "https://github.com/octocat/Hello-World/pull/1347"
    assert (change.head_branch, change.base_branch, change.draft) == ("new-topic", "master", True)


async def test_update_change_request_replaces_its_body(
    forge: GitHubForge, mock: respx.MockRouter
) -> None:
    route = mock.patch(f"{REPO_PATH}/pulls/1347").respond(200, json=rest("pull-request"))
    await forge.update_change_request(REPO, 1347, body="The gate passed")
    assert sent_json(route) == {"body": "The gate passed"}


async def test_clone_auth_keeps_the_token_out_of_the_url(
    app_forge: GitHubForge, mock: respx.MockRouter
) -> None:
    mock.post(TOKEN_PATH).respond(201, json=token_body("ghs_clone", NOW + 3600))
    mock.get(REPO_PATH).respond(200, json=rest("full-repository"))
    auth = await app_forge.clone_auth(REPO)
    assert auth == CloneAuth(
        url="https://github.com/octocat/Hello-World.git",
        username="x-access-token",
        password="ghs_clone",
    )
    assert "ghs_clone" not in repr(auth)


async def test_aclose_forgets_tokens_and_leaves_the_shared_client_open(
    app_forge: GitHubForge, mock: respx.MockRouter, http: httpx.AsyncClient
) -> None:
    tokens = mock.post(TOKEN_PATH).respond(201, json=token_body("ghs_a", NOW + 3600))
    mock.get(REPO_PATH).respond(200, json=rest("full-repository"))
    await app_forge.get_repo_info(REPO)
    await app_forge.aclose()
    assert not http.is_closed
    await app_forge.get_repo_info(REPO)
    assert tokens.call_count == 2


async def test_a_repositorys_facts_are_asked_once_in_a_while(
    forge: GitHubForge, mock: respx.MockRouter, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A task reads them for its context, its clone and its delivery: one request.
    now = [1000.0]
    monkeypatch.setattr(forge, "_repo_clock", lambda: now[0])
    route = mock.get(REPO_PATH).respond(200, json=rest("full-repository"))
    first = await forge.get_repo_info(REPO)
    assert await forge.get_repo_info(REPO) == first
    await forge.clone_auth(REPO)
    assert route.call_count == 1
    now[0] += REPO_INFO_TTL + 1
    await forge.get_repo_info(REPO)
    assert route.call_count == 2


async def test_whoami_as_an_app_is_the_app_bot(
    app_forge: GitHubForge, mock: respx.MockRouter
) -> None:
    route = mock.get("/app").respond(200, json=rest("integration"))
    assert await app_forge.whoami() == "octoapp[bot]"
    assert route.calls.last.request.headers["authorization"].lower().startswith("bearer ")


async def test_whoami_with_a_token_is_its_user(forge: GitHubForge, mock: respx.MockRouter) -> None:
    mock.get("/user").respond(200, json=rest("private-user"))
    assert await forge.whoami() == "octocat"


async def test_whoami_with_a_revoked_token_is_access_denied(
    forge: GitHubForge, mock: respx.MockRouter
) -> None:
    mock.get("/user").respond(401, json={"message": "Bad credentials"})
    with pytest.raises(AccessDenied, match="Bad credentials"):
        await forge.whoami()


# --- errors, retries, rate limits ---------------------------------------------------------------


async def test_server_errors_are_retried_after_one_and_two_seconds(
    forge: GitHubForge, mock: respx.MockRouter, sleeps: Sleeps
) -> None:
    route = mock.get(REPO_PATH)
    route.side_effect = [
        httpx.Response(500),
        httpx.Response(502, json={"message": "Server Error"}),
        httpx.Response(200, json=rest("full-repository")),
    ]
    info = await forge.get_repo_info(REPO)
    assert info.default_branch == "master"
    assert sleeps.waits == [1.0, 2.0]


async def test_server_errors_give_up_after_three_retries(
    forge: GitHubForge, mock: respx.MockRouter, sleeps: Sleeps
) -> None:
    route = mock.get(REPO_PATH).respond(500, json={"message": "Server Error"})
    with pytest.raises(ForgeError, match="GitHub error 500 for repository") as caught:
        await forge.get_repo_info(REPO)
    assert caught.value.status == 500
    assert route.call_count == 4
    assert sleeps.waits == [1.0, 2.0, 4.0]


async def test_connection_failures_are_retried_then_reported(
    forge: GitHubForge, mock: respx.MockRouter, sleeps: Sleeps
) -> None:
    route = mock.get(REPO_PATH)
    route.side_effect = [httpx.ConnectError, httpx.Response(200, json=rest("full-repository"))]
    await forge.get_repo_info(REPO)
    assert sleeps.waits == [1.0]
    forge.forget_repo_infos()  # asked again, not answered from the last minutes' facts
    route.side_effect = httpx.ConnectTimeout
    with pytest.raises(ForgeError, match="GitHub is unreachable") as caught:
        await forge.get_repo_info(REPO)
    assert caught.value.status is None
    assert sleeps.waits == [1.0, 1.0, 2.0, 4.0]


async def test_429_waits_as_told_by_retry_after(
    forge: GitHubForge, mock: respx.MockRouter, sleeps: Sleeps
) -> None:
    route = mock.post(f"{REPO_PATH}/issues/1347/comments")
    route.side_effect = [
        httpx.Response(429, headers={"retry-after": "7"}, json={"message": "slow down"}),
        httpx.Response(201, json=rest("issue-comment")),
    ]
    waits = REGISTRY.get_sample_value(
        "bot_forge_waits_total", {"forge": "github", "reason": "rate_limit"}
    )
    writes = REGISTRY.get_sample_value(
        "bot_forge_requests_total", {"forge": "github", "kind": "write"}
    )
    await forge.create_comment(ISSUE, "Me too")
    assert sleeps.waits == [7.0]
    # Counted for /metrics: two requests (the refused one and its retry), one wait.
    assert (
        REGISTRY.get_sample_value(
            "bot_forge_waits_total", {"forge": "github", "reason": "rate_limit"}
        )
        == (waits or 0) + 1
    )
    assert (
        REGISTRY.get_sample_value("bot_forge_requests_total", {"forge": "github", "kind": "write"})
        == (writes or 0) + 2
    )


async def test_exhausted_rate_limit_waits_until_the_reset(
    forge: GitHubForge, mock: respx.MockRouter, sleeps: Sleeps
) -> None:
    limited = {
        "x-ratelimit-limit": "5000",
        "x-ratelimit-remaining": "0",
        "x-ratelimit-reset": str(int(NOW) + 30),
        "x-ratelimit-used": "5000",
    }
    route = mock.get(REPO_PATH)
    route.side_effect = [
        httpx.Response(403, headers=limited, json={"message": "API rate limit exceeded"}),
        httpx.Response(200, json=rest("full-repository")),
    ]
    await forge.get_repo_info(REPO)
    assert sleeps.waits == [31.0]


async def test_rate_limit_that_persists_is_rate_limited(
    forge: GitHubForge, mock: respx.MockRouter, sleeps: Sleeps
) -> None:
    mock.get(REPO_PATH).respond(429, headers={"retry-after": "7"}, json={"message": "slow"})
    with pytest.raises(RateLimited) as caught:
        await forge.get_repo_info(REPO)
    assert caught.value.retry_after == 7.0
    assert sleeps.waits == [7.0, 7.0, 7.0]


@pytest.mark.parametrize("status", [401, 403])
async def test_refused_access_is_access_denied_without_retries(
    forge: GitHubForge, mock: respx.MockRouter, sleeps: Sleeps, status: int
) -> None:
    headers = {"x-ratelimit-limit": "5000", "x-ratelimit-remaining": "4999"}
    body = {"message": "Resource not accessible by integration"}
    route = mock.post(f"{REPO_PATH}/issues/1347/labels").respond(status, headers=headers, json=body)
    with pytest.raises(AccessDenied, match="Resource not accessible by integration") as caught:
        await forge.add_labels(ISSUE, ["bug"])
    assert caught.value.status == status
    assert route.call_count == 1
    assert sleeps.waits == []


async def test_409_is_a_conflict(forge: GitHubForge, mock: respx.MockRouter) -> None:
    mock.patch(f"{REPO_PATH}/git/refs/heads/b").respond(
        409, json={"message": "Git Repository is empty."}
    )
    mock.get(f"{REPO_PATH}/git/ref/heads/b").respond(200, json=rest("git-ref"))
    mock.get(f"{REPO_PATH}/git/commits/{HEAD_SHA}").respond(200, json=rest("git-commit"))
    mock.post(f"{REPO_PATH}/git/blobs").respond(201, json=rest("short-blob"))
    mock.post(f"{REPO_PATH}/git/trees").respond(201, json=rest("git-tree"))
    mock.post(f"{REPO_PATH}/git/commits").respond(201, json=rest("git-commit"))
    with pytest.raises(Conflict, match="Git Repository is empty"):
        await forge.commit_files(REPO, branch="b", message="m", files={"a": b"1"})


async def test_response_of_the_wrong_shape_is_a_forge_error(
    forge: GitHubForge, mock: respx.MockRouter
) -> None:
    mock.get(REPO_PATH).respond(200, json={"full_name": "octocat/Hello-World"})
    with pytest.raises(ForgeError, match="unexpected GitHub response for repository"):
        await forge.get_repo_info(REPO)


async def test_repository_name_must_be_owner_slash_name(forge: GitHubForge) -> None:
    odd = RepoRef(forge=ForgeKind.GITHUB, full_name="group/sub/project", scope_id="1")
    with pytest.raises(ValueError, match="owner/name"):
        await forge.get_repo_info(odd)


# --- write pacing -----------------------------------------------------------------------------


class Overlap:
    """A side effect that measures how many requests are in flight at once."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self.in_flight = 0
        self.peak = 0

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        await asyncio.sleep(0.02)
        self.in_flight -= 1
        return self.response


async def test_concurrent_writes_do_not_overlap(forge: GitHubForge, mock: respx.MockRouter) -> None:
    overlap = Overlap(httpx.Response(201, json=rest("issue-comment")))
    mock.post(f"{REPO_PATH}/issues/1347/comments").mock(side_effect=overlap)
    await asyncio.gather(*(forge.create_comment(ISSUE, f"n{i}") for i in range(3)))
    assert overlap.peak == 1


async def test_concurrent_reads_are_not_paced(forge: GitHubForge, mock: respx.MockRouter) -> None:
    overlap = Overlap(httpx.Response(200, json=rest("full-repository")))
    mock.get(REPO_PATH).mock(side_effect=overlap)
    await asyncio.gather(*(forge.get_repo_info(REPO) for _ in range(3)))
    assert overlap.peak == 3


async def test_writes_are_paced_per_installation(
    app_forge: GitHubForge, mock: respx.MockRouter
) -> None:
    mock.post(TOKEN_PATH).respond(201, json=token_body("ghs_one", NOW + 3600))
    mock.post("/app/installations/2/access_tokens").respond(
        201, json=token_body("ghs_two", NOW + 3600)
    )
    overlap = Overlap(httpx.Response(201, json=rest("issue-comment")))
    mock.post(f"{REPO_PATH}/issues/1347/comments").mock(side_effect=overlap)
    other = IssueRef(
        repo=RepoRef(forge=ForgeKind.GITHUB, full_name="octocat/Hello-World", scope_id="2"),
        number=1347,
    )
    await asyncio.gather(app_forge.create_comment(ISSUE, "a"), app_forge.create_comment(other, "b"))
    assert overlap.peak == 2


async def test_a_comment_cancelled_during_its_pacing_wait_does_not_block_later_writes(
    http: httpx.AsyncClient, sleeps: Sleeps, clock: Clock, mock: respx.MockRouter
) -> None:
    """What a reporter does to its pending status edit right after a milestone comment:
    the edit is cancelled while it sleeps out the pause between writes. The next write
    (the final status edit, the labels) must still go out."""
    forge = GitHubForge(GitHubSession(
        api_url=API, http=http, token="ghp_test", pacer=WritePacer(interval=0.3),
        sleep=sleeps, clock=clock,
    ))  # fmt: skip
    posted = mock.post(f"{REPO_PATH}/issues/1347/comments").respond(201, json=rest("issue-comment"))
    edited = mock.patch(f"{REPO_PATH}/issues/comments/1").respond(200, json={})
    await forge.create_comment(ISSUE, "milestone")
    pending = asyncio.create_task(forge.edit_comment(ISSUE, 1, "coalesced status"))
    await asyncio.sleep(0.05)
    pending.cancel()
    with pytest.raises(asyncio.CancelledError):
        await pending
    await asyncio.wait_for(forge.edit_comment(ISSUE, 1, "final status"), timeout=2.0)
    assert posted.call_count == 1
    assert [sent_json(edited, i)["body"] for i in range(edited.call_count)] == ["final status"]


async def test_validation_errors_are_spelled_out(
    forge: GitHubForge, mock: respx.MockRouter
) -> None:
    body = {
        "message": "Validation Failed",
        "errors": [
            {
                "resource": "PullRequest",
                "code": "custom",
                "message": "A pull request already exists for octocat:new-topic.",
            }
        ],
    }
    mock.post(f"{REPO_PATH}/pulls").respond(422, json=body)
    with pytest.raises(Conflict, match="A pull request already exists for octocat:new-topic"):
        await forge.open_change_request(REPO, head="new-topic", base="master", title="t", body="")


async def test_token_for_a_removed_installation_is_not_found(
    app_forge: GitHubForge, mock: respx.MockRouter
) -> None:
    mock.post(TOKEN_PATH).respond(404, json=NOT_FOUND)
    with pytest.raises(NotFound, match=r"installation 1 not found \(POST /app/installations/1/"):
        await app_forge.get_repo_info(REPO)


async def test_draft_refused_by_the_plan_opens_a_ready_pull_request(
    forge: GitHubForge, mock: respx.MockRouter
) -> None:
    refused = {
        "message": "Validation Failed",
        "errors": [
            {
                "resource": "PullRequest",
                "code": "custom",
                "message": "Draft pull requests are not supported in this repository.",
            }
        ],
    }
    route = mock.post(f"{REPO_PATH}/pulls")
    route.side_effect = [
        httpx.Response(422, json=refused),
        httpx.Response(201, json=rest("pull-request")),
    ]
    change = await forge.open_change_request(
        REPO, head="new-topic", base="master", title="t", body=""
    )
    assert [sent_json(route, i)["draft"] for i in (0, 1)] == [True, False]
    assert change.draft is False


async def test_the_app_s_bot_account_is_its_bot_user_with_its_id(
    app_forge: GitHubForge, mock: respx.MockRouter
) -> None:
    """Issue 27: the bot is known by its account id: the App's bot user, read from the
    public ``GET /users/<slug>[bot]`` (no credentials sent there)."""
    mock.get("/app").respond(200, json=rest("integration"))
    user = mock.get("/users/octoapp%5Bbot%5D").respond(
        200, json={"login": "octoapp[bot]", "id": 41898282, "type": "Bot"}
    )
    found = await app_forge.bot_account()
    assert (found.login, found.id, found.is_bot) == ("octoapp[bot]", "41898282", True)
    assert "authorization" not in user.calls.last.request.headers


async def test_a_token_s_bot_account_is_its_user(
    forge: GitHubForge, mock: respx.MockRouter
) -> None:
    mock.get("/user").respond(200, json=rest("private-user", id=583231))
    found = await forge.bot_account()
    assert (found.login, found.id) == ("octocat", "583231")


async def test_create_issue_opens_it_with_its_labels(
    forge: GitHubForge, mock: respx.MockRouter
) -> None:
    route = mock.post(f"{REPO_PATH}/issues").respond(201, json=rest("issue"))
    made = await forge.create_issue(
        REPO, title="Found a bug", body="I'm having a problem with this.", labels=["coding agent"]
    )
    assert sent_json(route) == {
        "title": "Found a bug", "body": "I'm having a problem with this.",
        "labels": ["coding agent"],
    }  # fmt: skip
    issue = rest("issue")
    assert (made.number, made.title, made.web_url) == (
        issue["number"], issue["title"], issue["html_url"]
    )  # fmt: skip
    assert made.repo == REPO and not made.is_change_request
