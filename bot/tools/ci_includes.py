"""The files a GitLab pipeline takes from its own repository (``include: local:``).

They are CI definitions as much as ``.gitlab-ci.yml`` is: pushed, they run with the
project's CI variables. Their names are the project's choice, so no default glob can
name them all: ``load_ci_includes`` reads ``.gitlab-ci.yml`` on the default branch and
the local files it includes (and those include, up to ``MAX_FILES`` files), and their
paths join ``require_approval_paths`` for the task (``load_repo_config``). Wildcards
(``configs/*.yml``) and CI variables (``$CI_...``) stay globs. A pipeline that cannot be
read whole (too large, too many includes) guards every YAML file instead.
``local_includes`` is pure; ``load_ci_includes`` is the one function that reads.
"""

from __future__ import annotations

import logging
import re
from typing import Any

import yaml

from bot.events import ForgeKind, RepoRef
from bot.forges.base import Forge, NotFound
from bot.tools.policy import repo_path

log = logging.getLogger(__name__)

GITLAB_CI_PATH = ".gitlab-ci.yml"
MAX_FILES = 20  # pipeline files read per task start
MAX_FILE_BYTES = 256 * 1024
MAX_ENTRIES = 200  # include entries looked at per file
UNKNOWN = ("*.yml", "*.yaml")  # guarded when the includes cannot all be known
_VARIABLE = re.compile(r"\$\{?\w+\}?")
_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml: ms, not seconds


def local_includes(document: object) -> tuple[str, ...]:
    """The repository paths (globs kept) a parsed GitLab CI file includes from its own
    repository: ``include: path``, ``include: [path, ...]`` and ``{local: path}``
    entries (a string that is a URL is a remote include; other keys name other
    projects, templates or components)."""
    if not isinstance(document, dict):
        return ()
    entries = document.get("include")
    if isinstance(entries, str | dict):
        entries = [entries]
    if not isinstance(entries, list):
        return ()
    found: list[str] = []
    for entry in entries[:MAX_ENTRIES]:
        path = entry.get("local") if isinstance(entry, dict) else entry
        if isinstance(path, str) and "://" not in path:
            pattern = repo_path(_VARIABLE.sub("*", path))
            if pattern:
                found.append(pattern)
    return tuple(dict.fromkeys(found))


def _parse(content: bytes) -> object:
    try:
        return yaml.load(content.decode("utf-8"), Loader=_Loader)  # noqa: S506 (a safe loader)
    except (UnicodeDecodeError, yaml.YAMLError):
        return None  # GitLab refuses it too: it runs nothing


async def load_ci_includes(forge: Forge, repo: RepoRef, ref: str) -> tuple[str, ...]:
    """The local files a GitLab project's pipeline at ``ref`` includes (nothing for a
    GitHub repository, or without ``.gitlab-ci.yml``). Forge errors other than
    ``NotFound`` propagate."""
    if repo.forge is not ForgeKind.GITLAB:
        return ()
    found: list[str] = []
    queue, seen = [GITLAB_CI_PATH], set[str]()
    while queue:
        path = queue.pop(0)
        if path in seen:
            continue
        if len(seen) == MAX_FILES:
            log.warning(
                "%s: more than %d pipeline files; every YAML file is guarded",
                repo.full_name,
                MAX_FILES,
            )
            return (*found, *UNKNOWN)
        seen.add(path)
        try:
            file = await forge.get_file(repo, path, ref=ref)
        except NotFound:
            continue
        if len(file.content) > MAX_FILE_BYTES:
            log.warning(
                "%s: %s is over %d bytes; every YAML file is guarded",
                repo.full_name,
                path,
                MAX_FILE_BYTES,
            )
            return (*found, *UNKNOWN)
        for included in local_includes(_parse(file.content)):
            found.append(included)
            if not any(c in included for c in "*?["):
                queue.append(included)
    return tuple(dict.fromkeys(found))
