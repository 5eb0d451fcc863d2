"""The code of the local actions a GitHub repository's workflows run (``uses: ./path``).

A local action is a folder of the repository: its ``action.yml`` and everything next to
it (a composite action's scripts, a JavaScript action's ``dist/``, a Dockerfile) runs in
the repository's CI with its secrets, so writing any of it waits for approval as the
workflows do. ``load_local_actions`` reads the workflows on the default branch and the
actions they name (and those name, up to ``MAX_FILES`` files); each action's folder joins
``require_approval_paths`` for the task. ``uses: ./`` names the repository itself: every
path is guarded. A set that cannot be read whole guards every path too.
``action_folders`` is pure.
"""

from __future__ import annotations

import logging
from typing import Any

import yaml

from bot.events import RepoRef
from bot.forges.base import EntryKind, Forge, NotFound
from bot.tools.policy import repo_path

log = logging.getLogger(__name__)

WORKFLOWS = ".github/workflows"
ACTION_FILES = ("action.yml", "action.yaml")
MAX_FILES = 50  # workflow and action files read per task start
MAX_FILE_BYTES = 256 * 1024
EVERYTHING = "*"  # the guard of ``uses: ./`` (and of a set too large to read)
_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _steps(document: dict[Any, Any]) -> list[Any]:
    """The steps of a workflow's jobs, or of a composite action (``runs.steps``)."""
    steps: list[Any] = []
    jobs = document.get("jobs")
    if isinstance(jobs, dict):
        for job in jobs.values():
            if isinstance(job, dict) and isinstance(job.get("steps"), list):
                steps.extend(job["steps"])
    runs = document.get("runs")
    if isinstance(runs, dict) and isinstance(runs.get("steps"), list):
        steps.extend(runs["steps"])
    return steps


def action_folders(document: object) -> tuple[str, ...]:
    """The repository folders a parsed workflow or action runs as local actions (``uses:
    ./path``; "" is the repository's own root)."""
    if not isinstance(document, dict):
        return ()
    found: list[str] = []
    for step in _steps(document):
        uses = step.get("uses") if isinstance(step, dict) else None
        if isinstance(uses, str) and uses.strip().startswith("./"):
            found.append(repo_path(uses.strip()))
    return tuple(dict.fromkeys(found))


def _parse(content: bytes) -> object:
    try:
        return yaml.load(content.decode("utf-8"), Loader=_Loader)  # noqa: S506 (a safe loader)
    except (UnicodeDecodeError, yaml.YAMLError):
        return None  # GitHub refuses it too: it runs nothing


async def _read(forge: Forge, repo: RepoRef, path: str, ref: str) -> bytes | None:
    try:
        file = await forge.get_file(repo, path, ref=ref)
    except NotFound:
        return None
    return file.content


async def _workflows(forge: Forge, repo: RepoRef, ref: str) -> list[str]:
    try:
        entries = await forge.list_tree(repo, path=WORKFLOWS, ref=ref)
    except NotFound:
        return []
    return sorted(
        e.path for e in entries if e.kind == EntryKind.FILE and e.path.endswith((".yml", ".yaml"))
    )


def _guard(folder: str) -> str:
    return f"{folder}/**" if folder else EVERYTHING


async def load_local_actions(forge: Forge, repo: RepoRef, ref: str) -> tuple[str, ...]:
    """The guards (``folder/**``) of the local actions the workflows at ``ref`` run.
    Forge errors other than ``NotFound`` propagate."""
    queue = await _workflows(forge, repo, ref)
    found: list[str] = []
    read, seen = 0, set[str]()
    while queue:
        path = queue.pop(0)
        if read == MAX_FILES:
            log.warning("%s: more than %d workflow and action files; every path is guarded",
                        repo.full_name, MAX_FILES)  # fmt: skip
            return (*found, EVERYTHING)
        read += 1
        content = await _read(forge, repo, path, ref)
        if content is None:
            continue
        if len(content) > MAX_FILE_BYTES:
            log.warning("%s: %s is over %d bytes; every path is guarded",
                        repo.full_name, path, MAX_FILE_BYTES)  # fmt: skip
            return (*found, EVERYTHING)
        for folder in action_folders(_parse(content)):
            if folder in seen:
                continue
            seen.add(folder)
            found.append(_guard(folder))
            if not folder:
                return tuple(found)  # everything is guarded already
            queue.extend(f"{folder}/{name}" for name in ACTION_FILES)
    return tuple(found)
