"""The GitLab adapter against GitLab's REST API, faked at the transport with ``responses``.

Response bodies live in tests/fixtures/gitlab/api/ and follow GitLab's API documentation.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import responses
from pydantic import SecretStr
from responses import matchers

from bot.config import GitLabSettings
from bot.events import ForgeKind, IssueRef, RepoRef
from bot.forges.base import (
    AccessDenied,
    ChangeRequest,
    CloneAuth,
    Comment,
    Conflict,
    Forge,
    ForgeError,
    NotFound,
    Permission,
    RateLimited,
    SearchHit,
    TreeEntry,
)
from bot.forges.gitlab import GitLabForge, commit_actions, draft_title, permission_for
from bot.forges.gitlab_client import GitLabClient
from bot.forges.retry import WritePacer

FIXTURES = Path(__file__).parent.parent / "fixtures" / "gitlab" / "api"
TOKEN = "glpat-s3cr3t-t0ken"
NOW = 1_700_000_000.0
HOST = "https://gitlab.example.com"
API = f"{HOST}/api/v4"
P = f"{API}/projects/42"
REPO = RepoRef(
    forge=ForgeKind.GITLAB,
    full_name="acme/widgets",
    project_id=42,
    default_branch="main",
    web_url=f"{HOST}/acme/widgets",
)
ISSUE = IssueRef(repo=REPO, number=7, web_url=f"{HOST}/acme/widgets/-/issues/7")
MR = IssueRef(
    repo=REPO, number=3, is_change_request=True, web_url=f"{HOST}/acme/widgets/-/merge_requests/3"
)


def load(name: str) -> Any:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def sent(call: Any) -> Any:
    return json.loads(call.request.body)


class RecordingPacer(WritePacer):
    def __init__(self) -> None:
        super().__init__(interval=0.0)
        self.keys: list[str] = []

    def slot(self, key: str) -> Any:
        self.keys.append(key)
        return super().slot(key)


@pytest.fixture
def api() -> Iterator[responses.RequestsMock]:
    with responses.RequestsMock(assert_all_requests_are_fired=True) as mock:
        yield mock


@pytest.fixture
def waits() -> list[float]:
    return []


@pytest.fixture
def pacer() -> RecordingPacer:
    return RecordingPacer()


@pytest.fixture
async def forge(waits: list[float], pacer: RecordingPacer) -> AsyncIterator[GitLabForge]:
    forge = GitLabForge(
        GitLabClient(url=HOST, token=TOKEN, pacer=pacer, sleep=waits.append, clock=lambda: NOW)
    )
    yield forge
    await forge.aclose()


async def test_implements_the_forge_protocol(forge: GitLabForge) -> None:
    assert isinstance(forge, Forge)
    assert forge.kind is ForgeKind.GITLAB


# --- issues and comments -----------------------------------------------------------------


async def test_get_issue_with_human_notes_oldest_first(api: Any, forge: GitLabForge) -> None:
    api.get(f"{P}/issues/7", json=load("issue"))
    oldest_first = matchers.query_param_matcher({"sort": "asc", "order_by": "created_at"})
    api.get(f"{P}/issues/7/notes", json=load("notes"), match=[oldest_first])

    details = await forge.get_issue(REPO, 7, change_request=False)

    assert details.issue == IssueRef(
        repo=REPO,
        number=7,
        title="Add a widget exporter",
        body="Export widgets as CSV.",
        web_url=f"{HOST}/acme/widgets/-/issues/7",
        author="alice",
        author_id="11",  # the author's account id
        state="open",
        labels=("coding agent", "feature"),
    )
    url = f"{HOST}/acme/widgets/-/issues/7"
    assert details.comments == (
        Comment(301, "Please also export as JSON.", "alice", f"{url}#note_301", author_id="11"),
        Comment(305, "/agent run", "bob", f"{url}#note_305", author_id="12"),
    )
    assert api.calls[0].request.headers["PRIVATE-TOKEN"] == TOKEN


async def test_get_merge_request(api: Any, forge: GitLabForge) -> None:
    api.get(f"{P}/merge_requests/3", json=load("merge_request"))
    api.get(f"{P}/merge_requests/3/notes", json=[load("note")])

    details = await forge.get_issue(REPO, 3, change_request=True)

    assert details.issue.is_change_request
    assert details.issue.head_branch == "agent/issue-7"
    assert details.issue.title == "Draft: Add a widget exporter"
    assert details.issue.author == "project_42_bot_3f2a9c1d"
    assert [c.id for c in details.comments] == [310]


async def test_project_addressed_by_path_without_an_id(api: Any, forge: GitLabForge) -> None:
    api.get(f"{API}/projects/acme%2Fwidgets/issues/7", json=load("issue"))
    api.get(f"{P}/issues/7/notes", json=[])  # python-gitlab uses the issue's project_id
    by_path = RepoRef(forge=ForgeKind.GITLAB, full_name="acme/widgets")

    details = await forge.get_issue(by_path, 7, change_request=False)

    assert details.issue.number == 7


async def test_create_comment(api: Any, forge: GitLabForge) -> None:
    api.post(
        f"{P}/issues/7/notes",
        json=load("note"),
        status=201,
        match=[matchers.json_params_matcher({"body": "Working on it."})],
    )

    comment = await forge.create_comment(ISSUE, "Working on it.")

    assert comment == Comment(
        310, "Working on it.", "project_42_bot_3f2a9c1d", f"{ISSUE.web_url}#note_310",
        author_id="99",
    )  # fmt: skip


async def test_edit_comment_on_a_merge_request(api: Any, forge: GitLabForge) -> None:
    api.put(
        f"{P}/merge_requests/3/notes/310",
        json={**load("note"), "body": "Done."},
        match=[matchers.json_params_matcher({"body": "Done."})],
    )

    await forge.edit_comment(MR, 310, "Done.")

    assert len(api.calls) == 1


async def test_add_reaction_to_issue_and_to_a_note(api: Any, forge: GitLabForge) -> None:
    eyes = [matchers.json_params_matcher({"name": "eyes"})]
    api.post(f"{P}/issues/7/award_emoji", json=load("award_emoji"), status=201, match=eyes)
    api.post(
        f"{P}/issues/7/notes/305/award_emoji", json=load("award_emoji"), status=201, match=eyes
    )
    thumbs = [matchers.json_params_matcher({"name": "thumbsup"})]
    api.post(
        f"{P}/merge_requests/3/award_emoji", json=load("award_emoji"), status=201, match=thumbs
    )

    await forge.add_reaction(ISSUE, None, "eyes")
    await forge.add_reaction(ISSUE, 305, "eyes")
    await forge.add_reaction(MR, None, "+1")

    assert len(api.calls) == 3


async def test_add_reaction_twice_is_not_an_error(api: Any, forge: GitLabForge) -> None:
    taken = {"message": "404 Award Emoji Name has already been taken Not Found"}
    api.post(f"{P}/issues/7/award_emoji", json=taken, status=404)

    await forge.add_reaction(ISSUE, None, "eyes")


# --- labels ------------------------------------------------------------------------------------


async def test_ensure_label_keeps_an_existing_label(api: Any, forge: GitLabForge) -> None:
    api.get(f"{P}/labels/coding%20agent", json=load("label"))

    await forge.ensure_label(REPO, "coding agent", color="1D76DB", description="agent work")

    assert len(api.calls) == 1


async def test_ensure_label_creates_a_missing_label(api: Any, forge: GitLabForge) -> None:
    api.get(f"{P}/labels/coding%20agent", json={"message": "404 Label Not Found"}, status=404)
    wanted = {"name": "coding agent", "color": "#1D76DB", "description": "agent work"}
    api.post(
        f"{P}/labels", json=load("label"), status=201, match=[matchers.json_params_matcher(wanted)]
    )

    await forge.ensure_label(REPO, "coding agent", color="1D76DB", description="agent work")


async def test_ensure_label_created_meanwhile_is_fine(api: Any, forge: GitLabForge) -> None:
    api.get(f"{P}/labels/coding%20agent", json={"message": "404 Label Not Found"}, status=404)
    color = matchers.json_params_matcher({"color": "#1D76DB"}, strict_match=False)
    api.post(f"{P}/labels", json={"message": "Label already exists"}, status=409, match=[color])

    await forge.ensure_label(REPO, "coding agent", color="#1D76DB", description="")


async def test_ensure_label_passes_css_color_names(api: Any, forge: GitLabForge) -> None:
    api.get(f"{P}/labels/help", json={"message": "404 Label Not Found"}, status=404)
    color = matchers.json_params_matcher({"color": "red"}, strict_match=False)
    api.post(f"{P}/labels", json={**load("label"), "name": "help"}, status=201, match=[color])

    await forge.ensure_label(REPO, "help", color="red", description="")


async def test_add_labels_and_remove_label(api: Any, forge: GitLabForge) -> None:
    add = {"add_labels": "coding agent,in progress"}
    api.put(f"{P}/issues/7", json=load("issue"), match=[matchers.json_params_matcher(add)])
    remove = {"remove_labels": "coding agent"}
    api.put(
        f"{P}/merge_requests/3",
        json=load("merge_request"),
        match=[matchers.json_params_matcher(remove)],
    )

    await forge.add_labels(ISSUE, ["coding agent", "in progress"])
    await forge.add_labels(ISSUE, [])  # nothing to add: no request
    await forge.remove_label(MR, "coding agent")

    assert len(api.calls) == 2


async def test_remove_label_of_a_missing_issue_is_not_found(api: Any, forge: GitLabForge) -> None:
    api.put(f"{P}/issues/7", json={"message": "404 Issue Not Found"}, status=404)

    with pytest.raises(NotFound, match="issue #7 in acme/widgets"):
        await forge.remove_label(ISSUE, "coding agent")


# --- permissions ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("access_level", "permission"),
    [
        (5, Permission.NONE),  # minimal access
        (10, Permission.READ),  # guest
        (15, Permission.TRIAGE),  # planner
        (20, Permission.TRIAGE),  # reporter
        (30, Permission.WRITE),  # developer
        (40, Permission.MAINTAIN),  # maintainer
        (50, Permission.ADMIN),  # owner
    ],
)
async def test_permission_by_access_level(
    api: Any, forge: GitLabForge, access_level: int, permission: Permission
) -> None:
    api.get(
        f"{API}/users",
        json=load("users"),
        match=[matchers.query_param_matcher({"username": "bob"})],
    )
    api.get(f"{P}/members/all/12", json={**load("member"), "access_level": access_level})

    assert await forge.get_permission(REPO, "bob") is permission


async def test_non_member_has_no_permission(api: Any, forge: GitLabForge) -> None:
    api.get(f"{API}/users", json=load("users"))
    api.get(f"{P}/members/all/12", json={"message": "404 Not found"}, status=404)

    assert await forge.get_permission(REPO, "bob") is Permission.NONE


async def test_unknown_user_has_no_permission(api: Any, forge: GitLabForge) -> None:
    api.get(f"{API}/users", json=[])

    assert await forge.get_permission(REPO, "nobody") is Permission.NONE
    assert len(api.calls) == 1


async def test_awaiting_membership_has_no_permission(api: Any, forge: GitLabForge) -> None:
    api.get(f"{API}/users", json=load("users"))
    member = {**load("member"), "access_level": 40, "membership_state": "awaiting"}
    api.get(f"{P}/members/all/12", json=member)

    assert await forge.get_permission(REPO, "bob") is Permission.NONE


def test_permission_for_without_level() -> None:
    assert permission_for(None) is Permission.NONE


# --- repository ------------------------------------------------------------------------------


async def test_get_repo_info(api: Any, forge: GitLabForge) -> None:
    api.get(P, json=load("project"))

    info = await forge.get_repo_info(REPO)

    assert info.default_branch == "main"
    assert info.clone_url == f"{HOST}/acme/widgets.git"
    assert info.web_url == f"{HOST}/acme/widgets"
    assert info.description == "Widgets for everyone"
    assert info.repo.project_id == 42
    assert info.ci_config_path == ""  # the project keeps .gitlab-ci.yml


async def test_get_repo_info_reads_the_projects_own_ci_file_path(
    api: Any, forge: GitLabForge
) -> None:
    api.get(P, json={**load("project"), "ci_config_path": "ci/pipeline.yml"})

    assert (await forge.get_repo_info(REPO)).ci_config_path == "ci/pipeline.yml"


async def test_self_hosted_url_is_honoured(waits: list[float]) -> None:
    base = "https://git.internal.example:8443/gitlab"
    forge = GitLabForge(GitLabClient(url=base, token=TOKEN, sleep=waits.append))
    project = {**load("project"), "http_url_to_repo": f"{base}/acme/widgets.git"}
    with responses.RequestsMock() as api:
        api.get(f"{base}/api/v4/projects/acme%2Fwidgets", json=project)
        info = await forge.get_repo_info(RepoRef(forge=ForgeKind.GITLAB, full_name="acme/widgets"))
    await forge.aclose()

    assert info.clone_url == f"{base}/acme/widgets.git"
    assert info.repo.project_id == 42


async def test_get_file_at_a_ref(api: Any, forge: GitLabForge) -> None:
    api.get(
        f"{P}/repository/files/src%2Fwidgets%2Fexporter.py",
        json=load("file"),
        match=[matchers.query_param_matcher({"ref": "agent/issue-7"})],
    )

    found = await forge.get_file(REPO, "src/widgets/exporter.py", ref="agent/issue-7")

    assert found.content == b"def export():\n    return []\n"
    assert found.ref == "agent/issue-7"
    assert found.sha == "79f7bbd25901e8334750839545a9bd021f0e4c83"


async def test_get_file_defaults_to_the_default_branch(api: Any, forge: GitLabForge) -> None:
    by_path = f"{API}/projects/acme%2Fwidgets"
    api.get(by_path, json={**load("project"), "default_branch": "trunk"})
    api.get(
        f"{by_path}/repository/files/README.md",
        json={**load("file"), "file_path": "README.md", "content": "aGk="},
        match=[matchers.query_param_matcher({"ref": "trunk"})],
    )
    repo = RepoRef(forge=ForgeKind.GITLAB, full_name="acme/widgets")

    found = await forge.get_file(repo, "README.md")

    assert (found.path, found.ref, found.text) == ("README.md", "trunk", "hi")


async def test_get_file_missing_is_not_found_naming_the_path(api: Any, forge: GitLabForge) -> None:
    api.get(
        f"{P}/repository/files/docs%2Fnope.md", json={"message": "404 File Not Found"}, status=404
    )

    with pytest.raises(NotFound, match=r"docs/nope\.md at main in acme/widgets") as caught:
        await forge.get_file(REPO, "docs/nope.md")
    assert caught.value.status == 404


async def test_list_tree_recursive_follows_pages(api: Any, forge: GitLabForge) -> None:
    next_page = f"{P}/repository/tree?page=2&per_page=2&recursive=True&ref=main"
    api.get(
        f"{P}/repository/tree",
        json=load("tree_page1"),
        headers={"Link": f'<{next_page}>; rel="next"', "X-Next-Page": "2", "X-Per-Page": "2"},
        match=[matchers.query_param_matcher({"recursive": "True", "ref": "main"})],
    )
    api.get(
        f"{P}/repository/tree",
        json=load("tree_page2"),
        match=[
            matchers.query_param_matcher(
                {"recursive": "True", "ref": "main", "page": "2"}, strict_match=False
            )
        ],
    )

    entries = await forge.list_tree(REPO, ref="main", recursive=True)

    assert entries == [
        TreeEntry("src", "dir"),
        TreeEntry("src/widgets", "dir"),
        TreeEntry("src/widgets/exporter.py", "file"),
        TreeEntry("README.md", "file"),
    ]


async def test_search_code(api: Any, forge: GitLabForge) -> None:
    query = matchers.query_param_matcher({"scope": "blobs", "search": "export"}, strict_match=False)
    api.get(f"{P}/search", json=load("search_blobs"), match=[query])

    hits = await forge.search_code(REPO, "export")

    assert hits == [SearchHit("src/widgets/exporter.py", "def export():\n    return []\n")]


# --- writing code ----------------------------------------------------------------------------


async def test_create_branch(api: Any, forge: GitLabForge) -> None:
    wanted = {"branch": "agent/issue-7", "ref": "main"}
    api.post(
        f"{P}/repository/branches",
        json=load("branch"),
        status=201,
        match=[matchers.json_params_matcher(wanted)],
    )

    await forge.create_branch(REPO, "agent/issue-7", from_ref="main")


async def test_create_existing_branch_is_a_conflict(api: Any, forge: GitLabForge) -> None:
    api.post(f"{P}/repository/branches", json={"message": "Branch already exists"}, status=400)

    with pytest.raises(Conflict):
        await forge.create_branch(REPO, "agent/issue-7", from_ref="main")


async def test_commit_files_creates_updates_and_deletes_in_one_commit(
    api: Any, forge: GitLabForge
) -> None:
    on_branch = [matchers.query_param_matcher({"ref": "agent/issue-7"})]
    files = f"{P}/repository/files"
    api.head(f"{files}/src%2Fwidgets%2Fexporter.py", match=on_branch)
    api.head(f"{files}/src%2Fwidgets%2Fcsv.py", status=404, match=on_branch)
    api.head(f"{files}/old.txt", match=on_branch)
    api.head(f"{files}/never.txt", status=404, match=on_branch)
    api.post(f"{P}/repository/commits", json=load("commit"), status=201)

    sha = await forge.commit_files(
        REPO,
        branch="agent/issue-7",
        message="Export widgets",
        files={
            "src/widgets/exporter.py": b"def export():\n    return rows\n",
            "src/widgets/csv.py": b"\x00binary\xff",
            "old.txt": None,
            "never.txt": None,
        },
    )

    assert sha == "ed899a2f4b50b4370feeea94676502b42383c746"
    assert sent(api.calls[-1]) == {
        "branch": "agent/issue-7",
        "commit_message": "Export widgets",
        "actions": [
            {
                "action": "update",
                "file_path": "src/widgets/exporter.py",
                "content": "ZGVmIGV4cG9ydCgpOgogICAgcmV0dXJuIHJvd3MK",
                "encoding": "base64",
            },
            {
                "action": "create",
                "file_path": "src/widgets/csv.py",
                "content": "AGJpbmFyef8=",
                "encoding": "base64",
            },
            {"action": "delete", "file_path": "old.txt"},
        ],
    }


async def test_commit_without_changes_returns_the_branch_head(api: Any, forge: GitLabForge) -> None:
    api.head(f"{P}/repository/files/gone.txt", status=404)
    api.get(f"{P}/repository/branches/agent%2Fissue-7", json=load("branch"))

    sha = await forge.commit_files(
        REPO, branch="agent/issue-7", message="noop", files={"gone.txt": None}
    )

    assert sha == "7b5c3cc8be40ee161ae89a06bba6229da1032a0c"


def test_commit_actions_is_pure() -> None:
    assert commit_actions({"a": b"x", "b": None, "c": None}, {"c"}) == [
        {"action": "create", "file_path": "a", "content": "eA==", "encoding": "base64"},
        {"action": "delete", "file_path": "c"},
    ]


async def test_open_draft_merge_request(api: Any, forge: GitLabForge) -> None:
    wanted = {
        "source_branch": "agent/issue-7",
        "target_branch": "main",
        "title": "Draft: Add a widget exporter",
        "description": "Closes #7",
    }
    api.post(
        f"{P}/merge_requests",
        json=load("merge_request"),
        status=201,
        match=[matchers.json_params_matcher(wanted)],
    )

    change = await forge.open_change_request(
        REPO, head="agent/issue-7", base="main", title="Add a widget exporter", body="Closes #7"
    )

    assert change == ChangeRequest(
        number=3,
        web_url=f"{HOST}/acme/widgets/-/merge_requests/3",
        head_branch="agent/issue-7",
        base_branch="main",
        draft=True,
    )


async def test_open_ready_merge_request_keeps_the_title(api: Any, forge: GitLabForge) -> None:
    ready = {**load("merge_request"), "title": "Add a widget exporter", "draft": False}
    title = matchers.json_params_matcher({"title": "Add a widget exporter"}, strict_match=False)
    api.post(f"{P}/merge_requests", json=ready, status=201, match=[title])

    change = await forge.open_change_request(
        REPO, head="agent/issue-7", base="main", title="Add a widget exporter", body="", draft=False
    )

    assert change.draft is False


async def test_second_merge_request_for_a_branch_is_a_conflict(
    api: Any, forge: GitLabForge
) -> None:
    exists = {"message": ["Another open merge request already exists for this source branch: !3"]}
    api.post(f"{P}/merge_requests", json=exists, status=409)

    with pytest.raises(Conflict, match="already exists"):
        await forge.open_change_request(REPO, head="agent/issue-7", base="main", title="t", body="")


async def test_update_merge_request_replaces_its_description(api: Any, forge: GitLabForge) -> None:
    wanted = matchers.json_params_matcher({"description": "The gate passed"})
    api.put(f"{P}/merge_requests/3", json=load("merge_request"), status=200, match=[wanted])

    await forge.update_change_request(REPO, 3, body="The gate passed")


def test_draft_title_is_not_doubled() -> None:
    assert draft_title("Fix it") == "Draft: Fix it"
    assert draft_title("Draft: Fix it") == "Draft: Fix it"


async def test_clone_auth_keeps_the_token_out_of_the_url(api: Any, forge: GitLabForge) -> None:
    api.get(P, json=load("project"))

    auth = await forge.clone_auth(REPO)

    assert auth == CloneAuth(url=f"{HOST}/acme/widgets.git", username="oauth2", password=TOKEN)
    assert TOKEN not in auth.url
    assert TOKEN not in repr(auth)


# --- errors and retries ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "error"),
    [(401, AccessDenied), (403, AccessDenied), (409, Conflict), (422, Conflict), (400, ForgeError)],
)
async def test_statuses_map_to_typed_errors(
    api: Any, forge: GitLabForge, waits: list[float], status: int, error: type[ForgeError]
) -> None:
    api.get(P, json={"message": f"{status} nope"}, status=status)

    with pytest.raises(error) as caught:
        await forge.get_repo_info(REPO)

    assert caught.value.status == status
    assert waits == []


async def test_server_errors_are_retried_after_1_and_2_seconds(
    api: Any, forge: GitLabForge, waits: list[float]
) -> None:
    api.get(P, json={"message": "500 Internal Server Error"}, status=500)
    api.get(P, json={"message": "500 Internal Server Error"}, status=500)
    api.get(P, json=load("project"))

    info = await forge.get_repo_info(REPO)

    assert info.default_branch == "main"
    assert waits == [1.0, 2.0]


async def test_server_errors_four_times_give_up(
    api: Any, forge: GitLabForge, waits: list[float]
) -> None:
    for _ in range(4):
        api.get(P, json={"message": "502 Bad Gateway"}, status=502)

    with pytest.raises(ForgeError) as caught:
        await forge.get_repo_info(REPO)

    assert caught.value.status == 502
    assert waits == [1.0, 2.0, 4.0]
    assert len(api.calls) == 4


async def test_rate_limit_waits_as_told_by_retry_after(
    api: Any, forge: GitLabForge, waits: list[float]
) -> None:
    api.get(P, json={"message": "Retry later"}, status=429, headers={"Retry-After": "5"})
    api.get(P, json=load("project"))

    await forge.get_repo_info(REPO)

    assert waits == [5.0]


async def test_rate_limit_waits_until_ratelimit_reset(
    api: Any, forge: GitLabForge, waits: list[float]
) -> None:
    reset = {"RateLimit-Remaining": "0", "RateLimit-Reset": str(int(NOW) + 10)}
    api.get(P, json={"message": "Retry later"}, status=429, headers=reset)
    api.get(P, json=load("project"))

    await forge.get_repo_info(REPO)

    assert waits == [11.0]


async def test_rate_limit_that_persists_is_rate_limited(
    api: Any, forge: GitLabForge, waits: list[float]
) -> None:
    for _ in range(4):
        api.get(P, json={"message": "Retry later"}, status=429, headers={"Retry-After": "7"})

    with pytest.raises(RateLimited) as caught:
        await forge.get_repo_info(REPO)

    assert caught.value.retry_after == 7.0
    assert waits == [7.0, 7.0, 7.0]


async def test_connection_errors_are_retried(
    api: Any, forge: GitLabForge, waits: list[float]
) -> None:
    api.get(P, body=requests.ConnectionError("connection refused"))
    api.get(P, json=load("project"))

    await forge.get_repo_info(REPO)

    assert waits == [1.0]


async def test_connection_errors_four_times_give_up(
    api: Any, forge: GitLabForge, waits: list[float]
) -> None:
    for _ in range(4):
        api.get(P, body=requests.ConnectTimeout("timed out"))

    with pytest.raises(ForgeError, match="project acme/widgets") as caught:
        await forge.get_repo_info(REPO)

    assert caught.value.status is None
    assert waits == [1.0, 2.0, 4.0]


async def test_writes_are_paced_under_a_key_without_the_token(
    api: Any, forge: GitLabForge, pacer: RecordingPacer
) -> None:
    api.post(f"{P}/issues/7/notes", json=load("note"), status=201)
    api.get(P, json=load("project"))

    await forge.create_comment(ISSUE, "Working on it.")
    await forge.get_repo_info(REPO)  # a read: not paced

    assert len(pacer.keys) == 1
    assert HOST in pacer.keys[0]
    assert TOKEN not in pacer.keys[0]


async def test_the_event_loop_keeps_running_during_a_slow_call(
    api: Any, forge: GitLabForge
) -> None:
    def slow(request: Any) -> tuple[int, dict[str, str], str]:
        time.sleep(0.5)
        return 200, {"Content-Type": "application/json"}, json.dumps(load("project"))

    api.add_callback(responses.GET, P, callback=slow)
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    task = asyncio.create_task(ticker())
    await forge.get_repo_info(REPO)
    task.cancel()

    assert ticks >= 20


async def test_from_settings() -> None:
    base = "https://git.internal.example"
    forge = GitLabForge.from_settings(GitLabSettings(url=base, token=SecretStr(TOKEN)))
    with responses.RequestsMock() as api:
        api.get(f"{base}/api/v4/projects/42", json=load("project"))
        await forge.get_repo_info(REPO)
        assert api.calls[0].request.headers["PRIVATE-TOKEN"] == TOKEN
    await forge.aclose()


def test_from_settings_needs_a_token() -> None:
    with pytest.raises(ValueError, match="token"):
        GitLabForge.from_settings(GitLabSettings())


async def test_whoami(api: Any, forge: GitLabForge) -> None:
    user = {**load("users")[0], "id": 99, "username": "project_42_bot_3f2a9c1d", "bot": True}
    api.get(f"{API}/user", json=user)

    assert await forge.whoami() == "project_42_bot_3f2a9c1d"


async def test_the_bot_account_is_the_token_s_user_with_its_id(
    api: Any, forge: GitLabForge
) -> None:
    """Issue 27: the bot is known by its account id (``GET /user``)."""
    user = {**load("users")[0], "id": 99, "username": "project_42_bot_3f2a9c1d", "bot": True}
    api.get(f"{API}/user", json=user)

    found = await forge.bot_account()
    assert (found.login, found.id, found.is_bot) == ("project_42_bot_3f2a9c1d", "99", True)


async def test_whoami_with_a_bad_token(api: Any, forge: GitLabForge) -> None:
    api.get(f"{API}/user", json={"message": "401 Unauthorized"}, status=401)

    with pytest.raises(AccessDenied):
        await forge.whoami()


async def test_unreadable_response_is_an_error_without_retries(
    api: Any, forge: GitLabForge, waits: list[float]
) -> None:
    api.get(P, body="<html>not json</html>", content_type="text/html")

    with pytest.raises(ForgeError, match="project acme/widgets"):
        await forge.get_repo_info(REPO)

    assert waits == []


async def test_long_error_pages_are_cut_short(api: Any, forge: GitLabForge) -> None:
    api.get(P, body="<html>" + "x" * 5000 + "</html>", status=400, content_type="text/html")

    with pytest.raises(ForgeError) as caught:
        await forge.get_repo_info(REPO)

    assert len(str(caught.value)) < 400


async def test_an_injected_session_is_used() -> None:
    session = requests.Session()
    session.headers["X-Proxy-Auth"] = "corp"
    forge = GitLabForge(GitLabClient(url=HOST, token=TOKEN, session=session))
    with responses.RequestsMock() as api:
        api.get(P, json=load("project"))
        await forge.get_repo_info(REPO)
        assert api.calls[0].request.headers["X-Proxy-Auth"] == "corp"
    await forge.aclose()
    session.close()


async def test_confidential_issue_and_internal_notes_are_flagged(
    api: Any, forge: GitLabForge
) -> None:
    internal = {**load("notes")[0], "id": 320, "body": "Internal: the customer is ACME.",
                "internal": True, "confidential": True}  # fmt: skip
    older = {**load("notes")[0], "id": 321, "body": "Before 15.0 only this flag."}
    older.pop("internal")
    older["confidential"] = True
    api.get(f"{P}/issues/7", json={**load("issue"), "confidential": True})
    api.get(f"{P}/issues/7/notes", json=[*load("notes"), internal, older])

    details = await forge.get_issue(REPO, 7, change_request=False)

    assert details.confidential
    assert [(c.id, c.internal) for c in details.comments] == [
        (301, False), (305, False), (320, True), (321, True)
    ]  # fmt: skip
    public = details.for_task(confidential_task=False)
    assert [c.id for c in public.comments] == [301, 305]
    assert details.for_task(confidential_task=True) == details


async def test_a_public_issue_is_not_confidential(api: Any, forge: GitLabForge) -> None:
    api.get(f"{P}/issues/7", json=load("issue"))
    api.get(f"{P}/issues/7/notes", json=[])

    assert not (await forge.get_issue(REPO, 7, change_request=False)).confidential


async def test_get_comment_reads_one_note_of_the_issue(api: Any, forge: GitLabForge) -> None:
    api.get(f"{P}/issues/7/notes/310", json={**load("note"), "internal": True})
    api.get(f"{P}/issues/7/notes/311", status=404, json={"message": "404 Not found"})

    note = await forge.get_comment(ISSUE, 310)

    assert note == Comment(310, "Working on it.", "project_42_bot_3f2a9c1d",
                           f"{ISSUE.web_url}#note_310", internal=True, author_id="99")  # fmt: skip
    with pytest.raises(NotFound):
        await forge.get_comment(ISSUE, 311)


async def test_who_last_added_a_label_comes_from_the_resource_label_events(
    api: Any, forge: GitLabForge
) -> None:
    """GitLab's documented shape of GET .../issues/:iid/resource_label_events."""

    def event(event_id: int, who: str, action: str, name: str) -> dict[str, Any]:
        return {
            "id": event_id,
            "user": {"id": event_id, "name": who.title(), "username": who, "state": "active"},
            "created_at": f"2026-11-2{event_id}T10:00:00.000Z",
            "resource_type": "Issue",
            "resource_id": 253,
            "label": {"id": 73, "name": name, "color": "#a8d695", "description": ""},
            "action": action,
        }

    events = [
        event(1, "alice", "add", "coding agent"),
        event(2, "bob", "remove", "coding agent"),
        event(3, "mallory", "add", "coding agent"),
        event(4, "carol", "add", "bug"),
    ]
    api.get(f"{P}/issues/7/resource_label_events", json=events)
    assert await forge.label_added_by(ISSUE, "coding agent") == "mallory"
    api.get(f"{P}/issues/7/resource_label_events", json=events)
    assert await forge.label_added_by(ISSUE, "documentation") is None


async def test_create_issue_opens_it_with_its_labels(api: Any, forge: GitLabForge) -> None:
    made_data = load("issue")
    data = {"title": "Add CI", "description": "make test, please", "labels": "coding agent"}
    api.post(f"{P}/issues", json=made_data, status=201, match=[matchers.json_params_matcher(data)])

    made = await forge.create_issue(
        REPO, title="Add CI", body="make test, please", labels=["coding agent"]
    )
    assert (made.number, made.web_url) == (made_data["iid"], made_data["web_url"])
    assert made.repo == REPO and not made.is_change_request
    assert len(api.calls) == 1
