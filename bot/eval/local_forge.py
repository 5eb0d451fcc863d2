"""The forge of an evaluation task: a bare git repository on disk and an issue in memory.

A forge adapter like GitHub's and GitLab's (it implements ``Forge``), so the agent runs as
on any task and nothing in it knows it is measured. The issue is the problem statement;
nothing is posted anywhere: every comment the bot writes (the status comment edited in
place, milestones, the completion or the request for a person) goes to the task folder's
``comments.md`` (and, with the labels and the change request, to ``forge.json``, from
which the next run's forge starts: ``forge_state.py``); the repository is the task's
``origin.git`` (``origin.py``), where the bot's pushes and commits land and its change
request is only recorded.
"""

from __future__ import annotations

import asyncio
import itertools
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bot.change_state import (
    ChangeRequestState,
    CommitChecks,
    LogTail,
    OpenChangeRequest,
    ReviewThread,
    ThreadAnswer,
    ThreadComment,
)
from bot.eval.checkout import git
from bot.eval.forge_state import STATE, ForgeState, load_state
from bot.eval.run_meta import replace_file
from bot.events import Actor, ForgeKind, IssueRef, RepoRef
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
from bot.forges.merged import MERGED_PAGES, MergedChangeRequest

BASE_BRANCH = "main"
ISSUE_NUMBER = 1
MAX_HITS = 50


@dataclass
class LocalIssue:
    """What the stand-in keeps of its one issue: the bot's comments and labels."""

    ref: IssueRef
    state: ForgeState = field(default_factory=ForgeState)

    @property
    def comments(self) -> list[Comment]:
        return self.state.comments

    @property
    def labels(self) -> set[str]:
        return self.state.labels

    @property
    def change_requests(self) -> list[ChangeRequest]:
        return self.state.change_requests


class LocalForge:
    """One task's forge. ``kind`` is the one its repository is named under (GitHub's
    by default), so the tools and texts are those of a real task. What an earlier run
    left in ``folder`` is read when it is built (a file read: build it in a thread)."""

    def __init__(
        self,
        *,
        origin: Path,
        folder: Path,
        repo: str,
        title: str,
        body: str,
        requester: str,
        bot_login: str,
        kind: ForgeKind = ForgeKind.GITHUB,
        number: int = ISSUE_NUMBER,
    ) -> None:
        self.kind = kind
        self.origin = origin
        self.folder = folder
        self.bot_login = bot_login
        self.requester = requester
        repo_ref = RepoRef(kind, repo, default_branch=BASE_BRANCH)
        issue = IssueRef(repo_ref, number, title=title, body=body, author=requester)
        state = load_state(folder)
        self.issue = LocalIssue(issue, state)
        self._ids = itertools.count(state.next_id())
        self._writing = asyncio.Lock()  # one write of comments.md at a time

    @property
    def repo(self) -> RepoRef:
        return self.issue.ref.repo

    # --- the issue ----------------------------------------------------------------------

    async def get_issue(
        self, repo: RepoRef, number: int, *, change_request: bool, comments: bool = True
    ) -> IssueDetails:
        if number != self.issue.ref.number or change_request:
            raise NotFound(f"no issue {number} here", status=404)
        labels = tuple(sorted(self.issue.labels))
        ref = IssueRef(self.repo, number, title=self.issue.ref.title, body=self.issue.ref.body,
                       author=self.requester, labels=labels)  # fmt: skip
        return IssueDetails(ref, tuple(self.issue.comments) if comments else ())

    async def get_comment(self, issue: IssueRef, comment_id: int) -> Comment:
        for comment in self.issue.comments:
            if comment.id == comment_id:
                return comment
        raise NotFound(f"no comment {comment_id}", status=404)

    async def create_comment(self, issue: IssueRef, body: str) -> Comment:
        comment = Comment(next(self._ids), body, self.bot_login)
        self.issue.comments.append(comment)
        await self._save()
        return comment

    async def edit_comment(self, issue: IssueRef, comment_id: int, body: str) -> None:
        for index, comment in enumerate(self.issue.comments):
            if comment.id == comment_id:
                self.issue.comments[index] = Comment(comment_id, body, comment.author)
                await self._save()
                return
        raise NotFound(f"no comment {comment_id}", status=404)

    async def _save(self) -> None:
        async with self._writing:
            parts = [f"<!-- comment {c.id} -->\n{c.body}\n" for c in self.issue.comments]
            text = "\n---\n\n".join(parts)
            state = self.issue.state.to_json()
            await asyncio.to_thread(_write, self.folder / STATE, state)
            await asyncio.to_thread(_write, self.folder / "comments.md", text)

    async def add_reaction(
        self, issue: IssueRef, comment_id: int | None, reaction: str, *, line_comment: bool = False
    ) -> None:
        return None

    async def ensure_label(self, repo: RepoRef, name: str, *, color: str, description: str) -> None:
        return None

    async def add_labels(self, issue: IssueRef, labels: list[str]) -> None:
        self.issue.labels.update(labels)
        await self._save()

    async def remove_label(self, issue: IssueRef, label: str) -> None:
        self.issue.labels.discard(label)
        await self._save()

    async def get_permission(self, repo: RepoRef, user: str) -> Permission:
        return Permission.ADMIN if user == self.requester else Permission.READ

    async def clone_auth(self, repo: RepoRef) -> CloneAuth:
        return CloneAuth(url=self.origin.absolute().as_uri(), username="local", password="")

    async def whoami(self) -> str:
        return self.bot_login

    async def create_issue(
        self, repo: RepoRef, *, title: str, body: str, labels: list[str]
    ) -> IssueRef:
        raise ForgeError("an evaluated task has its one issue: no other is opened")

    async def bot_account(self) -> Actor:
        return Actor(login=self.bot_login, is_bot=True)

    async def aclose(self) -> None:
        return None

    # --- the repository: the bare origin -------------------------------------------------

    async def get_repo_info(self, repo: RepoRef) -> RepoInfo:
        return RepoInfo(self.repo, BASE_BRANCH, self.origin.absolute().as_uri())

    async def get_file(self, repo: RepoRef, path: str, *, ref: str | None = None) -> FileContent:
        at = ref or BASE_BRANCH
        process = await asyncio.create_subprocess_exec(
            "git", "cat-file", "blob", f"{at}:{path.strip('/')}", cwd=self.origin,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        raw, _ = await process.communicate()
        if process.returncode != 0:
            raise NotFound(f"{path} not found at {at}", status=404)
        return FileContent(path, raw, at)

    async def list_tree(
        self, repo: RepoRef, *, path: str = "", ref: str | None = None, recursive: bool = False
    ) -> list[TreeEntry]:
        args = ["ls-tree", "-z", "--long"] + (["-r", "-t"] if recursive else [])
        spec = f"{ref or BASE_BRANCH}:{path.strip('/')}" if path else (ref or BASE_BRANCH)
        listed = await git(*args, spec, cwd=self.origin, check=False)
        if listed.code != 0:
            raise NotFound(f"{path or '/'} not found", status=404)
        prefix = f"{path.strip('/')}/" if path.strip("/") else ""
        return [entry for line in listed.stdout.split("\0") if (entry := _entry(line, prefix))]

    async def search_code(self, repo: RepoRef, query: str) -> list[SearchHit]:
        found = await git("grep", "-n", "-I", "-F", "-e", query, BASE_BRANCH, "--",
                          cwd=self.origin, check=False)  # fmt: skip
        hits = []
        for line in found.stdout.splitlines()[:MAX_HITS]:
            _, path, number, text = [*line.split(":", 3), "", "", ""][:4]
            hits.append(SearchHit(path, f"{number}: {text.strip()}"))
        return hits

    async def create_branch(self, repo: RepoRef, name: str, *, from_ref: str) -> None:
        exists = await git("rev-parse", "--verify", "--quiet", f"refs/heads/{name}",
                           cwd=self.origin, check=False)  # fmt: skip
        if exists.code == 0:
            raise Conflict(f"branch {name} exists", status=422)
        await git("update-ref", f"refs/heads/{name}", from_ref, cwd=self.origin)

    async def commit_files(
        self, repo: RepoRef, *, branch: str, message: str, files: dict[str, bytes | None]
    ) -> str:
        """One commit on ``branch`` with ``files`` (None deletes), made with git's plumbing
        in a temporary index, so the bare origin holds it as a push would."""
        head = await git("rev-parse", "--verify", "--quiet", f"refs/heads/{branch}",
                         cwd=self.origin, check=False)  # fmt: skip
        if head.code != 0:
            raise NotFound(f"branch {branch} not found", status=404)
        parent = head.stdout.strip()
        index = self.folder / f"commit-{next(self._ids)}.index"  # one per commit: they may overlap
        await asyncio.to_thread(index.unlink, missing_ok=True)
        env_git = _IndexGit(self.origin, index)
        await env_git.run("read-tree", parent)
        for path, content in files.items():
            if content is None:
                await env_git.run("update-index", "--force-remove", "--", path)
                continue
            blob = (await env_git.run("hash-object", "-w", "--stdin", stdin=content)).strip()
            await env_git.run("update-index", "--add", "--cacheinfo", f"100644,{blob},{path}")
        tree = (await env_git.run("write-tree")).strip()
        commit = (await env_git.run("commit-tree", tree, "-p", parent, "-m", message)).strip()
        await git("update-ref", f"refs/heads/{branch}", commit, parent, cwd=self.origin)
        await asyncio.to_thread(index.unlink, missing_ok=True)
        return commit

    async def open_change_request(
        self, repo: RepoRef, *, head: str, base: str, title: str, body: str, draft: bool = True
    ) -> ChangeRequest:
        for existing in self.issue.change_requests:
            if existing.head_branch == head:
                raise Conflict(f"a change request for {head} exists", status=422)
        number = 100 + len(self.issue.change_requests)
        change = ChangeRequest(number, f"local:change/{number}", head, base, draft)
        self.issue.change_requests.append(change)
        await self._save()
        await asyncio.to_thread(_write, self.folder / "change_request.md", f"# {title}\n\n{body}\n")
        return change

    async def update_change_request(self, repo: RepoRef, number: int, *, body: str) -> None:
        await asyncio.to_thread(_write, self.folder / "change_request.md", body + "\n")

    async def list_merged_change_requests(
        self, repo: RepoRef, *, since: str | None = None, max_pages: int = MERGED_PAGES
    ) -> list[MergedChangeRequest]:
        return []  # the task's remote holds base_commit and the bot's work, nothing merged

    # --- after the change request: nothing happens on a local forge -----------------------

    async def get_commit_checks(self, repo: RepoRef, sha: str) -> CommitChecks:
        return CommitChecks(sha)

    async def get_job_log(
        self, repo: RepoRef, log_id: str, *, max_bytes: int = LOG_TAIL_BYTES
    ) -> LogTail:
        raise NotFound("a local forge runs no CI", status=404)

    async def get_change_request_state(self, repo: RepoRef, number: int) -> ChangeRequestState:
        raise NotFound("a local change request has no state to read", status=404)

    async def list_open_change_requests(
        self, repo: RepoRef, *, branch_prefix: str
    ) -> list[OpenChangeRequest]:
        return []

    async def list_review_threads(self, repo: RepoRef, number: int) -> list[ReviewThread]:
        return []

    async def reply_to_thread(
        self, repo: RepoRef, number: int, thread_id: str, body: str
    ) -> ThreadComment:
        raise NotFound("a local change request has no threads", status=404)

    async def resolve_thread(self, repo: RepoRef, number: int, thread_id: str) -> None:
        return None

    async def answer_threads(
        self, repo: RepoRef, number: int, answers: Sequence[ThreadAnswer]
    ) -> None:
        return None

    async def mark_ready_for_review(self, repo: RepoRef, number: int) -> None:
        return None


class _IndexGit:
    """git on the bare origin with an index file of its own (for ``commit_files``)."""

    def __init__(self, origin: Path, index: Path) -> None:
        self.origin = origin
        self.index = index

    async def run(self, *args: str, stdin: bytes | None = None) -> str:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "GIT_INDEX_FILE": str(self.index),
               "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(self.index.parent),
               "GIT_AUTHOR_NAME": "coding-agent", "GIT_AUTHOR_EMAIL": "agent@localhost",
               "GIT_COMMITTER_NAME": "coding-agent",
               "GIT_COMMITTER_EMAIL": "agent@localhost"}  # fmt: skip
        process = await asyncio.create_subprocess_exec(
            "git", *args, cwd=self.origin, env=env, stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await process.communicate(stdin)
        if process.returncode != 0:
            raise Conflict(f"git {args[0]} failed: {err.decode(errors='replace').strip()}")
        return out.decode()


def _entry(line: str, prefix: str) -> TreeEntry | None:
    if not line.strip() or "\t" not in line:
        return None
    meta, path = line.split("\t", 1)
    parts = meta.split()
    kind = "dir" if parts[1] == "tree" else "file"
    size = int(parts[3]) if len(parts) > 3 and parts[3].isdigit() else None
    return TreeEntry(prefix + path, kind, size)


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    replace_file(path, text)
