"""The one fake forge of the test suite.

It keeps repositories, issues, comments, labels, reactions, files, branches,
commits and change requests in memory and records every call, so tests assert
what a maintainer would see. Failures can be injected per method.

As GitLab, it also serves GitLab's GraphQL endpoint for a review round's answers
(``createNote`` in a discussion, ``discussionToggleResolve``): executed by graphql-core
against a schema written from GitLab's GraphQL reference (only these two mutations and the
types they return), so a document GitLab would reject is rejected here, variables are
typed, mutations run one after the other, each payload carries its ``errors`` and a
resolver's failure is a top-level error with the alias's ``path``. ``answer_threads`` runs
the adapter's own answering (``bot.forges.gitlab_answers``) against it, each document a
recorded ``graphql`` call; ``graphql_http`` serves the same endpoint at the transport (a
``responses`` callback) for the real GitLab adapter.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import graphql
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
    ThreadAnswer,
    ThreadComment,
)
from bot.events import Actor, Check, ForgeKind, IssueRef, RepoRef
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
from bot.forges.gitlab_answers import GitLabAnswers
from bot.forges.merged import MERGED_PAGES, MergedChangeRequest, on_or_after
from bot.forges.retry import WritePacer
from bot.progress import step

# GitLab's GraphQL types for a review round's answers, as its GraphQL API reference gives
# them (Mutation.createNote, Mutation.discussionToggleResolve; the global id scalars).
GITLAB_GRAPHQL = graphql.build_schema(
    """
    scalar NoteableID
    scalar DiscussionID
    scalar NoteID
    type Discussion { id: DiscussionID! resolvable: Boolean! resolved: Boolean! }
    type Note { id: NoteID! body: String! discussion: Discussion }
    input CreateNoteInput {
      clientMutationId: String
      noteableId: NoteableID!
      body: String!
      discussionId: DiscussionID
      internal: Boolean
      mergeRequestDiffHeadSha: String
    }
    type CreateNotePayload { clientMutationId: String errors: [String!]! note: Note }
    input DiscussionToggleResolveInput {
      clientMutationId: String
      id: DiscussionID!
      resolve: Boolean!
    }
    type DiscussionToggleResolvePayload {
      clientMutationId: String
      discussion: Discussion
      errors: [String!]!
    }
    type Query { echo(text: String!): String! }
    type Mutation {
      createNote(input: CreateNoteInput!): CreateNotePayload
      discussionToggleResolve(input: DiscussionToggleResolveInput!): DiscussionToggleResolvePayload
    }
    """
)
# What GitLab says when a global id names nothing the token may see.
GITLAB_NOT_AVAILABLE = (
    "The resource that you are attempting to access does not exist or you don't have "
    "permission to perform this action"
)

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
        "answer_threads",
        "mark_ready_for_review",
    }
)
# The bot's git identity (bot.sandbox.workspace): its commits on a real remote are its own.
BOT_EMAIL = "coding-agent@users.noreply.localhost"


def remote_git(url: str, *args: str) -> str | None:
    """Ask the real git remote behind a ``file://`` clone URL (None when there is none, or
    git does not know the answer): what GitHub or GitLab would read from its repository."""
    if not url.startswith("file://"):
        return None
    done = subprocess.run(
        ["git", *args], cwd=url.removeprefix("file://"), capture_output=True, text=True,
        check=False,
    )  # fmt: skip
    return done.stdout.strip() if done.returncode == 0 else None


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
    ci_config_path: str = ""  # GitLab's project setting
    branches: dict[str, dict[str, bytes]] = field(default_factory=dict)
    labels: dict[str, tuple[str, str]] = field(default_factory=dict)
    permissions: dict[str, Permission] = field(default_factory=dict)
    commits: list[tuple[str, str, dict[str, bytes | None]]] = field(default_factory=list)
    change_requests: list[ChangeRequest] = field(default_factory=list)
    change_request_bodies: dict[int, tuple[str, str]] = field(default_factory=dict)
    merged: list[MergedChangeRequest] = field(default_factory=list)  # most recent first


@dataclass
class FakeChange:
    """What a test scripts of a change request after it was opened: its head and base
    commits, mergeability, commits, state and review threads. None (head, base,
    mergeability, commits): as the repository's real git remote has them, when it has
    one (``git merge-tree`` says whether head and base merge), else a fixed value."""

    head_sha: str | None = None
    base_sha: str | None = None
    mergeable: Mergeable | None = None
    commits: list[CommitAuthor] | None = None
    state: str = "open"
    threads: list[ReviewThread] = field(default_factory=list)
    global_id: int = 0  # GitLab: the merge request's ``id`` (its iid is the number)


BOT_ACCOUNT_ID = "9000001"  # the bot's account id on a fake forge


class FakeForge:
    """An in-memory forge implementing the ``Forge`` protocol."""

    def __init__(self, kind: ForgeKind = ForgeKind.GITHUB, *, bot_login: str = "") -> None:
        self.kind = kind
        self.bot_login = bot_login or (
            "coding-agent[bot]" if kind is ForgeKind.GITHUB else "coding-agent-bot"
        )
        # account ids by login (lower case), as the forge numbers its users: the bot's
        # own, then one for each login on first use (a test may set one)
        self.accounts: dict[str, str] = {self.bot_login.lower(): BOT_ACCOUNT_ID}
        self._account_ids = itertools.count(9100001)
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
        self._global_ids = itertools.count(5000)
        # after the change request: checks and annotations per commit, job logs by id
        self.checks: dict[str, list[Check]] = {}
        self.annotations: dict[str, dict[str, tuple[Annotation, ...]]] = {}
        self.logs: dict[str, str] = {}
        self.changes: dict[tuple[str, int], FakeChange] = {}
        # GitLab's GraphQL: a mutation's payload errors, by (mutation, thread id)
        self.graphql_errors: dict[tuple[str, str], str] = {}
        self.gitlab_answers = GitLabAnswers(self._send_graphql, self._global_id, time.monotonic)

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

    def add_merged(
        self,
        repo: RepoRef,
        number: int,
        *,
        title: str,
        merge_commit: str,
        body: str = "",
        merged_at: str = "2024-01-01T00:00:00Z",
    ) -> MergedChangeRequest:
        """A change request merged into ``repo`` (listed after those added before it)."""
        merged = MergedChangeRequest(
            number, title, body, self._web_url(repo, number, change_request=True, opened=True),
            merge_commit, merged_at,
        )  # fmt: skip
        self._repo(repo).merged.append(merged)
        return merged

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
        key = (repo.full_name, number)
        if key not in self.changes:
            self.changes[key] = FakeChange(global_id=next(self._global_ids))
        return self.changes[key]

    def add_thread(
        self,
        repo: RepoRef,
        number: int,
        *comments: tuple[str, str],
        path: str | None = None,
        line: int | None = None,
        resolvable: bool = True,
        thread_id: str = "",
    ) -> ReviewThread:
        """A review thread of ``(author, body)`` comments on change request ``number`` (its
        id a GitLab discussion's: 40 hex digits, unless given)."""
        thread = ReviewThread(
            id=thread_id or f"{next(self._ids):040x}",
            comments=tuple(
                ThreadComment(
                    id=next(self._ids), author=who, body=body, author_id=self.account_id(who)
                )
                for who, body in comments
            ),
            resolvable=resolvable,
            path=path,
            line=line,
        )
        self.change(repo, number).threads.append(thread)
        return thread

    def account_id(self, login: str) -> str:
        """The account id of ``login`` (numbered on first use; "" for no login)."""
        if not login:
            return ""
        return self.accounts.setdefault(login.lower(), str(next(self._account_ids)))

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
        """As the adapters: the repository found whatever the case of its name (as GitHub
        and GitLab do), and named in the answer as the caller named it; the issue's own
        ``web_url`` is the forge's (canonical) address."""
        await self._enter("get_issue", repo.full_name, number)
        found = self.issues.get((repo.full_name, number))
        for (name, at), fake in self.issues.items():
            if found is None and at == number and name.lower() == repo.full_name.lower():
                found = fake
        if found is None:
            raise NotFound(f"issue {number} not found", status=404)
        asked = msgspec.structs.replace(
            found.ref.repo, full_name=repo.full_name, web_url=repo.web_url or found.ref.repo.web_url
        )
        ref = msgspec.structs.replace(found.ref, repo=asked, labels=tuple(found.labels))
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

    async def create_issue(
        self, repo: RepoRef, *, title: str, body: str, labels: list[str]
    ) -> IssueRef:
        await self._enter("create_issue", repo.full_name, title, tuple(labels))
        fake = self._repo(repo)
        taken = [n for (name, n) in self.issues if name == fake.ref.full_name]
        number = max(taken, default=0) + 1
        self.add_issue(fake.ref, number, title=title, body=body, author=self.bot_login,
                       labels=tuple(labels))  # fmt: skip
        return self.issue(fake.ref, number).ref

    async def create_comment(self, issue: IssueRef, body: str) -> Comment:
        await self._enter("create_comment", issue.number, body)
        comment = Comment(id=next(self._ids), body=body, author=self.bot_login,
                          author_id=self.account_id(self.bot_login))  # fmt: skip
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
            ci_config_path=fake.ci_config_path,
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

    async def list_merged_change_requests(
        self, repo: RepoRef, *, since: str | None = None, max_pages: int = MERGED_PAGES
    ) -> list[MergedChangeRequest]:
        await self._enter("list_merged_change_requests", repo.full_name, since)
        listed = self._repo(repo).merged[: max_pages * 100]
        return [merged for merged in listed if on_or_after(merged.merged_at, since)]

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

    def _head_sha(self, repo: RepoRef, opened: ChangeRequest) -> str:
        known = self.change(repo, opened.number).head_sha
        return self._branch_sha(repo, known, opened.head_branch, fill="0")

    def _base_sha(self, repo: RepoRef, opened: ChangeRequest) -> str:
        known = self.change(repo, opened.number).base_sha
        return self._branch_sha(repo, known, opened.base_branch, fill="b")

    def _branch_sha(self, repo: RepoRef, known: str | None, branch: str, *, fill: str) -> str:
        """The sha a test set, else the branch's head on the real remote (``fill`` x 40
        when the branch is not there)."""
        if known is not None:
            return known
        url = self._repo(repo).clone_url
        return remote_git(url, "rev-parse", f"refs/heads/{branch}") or fill * 40

    def _mergeable(self, repo: RepoRef, opened: ChangeRequest) -> Mergeable:
        change = self.change(repo, opened.number)
        if change.mergeable is not None:
            return change.mergeable
        url = self._repo(repo).clone_url
        heads = (self._head_sha(repo, opened), self._base_sha(repo, opened))
        if remote_git(url, "rev-parse", "--verify", "--quiet", heads[0]) is None:
            return Mergeable.MERGEABLE
        merged = remote_git(url, "merge-tree", "--write-tree", *heads)
        return Mergeable.MERGEABLE if merged is not None else Mergeable.CONFLICTING

    def _commits(self, repo: RepoRef, opened: ChangeRequest) -> tuple[CommitAuthor, ...]:
        change = self.change(repo, opened.number)
        if change.commits is not None:
            return tuple(change.commits)
        url = self._repo(repo).clone_url
        span = f"{self._base_sha(repo, opened)}..{self._head_sha(repo, opened)}"
        listed = remote_git(url, "log", "--reverse", "--format=%H%x00%an%x00%ae", span) or ""
        found = []
        for line in listed.splitlines():
            sha, name, email = line.split("\0")
            login = self.bot_login if email == BOT_EMAIL and self.kind is ForgeKind.GITHUB else ""
            found.append(CommitAuthor(sha=sha, name=name, email=email, login=login))
        return tuple(found)

    async def get_change_request_state(self, repo: RepoRef, number: int) -> ChangeRequestState:
        await self._enter("get_change_request_state", repo.full_name, number)
        opened = self._change_request(repo, number)
        change = self.change(repo, number)
        return ChangeRequestState(
            number=number,
            state=change.state,
            head_branch=opened.head_branch,
            head_sha=self._head_sha(repo, opened),
            base_branch=opened.base_branch,
            base_sha=self._base_sha(repo, opened),
            mergeable=self._mergeable(repo, opened),
            draft=opened.draft,
            web_url=opened.web_url,
            commits=self._commits(repo, opened),
        )

    async def list_open_change_requests(
        self, repo: RepoRef, *, branch_prefix: str
    ) -> list[OpenChangeRequest]:
        await self._enter("list_open_change_requests", repo.full_name, branch_prefix)
        return [
            OpenChangeRequest(
                number=opened.number,
                head_branch=opened.head_branch,
                head_sha=self._head_sha(repo, opened),
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
        change = self.change(repo, number)
        if self.kind is ForgeKind.GITLAB:  # its notes' noteable_id, as the adapter keeps it
            self.gitlab_answers.keep_noteable(repo, number, change.global_id)
        return list(change.threads)

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
        reply = ThreadComment(
            id=next(self._ids),
            author=self.bot_login,
            body=body,
            author_id=self.account_id(self.bot_login),
        )
        threads[index] = replace(threads[index], comments=(*threads[index].comments, reply))
        return reply

    async def resolve_thread(self, repo: RepoRef, number: int, thread_id: str) -> None:
        await self._enter("resolve_thread", repo.full_name, number, thread_id)
        threads = self.change(repo, number).threads
        index = self._thread(repo, number, thread_id)
        threads[index] = replace(threads[index], resolved=True)

    async def answer_threads(
        self, repo: RepoRef, number: int, answers: Sequence[ThreadAnswer]
    ) -> None:
        """One call for all, applied in order: GitHub's batched GraphQL document; GitLab's
        answering as the adapter does it (``GitLabAnswers``: GraphQL documents through
        ``serve_graphql``, each a recorded ``graphql`` call, and the REST calls
        ``reply_to_thread``/``resolve_thread`` where GraphQL is refused)."""
        await self._enter("answer_threads", repo.full_name, number, tuple(answers))
        if self.kind is ForgeKind.GITLAB:

            async def rest(answer: ThreadAnswer) -> None:
                await self.reply_to_thread(repo, number, answer.thread_id, answer.body)
                if answer.resolve:
                    await self.resolve_thread(repo, number, answer.thread_id)

            await self.gitlab_answers.answer(repo, number, answers, rest)
            return
        threads = self.change(repo, number).threads
        for answer in answers:
            index = self._thread(repo, number, answer.thread_id)
            reply = ThreadComment(
                id=next(self._ids),
                author=self.bot_login,
                body=answer.body,
                author_id=self.account_id(self.bot_login),
            )
            thread = threads[index]
            threads[index] = replace(
                thread,
                comments=(*thread.comments, reply),
                resolved=thread.resolved or answer.resolve,
            )

    # --- GitLab's GraphQL endpoint ----------------------------------------------------------------

    async def _global_id(self, repo: RepoRef, number: int) -> object:
        """The merge request's ``id`` as its REST resource gives it (one read)."""
        await self._enter("get_merge_request", repo.full_name, number)
        self._change_request(repo, number)
        return self.change(repo, number).global_id

    async def _send_graphql(self, what: str, document: str, variables: dict[str, Any]) -> Any:
        """``GitLabClient.graphql`` of this fake: a recorded ``graphql`` call (``fail`` it
        with ``NotFound``/``AccessDenied`` for an instance that refuses GraphQL)."""
        await self._enter("graphql", document, variables)
        return self.serve_graphql(document, variables)

    def graphql_http(self, request: Any) -> tuple[int, dict[str, str], str]:
        """``POST /api/graphql`` at the transport (a ``responses`` callback): a queued
        ``fail("graphql", error)`` answers with the error's status as GitLab would."""
        body = json.loads(request.body)
        self.calls.append(("graphql", (body.get("query"), body.get("variables"))))
        headers: dict[str, str] = {}  # the callback's content type: application/json
        queue = self.failures.get("graphql")
        if queue:
            error = queue.pop(0)
            status = getattr(error, "status", None) or 500
            return status, headers, json.dumps({"message": f"{status} {error}"})
        if not str(request.headers.get("Authorization", "")).startswith("Bearer "):
            return 401, headers, json.dumps({"errors": [{"message": "Invalid token"}]})
        answer = self.serve_graphql(str(body.get("query") or ""), body.get("variables") or {})
        return 200, headers, json.dumps(answer)

    def serve_graphql(self, document: str, variables: Mapping[str, Any]) -> dict[str, Any]:
        """GitLab's answer to a GraphQL document: ``data`` and ``errors`` as it sends them
        (a document it cannot run: ``errors`` only)."""
        result = graphql.graphql_sync(
            GITLAB_GRAPHQL, document, root_value=_GitLabMutations(self),
            variable_values=dict(variables),
        )  # fmt: skip
        return dict(result.formatted)

    def _discussion(self, gid: object) -> tuple[FakeChange, int]:
        prefix = "gid://gitlab/Discussion/"
        if isinstance(gid, str) and gid.startswith(prefix):
            wanted = gid.removeprefix(prefix)
            for change in self.changes.values():
                for index, thread in enumerate(change.threads):
                    if thread.id == wanted:
                        return change, index
        raise graphql.GraphQLError(GITLAB_NOT_AVAILABLE)

    def graphql_create_note(self, data: Mapping[str, Any]) -> dict[str, Any]:
        change, index = self._discussion(data.get("discussionId"))
        if data.get("noteableId") != f"gid://gitlab/MergeRequest/{change.global_id}":
            raise graphql.GraphQLError(GITLAB_NOT_AVAILABLE)
        thread = change.threads[index]
        refused = self.graphql_errors.get(("createNote", thread.id))
        if refused is not None:
            return {"errors": [refused], "note": None}
        reply = ThreadComment(
            id=next(self._ids),
            author=self.bot_login,
            body=str(data["body"]),
            author_id=self.account_id(self.bot_login),
        )
        change.threads[index] = replace(thread, comments=(*thread.comments, reply))
        return {"errors": [], "note": {"id": f"gid://gitlab/DiscussionNote/{reply.id}",
                                       "body": reply.body, "discussion": None}}  # fmt: skip

    def graphql_toggle_resolve(self, data: Mapping[str, Any]) -> dict[str, Any]:
        change, index = self._discussion(data.get("id"))
        thread = change.threads[index]
        refused = self.graphql_errors.get(("discussionToggleResolve", thread.id))
        if refused is not None:
            return {"errors": [refused], "discussion": None}
        change.threads[index] = replace(thread, resolved=bool(data["resolve"]))
        return {"errors": [], "discussion": {"id": f"gid://gitlab/Discussion/{thread.id}",
                "resolvable": thread.resolvable, "resolved": bool(data["resolve"])}}  # fmt: skip

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

    async def bot_account(self) -> Actor:
        await self._enter("bot_account")
        return Actor(login=self.bot_login, id=self.account_id(self.bot_login), is_bot=True)

    async def aclose(self) -> None:
        await self._enter("aclose")


class _GitLabMutations:
    """The root of GitLab's mutations for graphql-core's default resolvers."""

    def __init__(self, forge: FakeForge) -> None:
        self._forge = forge

    def createNote(self, info: Any, input: dict[str, Any]) -> dict[str, Any]:
        return self._forge.graphql_create_note(input)

    def discussionToggleResolve(self, info: Any, input: dict[str, Any]) -> dict[str, Any]:
        return self._forge.graphql_toggle_resolve(input)
