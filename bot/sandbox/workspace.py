"""The task's clone of the repository: one branch of the bot's own, pushed with care.

``ensure`` makes a shallow clone of the base branch on first use and checks out the
bot's branch (reusing it when the remote already has it: it is the bot's own branch
from an earlier run). ``commit_and_push`` commits everything and pushes that branch
only, never the base branch and never a branch the bot did not name, and never with
force. ``merge_base`` brings the base branch in (a merge, never a rebase: commits people
pushed to the branch stay as they are); a push with a conflict marker left is refused.
Credentials go to the git process that needs them and nowhere else (see ``gitcmd``).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import re
import stat
import unicodedata
import weakref
from collections.abc import Awaitable, Callable
from pathlib import Path

from bot import offload
from bot.forges.base import CloneAuth
from bot.paths import resolve_inside
from bot.sandbox.git_state import conflict_attributes, has_markers, parse_status, unmerged_paths
from bot.sandbox.gitcmd import GitResult, Identity, WorkspaceError, base_env, run_git
from bot.sandbox.tree_walk import remove_tree, walk

log = logging.getLogger(__name__)

__all__ = ["Workspace", "WorkspaceError", "branch_name", "valid_branch"]

MAX_BRANCH_LENGTH = 60
_REF_FORBIDDEN = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]|\.\.|@\{|//")
_locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()


def valid_branch(name: str) -> bool:
    """Whether git accepts ``name`` as a branch name (``git check-ref-format --branch``)."""
    if not name or name == "@" or name.startswith(("-", "/")) or _REF_FORBIDDEN.search(name):
        return False
    parts = name.split("/")
    return not any(p == "" or p.startswith(".") or p.endswith(".lock") for p in parts) and (
        not name.endswith(".")
    )


def _slug(title: str) -> str:
    ascii_title = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode()
    return re.sub(r"[^a-z0-9]+", "-", ascii_title.lower()).strip("-")


def branch_name(prefix: str, number: int, title: str) -> str:
    """``agent/42-fix-readme-typo``: the prefix, the issue number and an ASCII slug of the
    title, cut at a word boundary to at most 60 characters."""
    if number < 0:
        raise ValueError(f"the issue number must not be negative (got {number})")
    head = f"{prefix}{number}"
    name = head
    slug = _slug(title)
    if slug and len(head) + 1 < MAX_BRANCH_LENGTH:
        name = f"{head}-{slug}"[:MAX_BRANCH_LENGTH]
        if len(f"{head}-{slug}") > MAX_BRANCH_LENGTH and "-" in name[len(head) + 1 :]:
            name = name[: name.rindex("-")]
        name = name.rstrip("-")
    if not valid_branch(name):
        raise ValueError(f"{name!r} is not a valid branch name (check the branch prefix)")
    return name


class Workspace:
    def __init__(
        self,
        root: Path,
        *,
        auth: Callable[[], Awaitable[CloneAuth]],
        branch: str,
        base_branch: str,
        max_file_bytes: int = 10 * 1024 * 1024,
        author: tuple[str, str] = ("coding-agent", "coding-agent@users.noreply.localhost"),
        git_timeout: float = 600.0,
        lfs: bool = False,
    ) -> None:
        for name in (branch, base_branch):
            if not valid_branch(name):
                raise ValueError(f"{name!r} is not a valid branch name")
        if branch == base_branch:
            raise ValueError(f"the bot's branch may not be the base branch {base_branch!r}")
        self._root = Path(root).absolute()
        self._auth = auth
        self.branch = branch
        self.base_branch = base_branch
        self.max_file_bytes = max_file_bytes
        self.git_timeout = git_timeout
        self.lfs = lfs  # LFS content fetched and pushed, from the forge's own endpoint only
        self._env = base_env(os.environ, Identity(*author), lfs=lfs)
        self._lock = _locks.setdefault(str(self._root), asyncio.Lock())
        self._ready = False

    @property
    def path(self) -> Path:
        return self._root

    def resolve(self, rel: str) -> Path:
        return resolve_inside(self._root, rel)

    async def _git(
        self, *args: str, auth: CloneAuth | None = None, stdin: bytes | None = None,
        check: bool = True, cwd: Path | None = None,
    ) -> GitResult:  # fmt: skip
        return await run_git(
            list(args), cwd=cwd or self._root, env=self._env, timeout=self.git_timeout,
            auth=auth, stdin=stdin, check=check,
        )  # fmt: skip

    async def ensure(self) -> Path:
        """Clone (first call) and check out the bot's branch; safe to call any number of
        times, from several tasks at once."""
        async with self._lock:
            if not self._ready:
                await self._prepare()
                if self.lfs:
                    await self._git("lfs", "pull", "origin", auth=await self._auth())
                self._ready = True
        return self._root

    async def _prepare(self) -> None:
        if (self._root / ".git").is_dir():
            current = await self._current_branch()
            if current == self.branch:
                return
            local = await self._git("rev-parse", "--verify", "--quiet",
                                    f"refs/heads/{self.branch}", check=False)  # fmt: skip
            if local.code == 0:
                await self._git("checkout", "--quiet", self.branch)
                return
        elif self._root.exists() and any(self._root.iterdir()):
            raise WorkspaceError(f"{self._root} exists, is not empty and is not a clone")
        else:
            await self._clone()
        await self._checkout_branch()

    async def _clone(self) -> None:
        auth = await self._auth()
        self._root.mkdir(parents=True, exist_ok=True)
        await self._git(
            "clone", "--quiet", "--depth", "1", "--single-branch", "--no-tags",
            "--branch", self.base_branch, "--", auth.url, str(self._root),
            auth=auth, cwd=self._root.parent,
        )  # fmt: skip

    async def _checkout_branch(self) -> None:
        auth = await self._auth()
        ref = f"refs/heads/{self.branch}"
        listed = await self._git("ls-remote", "--heads", "origin", ref, auth=auth)
        if listed.stdout.strip():
            tracking = f"refs/remotes/origin/{self.branch}"
            await self._git("fetch", "--quiet", "--depth", "1", "--no-tags", "origin",
                            f"+{ref}:{tracking}", auth=auth)  # fmt: skip
            await self._git("checkout", "--quiet", "-B", self.branch, tracking)
        else:
            await self._git("checkout", "--quiet", "-B", self.branch)

    async def _current_branch(self) -> str | None:
        result = await self._git("symbolic-ref", "--quiet", "--short", "HEAD", check=False)
        return result.stdout.strip() if result.code == 0 else None

    async def diff(self, *, stat: bool = False) -> str:
        """The changes against the last commit, new (untracked) files included."""
        await self.ensure()
        async with self._lock:
            await self._mark_untracked()
            mode = ["--stat"] if stat else []
            result = await self._git("diff", "--no-color", "--no-ext-diff", "--no-textconv",
                                     *mode, "HEAD")  # fmt: skip
        return result.stdout

    async def _remove_nested_repositories(self) -> list[str]:
        """Delete every ``.git`` below the top level before git runs on the host: a nested
        repository is the one way a sandboxed command could hand git a config of its own.
        The walk (a workspace with a virtualenv holds thousands of files) leaves the loop."""
        removed = await offload.run(remove_nested_repositories, self.path)
        if removed:
            log.warning("removed nested git repositories from the workspace: %s", removed)
        return removed

    async def _mark_untracked(self) -> None:
        await self._remove_nested_repositories()
        listed = await self._git("ls-files", "--others", "--exclude-standard", "-z")
        if listed.stdout:
            await self._git("add", "--intent-to-add", "--pathspec-from-file=-",
                            "--pathspec-file-nul", stdin=listed.stdout.encode())  # fmt: skip

    async def untracked(self) -> list[str]:
        """Every path git does not track, ignored ones included; a folder of nothing but
        untracked files is one entry (what set-up leaves: ``.venv``, ``node_modules``)."""
        await self.ensure()
        async with self._lock:
            result = await self._git("ls-files", "--others", "--directory", "-z")
        return sorted({p.rstrip("/") for p in result.stdout.split("\0") if p})

    async def differs_from_base(self) -> list[str]:
        """Every path the working tree holds otherwise than the base branch does: tracked
        files the bot's own branch (or a command) changed, added or deleted, and files git
        does not track (ignored ones included). The base branch's name alone when the
        clone does not know that branch."""
        await self.ensure()
        base = f"refs/remotes/origin/{self.base_branch}"
        async with self._lock:
            found = await self._git("rev-parse", "--verify", "--quiet", base, check=False)
            if found.code != 0:
                return [f"origin/{self.base_branch}"]
            result = await self._git("diff", "--name-only", "-z", "--no-renames", base)
            others = await self._git("ls-files", "--others", "--directory", "-z")
        listed = result.stdout.split("\0") + others.stdout.split("\0")
        return sorted({p.rstrip("/") for p in listed if p})

    async def changed_files(self) -> list[str]:
        """Paths added, modified or deleted since the last commit (a moved file counts
        as its old path deleted and its new path added)."""
        await self.ensure()
        async with self._lock:
            await self._remove_nested_repositories()
            result = await self._git(
                "status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames"
            )
        return parse_status(result.stdout)

    async def _push_base(self) -> str:
        return await self._published() or "HEAD"

    async def paths_to_push(self) -> list[str]:
        """Every path the next push would change on the remote: the working tree against
        the commit the remote has, so local commits (a command may run git) count too."""
        await self.ensure()
        async with self._lock:
            await self._mark_untracked()
            base = await self._push_base()
            result = await self._git("diff", "--name-only", "-z", "--no-renames", base)
        return sorted({p for p in result.stdout.split("\0") if p})

    async def push_diff(self, paths: list[str]) -> str:
        """The diff of ``paths`` that the next push would make."""
        await self.ensure()
        async with self._lock:
            await self._mark_untracked()
            base = await self._push_base()
            result = await self._git("diff", "--no-color", "--no-ext-diff", "--no-textconv",
                                     base, "--", *(f":(literal){p}" for p in paths))  # fmt: skip
        return result.stdout

    async def commit_and_push(self, message: str) -> str | None:
        """Commit every change and push the bot's branch; the new head commit, or None
        when there is nothing to push."""
        if not message.strip():
            raise ValueError("the commit message is empty")
        await self.ensure()
        async with self._lock:
            current = await self._current_branch()
            if current != self.branch or current == self.base_branch:
                raise WorkspaceError(
                    f"refusing to push: the checked-out branch is {current or 'detached'}, "
                    f"not the bot's branch {self.branch}"
                )
            left = await self._conflict_markers()
            if left:  # a merge of the base whose conflicts were not all resolved
                raise WorkspaceError(f"refusing to push: conflict markers in {', '.join(left)}")
            await self._remove_nested_repositories()
            await self._git("add", "--all")
            staged = await self._git("diff", "--cached", "--quiet", check=False)
            if staged.code == 1:
                await self._git("commit", "--quiet", "--no-verify", "-m", message)
            head = (await self._git("rev-parse", "HEAD")).stdout.strip()
            if head == await self._published():
                return None
            await self._push(head)
        return head

    async def merge_base(self) -> list[str]:
        """Bring the base branch into the bot's branch: a merge, never a rebase, so the
        branch's commits (a person's among them) stay as they are and the push needs no
        force. The merge is left uncommitted (the delivery's commit completes it, after
        the gate); the paths git left conflicted are returned ([] when it merged cleanly
        or the base is in already). A merge in progress is left as it is."""
        await self.ensure()
        async with self._lock:
            going = await self._git("rev-parse", "--quiet", "--verify", "MERGE_HEAD", check=False)
            if going.code == 0:
                return await self._unmerged()
            await self._fetch_history()
            base = f"refs/remotes/origin/{self.base_branch}"
            inside = await self._git("merge-base", "--is-ancestor", base, "HEAD", check=False)
            if inside.code == 0:
                return []
            merged = await self._git("merge", "--no-ff", "--no-commit", "--no-edit", base,
                                     check=False)  # fmt: skip
            if merged.code == 0:
                return []
            conflicted = await self._unmerged()
            if not conflicted:
                raise WorkspaceError(f"git could not merge {self.base_branch}: {merged.stderr}")
            return conflicted

    async def _fetch_history(self) -> None:
        """The whole history of the base and the bot's branch (the clone is shallow): git
        needs their common ancestor to merge."""
        auth = await self._auth()
        refs = [f"+refs/heads/{name}:refs/remotes/origin/{name}"
                for name in (self.base_branch, self.branch)]  # fmt: skip
        deepen = ["--unshallow"] if (self._root / ".git" / "shallow").exists() else []
        await self._git("fetch", "--quiet", "--no-tags", *deepen, "origin", *refs, auth=auth)

    async def _unmerged(self) -> list[str]:
        """The paths git holds as unmerged (the index's stages and the diff's view)."""
        staged = await self._git("ls-files", "-u", "-z")
        listed = await self._git("diff", "--name-only", "-z", "--diff-filter=U")
        return unmerged_paths(staged.stdout, listed.stdout)

    async def _conflict_markers(self) -> list[str]:
        """The paths left unmerged that still hold a conflict marker line of any length
        the attributes name (the working tree's, the index's, git's default)."""
        conflicted = await self._unmerged()
        names = "".join(f"{p}\0" for p in conflicted).encode()
        found = [await self._git("check-attr", "-z", "--stdin", *where, "conflict-marker-size",
                                 "working-tree-encoding", stdin=names)
                 for where in ([], ["--cached"]) if conflicted]  # fmt: skip
        attrs = conflict_attributes(conflicted, *(f.stdout for f in found))
        return [p for p in conflicted if await offload.run(has_markers, self.resolve(p), *attrs[p])]

    async def unpublished(self) -> bool:
        """Whether the branch has commits the remote is not known to have (a commit made
        by a run that stopped before its push)."""
        if not (self._root / ".git").is_dir():
            return False
        async with self._lock:
            head = await self._git("rev-parse", "--verify", "--quiet", "HEAD", check=False)
            return head.code == 0 and head.stdout.strip() != await self._published()

    async def _published(self) -> str:
        """The commit the remote is known to have for our branch (else the base)."""
        for name in (self.branch, self.base_branch):
            found = await self._git("rev-parse", "--verify", "--quiet",
                                    f"refs/remotes/origin/{name}", check=False)  # fmt: skip
            if found.code == 0:
                return found.stdout.strip()
        return ""

    async def _push(self, head: str) -> None:
        auth = await self._auth()
        if self.lfs:  # what the pre-push hook would do, were hooks on
            await self._git("lfs", "push", "origin", head, auth=auth)
        await self._git("push", "--quiet", "--no-verify", "origin",
                        f"{head}:refs/heads/{self.branch}", auth=auth)  # fmt: skip
        await self._git("update-ref", f"refs/remotes/origin/{self.branch}", head)


def remove_nested_repositories(root: Path) -> list[str]:
    """Delete every ``.git`` below the top level of ``root``; the paths removed."""
    removed = []
    for folder, dirs, files in walk(root):  # no recursion: a tree may nest 1,000s deep
        here = Path(folder)
        if here == root:
            dirs[:] = [d for d in dirs if d != ".git"]
            continue
        if ".git" in dirs or ".git" in files:
            nested = here / ".git"
            if nested.is_dir() and not nested.is_symlink():
                remove_tree(nested, ignore_errors=True)
            else:
                nested.unlink(missing_ok=True)
            removed.append(str(nested.relative_to(root)))
            dirs[:] = [d for d in dirs if d != ".git"]
    return removed


def content_digest(root: Path, rel: str) -> str:
    """What a path holds, as git would push it: a file's SHA-256, a link's target, a
    folder, or nothing. Never follows a link."""
    where = root / rel
    try:
        info = where.lstat()
    except (FileNotFoundError, NotADirectoryError):
        return "absent"
    if stat.S_ISLNK(info.st_mode):
        return "link:" + hashlib.sha256(os.readlink(where).encode()).hexdigest()
    if stat.S_ISDIR(info.st_mode):
        return "folder"
    if not stat.S_ISREG(info.st_mode):  # a FIFO or device: never opened
        return "special"
    with where.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()
