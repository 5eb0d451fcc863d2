"""The one fake forge of the test suite.

It keeps repositories, issues, comments, labels, reactions, files, branches,
commits and change requests in memory and records every call, so tests assert
what a maintainer would see. Failures can be injected per method.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import msgspec.structs

from bot.change_state import (
    Annotation,
    ChangeRequestState,
    CommitAuthor,
    CommitChecks,
    LogTail,
    Mergeable,
    OpenChangeRequest,
    ReviewThread,
    ThreadComment,
)
from bot.events import Check, ForgeKind, IssueRef, RepoRef
from bot.forges.base import (
    LOG_TAIL_BYTES,
    ChangeRequest,
    CloneAuth,
    Comment,
    Conflict,
    FileContent,
    ForgeError,
    IssueDetails,
    NotFound,
    Permission,
    RepoInfo,
    SearchHit,
    TreeEntry,
)
from bot.forges.retry import WritePacer
from bot.progress import step

WRITES = frozenset(
    {
        "create_comment",
        "edit_comment",
        "add_reaction",
        "ensure_label",
        "add_labels",
        "remove_label",
        "create_branch",
        "commit_files",
        "open_change_request",
        "update_change_request",
        "reply_to_thread",
        "resolve_thread",
        "mark_ready_for_review",
    }
)


@dataclass
class FakeIssue:
    ref: IssueRef
    comments: list[Comment] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    reactions: list[tuple[int | None, str]] = field(default_factory=list)
    confidential: bool = False  # GitLab: only members may read it
    label_events: list[tuple[str, str]] = field(default_factory=list)  # (who, label) added


@dataclass
class FakeRepo:
    ref: RepoRef
    default_branch: str = "main"
    clone_url: str = ""
    branches: dict[str, dict[str, bytes]] = field(default_factory=dict)
    labels: dict[str, tuple[str, str]] = field(default_factory=dict)
    permissions: dict[str, Permission] = field(default_factory=dict)
    commits: list[tuple[str, str, dict[str, bytes | None]]] = field(default_factory=list)
    change_requests: list[ChangeRequest] = field(default_factory=list)
    change_request_bodies: dict[int, tuple[str, str]] = field(default_factory=dict)


@dataclass
class FakeChange:
    """What a test scripts of a change request after it was opened: its head and base
    commits, mergeability, commits, state and review threads."""

    head_sha: str = "0" * 40
    base_sha: str = "b" * 40
    mergeable: Mergeable = Mergeable.MERGEABLE
    commits: list[CommitAuthor] = field(default_factory=list)
    state: str = "open"
    threads: list[ReviewThread] = field(default_factory=list)


class FakeForge:
    """An in-memory forge implementing the ``Forge`` protocol."""

    def __init__(self, kind: ForgeKind = ForgeKind.GITHUB, *, bot_login: str = "") -> None:
        self.kind = kind
        self.bot_login = bot_login or (
            "coding-agent[bot]" if kind is ForgeKind.GITHUB else "coding-agent-bot"
        )
        self.repos: dict[str, FakeRepo] = {}
        self.issues: dict[tuple[str, int], FakeIssue] = {}
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        self.failures: dict[str, list[BaseException]] = {}
        self.conditions: dict[str, Callable[[tuple[Any, ...]], bool]] = {}
        self.edits: list[tuple[int, str]] = []
        self.hangs: set[str] = set()  # methods whose next call never answers
        self.pacer: WritePacer | None = None  # pace writes as the real adapters do
        # (time.monotonic() when the call went out, after its pacing wait, method, args)
        self.timeline: list[tuple[float, str, tuple[Any, ...]]] = []
        self._ids = itertools.count(1000)
        self._numbers = itertools.count(100)
        # after the change request: checks and annotations per commit, job logs by id
        self.checks: dict[str, list[Check]] = {}
        self.annotations: dict[str, dict[str, tuple[Annotation, ...]]] = {}
        self.logs: dict[str, str] = {}
        self.changes: dict[tuple[str, int], FakeChange] = {}

    # --- test set-up -----------------------------------------------------------------------

    def add_repo(
        self,
        full_name: str,
        files: dict[str, str | bytes] | None = None,
        *,
        default_branch: str = "main",
        clone_url: str = "",
        writers: tuple[str, ...] = ("alice",),
    ) -> RepoRef:
        ref = RepoRef(
            forge=self.kind,
            full_name=full_name,
            project_id=len(self.repos) + 1 if self.kind is ForgeKind.GITLAB else None,
            scope_id="1" if self.kind is ForgeKind.GITHUB else None,
            default_branch=default_branch,
            web_url=f"https://{self.kind.value}.example/{full_name}",
        )
        content = {p: v.encode() if isinstance(v, str) else v for p, v in (files or {}).items()}
        repo = FakeRepo(ref=ref, default_branch=default_branch, clone_url=clone_url)
        repo.branches[default_branch] = content
        for user in writers:
            repo.permissions[user] = Permission.WRITE
        self.repos[full_name] = repo
        return ref

    def add_issue(
        self,
        repo: RepoRef,
        number: int,
        *,
        title: str,
        body: str = "",
        author: str = "alice",
        labels: tuple[str, ...] = (),
        change_request: bool = False,
        head_branch: str | None = None,
        head_repo: str | None = None,
        confidential: bool = False,
    ) -> IssueRef:
        ref = IssueRef(
            repo=repo,
            number=number,
            is_change_request=change_request,
            title=title,
            body=body,
            web_url=self._web_url(repo, number, change_request=change_request),
            author=author,
            labels=labels,
            head_branch=head_branch,
            head_repo=head_repo,
        )
        self.issues[(repo.full_name, number)] = FakeIssue(
            ref=ref,
            labels=list(labels),
            confidential=confidential,
            label_events=[(author, label) for label in labels],
        )
        return ref

    def _web_url(
        self, repo: RepoRef, number: int, *, change_request: bool, opened: bool = False
    ) -> str:
        """An issue's or change request's address as the forge forms it (GitLab:
        ``/-/issues/N``, ``/-/merge_requests/N``; GitHub: ``/issues/N``, ``/pull/N``)."""
        if self.kind is ForgeKind.GITLAB:
            kind = "merge_requests" if change_request else "issues"
            return f"{repo.web_url}/-/{kind}/{number}"
        return f"{repo.web_url}/{'pull' if opened else 'issues'}/{number}"

    def fail(
        self,
        method: str,
        *errors: BaseException,
        when: Callable[[tuple[Any, ...]], bool] | None = None,
    ) -> None:
        """The next calls of ``method`` raise these errors, in order; with ``when``, only
        the calls whose arguments (as recorded in ``calls``) it accepts. A
        ``BaseException`` that is not an ``Exception`` stands for the worker being killed
        in the middle of the call."""
        self.failures.setdefault(method, []).extend(errors)
        if when is not None:
            self.conditions[method] = when

    def set_checks(self, sha: str, *checks: Check, **annotations: tuple[Annotation, ...]) -> None:
        """The checks commit ``sha`` has now (a later call replaces them); ``annotations``
        by check id."""
        self.checks[sha] = list(checks)
        self.annotations[sha] = dict(annotations)

    def change(self, repo: RepoRef, number: int) -> FakeChange:
        """The scriptable after-opening state of change request ``number`` (made on use)."""
        return self.changes.setdefault((repo.full_name, number), FakeChange())

    def add_thread(
        self,
        repo: RepoRef,
        number: int,
        *comments: tuple[str, str],
        path: str | None = None,
        line: int | None = None,
        resolvable: bool = True,
    ) -> ReviewThread:
        """A review thread of ``(author, body)`` comments on change request ``number``."""
        thread = ReviewThread(
            id=f"thread-{next(self._ids)}",
            comments=tuple(
                ThreadComment(id=next(self._ids), author=who, body=body) for who, body in comments
            ),
            resolvable=resolvable,
            path=path,
            line=line,
        )
        self.change(repo, number).threads.append(thread)
        return thread

    def hang(self, method: str) -> None:
        """The next call of ``method`` never answers (a forge that stopped responding)."""
        self.hangs.add(method)

    # --- inspection --------------------------------------------------------------------------

    def issue(self, repo: RepoRef, number: int) -> FakeIssue:
        return self.issues[(repo.full_name, number)]

    def repo(self, repo: RepoRef) -> FakeRepo:
        return self.repos[repo.full_name]

    def calls_of(self, method: str) -> list[tuple[Any, ...]]:
        return [args for name, args in self.calls if name == method]

    # --- the protocol --------------------------------------------------------------------------

    async def _enter(self, method: str, *args: Any) -> None:
        """Record the call; raise an injected failure; wait for the write pacer's turn
        (writes, when ``pacer`` is set, as the real adapters do); hang when told to."""
        with step(f"{self.kind.value} (fake) {method}"):
            self.calls.append((method, args))
            queue = self.failures.get(method)
            condition = self.conditions.get(method)
            if queue and (condition is None or condition(args)):
                raise queue.pop(0)
            if method in self.hangs:
                self.hangs.discard(method)
                await asyncio.Event().wait()  # a call that never answers
            if self.pacer is not None and method in WRITES:
                async with self.pacer.slot(f"{self.kind.value}:fake"):
                    pass
            self.timeline.append((time.monotonic(), method, args))

    def _name(self, repo: RepoRef) -> str:
        """The repository ``repo`` means: GitLab finds a project by its id first."""
        if self.kind is ForgeKind.GITLAB and repo.project_id is not None:
            for fake in self.repos.values():
                if fake.ref.project_id == repo.project_id:
                    return fake.ref.full_name
        return repo.full_name

    def _issue(self, issue: IssueRef) -> FakeIssue:
        try:
            return self.issues[(self._name(issue.repo), issue.number)]
        except KeyError:
            raise NotFound(f"issue {issue.number} not found", status=404) from None

    def _repo(self, repo: RepoRef) -> FakeRepo:
        try:
            return self.repos[self._name(repo)]
        except KeyError:
            raise NotFound(f"repository {repo.full_name} not found", status=404) from None

    async def get_issue(
        self, repo: RepoRef, number: int, *, change_request: bool, comments: bool = True
    ) -> IssueDetails:
        await self._enter("get_issue", repo.full_name, number)
        found = self.issues.get((repo.full_name, number))
        if found is None:
            raise NotFound(f"issue {number} not found", status=404)
        ref = msgspec.structs.replace(found.ref, labels=tuple(found.labels))
        return IssueDetails(
            issue=ref,
            comments=tuple(found.comments) if comments else (),
            confidential=found.confidential,
        )

    async def get_comment(self, issue: IssueRef, comment_id: int) -> Comment:
        await self._enter("get_comment", issue.number, comment_id)
        for comment in self._issue(issue).comments:
            if comment.id == comment_id:
                return comment
        raise NotFound(f"comment {comment_id} not found", status=404)

    async def create_comment(self, issue: IssueRef, body: str) -> Comment:
        await self._enter("create_comment", issue.number, body)
        comment = Comment(id=next(self._ids), body=body, author=self.bot_login)
        self._issue(issue).comments.append(comment)
        return comment

    async def edit_comment(self, issue: IssueRef, comment_id: int, body: str) -> None:
        await self._enter("edit_comment", issue.number, comment_id, body)
        fake = self._issue(issue)
        for index, comment in enumerate(fake.comments):
            if comment.id == comment_id:
                fake.comments[index] = replace(comment, body=body)
                self.edits.append((comment_id, body))
                return
        raise NotFound(f"comment {comment_id} not found", status=404)

    async def add_reaction(
        self, issue: IssueRef, comment_id: int | None, reaction: str, *, line_comment: bool = False
    ) -> None:
        await self._enter("add_reaction", issue.number, comment_id, reaction, line_comment)
        self._issue(issue).reactions.append((comment_id, reaction))

    async def ensure_label(self, repo: RepoRef, name: str, *, color: str, description: str) -> None:
        await self._enter("ensure_label", repo.full_name, name)
        self._repo(repo).labels.setdefault(name, (color, description))

    async def add_labels(self, issue: IssueRef, labels: list[str]) -> None:
        await self._enter("add_labels", issue.number, tuple(labels))
        fake = self._issue(issue)
        for label in labels:
            if label not in fake.labels:
                fake.labels.append(label)
                fake.label_events.append((self.bot_login, label))

    async def label_added_by(self, issue: IssueRef, label: str) -> str | None:
        await self._enter("label_added_by", issue.number, label)
        added = [who for who, name in self._issue(issue).label_events if name == label]
        return added[-1] if added else None

    async def remove_label(self, issue: IssueRef, label: str) -> None:
        await self._enter("remove_label", issue.number, label)
        fake = self._issue(issue)
        if label in fake.labels:
            fake.labels.remove(label)

    async def get_permission(self, repo: RepoRef, user: str) -> Permission:
        await self._enter("get_permission", repo.full_name, user)
        return self._repo(repo).permissions.get(user, Permission.READ)

    async def get_repo_info(self, repo: RepoRef) -> RepoInfo:
        await self._enter("get_repo_info", repo.full_name)
        fake = self._repo(repo)
        return RepoInfo(
            repo=fake.ref,
            default_branch=fake.default_branch,
            clone_url=fake.clone_url,
            web_url=fake.ref.web_url,
        )

    async def get_file(self, repo: RepoRef, path: str, *, ref: str | None = None) -> FileContent:
        await self._enter("get_file", repo.full_name, path, ref)
        fake = self._repo(repo)
        branch = ref or fake.default_branch
        files = fake.branches.get(branch)
        if files is None:
            raise NotFound(f"ref {branch} not found", status=404)
        if path not in files:
            raise NotFound(f"{path} not found on {branch}", status=404)
        return FileContent(path=path, content=files[path], ref=branch)

    async def list_tree(
        self, repo: RepoRef, *, path: str = "", ref: str | None = None, recursive: bool = False
    ) -> list[TreeEntry]:
        await self._enter("list_tree", repo.full_name, path, ref, recursive)
        fake = self._repo(repo)
        files = fake.branches.get(ref or fake.default_branch, {})
        prefix = path.strip("/") + "/" if path.strip("/") else ""
        entries: dict[str, TreeEntry] = {}
        for file_path, content in sorted(files.items()):
            if not file_path.startswith(prefix):
                continue
            rest = file_path[len(prefix) :]
            if recursive or "/" not in rest:
                entries[file_path] = TreeEntry(file_path, "file", len(content))
            else:
                top = prefix + rest.split("/", 1)[0]
                entries.setdefault(top, TreeEntry(top, "dir"))
        return list(entries.values())

    async def search_code(self, repo: RepoRef, query: str) -> list[SearchHit]:
        await self._enter("search_code", repo.full_name, query)
        fake = self._repo(repo)
        hits = []
        for file_path, content in sorted(fake.branches[fake.default_branch].items()):
            text = content.decode("utf-8", errors="replace")
            for line in text.splitlines():
                if query.lower() in line.lower():
                    hits.append(SearchHit(file_path, line.strip()))
                    break
        return hits

    async def create_branch(self, repo: RepoRef, name: str, *, from_ref: str) -> None:
        await self._enter("create_branch", repo.full_name, name, from_ref)
        fake = self._repo(repo)
        if name in fake.branches:
            raise Conflict(f"branch {name} already exists", status=422)
        if from_ref not in fake.branches:
            raise NotFound(f"ref {from_ref} not found", status=404)
        fake.branches[name] = dict(fake.branches[from_ref])

    async def commit_files(
        self, repo: RepoRef, *, branch: str, message: str, files: dict[str, bytes | None]
    ) -> str:
        await self._enter("commit_files", repo.full_name, branch, message, tuple(sorted(files)))
        fake = self._repo(repo)
        if branch not in fake.branches:
            raise NotFound(f"branch {branch} not found", status=404)
        tree = fake.branches[branch]
        for path, content in files.items():
            if content is None:
                tree.pop(path, None)
            else:
                tree[path] = content
        sha = f"{len(fake.commits) + 1:040x}"
        fake.commits.append((branch, message, dict(files)))
        return sha

    async def open_change_request(
        self, repo: RepoRef, *, head: str, base: str, title: str, body: str, draft: bool = True
    ) -> ChangeRequest:
        await self._enter("open_change_request", repo.full_name, head, base, title)
        fake = self._repo(repo)
        for existing in fake.change_requests:
            if existing.head_branch == head:
                raise Conflict(f"a change request for {head} exists", status=422)
        number = next(self._numbers)
        change = ChangeRequest(
            number=number,
            web_url=self._web_url(fake.ref, number, change_request=True, opened=True),
            head_branch=head,
            base_branch=base,
            draft=draft,
        )
        fake.change_requests.append(change)
        fake.change_request_bodies[number] = (title, body)
        ref = IssueRef(
            repo=fake.ref,
            number=number,
            is_change_request=True,
            title=title,
            body=body,
            web_url=change.web_url,
            author=self.bot_login,
            head_branch=head,
        )
        self.issues[(repo.full_name, number)] = FakeIssue(ref=ref)  # comments, labels
        return change

    async def update_change_request(self, repo: RepoRef, number: int, *, body: str) -> None:
        await self._enter("update_change_request", repo.full_name, number)
        fake = self._repo(repo)
        if number not in fake.change_request_bodies:
            raise NotFound(f"change request {number} not found", status=404)
        title, _old = fake.change_request_bodies[number]
        fake.change_request_bodies[number] = (title, body)

    # --- after the change request ------------------------------------------------------------

    def _change_request(self, repo: RepoRef, number: int) -> ChangeRequest:
        for change in self._repo(repo).change_requests:
            if change.number == number:
                return change
        raise NotFound(f"change request {number} not found", status=404)

    async def get_commit_checks(self, repo: RepoRef, sha: str) -> CommitChecks:
        await self._enter("get_commit_checks", repo.full_name, sha)
        self._repo(repo)
        return CommitChecks(
            sha=sha,
            checks=tuple(self.checks.get(sha, ())),
            annotations=dict(self.annotations.get(sha, {})),
        )

    async def get_job_log(
        self, repo: RepoRef, log_id: str, *, max_bytes: int = LOG_TAIL_BYTES
    ) -> LogTail:
        await self._enter("get_job_log", repo.full_name, log_id, max_bytes)
        if log_id not in self.logs:
            raise NotFound(f"the log of job {log_id} not found", status=404)
        data = self.logs[log_id].encode()
        tail = data[-max_bytes:].decode("utf-8", errors="replace")
        return LogTail(log_id=log_id, text=tail, truncated=len(data) > max_bytes)

    async def get_change_request_state(self, repo: RepoRef, number: int) -> ChangeRequestState:
        await self._enter("get_change_request_state", repo.full_name, number)
        opened = self._change_request(repo, number)
        change = self.change(repo, number)
        return ChangeRequestState(
            number=number,
            state=change.state,
            head_branch=opened.head_branch,
            head_sha=change.head_sha,
            base_branch=opened.base_branch,
            base_sha=change.base_sha,
            mergeable=change.mergeable,
            draft=opened.draft,
            web_url=opened.web_url,
            commits=tuple(change.commits),
        )

    async def list_open_change_requests(
        self, repo: RepoRef, *, branch_prefix: str
    ) -> list[OpenChangeRequest]:
        await self._enter("list_open_change_requests", repo.full_name, branch_prefix)
        return [
            OpenChangeRequest(
                number=opened.number,
                head_branch=opened.head_branch,
                head_sha=self.change(repo, opened.number).head_sha,
                base_branch=opened.base_branch,
                draft=opened.draft,
                web_url=opened.web_url,
            )
            for opened in self._repo(repo).change_requests
            if opened.head_branch.startswith(branch_prefix)
            and self.change(repo, opened.number).state == "open"
        ]

    async def list_review_threads(self, repo: RepoRef, number: int) -> list[ReviewThread]:
        await self._enter("list_review_threads", repo.full_name, number)
        self._change_request(repo, number)
        return list(self.change(repo, number).threads)

    def _thread(self, repo: RepoRef, number: int, thread_id: str) -> int:
        for index, thread in enumerate(self.change(repo, number).threads):
            if thread.id == thread_id:
                return index
        raise NotFound(f"thread {thread_id} not found", status=404)

    async def reply_to_thread(
        self, repo: RepoRef, number: int, thread_id: str, body: str
    ) -> ThreadComment:
        await self._enter("reply_to_thread", repo.full_name, number, thread_id, body)
        threads = self.change(repo, number).threads
        index = self._thread(repo, number, thread_id)
        reply = ThreadComment(id=next(self._ids), author=self.bot_login, body=body)
        threads[index] = replace(threads[index], comments=(*threads[index].comments, reply))
        return reply

    async def resolve_thread(self, repo: RepoRef, number: int, thread_id: str) -> None:
        await self._enter("resolve_thread", repo.full_name, number, thread_id)
        threads = self.change(repo, number).threads
        index = self._thread(repo, number, thread_id)
        threads[index] = replace(threads[index], resolved=True)

    async def mark_ready_for_review(self, repo: RepoRef, number: int) -> None:
        await self._enter("mark_ready_for_review", repo.full_name, number)
        fake = self._repo(repo)
        opened = self._change_request(repo, number)
        fake.change_requests[fake.change_requests.index(opened)] = replace(opened, draft=False)

    async def clone_auth(self, repo: RepoRef) -> CloneAuth:
        await self._enter("clone_auth", repo.full_name)
        fake = self._repo(repo)
        if not fake.clone_url:
            raise ForgeError("this fake repository has no clone URL")
        return CloneAuth(url=fake.clone_url, username="x-access-token", password="fake-token")

    async def whoami(self) -> str:
        await self._enter("whoami")
        return self.bot_login

    async def aclose(self) -> None:
        await self._enter("aclose")
