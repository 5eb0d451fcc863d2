"""The GitLab adapter's after-opening calls against GitLab's REST API, faked at the
transport with ``responses`` (bodies in tests/fixtures/gitlab/api), through the real
python-gitlab client, its thread pool and the shared retries. Each test also counts
the requests: the bench's target is at most 15 forge calls per round."""

# ruff: noqa: F811  (the fixtures imported from the adapter tests are parameters here)
from __future__ import annotations

import json
from typing import Any

import pytest
import responses
from responses import matchers

from bot.change_state import Mergeable, ThreadAnswer
from bot.events import CheckKind, CheckState, ForgeKind
from bot.forges.base import AccessDenied, ForgeError, NotFound, RateLimited, UnansweredThreads
from bot.forges.gitlab import GitLabForge
from bot.forges.gitlab_followup import discussion_thread, mergeable, ready_title
from tests.fakes import FakeForge
from tests.forges.test_gitlab import (  # noqa: F401  (fixtures)
    HOST,
    REPO,
    TOKEN,
    P,
    RecordingPacer,
    api,
    forge,
    load,
    pacer,
    waits,
)

SHA = "8888888888888888888888888888888888888888"
MR = f"{P}/merge_requests/3"
THREAD = "6a9c1750b37d513a43987b574953fceb50b03ce7"
OTHER = "87805b7c09016a7058e91bdbe7b29d1f284a39e6"
GRAPHQL = f"{HOST}/api/graphql"


@pytest.fixture
def gitlab(api: responses.RequestsMock) -> FakeForge:
    """The one fake forge as GitLab, serving its GraphQL endpoint at the transport, with
    merge request !3 (global id 5501) and two of its discussions."""
    fake = FakeForge(ForgeKind.GITLAB)
    fake.change(REPO, 3).global_id = 5501
    fake.add_thread(REPO, 3, ("alice", "This loop never ends."), thread_id=THREAD)
    fake.add_thread(REPO, 3, ("bob", "Rename it?"), thread_id=OTHER)
    api.add_callback(
        responses.POST, GRAPHQL, callback=fake.graphql_http, content_type="application/json"
    )
    return fake


def sent(call: Any) -> Any:
    return json.loads(call.request.body)


# --- checks ------------------------------------------------------------------------------------


async def test_checks_are_the_jobs_of_the_newest_pipeline_of_each_source(
    forge: GitLabForge, api: responses.RequestsMock
) -> None:
    api.get(
        f"{P}/pipelines",
        json=load("pipelines"),
        match=[matchers.query_param_matcher({"sha": SHA, "order_by": "id", "sort": "desc",
                                             "per_page": "20"})],
    )  # fmt: skip
    api.get(f"{P}/pipelines/48/jobs", json=load("pipeline_jobs"))
    api.get(f"{P}/pipelines/47/jobs", json=[])  # not started yet: the pipeline stands in
    found = await forge.get_commit_checks(REPO, SHA)
    pytest_job, docs, review_app, pipeline = found.checks
    assert (pytest_job.name, pytest_job.state, pytest_job.summary) == (
        "pytest",
        CheckState.FAILED,
        "script_failure",
    )
    assert pytest_job.kind is CheckKind.JOB and pytest_job.log_id == "7001"
    assert pytest_job.reporter == ""  # a CI job, even though the bot pushed its commit
    assert docs.state is CheckState.FAILED and docs.optional
    assert review_app.state is CheckState.WAITING  # a blocking manual job
    assert pipeline.kind is CheckKind.PIPELINE and pipeline.id == "47"
    assert len(api.calls) == 3  # pipeline 45 is an older push pipeline: not read


async def test_an_external_pipeline_is_reported_by_its_user(
    forge: GitLabForge, api: responses.RequestsMock
) -> None:
    external = load("pipelines")[0] | {"id": 50, "source": "external"}
    api.get(f"{P}/pipelines", json=[external])
    status = load("pipeline_jobs")[0] | {"name": "coding-agent/gate", "status": "success"}
    api.get(f"{P}/pipelines/50/jobs", json=[status])
    (check,) = (await forge.get_commit_checks(REPO, SHA)).checks
    assert check.kind is CheckKind.STATUS and check.reporter == "coding-agent-bot"
    assert check.log_id == ""


async def test_checks_retry_server_errors(
    forge: GitLabForge, api: responses.RequestsMock, waits: list[float]
) -> None:
    api.get(f"{P}/pipelines", status=502)
    api.get(f"{P}/pipelines", json=[])
    assert (await forge.get_commit_checks(REPO, SHA)).checks == ()
    assert waits == [1.0]


async def test_checks_of_an_unknown_project_are_not_found(
    forge: GitLabForge, api: responses.RequestsMock
) -> None:
    api.get(f"{P}/pipelines", status=404, json={"message": "404 Project Not Found"})
    with pytest.raises(NotFound):
        await forge.get_commit_checks(REPO, SHA)


# --- job traces --------------------------------------------------------------------------------


async def test_a_job_trace_is_cut_to_its_end(
    forge: GitLabForge, api: responses.RequestsMock
) -> None:
    trace = b"".join(f"step {n}\n".encode() for n in range(5000)) + b"FAILED test_export\n"
    api.get(f"{P}/jobs/7001/trace", body=trace)
    tail = await forge.get_job_log(REPO, "7001", max_bytes=200)
    assert tail.truncated and tail.text.endswith("FAILED test_export\n")
    assert tail.text.startswith("step ") and len(tail.text.encode()) <= 200


async def test_a_short_trace_is_whole(forge: GitLabForge, api: responses.RequestsMock) -> None:
    api.get(f"{P}/jobs/7001/trace", body=b"ok\n")
    tail = await forge.get_job_log(REPO, "7001")
    assert tail.text == "ok\n" and not tail.truncated


async def test_a_trace_without_access_is_refused(
    forge: GitLabForge, api: responses.RequestsMock
) -> None:
    api.get(f"{P}/jobs/7001/trace", status=403, json={"message": "403 Forbidden"})
    with pytest.raises(AccessDenied):
        await forge.get_job_log(REPO, "7001")


async def test_a_job_id_that_is_not_a_number_is_refused(forge: GitLabForge) -> None:
    with pytest.raises(ValueError, match="not a GitLab job id"):
        await forge.get_job_log(REPO, "1/../../2")


# --- the merge request -------------------------------------------------------------------------


async def test_the_state_is_three_requests(forge: GitLabForge, api: responses.RequestsMock) -> None:
    data = load("merge_request") | {"has_conflicts": True, "detailed_merge_status": "conflict"}
    api.get(MR, json=data)
    api.get(f"{P}/repository/branches/main", json=load("branch"))
    api.get(f"{MR}/commits", json=load("mr_commits"))
    state = await forge.get_change_request_state(REPO, 3)
    assert len(api.calls) == 3
    assert state.mergeable is Mergeable.CONFLICTING and state.draft and state.state == "open"
    assert (state.head_branch, state.head_sha, state.base_branch) == ("agent/issue-7", SHA, "main")
    assert state.base_sha == load("branch")["commit"]["id"]
    assert [c.name for c in state.commits] == ["Coding Agent", "Bob"]  # oldest first


async def test_a_missing_merge_request_is_not_found(
    forge: GitLabForge, api: responses.RequestsMock
) -> None:
    api.get(MR, status=404, json={"message": "404 Not found"})
    with pytest.raises(NotFound):
        await forge.get_change_request_state(REPO, 3)


def test_mergeability_from_gitlab_s_fields() -> None:
    assert mergeable({"has_conflicts": True}) is Mergeable.CONFLICTING
    assert mergeable({"detailed_merge_status": "checking"}) is Mergeable.UNKNOWN
    assert mergeable({"detailed_merge_status": "mergeable"}) is Mergeable.MERGEABLE
    assert mergeable({"detailed_merge_status": "ci_still_running"}) is Mergeable.MERGEABLE
    assert mergeable({"merge_status": "cannot_be_merged"}) is Mergeable.CONFLICTING
    assert mergeable({}) is Mergeable.UNKNOWN


async def test_open_change_requests_are_those_of_the_bot_s_branches_here(
    forge: GitLabForge, api: responses.RequestsMock
) -> None:
    mine = load("merge_request")
    other = mine | {"iid": 4, "source_branch": "feature/x"}
    fork = mine | {"iid": 5, "source_project_id": 99}
    api.get(f"{P}/merge_requests", json=[mine, other, fork])
    found = await forge.list_open_change_requests(REPO, branch_prefix="agent/")
    assert [(f.number, f.head_branch, f.head_sha, f.draft) for f in found] == [
        (3, "agent/issue-7", SHA, True)
    ]
    assert "state=opened" in str(api.calls[0].request.url)


async def test_ready_for_review_drops_the_draft_prefix(
    forge: GitLabForge, api: responses.RequestsMock, pacer: RecordingPacer
) -> None:
    api.get(MR, json=load("merge_request"))
    update = api.put(MR, json=load("merge_request") | {"draft": False})
    await forge.mark_ready_for_review(REPO, 3)
    assert sent(update.calls[0]) == {"title": "Add a widget exporter"}
    assert len(api.calls) == 2 and len(pacer.keys) == 1  # the write was paced


async def test_a_merge_request_that_is_no_draft_is_left_alone(
    forge: GitLabForge, api: responses.RequestsMock
) -> None:
    data = load("merge_request") | {"draft": False, "work_in_progress": False, "title": "Add"}
    api.get(MR, json=data)
    await forge.mark_ready_for_review(REPO, 3)
    assert len(api.calls) == 1


def test_ready_titles() -> None:
    assert ready_title("Draft: Add a widget") == "Add a widget"
    assert ready_title("[Draft] (draft) draft: Add") == "Add"
    assert ready_title("Drafting the plan") == "Drafting the plan"


# --- discussions -------------------------------------------------------------------------------


async def test_discussions_are_threads_without_system_notes(
    forge: GitLabForge, api: responses.RequestsMock
) -> None:
    api.get(f"{MR}/discussions", json=load("discussions"))
    diff, general, resolved = await forge.list_review_threads(REPO, 3)
    assert len(api.calls) == 1
    assert diff.id == THREAD and diff.resolvable and not diff.resolved
    assert (diff.path, diff.line, diff.author, diff.last_author) == (
        "exporter.py",
        18,
        "alice",
        "bob",
    )
    assert not general.resolvable and general.comments[0].body == "Looks good overall."
    assert resolved.resolved and (resolved.path, resolved.line) == ("old_name.py", 4)


def test_a_discussion_of_only_system_notes_is_no_thread() -> None:
    assert discussion_thread(load("discussions")[2]) is None


async def test_reply_and_resolve_are_one_write_each(
    forge: GitLabForge, api: responses.RequestsMock, pacer: RecordingPacer
) -> None:
    reply = api.post(f"{MR}/discussions/{THREAD}/notes", json=load("discussion_note"))
    resolve = api.put(
        f"{MR}/discussions/{THREAD}", json=load("discussions")[0],
        match=[matchers.json_params_matcher({"resolved": True})],
    )  # fmt: skip
    note = await forge.reply_to_thread(REPO, 3, THREAD, "Fixed in 9999999.")
    await forge.resolve_thread(REPO, 3, THREAD)
    assert note.id == 1131 and note.author == "coding-agent-bot"
    assert sent(reply.calls[0]) == {"body": "Fixed in 9999999."}
    assert resolve.call_count == 1 and len(api.calls) == 2 and len(pacer.keys) == 2


async def test_a_rate_limited_write_that_persists_is_rate_limited(
    forge: GitLabForge, api: responses.RequestsMock
) -> None:
    for _ in range(4):
        api.put(f"{MR}/discussions/{THREAD}", status=429, headers={"Retry-After": "2"})
    with pytest.raises(RateLimited):
        await forge.resolve_thread(REPO, 3, THREAD)


async def test_a_server_error_that_persists_is_a_forge_error(
    forge: GitLabForge, api: responses.RequestsMock, waits: list[float]
) -> None:
    for _ in range(4):
        api.get(f"{MR}/discussions", status=500)
    with pytest.raises(ForgeError):
        await forge.list_review_threads(REPO, 3)
    assert waits == [1.0, 2.0, 4.0]


async def test_a_review_rounds_answers_are_one_graphql_request(
    forge: GitLabForge, api: responses.RequestsMock, pacer: RecordingPacer, gitlab: FakeForge
) -> None:
    """Two answers, one resolved: one read of the merge request's global id (not seen
    before), then ONE paced GraphQL request whose replies travel as variables."""
    api.get(MR, json=load("merge_request"))
    first, other = "Changed in 9999999: done.", 'No change: "on purpose" }) { x }'
    await forge.answer_threads(
        REPO, 3, [ThreadAnswer(THREAD, first, resolve=True), ThreadAnswer(OTHER, other)]
    )
    [(document, variables)] = gitlab.calls_of("graphql")
    assert len(api.calls) == 2 and len(pacer.keys) == 1  # the read is not paced
    assert api.calls[1].request.headers["Authorization"] == f"Bearer {TOKEN}"
    assert first not in document and "on purpose" not in document  # variables, never text
    assert variables["mr"] == "gid://gitlab/MergeRequest/5501"  # its id, not its iid
    assert variables["d0"] == f"gid://gitlab/Discussion/{THREAD}"
    assert (variables["b0"], variables["b1"]) == (first, other)
    assert document.count("createNote(") == 2 and document.count("discussionToggleResolve(") == 1
    held, unresolved = gitlab.change(REPO, 3).threads
    assert held.resolved and held.comments[-1].body == first
    assert not unresolved.resolved and unresolved.comments[-1].body == other


async def test_the_global_id_is_kept_from_the_discussions_listed(
    forge: GitLabForge, api: responses.RequestsMock, gitlab: FakeForge
) -> None:
    api.get(f"{MR}/discussions", json=load("discussions"))
    await forge.list_review_threads(REPO, 3)
    await forge.answer_threads(REPO, 3, [ThreadAnswer(THREAD, "done", resolve=True)])
    assert len(api.calls) == 2  # the discussions, the one GraphQL request: no look-up
    [(_, variables)] = gitlab.calls_of("graphql")
    assert variables["mr"] == "gid://gitlab/MergeRequest/5501"  # its notes' noteable_id


async def test_a_thread_gitlab_refuses_is_named_and_not_answered(
    forge: GitLabForge, api: responses.RequestsMock, gitlab: FakeForge
) -> None:
    """A payload's ``errors`` (the reply refused), a top-level error naming an alias (a
    discussion gone): those threads are named; the others are answered. The thread
    resolved in the same document although its reply failed is opened again."""
    api.get(MR, json=load("merge_request"))
    gitlab.graphql_errors[("createNote", OTHER)] = "Note can't be blank"
    answers = [
        ThreadAnswer(THREAD, "done", resolve=True),
        ThreadAnswer(OTHER, "refused", resolve=True),
        ThreadAnswer("0" * 40, "gone", resolve=True),
    ]
    with pytest.raises(UnansweredThreads) as raised:
        await forge.answer_threads(REPO, 3, answers)
    assert raised.value.answered == (THREAD,)
    assert raised.value.failed[OTHER] == "reply refused: Note can't be blank"
    assert raised.value.failed["0" * 40].startswith("reply refused: The resource that you")
    answered, refused = gitlab.change(REPO, 3).threads
    assert answered.resolved and answered.comments[-1].body == "done"
    assert not refused.resolved and refused.comments[-1].body != "refused"
    _first, reopen = gitlab.calls_of("graphql")
    assert "resolve: false" in reopen[0] and reopen[1] == {"d0": f"gid://gitlab/Discussion/{OTHER}"}


@pytest.mark.parametrize("status", [404, 403])
async def test_graphql_refused_as_a_whole_falls_back_to_rest(
    forge: GitLabForge,
    api: responses.RequestsMock,
    pacer: RecordingPacer,
    gitlab: FakeForge,
    status: int,
) -> None:
    """An instance (or a token) without GraphQL: the REST notes and updates, as before;
    the refusal is remembered, so the next round goes to REST at once."""
    api.get(MR, json=load("merge_request"))
    gitlab.fail("graphql", ForgeError("refused", status=status))
    reply = api.post(f"{MR}/discussions/{THREAD}/notes", json=load("discussion_note"))
    other = api.post(f"{MR}/discussions/{OTHER}/notes", json=load("discussion_note"))
    resolve = api.put(
        f"{MR}/discussions/{THREAD}", json=load("discussions")[0],
        match=[matchers.json_params_matcher({"resolved": True})],
    )  # fmt: skip
    answers = [
        ThreadAnswer(THREAD, "Changed in 9999999: done.", resolve=True),
        ThreadAnswer(OTHER, "No change for this thread: on purpose."),
    ]
    await forge.answer_threads(REPO, 3, answers)
    assert sent(reply.calls[0]) == {"body": "Changed in 9999999: done."}
    assert sent(other.calls[0]) == {"body": "No change for this thread: on purpose."}
    assert resolve.call_count == 1 and len(gitlab.calls_of("graphql")) == 1
    await forge.answer_threads(REPO, 3, answers[1:])
    assert other.call_count == 2 and len(gitlab.calls_of("graphql")) == 1  # not tried again


async def test_a_document_gitlab_runs_none_of_falls_back_to_rest(
    forge: GitLabForge, api: responses.RequestsMock
) -> None:
    """An older schema without one of the mutations: GitLab answers 200 with errors and
    no data (it ran nothing), so REST answers."""
    api.get(MR, json=load("merge_request"))
    said = "Field 'discussionToggleResolve' doesn't exist on type 'Mutation'"
    old = {"errors": [{"message": said, "locations": [{"line": 3, "column": 3}]}]}
    api.post(GRAPHQL, json=old)
    reply = api.post(f"{MR}/discussions/{THREAD}/notes", json=load("discussion_note"))
    resolve = api.put(f"{MR}/discussions/{THREAD}", json=load("discussions")[0])
    await forge.answer_threads(REPO, 3, [ThreadAnswer(THREAD, "done", resolve=True)])
    assert reply.call_count == 1 and resolve.call_count == 1


async def test_a_server_error_on_graphql_is_no_fallback(
    forge: GitLabForge, api: responses.RequestsMock, waits: list[float]
) -> None:
    """A 5xx may come after GitLab ran part of the document: no REST answers on top of
    it; the threads are named as not answered."""
    api.get(MR, json=load("merge_request"))
    for _ in range(4):
        api.post(GRAPHQL, status=500)
    with pytest.raises(UnansweredThreads) as raised:
        await forge.answer_threads(REPO, 3, [ThreadAnswer(THREAD, "done", resolve=True)])
    assert list(raised.value.failed) == [THREAD] and raised.value.answered == ()
    assert len(api.calls) == 5  # the read, then the request and its three retries


def test_internal_notes_are_left_out_of_a_thread() -> None:
    discussion = load("discussions")[0]
    discussion["notes"][1]["internal"] = True
    (only,) = discussion_thread(discussion).comments  # type: ignore[union-attr]
    assert only.author == "alice"
    discussion["notes"][0]["internal"] = True
    assert discussion_thread(discussion) is None


async def test_another_project_s_pipeline_is_not_the_project_s_ci(
    forge: GitLabForge, api: responses.RequestsMock
) -> None:
    """Issue 27: only the project's own pipelines are its CI. A pipeline of another
    project (a fork's) reports statuses, shown, never acted on."""
    foreign = load("pipelines")[0] | {"id": 51, "project_id": 4242}
    api.get(f"{P}/pipelines", json=[foreign])
    api.get(f"{P}/pipelines/51/jobs", json=[load("pipeline_jobs")[0]])
    (check,) = (await forge.get_commit_checks(REPO, SHA)).checks
    assert check.kind is CheckKind.STATUS and check.state is CheckState.FAILED
    assert check.log_id == ""
