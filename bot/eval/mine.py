"""Tasks from a repository's own history, in SWE-bench's format.

For each candidate commit (``history.candidates``: it changes code and tests) a fresh
checkout of its parent is set up (``prepared``: the bot's set-up, cached), the test
patch is applied and the whole suite runs in the sandbox (before), then the code patch
is applied and it runs again (after, the commit's own tree). FAIL_TO_PASS: the tests
that pass after and did not pass before (failed, errored, or were not there);
PASS_TO_PASS: those that passed both times. A candidate is dropped, with its reason,
when set-up fails, its tests do not run at the commit (nothing passes) or nothing
fails before and passes after.

With a forge (``IssueSource``: a forge with credentials), the change requests merged into
the repository are candidates too: each whose merge commit (or squashed commit) is in the
local history is taken against that commit's first parent; a commit that is both a
candidate and a change request's is one candidate, the change request's. A forge that
cannot list them leaves the commits alone, with a notice.

The problem statement is the title and body of the issue the change request's body or
the commit message names (``Fixes #3``, ``Closes !7``) when the forge can read it (a
confidential issue is not used), else the change request's title and body (marked
``"statement": "change_request"``), else the commit message (``"statement": "commit"``).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.config import Settings
from bot.eval.checkout import CheckoutError, apply_patch
from bot.eval.history import Candidate, candidates, linked_issue
from bot.eval.prepared import Prepared, prepared, setup_failure
from bot.eval.results import Statement
from bot.eval.testrun import TestRun, TestStatus, discover
from bot.events import RepoRef
from bot.forges.base import Forge, ForgeError
from bot.forges.merged import MergedChangeRequest
from bot.sandbox.gitcmd import WorkspaceError


@dataclass(frozen=True, slots=True)
class IssueSource:
    """Where the issues a commit names are read: a forge and the repository on it."""

    forge: Forge
    repo: RepoRef

    async def statement(self, message: str) -> str | None:
        """The linked issue's title and body, or None (no link, not readable, confidential)."""
        link = linked_issue(message)
        if link is None:
            return None
        try:
            details = await self.forge.get_issue(
                self.repo, link.number, change_request=link.change_request, comments=False
            )
        except ForgeError:
            return None
        if details.confidential:
            return None
        issue = details.issue
        return f"{issue.title}\n\n{issue.body}".strip()

    async def merged(self, since: str | None) -> dict[str, MergedChangeRequest]:
        """The change requests merged into the repository, by merge commit; raises
        ``ForgeError`` when the forge cannot list them."""
        listed = await self.forge.list_merged_change_requests(self.repo, since=since)
        return {merged.merge_commit: merged for merged in reversed(listed)}  # newest wins


@dataclass(frozen=True, slots=True)
class Source:
    """The repository mined: its local clone, its name in the tasks, where it came from."""

    path: Path
    name: str
    url: str = ""  # the git URL it was cloned from ("" for a local path)


@dataclass(frozen=True, slots=True)
class Verdict:
    """One candidate: the task (None when dropped) or why it was dropped."""

    commit: str
    task: dict[str, Any] | None = None
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Mining:
    """How to mine: the tests' command and set-up (None: pytest, and set-up as a task's
    clone gets it), how many tasks at most, from which date."""

    test_command: tuple[str, ...] | None = None
    setup: tuple[str, ...] | None = None
    limit: int | None = None
    since: str | None = None
    issues: IssueSource | None = None
    report: Callable[[Verdict], Awaitable[None]] | None = None  # each verdict as it is known
    notice: Callable[[str], Awaitable[None]] | None = None  # what went wrong besides


@dataclass(frozen=True, slots=True)
class Told:
    """A task's problem statement, where it came from, and the change request mined."""

    text: str
    kind: Statement
    change: MergedChangeRequest | None = None


def split_results(before: TestRun, after: TestRun) -> tuple[list[str], list[str]]:
    """FAIL_TO_PASS and PASS_TO_PASS from the run before and the run after. Pure."""
    passed = [i for i, s in sorted(after.statuses.items()) if s is TestStatus.PASSED]
    was = {i for i, s in before.statuses.items() if s is TestStatus.PASSED}
    return [i for i in passed if i not in was], [i for i in passed if i in was]


async def mine(
    source: Source, *, settings: Settings, work_dir: Path, how: Mining
) -> list[dict[str, Any]]:
    """The tasks of ``source``'s history, newest first, at most ``how.limit``; each
    candidate's verdict goes to ``how.report`` as it is known."""
    tasks: list[dict[str, Any]] = []
    if how.limit is not None and how.limit < 1:
        return tasks
    merged = await _merged(how)
    listed = candidates(source.path, since=how.since, merges=frozenset(merged))
    async with contextlib.aclosing(listed) as found:
        async for candidate in found:
            folder = work_dir / candidate.commit[:12]
            verdict = await judge_candidate(source, candidate, settings=settings,
                                            work_dir=folder, how=how,
                                            change=merged.get(candidate.commit))  # fmt: skip
            if how.report is not None:
                await how.report(verdict)
            if verdict.task is not None:
                tasks.append(verdict.task)
                if how.limit is not None and len(tasks) >= how.limit:
                    break
    return tasks


async def _merged(how: Mining) -> dict[str, MergedChangeRequest]:
    """The merged change requests by merge commit; none (and a notice) when the forge
    cannot list them."""
    if how.issues is None:
        return {}
    try:
        return await how.issues.merged(how.since)
    except ForgeError as exc:
        if how.notice is not None:
            await how.notice(f"the merged change requests of {how.issues.repo.full_name} "
                             f"could not be listed ({exc}): mining commits only")  # fmt: skip
        return {}


async def judge_candidate(
    source: Source,
    candidate: Candidate,
    *,
    settings: Settings,
    work_dir: Path,
    how: Mining,
    change: MergedChangeRequest | None = None,
) -> Verdict:
    """Run the candidate's tests before and after its change; its task or why not."""
    try:
        async with prepared(repo=source.path, commit=candidate.parent, work_dir=work_dir,
                            setup=how.setup, test_command=how.test_command,
                            settings=settings) as ready:  # fmt: skip
            runs = await _before_and_after(ready, candidate, work_dir)
    except (CheckoutError, WorkspaceError) as exc:
        return Verdict(
            candidate.commit, reason=f"no checkout of its parent could be prepared: {exc}"
        )
    if isinstance(runs, str):
        return Verdict(candidate.commit, reason=runs)
    before, after = runs
    if not any(s is TestStatus.PASSED for s in after.statuses.values()):
        why = after.error or ("they timed out" if after.timed_out else "no test passed")
        return Verdict(candidate.commit, reason=f"its tests do not run at the commit ({why})")
    fail_to_pass, pass_to_pass = split_results(before, after)
    if not fail_to_pass:
        return Verdict(candidate.commit, reason="no test fails before it and passes after it")
    told = await problem_statement(candidate, change, how.issues)
    task = swe_bench_task(source, candidate, fail_to_pass, pass_to_pass, told, how)
    return Verdict(candidate.commit, task=task)


async def problem_statement(
    candidate: Candidate, change: MergedChangeRequest | None, issues: IssueSource | None
) -> Told:
    """The linked issue's (the change request's body first, then the commit message),
    else the change request's title and body, else the commit message."""
    for text in (change.body if change else "", candidate.message):
        issue = await issues.statement(text) if issues and text else None
        if issue is not None:
            return Told(issue, Statement.ISSUE, change)
    if change is not None:
        return Told(f"{change.title}\n\n{change.body}".strip(), Statement.CHANGE_REQUEST, change)
    return Told(candidate.message, Statement.COMMIT)


async def _before_and_after(
    ready: Prepared, candidate: Candidate, work_dir: Path
) -> tuple[TestRun, TestRun] | str:
    failed = setup_failure(ready.setup)
    if failed:
        return failed
    refused = await apply_patch(ready.root, candidate.test_patch)
    if refused:
        return f"its test patch does not apply to its parent: {refused}"
    before = await discover(ready.root, sandbox=ready.sandbox, how=ready.how,
                            log_path=work_dir / "before.log")  # fmt: skip
    refused = await apply_patch(ready.root, candidate.patch)
    if refused:
        return f"its code patch does not apply over its test patch: {refused}"
    after = await discover(ready.root, sandbox=ready.sandbox, how=ready.how,
                           log_path=work_dir / "after.log")  # fmt: skip
    return before, after


def swe_bench_task(
    source: Source,
    candidate: Candidate,
    fail_to_pass: Sequence[str],
    pass_to_pass: Sequence[str],
    told: Told,
    how: Mining,
) -> dict[str, Any]:
    """One task as SWE-bench writes its instances (the test lists as JSON strings), with
    where the repository is and where the statement came from. Pure."""
    task: dict[str, Any] = {
        "instance_id": f"{source.name.replace('/', '__')}-{candidate.commit[:12]}",
        "repo": source.name,
        "base_commit": candidate.parent,
        "problem_statement": told.text,
        "hints_text": "",
        "test_patch": candidate.test_patch,
        "patch": candidate.patch,
        "FAIL_TO_PASS": json.dumps(list(fail_to_pass)),
        "PASS_TO_PASS": json.dumps(list(pass_to_pass)),
        "created_at": candidate.created_at,
        "environment_setup_commit": candidate.parent,
        "statement": told.kind.value,
        "commit": candidate.commit,
    }
    if told.change is not None:
        task["change_request"] = told.change.number
        task["change_request_url"] = told.change.web_url
    task["repo_url" if source.url else "repo_path"] = source.url or str(source.path)
    if how.test_command is not None:
        task["test_command"] = list(how.test_command)
    if how.setup is not None:
        task["setup"] = list(how.setup)
    return task
