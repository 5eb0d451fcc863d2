"""Git for evaluation: a fresh checkout of one commit of a local repository, the paths a
patch touches, and a patch applied.

git runs on the host as for the bot's workspace (``gitcmd.base_env``: no hooks, no
credential helper, no prompt, no submodule). A checkout is a clone of the local
repository without its remote, on a branch of its own (``eval/work``) with the commit
kept as ``origin/eval/base``: a ``Workspace`` over it sees the base branch it was made
from, so set-up runs on it as on a task's clone (and is cached the same way).
"""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path

from bot.forges.base import CloneAuth
from bot.sandbox.gitcmd import GitResult, Identity, WorkspaceError, base_env, run_git
from bot.sandbox.workspace import Workspace

BRANCH = "eval/work"
BASE = "eval/base"
GIT_TIMEOUT = 600.0
_IDENTITY = Identity("coding-agent", "coding-agent@users.noreply.localhost")
_SHA = re.compile(r"^[0-9a-fA-F]{4,64}$")


class CheckoutError(Exception):
    """No checkout could be made; the message says why in one line."""


async def git(*args: str, cwd: Path, stdin: bytes | None = None, check: bool = True) -> GitResult:
    """``git args`` in ``cwd`` with the workspace's safe environment."""
    env = base_env(os.environ, _IDENTITY)
    return await run_git(list(args), cwd=cwd, env=env, timeout=GIT_TIMEOUT, stdin=stdin,
                         check=check)  # fmt: skip


async def resolve_commit(repo: Path, commit: str) -> str:
    """The full id of ``commit`` in ``repo``; raises ``CheckoutError``."""
    if not _SHA.match(commit):
        raise CheckoutError(f"{commit!r} is not a commit id")
    if not (repo / ".git").exists() and not (repo / "HEAD").is_file():
        raise CheckoutError(f"{repo} is not a git repository")
    found = await git("rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}", cwd=repo,
                      check=False)  # fmt: skip
    if found.code != 0:
        raise CheckoutError(f"the commit {commit} is not in {repo}")
    return found.stdout.strip()


_roots: dict[str, str] = {}


async def project_key(repo: Path, commit: str) -> str:
    """What names a project's set-up cache whatever folder holds its clone: the first root
    commit of ``commit``'s history (asked once per repository folder and process)."""
    asked = str(repo)
    if asked not in _roots:
        found = await git("rev-list", "--max-parents=0", commit, cwd=repo)
        roots = sorted(found.stdout.split())
        _roots[asked] = roots[0] if roots else commit
    return _roots[asked]


async def check_out(repo: Path, commit: str, dest: Path) -> Workspace:
    """A fresh clone of ``repo`` at ``commit`` in ``dest`` (which must not exist or be
    empty), as a ``Workspace``; raises ``CheckoutError``."""
    full = await resolve_commit(repo, commit)
    source = await asyncio.to_thread(_ready_for_clone, repo, dest)
    try:
        await git("clone", "--quiet", "--no-checkout", "--", source, str(dest),
                  cwd=dest.parent)  # fmt: skip
        await git("remote", "remove", "origin", cwd=dest)
        await git("checkout", "--quiet", "-B", BRANCH, full, cwd=dest)
        await git("update-ref", f"refs/remotes/origin/{BASE}", full, cwd=dest)
    except WorkspaceError as exc:
        raise CheckoutError(str(exc)) from exc
    return Workspace(dest, auth=_no_remote, branch=BRANCH, base_branch=BASE)


def _ready_for_clone(repo: Path, dest: Path) -> str:
    """The source's absolute path; ``dest``'s parent made. Raises ``CheckoutError``
    when ``dest`` holds something."""
    if dest.exists() and any(dest.iterdir()):
        raise CheckoutError(f"{dest} is not empty")
    dest.parent.mkdir(parents=True, exist_ok=True)
    return str(repo.absolute())


async def _no_remote() -> CloneAuth:
    raise WorkspaceError("an evaluation checkout has no remote")


async def patch_paths(root: Path, patch: str) -> list[str]:
    """Every path ``patch`` touches (both sides of a rename); raises ``CheckoutError``
    when git cannot read it."""
    if not patch.strip():
        return []
    listed = await git("apply", "--numstat", "-z", "-", cwd=root, stdin=patch.encode(),
                       check=False)  # fmt: skip
    if listed.code != 0:
        raise CheckoutError(first_line(listed.stderr) or "git cannot read the patch")
    return sorted(set(numstat_paths(listed.stdout)))


def numstat_paths(text: str) -> list[str]:
    """The paths of ``git apply --numstat -z`` output: ``added\\tdeleted\\tpath\\0``, or for a
    rename ``added\\tdeleted\\t\\0old\\0new\\0``. Pure."""
    fields = text.split("\0")
    paths: list[str] = []
    index = 0
    while index < len(fields):
        entry = fields[index]
        index += 1
        if not entry:
            continue
        name = entry.split("\t", 2)[2] if entry.count("\t") >= 2 else ""
        if name:
            paths.append(name)
        else:
            paths += [p for p in fields[index : index + 2] if p]
            index += 2
    return paths


async def apply_patch(root: Path, patch: str) -> str:
    """Apply ``patch`` to the working tree; "" when it applied, else why (one line)."""
    if not patch.strip():
        return ""
    text = patch if patch.endswith("\n") else patch + "\n"
    applied = await git("apply", "--whitespace=nowarn", "-", cwd=root, stdin=text.encode(),
                        check=False)  # fmt: skip
    if applied.code == 0:
        return ""
    return first_line(applied.stderr) or f"git apply failed (exit {applied.code})"


def first_line(text: str) -> str:
    """The first line of ``text`` that says something (git's ``error:`` line first)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error:")]
    return (errors or lines or [""])[0][:300]
