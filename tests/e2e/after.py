"""After the pull request, end to end: a project whose CI checks what the bot's quality
gate does not, the webhooks GitHub and GitLab send about the bot's change request (CI
runs, suites, pipelines, jobs, reviews, notes), and what the forge holds meanwhile
(checks, logs, review threads: the FakeForge, as the real one would)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from bot.change_state import ReviewThread
from bot.events import Check, CheckKind, CheckState
from bot.storage.base import Task, TaskState
from tests.agent import docs
from tests.e2e.support import GH_BRANCH, GH_REPO, GL_OWNER, GL_REPO, OWNER, settle
from tests.fakes import BOT_ACCOUNT_ID, FakeForge
from tests.harness import Harness, fixture
from tests.storage.store_support import Clock
from tests.tools.conftest import GIT_ENV, Remote, git, make_remote

MAKEFILE = b"lint:\n\tgrep -q Hello-World README.md\n"  # the bot's gate: lint only
TEST_CALC = b"""\
. ./calc.sh
got=$(sub 5 3)
[ "$got" = 2 ] || {
    echo "FAILED tests/test_calc.sh::test_sub: sub 5 3 gave $got, expected 2"
    exit 1
}
echo "1 passed"
"""
PROJECT = {
    "README.md": b"# Hello-World\n\nMy first repository.\n",
    "Makefile": MAKEFILE,
    "tests/test_calc.sh": TEST_CALC,  # what the project's CI runs, and the gate does not
}
BUGGY = "add() { echo $(($1 + $2)); }\nsub() { echo $(($1 + $2)); }\n"
FIXED = "add() { echo $(($1 + $2)); }\nsub() { echo $(($1 - $2)); }\n"
CI_LOG = """\
2024-05-01T10:00:00.0000000Z ##[group]Run sh tests/test_calc.sh
2024-05-01T10:00:00.1000000Z sh tests/test_calc.sh
2024-05-01T10:00:00.2000000Z FAILED tests/test_calc.sh::test_sub: sub 5 3 gave 8, expected 2
2024-05-01T10:00:00.3000000Z ##[error]Process completed with exit code 1.
"""
ACTIONS = "github-actions[bot]"
SETTLE = 60.0


def project(tmp_path: Path) -> Remote:
    return make_remote(tmp_path / "origin", dict(PROJECT))


def bot_with_clock(tmp_path: Path, script: list[object], **overrides: dict[str, Any]) -> Harness:
    """The bot end to end on a clock the test moves (the settle and quiet times pass when
    the test says so)."""
    clock = Clock()
    bot = Harness(tmp_path, script=script, clock=clock, overrides=overrides or None)
    bot.clock = clock  # type: ignore[attr-defined]
    return bot


async def later(bot: Harness, seconds: float = SETTLE + 1) -> list[Task]:
    """What came in is seen now; then ``seconds`` pass and everything due runs. The tasks
    run, in both steps."""
    ran = await settle(bot)
    bot.clock.advance(seconds)  # type: ignore[attr-defined]
    return ran + await settle(bot)


def opening_script() -> list[object]:
    """The task that opens the pull request: calc.sh with a bug the gate does not see."""
    write = docs.action(
        "task_1",
        "write_file",
        arguments={"path": "calc.sh", "content": BUGGY},
        purpose="Add add and sub to calc.sh",
    )
    return [docs.plan([write], objective="Add calc.sh"), docs.completion(done=1)]


def fix_script(content: str = FIXED) -> list[object]:
    """A CI fix round: reproduce with the failing command from the log (it fails, as it
    should), fix, run it again."""
    reproduce = docs.action(
        "task_1",
        "run_command",
        arguments={"argv": ["sh", "tests/test_calc.sh"]},
        purpose="Reproduce the failure",
        expected="it fails like CI",
    )
    fix = docs.action(  # not dependent on the reproduction: it fails, as it should
        "task_2",
        "write_file",
        arguments={"path": "calc.sh", "content": content},
        purpose="Fix sub",
    )
    again = docs.action(
        "task_3",
        "run_command",
        arguments={"argv": ["sh", "tests/test_calc.sh"]},
        purpose="Run the test again",
        dependencies=["task_2"],
    )
    plan = docs.plan(
        [reproduce, fix, again],
        objective="Fix the failing CI check test",
        dependencies={"task_3": ["task_2"]},
    )
    reproduced = docs.reflection("task_1", status="success")
    return [plan, reproduced, docs.completion(done=3)]


def attempt_script(n: int) -> list[object]:
    """A CI fix round that changes something, without fixing the cause."""
    write = docs.action(
        "task_1", "write_file", arguments={"path": "calc.sh", "content": BUGGY + f"# attempt {n}\n"}
    )
    return [docs.plan([write], objective=f"Fix attempt {n}"), docs.completion(done=1)]


async def opened_pull_request(bot: Harness, remote: Remote) -> tuple[Any, str]:
    """Issue #1 labelled, its task run: the draft pull request and its head commit."""
    repo = bot.github.add_repo(GH_REPO, dict(PROJECT), clone_url=remote.url, writers=(OWNER,))
    title = "Spelling error in the README file"  # the fixture's: the branch is GH_BRANCH
    bot.github.add_issue(repo, 1, title=title, author=OWNER, labels=("coding agent",))
    await bot.send_github("issues", labeled())
    await settle(bot)
    [change] = bot.github.repos[GH_REPO].change_requests
    return change, remote.rev(GH_BRANCH)


def labeled() -> dict[str, Any]:
    payload = fixture("github", "issues.labeled.json")
    payload["label"]["name"] = "coding agent"
    payload["issue"]["labels"].append({"name": "coding agent"})
    return payload


# --- GitHub: CI ----------------------------------------------------------------------------


def actions_check(name: str, state: CheckState, run_id: int, *, conclusion: str = "") -> Check:
    words = {CheckState.FAILED: "failure", CheckState.PASSED: "success"}
    return Check(
        name=name,
        state=state,
        kind=CheckKind.RUN,
        conclusion=conclusion or words.get(state, ""),
        id=str(run_id),
        reporter=ACTIONS,
        log_id=str(run_id),
    )


def check_run(
    sha: str,
    number: int,
    *,
    name: str = "test",
    conclusion: str | None = "failure",
    run_id: int = 11,
    status: str = "completed",
    branch: str = GH_BRANCH,
    app: str = "github-actions",
) -> dict[str, Any]:
    payload = fixture("github", "check_run.completed.json")
    run = payload["check_run"]
    run.update(id=run_id, head_sha=sha, name=name, status=status, conclusion=conclusion)
    run["app"]["slug"] = app
    run["check_suite"].update(head_branch=branch, head_sha=sha)
    run["pull_requests"][0]["number"] = number
    run["pull_requests"][0]["head"].update(ref=branch, sha=sha)
    return payload


def check_suite(sha: str, number: int, *, conclusion: str = "success") -> dict[str, Any]:
    payload = fixture("github", "check_suite.completed.json")
    suite = payload["check_suite"]
    suite.update(head_sha=sha, head_branch=GH_BRANCH, conclusion=conclusion, after=sha)
    suite["pull_requests"] = [{"number": number, "head": {"ref": GH_BRANCH, "sha": sha}}]
    return payload


# --- GitHub: reviews -------------------------------------------------------------------------


def review_threads(
    forge: FakeForge, number: int, comments: list[tuple[str, int, str]], *, by: str = OWNER
) -> list[ReviewThread]:
    """What GitHub holds once a review with these line comments is submitted."""
    repo = forge.repos[GH_REPO].ref
    return [
        forge.add_thread(repo, number, (by, body), path=path, line=line)
        for path, line, body in comments
    ]


def review_comment(
    change: Any, thread: ReviewThread, *, review_id: int = 4242, by: str = OWNER
) -> dict[str, Any]:
    payload = fixture("github", "pull_request_review_comment.created.json")
    first = thread.comments[0]
    payload["comment"].update(
        id=first.id,
        body=first.body,
        path=thread.path,
        line=thread.line,
        pull_request_review_id=review_id,
    )
    payload["comment"]["user"]["login"] = by
    payload["sender"]["login"] = by
    return on_the_pull_request(payload, change)


def review_submitted(
    change: Any,
    *,
    review_id: int = 4242,
    by: str = OWNER,
    state: str = "changes_requested",
    body: str | None = None,
) -> dict[str, Any]:
    payload = fixture("github", "pull_request_review.submitted.json")
    payload["review"].update(id=review_id, state=state, body=body)
    payload["review"]["user"]["login"] = by
    payload["sender"]["login"] = by
    return on_the_pull_request(payload, change)


def on_the_pull_request(payload: dict[str, Any], change: Any) -> dict[str, Any]:
    pull = payload["pull_request"]
    pull.update(number=change.number, html_url=change.web_url, draft=change.draft)
    pull["head"]["ref"] = GH_BRANCH
    pull["head"]["repo"]["full_name"] = GH_REPO
    pull["user"].update(login="coding-agent[bot]", id=int(BOT_ACCOUNT_ID), type="Bot")
    return payload


# --- a person on the branch ------------------------------------------------------------------


def push_as_person(
    remote: Remote, tmp_path: Path, branch: str, files: dict[str, bytes], message: str
) -> str:
    """A person clones, commits ``files`` to ``branch`` and pushes; the new head."""
    where = tmp_path / f"person-{branch.replace('/', '-')}-{len(list(tmp_path.iterdir()))}"
    git("clone", "--quiet", "--branch", branch, remote.url, str(where), cwd=tmp_path)
    for rel, data in files.items():
        (where / rel).parent.mkdir(parents=True, exist_ok=True)
        (where / rel).write_bytes(data)
    git("add", "--all", cwd=where)
    env = {**GIT_ENV, "GIT_AUTHOR_NAME": "Mona", "GIT_AUTHOR_EMAIL": "mona@example.com"}
    subprocess.run(["git", "commit", "--quiet", "-m", message], cwd=where, env=env, check=True)
    git("push", "--quiet", "origin", branch, cwd=where)
    return git("rev-parse", "HEAD", cwd=where)


# --- GitLab ----------------------------------------------------------------------------------


def pipeline(
    sha: str,
    iid: int,
    branch: str,
    *,
    status: str = "failed",
    job: tuple[int, str, str] = (31, "test", "failed"),
) -> dict[str, Any]:
    """A merge request pipeline's hook: its jobs (``job``: id, name, status)."""
    payload = fixture("gitlab", "pipeline-hook.json")
    attrs = payload["object_attributes"]
    attrs.update(
        sha=sha,
        status=status,
        ref=f"refs/merge-requests/{iid}/head",
        tag=False,
        source="merge_request_event",
    )
    job_id, name, job_status = job
    payload["builds"] = [
        {
            **payload["builds"][0],
            "id": job_id,
            "name": name,
            "status": job_status,
            "stage": "test",
            "when": "on_success",
            "manual": False,
            "allow_failure": False,
            "failure_reason": "script_failure",
        }
    ]
    payload["merge_request"].update(iid=iid, source_branch=branch)
    payload["project"]["path_with_namespace"] = GL_REPO
    payload["user"]["username"] = GL_OWNER
    return payload


def ended(tasks: list[Task]) -> list[TaskState]:
    return [task.state for task in tasks]
