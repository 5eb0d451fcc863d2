"""CI and review events, GitHub's and GitLab's, against their published example payloads:
which commit, which change requests, which checks, in what state, reported by whom."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from bot.events import CheckKind, CheckState, EventKind, ForgeEvent
from bot.webhooks import github, gitlab
from bot.webhooks.check_states import github_check, github_status, gitlab_job
from bot.webhooks.errors import PayloadError

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
SHA = "ec26c3e57ca3a959ca5aad62de7213c562f8c821"


def load(forge: str, name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / forge / f"{name}.json").read_text())
    return data


def gh(name: str, payload: dict[str, Any] | None = None) -> ForgeEvent:
    body = json.dumps(load("github", name) if payload is None else payload).encode()
    return github.parse_event(name.split(".")[0], "d-1", body)


def gl(event: str, name: str, payload: dict[str, Any] | None = None) -> ForgeEvent:
    body = json.dumps(load("gitlab", name) if payload is None else payload).encode()
    return gitlab.parse_event(event, "d-1", body)


# --- GitHub -----------------------------------------------------------------------------------


def test_a_failed_actions_check_run_names_its_commit_pull_request_and_log() -> None:
    event = gh("check_run.completed")
    assert event.kind is EventKind.CHECKS_CHANGED and event.checks is not None
    report = event.checks
    assert report.head_sha == SHA and report.numbers == (2,)
    (check,) = report.checks
    assert check.name == "Octocoders-linter" and check.kind is CheckKind.RUN
    assert check.state is CheckState.FAILED and check.conclusion == "failure"
    assert check.reporter == "github-actions[bot]"
    assert check.id == check.log_id == "128620228"  # an Actions job: its log can be read
    assert check.web_url == "https://github.com/Codertocat/Hello-World/runs/128620228"


def test_a_check_run_of_another_app_has_no_log_and_names_that_app() -> None:
    payload = load("github", "check_run.completed")
    payload["check_run"]["app"]["slug"] = "coding-agent"
    payload["check_run"]["output"] = {"title": "2 problems", "summary": "see the lines"}
    (check,) = gh("check_run.completed", payload).checks.checks  # type: ignore[union-attr]
    assert check.reporter == "coding-agent[bot]" and check.log_id == ""
    assert check.summary == "2 problems\nsee the lines"


def test_a_queued_check_run_is_pending() -> None:
    (check,) = gh("check_run.created").checks.checks  # type: ignore[union-attr]
    assert check.state is CheckState.PENDING and not check.state.settled


def test_a_check_suite_reports_its_branch_and_app() -> None:
    report = gh("check_suite.completed").checks
    assert report is not None and report.head_sha == SHA
    suite = load("github", "check_suite.completed")["check_suite"]
    assert report.branches == (suite["head_branch"],) and report.numbers == ()
    (check,) = report.checks
    assert check.kind is CheckKind.SUITE and check.state is CheckState.PASSED
    assert check.reporter == "github-actions[bot]"


def test_a_requested_suite_on_the_default_branch_names_no_pull_request() -> None:
    report = gh("check_suite.requested").checks
    assert report is not None and report.numbers == () and report.branches == ("master",)
    assert report.checks[0].state is CheckState.PENDING


def test_a_workflow_run_that_needs_an_approval_waits_for_a_person() -> None:
    report = gh("workflow_run.requested").checks
    assert report is not None
    (run,) = report.checks
    assert run.kind is CheckKind.WORKFLOW and run.conclusion == "action_required"
    assert run.state is CheckState.WAITING


def test_a_completed_workflow_run_names_the_pull_requests_of_its_commit() -> None:
    report = gh("workflow_run.completed").checks
    assert report is not None and report.numbers == (2,)
    assert report.checks[0].state is CheckState.PASSED


def test_a_commit_status_is_reported_by_whoever_sent_it() -> None:
    event = gh("status")
    assert event.action == "" and event.checks is not None
    (status,) = event.checks.checks
    assert status.kind is CheckKind.STATUS and status.name == "default"
    assert status.state is CheckState.PASSED and status.reporter == "Codertocat"
    assert event.checks.head_sha == "6113728f27ae82c7b1a177c8d03f9e96e0adf246"
    assert event.checks.numbers == ()  # a status names branches, never pull requests
    assert event.checks.branches == tuple(b["name"] for b in load("github", "status")["branches"])


def test_a_push_to_a_pull_request_carries_its_new_head() -> None:
    event = gh("pull_request.synchronize")
    assert event.kind is EventKind.CHANGE_REQUEST_PUSHED and event.head is not None
    assert event.head.sha == SHA and event.head.base_branch == "master"
    assert event.head.before_sha == "f95f852bd8fca8fcc58a9a2d6c842781e32a215e"
    assert event.head.draft is False


def test_other_pull_request_events_carry_the_head_without_a_before() -> None:
    event = gh("pull_request.opened")
    assert event.kind is EventKind.ISSUE_OPENED
    assert event.head is not None and event.head.before_sha is None


def test_a_submitted_review_carries_its_id_and_state() -> None:
    event = gh("pull_request_review.submitted")
    data = load("github", "pull_request_review.submitted")["review"]
    assert event.kind is EventKind.REVIEW_SUBMITTED and event.review is not None
    assert event.review.review_id == data["id"]
    assert event.review.state == data["state"].lower()
    assert event.review.commit_sha == data["commit_id"]


def test_a_review_comment_names_its_review_its_line_and_what_it_answers() -> None:
    payload = load("github", "pull_request_review_comment.created")
    payload["comment"]["in_reply_to_id"] = 7
    event = gh("pull_request_review_comment.created", payload)
    review = event.review
    assert review is not None
    assert review.review_id == payload["comment"]["pull_request_review_id"]
    assert review.in_reply_to == 7
    assert review.path == payload["comment"]["path"]
    assert review.line == payload["comment"].get("line")


@pytest.mark.parametrize(
    ("name", "path", "message"),
    [
        ("check_run.completed", ("check_run", "head_sha"), "payload.check_run.head_sha: missing"),
        ("check_suite.completed", ("check_suite", "id"), "payload.check_suite.id: missing"),
        ("workflow_run.completed", ("workflow_run", "head_sha"), "head_sha: missing"),
        ("status", ("sha",), "payload.sha: missing"),
        ("status", ("state",), "payload.state: missing"),
    ],
)
def test_a_ci_payload_without_its_keys_is_refused_by_name(
    name: str, path: tuple[str, ...], message: str
) -> None:
    payload = copy.deepcopy(load("github", name))
    node = payload
    for key in path[:-1]:
        node = node[key]
    del node[path[-1]]
    with pytest.raises(PayloadError, match=message.replace(".", r"\.")):
        gh(name, payload)


def test_a_check_run_with_pull_requests_of_the_wrong_type_is_refused() -> None:
    payload = load("github", "check_run.completed")
    payload["check_run"]["pull_requests"] = [{"number": "2"}]
    with pytest.raises(PayloadError, match="expected an integer"):
        gh("check_run.completed", payload)


# --- GitLab -----------------------------------------------------------------------------------


def test_a_pipeline_hook_reports_the_pipeline_and_each_job() -> None:
    event = gl("Pipeline Hook", "pipeline-hook")
    report = event.checks
    assert event.kind is EventKind.CHECKS_CHANGED and report is not None
    assert report.head_sha == "bcbb5ec396a2c0f828686f14fac9b80b780504f2"
    assert report.numbers == (1,) and report.branches == ("master",)
    pipeline, *jobs = report.checks
    assert pipeline.kind is CheckKind.PIPELINE and pipeline.state is CheckState.PASSED
    builds = load("gitlab", "pipeline-hook")["builds"]
    assert [job.name for job in jobs] == [build["name"] for build in builds]
    assert all(job.kind is CheckKind.JOB and job.log_id == job.id for job in jobs)
    production = next(job for job in jobs if job.name == "production")
    assert production.conclusion == "skipped" and production.state is CheckState.PASSED


def test_a_blocking_manual_job_waits_and_an_optional_one_does_not() -> None:
    payload = load("gitlab", "pipeline-hook")
    payload["builds"] = [
        {"id": 1, "name": "deploy", "status": "manual", "allow_failure": False},
        {"id": 2, "name": "extra", "status": "manual", "allow_failure": True},
        {"id": 3, "name": "flaky", "status": "failed", "allow_failure": True},
    ]
    _, deploy, extra, flaky = gl("Pipeline Hook", "pipeline-hook", payload).checks.checks  # type: ignore[union-attr]
    assert deploy.state is CheckState.WAITING
    assert extra.state is CheckState.PASSED
    assert flaky.state is CheckState.FAILED and flaky.optional


def test_a_merge_request_pipeline_ref_names_the_merge_request_not_a_branch() -> None:
    payload = load("gitlab", "pipeline-hook")
    payload["object_attributes"]["ref"] = "refs/merge-requests/7/head"
    payload["merge_request"] = None
    report = gl("Pipeline Hook", "pipeline-hook", payload).checks
    assert report is not None and report.numbers == (7,) and report.branches == ()


def test_an_external_pipeline_is_reported_by_its_user() -> None:
    payload = load("gitlab", "pipeline-hook")
    payload["object_attributes"]["source"] = "external"
    report = gl("Pipeline Hook", "pipeline-hook", payload).checks
    assert report is not None and {check.reporter for check in report.checks} == {"root"}


def test_a_job_hook_reports_one_job_on_its_branch() -> None:
    event = gl("Job Hook", "job-hook")
    report = event.checks
    assert report is not None and report.head_sha == "2293ada6b400935a1378653304eaf6221e0fdb8f"
    assert report.branches == ("gitlab-script-trigger",) and report.numbers == ()
    (job,) = report.checks
    assert job.name == "test" and job.id == job.log_id == "1977"
    assert job.state is CheckState.PENDING
    assert job.summary == ""  # a failure reason means something only once the job failed
    assert event.actor.login == ""  # this hook's user has no username


def test_a_failed_job_says_why() -> None:
    payload = load("gitlab", "job-hook")
    payload["build_status"] = "failed"
    (job,) = gl("Job Hook", "job-hook", payload).checks.checks  # type: ignore[union-attr]
    assert job.state is CheckState.FAILED and job.summary == "script_failure"


def test_a_tag_job_names_no_branch() -> None:
    payload = load("gitlab", "job-hook")
    payload["tag"] = True
    report = gl("Job Hook", "job-hook", payload).checks
    assert report is not None and report.branches == ()


def test_a_merge_request_note_names_its_discussion_and_line() -> None:
    payload = load("gitlab", "note-hook-merge-request")
    payload["object_attributes"] |= {
        "type": "DiffNote",
        "discussion_id": "6a9c1750b37d513a43987b574953fceb50b03ce7",
        "position": {"new_path": "app.py", "new_line": 12, "old_path": "app.py"},
    }
    event = gl("Note Hook", "note-hook-merge-request", payload)
    assert event.kind is EventKind.REVIEW_COMMENT and event.review is not None
    assert event.review.thread_id == "6a9c1750b37d513a43987b574953fceb50b03ce7"
    assert (event.review.path, event.review.line) == ("app.py", 12)


def test_a_note_on_a_removed_line_points_at_the_old_line() -> None:
    payload = load("gitlab", "note-hook-merge-request")
    payload["object_attributes"]["position"] = {"old_path": "gone.py", "old_line": 3}
    review = gl("Note Hook", "note-hook-merge-request", payload).review
    assert review is not None and (review.path, review.line) == ("gone.py", 3)


def test_an_issue_note_has_no_review_place() -> None:
    assert gl("Note Hook", "note-hook-issue").review is None


def test_a_push_to_a_merge_request_carries_its_new_head() -> None:
    payload = load("gitlab", "merge-request-hook")
    attrs = payload["object_attributes"]
    attrs |= {"action": "update", "oldrev": "0" * 40}
    payload["changes"] = {}
    event = gl("Merge Request Hook", "merge-request-hook", payload)
    assert event.kind is EventKind.CHANGE_REQUEST_PUSHED and event.head is not None
    assert event.head.sha == attrs["last_commit"]["id"]
    assert event.head.base_branch == attrs["target_branch"]
    assert event.head.before_sha == "0" * 40


@pytest.mark.parametrize(
    ("event", "name", "drop", "message"),
    [
        ("Pipeline Hook", "pipeline-hook", ("object_attributes", "sha"), "sha: missing"),
        ("Pipeline Hook", "pipeline-hook", ("project",), "payload.project: missing"),
        ("Job Hook", "job-hook", ("build_status",), "payload.build_status: missing"),
        ("Job Hook", "job-hook", ("sha",), "payload.sha: missing"),
    ],
)
def test_a_gitlab_ci_payload_without_its_keys_is_refused_by_name(
    event: str, name: str, drop: tuple[str, ...], message: str
) -> None:
    payload = copy.deepcopy(load("gitlab", name))
    node = payload
    for key in drop[:-1]:
        node = node[key]
    del node[drop[-1]]
    with pytest.raises(PayloadError, match=message):
        gl(event, name, payload)


# --- the states -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "conclusion", "state"),
    [
        ("queued", None, CheckState.PENDING),
        ("in_progress", None, CheckState.RUNNING),
        ("waiting", None, CheckState.WAITING),
        ("completed", "success", CheckState.PASSED),
        ("completed", "neutral", CheckState.PASSED),
        ("completed", "skipped", CheckState.PASSED),
        ("completed", "failure", CheckState.FAILED),
        ("completed", "timed_out", CheckState.FAILED),
        ("completed", "startup_failure", CheckState.FAILED),
        ("completed", "action_required", CheckState.WAITING),
        ("completed", "cancelled", CheckState.CANCELLED),
        ("completed", "stale", CheckState.CANCELLED),
        ("completed", "something new", CheckState.PENDING),
        ("something new", None, CheckState.PENDING),
    ],
)
def test_github_check_states(status: str, conclusion: str | None, state: CheckState) -> None:
    assert github_check(status, conclusion) is state


def test_github_commit_status_and_gitlab_states() -> None:
    assert github_status("error") is CheckState.FAILED
    assert github_status("pending") is CheckState.PENDING
    assert gitlab_job("waiting_for_resource") is CheckState.PENDING
    assert gitlab_job("canceled") is CheckState.CANCELLED
    assert gitlab_job("manual") is CheckState.WAITING
    assert gitlab_job("manual", allow_failure=True) is CheckState.PASSED
    assert gitlab_job("unheard of") is CheckState.PENDING
