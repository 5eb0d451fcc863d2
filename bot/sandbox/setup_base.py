"""A clean checkout of the base branch's commit, where set-up runs with network when the
working tree differs from the base branch (a follow-up on the bot's own branch).

``check_out`` makes a repository of its own in a private folder beside the workspace
(``base_folder``: ``.<task>.setup-base``, mode 0700, in the data directory that every
sandbox hides): ``git init`` without a template (no hooks, no remote, no credential), a
shallow fetch of the commit the workspace knows as the base branch
(``refs/remotes/origin/<base>``) from the workspace's own ``.git`` (no network), and a
detached checkout of it. Nothing of the working tree reaches it. Its ``.git`` is a
real repository (a build that asks git for its version works) and, as the workspace's,
is read-only to every sandboxed command. Before anything is checked out, the commit's
tree is measured against the workspace's bounds (``sandbox.workspace_mb``,
``sandbox.workspace_files``); the set-up commands then write within what is left, as
in the workspace. The folder is removed when ``base_folder``'s context ends, on every
path (cancellation included), and a folder left by a crash is removed before a new one
is made.

git runs on the host here as for the workspace (``gitcmd.base_env``: no hooks, no
credential, no prompt, no system or user configuration, no LFS), and each git process is
killed when its caller gives up.
Before git reads the checkout after set-up, nested repositories are deleted, as in the
workspace.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import stat
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from bot import offload
from bot.sandbox import tree_walk
from bot.sandbox.gitcmd import Identity, base_env
from bot.sandbox.workspace import Workspace, remove_nested_repositories

log = logging.getLogger(__name__)

FOLDER_SUFFIX = ".setup-base"
_IDENTITY = Identity("coding-agent", "coding-agent@users.noreply.localhost")


class BaseUnavailable(Exception):
    """No checkout of the base branch could be made; the message says why."""


@dataclass(frozen=True, slots=True)
class BaseCheckout:
    root: Path
    commit: str
    branch: str
    git_timeout: float


@dataclass(frozen=True, slots=True)
class Bounds:
    """The workspace's bounds, which hold for the checkout too."""

    max_bytes: int
    max_files: int


@contextlib.asynccontextmanager
async def base_folder(workspace: Path) -> AsyncIterator[Path]:
    """A new private folder for the base checkout of ``workspace``, beside it (hidden by
    its name), removed when the context ends."""
    folder = workspace.parent / f".{workspace.name}{FOLDER_SUFFIX}"
    try:
        await _removed(folder)  # left by a crash
        await asyncio.to_thread(folder.mkdir, 0o700)
        yield folder
    finally:
        await _removed(folder)


async def check_out(workspace: Workspace, folder: Path, bounds: Bounds) -> BaseCheckout:
    """Check the commit the workspace knows as its base branch out in ``folder`` (a new,
    empty folder); ``BaseUnavailable`` when it cannot be."""
    await workspace.ensure()
    env = base_env(os.environ, _IDENTITY)
    timeout = workspace.git_timeout
    ref = f"refs/remotes/origin/{workspace.base_branch}"
    found = ["rev-parse", "--verify", "--quiet", ref]
    commit = (await _git(found, workspace.path, env, timeout, check=False)).strip()
    if not commit:
        raise BaseUnavailable(f"the clone does not know the base branch {workspace.base_branch}")
    await _git(["init", "--quiet", "--template=", str(folder)], folder, env, timeout)
    await _git(["fetch", "--quiet", "--depth", "1", "--no-tags", "--no-write-fetch-head",
                str(workspace.path), f"+{ref}:refs/base"], folder, env, timeout)  # fmt: skip
    fetched = await _git(["rev-parse", "--verify", "refs/base"], folder, env, timeout)
    if fetched.strip() != commit:
        raise BaseUnavailable(f"the base branch moved while it was fetched ({commit})")
    await _check_size(folder, commit, bounds, env, timeout)
    await _git(["checkout", "--quiet", "--detach", commit], folder, env, timeout)
    return BaseCheckout(folder, commit, workspace.base_branch, timeout)


async def made_paths(base: BaseCheckout) -> list[str]:
    """Every path of the checkout git does not track (what set-up made there); a folder
    of nothing but such files is one entry."""
    await offload.run(remove_nested_repositories, base.root)
    env = base_env(os.environ, _IDENTITY)
    others = ["ls-files", "--others", "--directory", "-z"]
    listed = await _git(others, base.root, env, base.git_timeout)
    return sorted({p.rstrip("/") for p in listed.split("\0") if p})


async def changed_tracked(base: BaseCheckout) -> bool:
    """Whether set-up changed (or deleted) files the base branch tracks."""
    await offload.run(remove_nested_repositories, base.root)
    env = base_env(os.environ, _IDENTITY)
    status = ["status", "--porcelain=v1", "-z", "--untracked-files=no", "--no-renames"]
    return bool((await _git(status, base.root, env, base.git_timeout)).strip("\0"))


async def _check_size(
    folder: Path, commit: str, bounds: Bounds, env: dict[str, str], timeout: float
) -> None:
    """Refuse a tree over the workspace's bounds before it is checked out."""
    listed = await _git(["ls-tree", "-r", "-t", "-l", "-z", commit], folder, env, timeout)
    size = files = 0
    for entry in listed.split("\0"):
        if entry:
            files += 1
            info = entry.split("\t", 1)[0].split()
            size += int(info[3]) if len(info) == 4 and info[3].isdigit() else 0
    if size > bounds.max_bytes or files > bounds.max_files:
        raise BaseUnavailable(
            f"the base branch's tree ({size >> 20} MB, {files} files) is over the workspace's "
            f"bounds (sandbox.workspace_mb, sandbox.workspace_files)"
        )


async def _git(
    args: list[str], cwd: Path, env: dict[str, str], timeout: float, *, check: bool = True
) -> str:
    """``git args`` in ``cwd``; its output, or ``BaseUnavailable`` when it fails (nothing,
    without ``check``). A call given up on (cancelled, or past ``timeout``) kills git
    first."""
    proc = await asyncio.create_subprocess_exec(
        "git", *args, cwd=cwd, env=env, start_new_session=True,
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    except BaseException as exc:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        await asyncio.shield(proc.wait())
        if isinstance(exc, TimeoutError):
            raise BaseUnavailable(f"git {args[0]} did not finish within {timeout:g} s") from None
        raise
    if proc.returncode != 0 and check:
        detail = err.decode("utf-8", errors="replace").strip()
        raise BaseUnavailable(f"git {args[0]} failed (exit {proc.returncode}): {detail}")
    return out.decode("utf-8", errors="replace") if proc.returncode == 0 else ""


async def _removed(folder: Path) -> None:
    """Remove ``folder`` whole; a removal begun goes on to its end, even if the caller is
    cancelled meanwhile."""
    removal = asyncio.ensure_future(asyncio.to_thread(remove_tree, folder))
    await asyncio.shield(removal)


def remove_tree(folder: Path) -> None:
    """Remove a tree that sandboxed commands wrote (never following a link): folders
    they left without write or search permission are opened up first."""
    try:
        info = folder.lstat()
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(info.st_mode):
        folder.unlink()
        return
    tree_walk.remove_tree(folder, ignore_errors=True)
    if not folder.exists():
        return
    folder.chmod(0o700)
    for here, dirs, _files in tree_walk.walk(folder):  # never into a link
        for name in dirs:
            path = Path(here, name)
            if stat.S_ISDIR(path.lstat().st_mode):
                path.chmod(0o700)
    tree_walk.remove_tree(folder, ignore_errors=True)
    if folder.exists():
        log.warning("the base checkout %s could not be removed whole", folder)
