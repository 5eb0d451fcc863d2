"""The GitHub adapter's after-opening calls against a mocked GitHub (respx at the httpx
transport): REST bodies from GitHub's OpenAPI examples, GraphQL bodies in the shapes of
GitHub's GraphQL reference (tests/fixtures/github/graphql). Each test also counts the
requests: the bench's target is at most 15 forge calls per round."""

# ruff: noqa: F811  (the fixtures imported from the adapter tests are parameters here)
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx

from bot.change_state import Mergeable, ThreadAnswer
from bot.events import CheckKind, CheckState
from bot.forges.base import AccessDenied, ForgeError, NotFound, RateLimited
from bot.forges.github import GitHubForge
from bot.forges.github_graphql import graphql_url
from tests.forges.test_github import (  # noqa: F401  (fixtures)
    API,
    REPO,
    REPO_PATH,
    Clock,
    Sleeps,
    clock,
    forge,
    http,
    mock,
    rest,
    sleeps,
)

GRAPHQL = Path(__file__).resolve().parent.parent / "fixtures" / "github" / "graphql"
SHA = "6dcb09b5b57875f334f61aebed695e2e4193db5e"
CHECK_RUNS = f"{REPO_PATH}/commits/{SHA}/check-runs"
STATUSES = f"{REPO_PATH}/commits/{SHA}/statuses"
LOGS = f"{REPO_PATH}/actions/jobs/399444496/logs"
BLOB = "https://pipelines.example.net/logs/399444496?sig=abc"


def graphql(name: str) -> Any:
    return json.loads((GRAPHQL / f"{name}.json").read_text(encoding="utf-8"))


def sent(route: respx.Route, index: int = -1) -> Any:
    return json.loads(route.calls[index].request.content)


def failed_run(**overrides: Any) -> dict[str, Any]:
    run: dict[str, Any] = rest("check-run-paginated")["check_runs"][0]
    run |= {"status": "completed", "conclusion": "failure", **overrides}
    return run


# --- checks ------------------------------------------------------------------------------------


async def test_checks_combine_runs_and_the_newest_status_of_each_context(
    forge: GitHubForge, mock: respx.MockRouter
) -> None:
    runs = mock.get(CHECK_RUNS).respond(json=rest("check-run-paginated"))
    older = rest("status-items")[0] | {"id": 0, "state": "failure"}
    statuses = mock.get(STATUSES).respond(json=[*rest("status-items"), older])
    found = await forge.get_commit_checks(REPO, SHA)
    assert [(c.name, c.kind, c.state) for c in found.checks] == [
        ("mighty_readme", CheckKind.RUN, CheckState.PASSED),  # neutral
        ("continuous-integration/jenkins", CheckKind.STATUS, CheckState.PASSED),
    ]
    run, status = found.checks
    assert run.reporter == "octoapp[bot]" and run.log_id == ""  # not GitHub Actions
    assert run.summary.startswith("Mighty Readme report\nThere are 0 failures")
    assert status.reporter == "octocat" and status.summary == "Build has completed successfully"
    assert found.annotations == {}  # nothing failed: no annotations asked for
    assert runs.calls.last.request.url.params["filter"] == "latest"
    assert runs.call_count == statuses.call_count == 1


async def test_failed_runs_with_annotations_bring_them(
    forge: GitHubForge, mock: respx.MockRouter
) -> None:
    actions = failed_run(id=399444496, app={"slug": "github-actions"}, name="test")
    bare = failed_run(id=5, name="lint", output={"annotations_count": 0})
    mock.get(CHECK_RUNS).respond(json={"total_count": 2, "check_runs": [actions, bare]})
    mock.get(STATUSES).respond(json=[])
    notes = mock.get(f"{REPO_PATH}/check-runs/399444496/annotations").respond(
        json=rest("check-annotation-items")
    )
    found = await forge.get_commit_checks(REPO, SHA)
    test, lint = found.checks
    assert test.state is lint.state is CheckState.FAILED
    assert test.log_id == "399444496" and test.reporter == "github-actions[bot]"
    (note,) = found.annotations["399444496"]
    assert (note.path, note.start_line, note.level) == ("README.md", 2, "warning")
    assert note.message == "Check your spelling for 'banaas'."
    assert "5" not in found.annotations  # a run without annotations costs no request
    assert notes.call_count == 1 and len(mock.calls) == 3


async def test_annotations_are_read_for_at_most_five_failed_runs(
    forge: GitHubForge, mock: respx.MockRouter
) -> None:
    runs = [failed_run(id=index, name=f"job {index}") for index in range(8)]
    mock.get(CHECK_RUNS).respond(json={"total_count": 8, "check_runs": runs})
    mock.get(STATUSES).respond(json=[])
    route = mock.route(method="GET", path__regex=r".*/check-runs/\d+/annotations").respond(json=[])
    found = await forge.get_commit_checks(REPO, SHA)
    assert len(found.checks) == 8 and route.call_count == 5


async def test_checks_of_an_unknown_commit_are_not_found(
    forge: GitHubForge, mock: respx.MockRouter
) -> None:
    mock.get(CHECK_RUNS).respond(404, json={"message": "No commit found for SHA"})
    with pytest.raises(NotFound):
        await forge.get_commit_checks(REPO, SHA)


async def test_checks_retry_server_errors(
    forge: GitHubForge, mock: respx.MockRouter, sleeps: Sleeps
) -> None:
    mock.get(CHECK_RUNS).side_effect = [
        httpx.Response(502),
        httpx.Response(200, json=rest("check-run-paginated")),
    ]
    mock.get(STATUSES).respond(json=[])
    assert len((await forge.get_commit_checks(REPO, SHA)).checks) == 1
    assert sleeps.waits == [1.0]


# --- job logs ----------------------------------------------------------------------------------


async def test_a_job_log_is_the_end_of_the_redirected_download(
    forge: GitHubForge, mock: respx.MockRouter
) -> None:
    redirect = mock.get(LOGS).respond(302, headers={"location": BLOB})
    log = b"".join(f"line {n}\n".encode() for n in range(1000))
    download = mock.get(BLOB).respond(
        206, content=log[-100:], headers={"content-range": f"bytes {len(log) - 100}-/{len(log)}"}
    )
    tail = await forge.get_job_log(REPO, "399444496", max_bytes=100)
    assert download.calls.last.request.headers["range"] == "bytes=-100"
    assert "authorization" not in download.calls.last.request.headers  # the URL is signed
    assert redirect.calls.last.request.headers["authorization"] == "token ghp_test"
    assert tail.truncated and tail.text.endswith("line 999\n")
    assert tail.text.startswith("line ")  # cut at a line start
    assert len(tail.text.encode()) <= 100


async def test_a_download_that_ignores_the_range_is_still_cut_to_its_end(
    forge: GitHubForge, mock: respx.MockRouter
) -> None:
    mock.get(LOGS).respond(302, headers={"location": BLOB})
    log = b"x" * 5000 + b"\nerror: the test failed\n"
    mock.get(BLOB).respond(200, content=log)
    tail = await forge.get_job_log(REPO, "399444496", max_bytes=64)
    assert tail.truncated and tail.text == "error: the test failed\n"


async def test_a_short_log_is_whole(forge: GitHubForge, mock: respx.MockRouter) -> None:
    mock.get(LOGS).respond(302, headers={"location": BLOB})
    mock.get(BLOB).respond(206, content=b"ok\n", headers={"content-range": "bytes 0-2/3"})
    tail = await forge.get_job_log(REPO, "399444496")
    assert tail.text == "ok\n" and not tail.truncated


async def test_an_expired_log_is_not_found(forge: GitHubForge, mock: respx.MockRouter) -> None:
    mock.get(LOGS).respond(410, json={"message": "Gone"})
    with pytest.raises(NotFound, match="expired"):
        await forge.get_job_log(REPO, "399444496")


async def test_a_log_without_access_is_refused(forge: GitHubForge, mock: respx.MockRouter) -> None:
    mock.get(LOGS).respond(403, json={"message": "Must have admin rights to Repository."})
    with pytest.raises(AccessDenied):
        await forge.get_job_log(REPO, "399444496")


async def test_a_failed_download_is_a_forge_error(
    forge: GitHubForge, mock: respx.MockRouter
) -> None:
    mock.get(LOGS).respond(302, headers={"location": BLOB})
    mock.get(BLOB).respond(500)
    with pytest.raises(ForgeError, match="download answered 500"):
        await forge.get_job_log(REPO, "399444496")


async def test_a_job_id_that_is_not_a_number_is_refused(forge: GitHubForge) -> None:
    with pytest.raises(ValueError, match="not a GitHub Actions job id"):
        await forge.get_job_log(REPO, "../../hooks")


# --- the pull request --------------------------------------------------------------------------


async def test_the_state_is_one_graphql_query(forge: GitHubForge, mock: respx.MockRouter) -> None:
    route = mock.post("/graphql").respond(json=graphql("pull-request-state"))
    state = await forge.get_change_request_state(REPO, 1347)
    assert route.call_count == 1 and len(mock.calls) == 1
    assert sent(route)["variables"] == {"owner": "octocat", "name": "Hello-World", "number": 1347}
    assert state.mergeable is Mergeable.CONFLICTING and state.draft and state.state == "open"
    assert (state.head_branch, state.head_sha) == ("agent/12-fix-the-parser", SHA)
    assert (state.base_branch, state.base_sha[:7]) == ("master", "553c207")
    assert [(c.name, c.login) for c in state.commits] == [
        ("coding-agent", ""),
        ("Monalisa Octocat", "octocat"),
    ]


async def test_a_missing_pull_request_is_not_found(
    forge: GitHubForge, mock: respx.MockRouter
) -> None:
    mock.post("/graphql").respond(json=graphql("not-found"))
    with pytest.raises(NotFound, match="Could not resolve"):
        await forge.get_change_request_state(REPO, 9999)


async def test_a_graphql_rate_limit_is_rate_limited(
    forge: GitHubForge, mock: respx.MockRouter, clock: Clock
) -> None:
    reset = str(int(clock.now) + 30)
    headers = {"x-ratelimit-remaining": "0", "x-ratelimit-reset": reset}
    mock.post("/graphql").respond(200, json=graphql("rate-limited"), headers=headers)
    with pytest.raises(RateLimited) as caught:
        await forge.get_change_request_state(REPO, 1347)
    assert caught.value.retry_after == 31.0


async def test_graphql_server_errors_are_retried(
    forge: GitHubForge, mock: respx.MockRouter, sleeps: Sleeps
) -> None:
    mock.post("/graphql").side_effect = [
        httpx.Response(502, json={"message": "Bad gateway"}),
        httpx.Response(200, json=graphql("pull-request-state")),
    ]
    assert (await forge.get_change_request_state(REPO, 1347)).number == 1347
    assert sleeps.waits == [1.0]


async def test_graphql_that_keeps_failing_is_a_forge_error(
    forge: GitHubForge, mock: respx.MockRouter
) -> None:
    mock.post("/graphql").respond(500, json={"message": "Server Error"})
    with pytest.raises(ForgeError, match="GitHub error 500"):
        await forge.get_change_request_state(REPO, 1347)


async def test_open_change_requests_are_those_of_the_bot_s_branches_here(
    forge: GitHubForge, mock: respx.MockRouter
) -> None:
    mine = rest("pull-request-simple-items")[0]
    mine = mine | {"head": mine["head"] | {"ref": "agent/3-fix"}, "draft": True}
    someone = rest("pull-request-simple-items")[0]
    fork = json.loads(json.dumps(mine))
    fork["head"]["repo"]["full_name"] = "mallory/Hello-World"
    route = mock.get(f"{REPO_PATH}/pulls").respond(json=[mine, someone, fork])
    found = await forge.list_open_change_requests(REPO, branch_prefix="agent/")
    assert [(f.number, f.head_branch, f.draft) for f in found] == [(1347, "agent/3-fix", True)]
    assert found[0].head_sha == SHA and found[0].base_branch == "master"
    assert route.calls.last.request.url.params["state"] == "open"


async def test_ready_for_review_is_a_query_and_a_mutation(
    forge: GitHubForge, mock: respx.MockRouter
) -> None:
    route = mock.post("/graphql")
    route.side_effect = [
        httpx.Response(200, json=graphql("draft")),
        httpx.Response(200, json=graphql("ready")),
    ]
    await forge.mark_ready_for_review(REPO, 1347)
    assert route.call_count == 2
    assert "markPullRequestReadyForReview" in sent(route)["query"]
    assert sent(route)["variables"] == {"id": "PR_kwDOABCD1M5CCCCC"}


async def test_a_pull_request_that_is_no_draft_is_left_alone(
    forge: GitHubForge, mock: respx.MockRouter
) -> None:
    answer = graphql("draft")
    answer["data"]["repository"]["pullRequest"]["isDraft"] = False
    route = mock.post("/graphql").respond(json=answer)
    await forge.mark_ready_for_review(REPO, 1347)
    assert route.call_count == 1


# --- review threads ----------------------------------------------------------------------------


async def test_review_threads_with_their_comments(
    forge: GitHubForge, mock: respx.MockRouter
) -> None:
    route = mock.post("/graphql").respond(json=graphql("review-threads"))
    open_thread, done = await forge.list_review_threads(REPO, 1347)
    assert route.call_count == 1
    assert open_thread.id == "PRRT_kwDOABCD1M5AAAAA" and not open_thread.resolved
    assert (open_thread.path, open_thread.line) == ("src/parser.py", 42)
    assert open_thread.author == "octocat" and open_thread.last_author == "hubot"
    assert [c.id for c in open_thread.comments] == [1001, 1002]
    assert done.resolved and done.outdated and done.line == 3  # its original line
    assert done.author == ""  # a deleted user


async def test_a_thread_s_authors_are_told_apart_by_kind_and_id(
    forge: GitHubForge, mock: respx.MockRouter
) -> None:
    """Issue 27: GraphQL names an App's bot user by its bare slug, the login a person may
    hold: the App reads as ``<slug>[bot]``, the person as themselves, each with its id."""
    page = graphql("review-threads")
    comments = page["data"]["repository"]["pullRequest"]["reviewThreads"]["nodes"][0]
    comments["comments"]["nodes"] = [
        {"databaseId": 1, "body": "a", "url": "", "author":
         {"__typename": "User", "login": "coding-agent", "databaseId": 77}},
        {"databaseId": 2, "body": "b", "url": "", "author":
         {"__typename": "Bot", "login": "coding-agent", "databaseId": 41898282}},
    ]  # fmt: skip
    mock.post("/graphql").respond(json=page)
    thread, _done = await forge.list_review_threads(REPO, 1347)
    assert [(c.author, c.author_id) for c in thread.comments] == [
        ("coding-agent", "77"),
        ("coding-agent[bot]", "41898282"),
    ]
    assert "__typename" in sent(mock.routes[0])["query"]


async def test_review_threads_follow_pages(forge: GitHubForge, mock: respx.MockRouter) -> None:
    first = graphql("review-threads")
    page = first["data"]["repository"]["pullRequest"]["reviewThreads"]
    page["pageInfo"] = {"hasNextPage": True, "endCursor": "next"}
    route = mock.post("/graphql")
    again = graphql("review-threads")
    route.side_effect = [httpx.Response(200, json=first), httpx.Response(200, json=again)]
    threads = await forge.list_review_threads(REPO, 1347)
    assert len(threads) == 4 and route.call_count == 2
    assert sent(route, 0)["variables"]["after"] is None
    assert sent(route, 1)["variables"]["after"] == "next"


async def test_reply_and_resolve_are_one_mutation_each(
    forge: GitHubForge, mock: respx.MockRouter
) -> None:
    route = mock.post("/graphql")
    route.side_effect = [
        httpx.Response(200, json=graphql("reply")),
        httpx.Response(200, json=graphql("resolve")),
    ]
    reply = await forge.reply_to_thread(REPO, 1347, "PRRT_kwDOABCD1M5AAAAA", "Fixed in 6dcb09b.")
    await forge.resolve_thread(REPO, 1347, "PRRT_kwDOABCD1M5AAAAA")
    assert reply.id == 1004
    # GraphQL names the App's bot user by its slug; the bot reads it as REST writes it
    assert (reply.author, reply.author_id) == ("coding-agent[bot]", "41898282")
    assert sent(route, 0)["variables"] == {
        "thread": "PRRT_kwDOABCD1M5AAAAA",
        "body": "Fixed in 6dcb09b.",
    }
    assert "resolveReviewThread" in sent(route, 1)["query"]
    assert route.call_count == 2


async def test_a_refused_mutation_is_access_denied(
    forge: GitHubForge, mock: respx.MockRouter
) -> None:
    error = {"type": "FORBIDDEN", "message": "Resource not accessible by integration"}
    refused = {"errors": [error]}
    mock.post("/graphql").respond(json=refused)
    with pytest.raises(AccessDenied, match="not accessible"):
        await forge.resolve_thread(REPO, 1347, "PRRT_x")


def test_the_graphql_endpoint_of_github_and_of_an_enterprise_server() -> None:
    assert graphql_url(API) == "https://api.github.com/graphql"
    assert graphql_url("https://ghe.example/api/v3/") == "https://ghe.example/api/graphql"


async def test_a_review_rounds_answers_are_one_mutation_document(
    forge: GitHubForge, mock: respx.MockRouter
) -> None:
    """Aliased fields, run by GitHub one after the other: each reply, then its thread's
    resolution when asked; a thread left open gets only its reply."""
    route = mock.post("/graphql").respond(json=graphql("answers"))
    answers = [
        ThreadAnswer("PRRT_kwDOABCD1M5AAAAA", "Changed in 6dcb09b: fixed.", resolve=True),
        ThreadAnswer("PRRT_kwDOABCD1M5AAAAB", "No change for this thread: on purpose."),
    ]
    await forge.answer_threads(REPO, 1347, answers)
    assert route.call_count == 1
    body = sent(route)
    query = body["query"]
    assert (
        query.index("r0: addPullRequestReviewThreadReply")
        < query.index("s0: resolveReviewThread")
        < query.index("r1: addPullRequestReviewThreadReply")
    )
    assert "s1:" not in query
    assert body["variables"] == {
        "t0": "PRRT_kwDOABCD1M5AAAAA",
        "b0": "Changed in 6dcb09b: fixed.",
        "t1": "PRRT_kwDOABCD1M5AAAAB",
        "b1": "No change for this thread: on purpose.",
    }


async def test_many_answers_go_in_documents_of_at_most_twenty_threads(
    forge: GitHubForge, mock: respx.MockRouter
) -> None:
    route = mock.post("/graphql").respond(json={"data": {}})
    answers = [ThreadAnswer(f"PRRT_{n}", f"reply {n}", resolve=True) for n in range(45)]
    await forge.answer_threads(REPO, 1347, answers)
    assert route.call_count == 3  # 20 + 20 + 5 threads; two mutations each
    assert [len(sent(route, i)["variables"]) for i in range(3)] == [40, 40, 10]
    assert sent(route, 2)["variables"]["t4"] == "PRRT_44"
