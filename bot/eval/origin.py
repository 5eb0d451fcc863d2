"""Where a task's source comes from, and the task's own remote.

``source_repo`` gives a local git repository holding the task's commit: its
``repo_path``, or a bare clone of its ``repo_url`` made once per run in the run folder's
``repos/``. ``make_origin`` makes the task's remote: a bare repository whose only branch,
``main``, is ``base_commit``, borrowing the source's objects (git's alternates, nothing
copied); a clone of it holds nothing after ``base_commit``, so the agent cannot read the
fix from the future. ``bot_patch`` is the prediction: the diff of the bot's branch against
``base_commit``.
"""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

from bot.eval.checkout import CheckoutError, git, resolve_commit
from bot.eval.local_forge import BASE_BRANCH
from bot.eval.tasks import EvalTask
from bot.sandbox.gitcmd import WorkspaceError

_CLONING: dict[tuple[int, str], asyncio.Lock] = {}  # (event loop, URL's key): one clone


async def source_repo(task: EvalTask, cache: Path) -> Path:
    """A local repository with the task's commit; raises ``CheckoutError``."""
    if task.repo_path is not None:
        return task.repo_path
    key = hashlib.sha256(task.repo_url.encode()).hexdigest()[:16]
    bare = cache / f"{key}.git"
    lock = _CLONING.setdefault((id(asyncio.get_running_loop()), key), asyncio.Lock())
    async with lock:
        if not await asyncio.to_thread((bare / "HEAD").is_file):
            await asyncio.to_thread(cache.mkdir, parents=True, exist_ok=True)
            try:
                await git("clone", "--quiet", "--bare", "--", task.repo_url, str(bare),
                          cwd=cache)  # fmt: skip
            except WorkspaceError as exc:
                raise CheckoutError(f"cannot clone {task.repo_url}: {exc}") from exc
    return bare


async def make_origin(source: Path, base_commit: str, origin: Path) -> str:
    """The task's bare remote at ``origin`` with ``main`` at ``base_commit``; returns the
    commit's full id. Raises ``CheckoutError``."""
    full = await resolve_commit(source, base_commit)
    objects = await git("rev-parse", "--path-format=absolute", "--git-common-dir", cwd=source)
    store = Path(objects.stdout.strip()) / "objects"
    try:
        await git("init", "--quiet", "--bare", origin.name, cwd=origin.parent)
        await asyncio.to_thread(_borrow, origin, store)
        await git("update-ref", f"refs/heads/{BASE_BRANCH}", full, cwd=origin)
        await git("symbolic-ref", "HEAD", f"refs/heads/{BASE_BRANCH}", cwd=origin)
    except WorkspaceError as exc:
        raise CheckoutError(f"the task's remote cannot be made: {exc}") from exc
    return full


async def bot_patch(origin: Path, base_commit: str) -> tuple[str, str]:
    """The bot's branch (the newest other than ``main``) and its diff against
    ``base_commit``; ("", "") when the bot left no branch."""
    listed = await git("for-each-ref", "--sort=-committerdate", "--format=%(refname:short)",
                       "refs/heads", cwd=origin)  # fmt: skip
    branches = [b for b in listed.stdout.split() if b != BASE_BRANCH]
    if not branches:
        return "", ""
    diff = await git("diff", "--no-color", "--binary", "--no-ext-diff", base_commit,
                     branches[0], cwd=origin)  # fmt: skip
    return branches[0], diff.stdout


def _borrow(origin: Path, objects: Path) -> None:
    info = origin / "objects" / "info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "alternates").write_text(f"{objects}\n", encoding="utf-8")
