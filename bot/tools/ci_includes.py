"""The files a GitLab pipeline takes from its own repository (``include: local:``).

They are CI definitions as much as ``.gitlab-ci.yml`` is: pushed, they run with the
project's CI variables. Their names are the project's choice, so no default glob can
name them all: ``load_ci_includes`` reads the project's CI file on the default branch
(``.gitlab-ci.yml``, or the path the project's settings name: ``ci_config_path``) and
the local files it includes (and those include, up to ``MAX_FILES`` files), and their
paths join ``require_approval_paths`` for the task (``load_repo_config``). Wildcards
(``configs/*.yml``, ``ci/**/*.yml``) and CI variables (``$CI_...``) stay globs, read as
GitLab reads them (``**/`` is also no folder; ``?`` and ``[`` are plain characters); the
files a glob matches in the tree are read for their own includes as well. A
pipeline that cannot be read whole (too large, too many includes) guards every YAML file
instead. On GitHub the same call gives the folders of the local actions the workflows run
(``local_actions``). ``local_includes`` is pure; ``load_ci_includes`` reads.
"""

from __future__ import annotations

import logging
import re
from typing import Any

import yaml

from bot.events import ForgeKind, RepoRef
from bot.forges.base import EntryKind, Forge, NotFound
from bot.tools.local_actions import load_local_actions
from bot.tools.policy import path_matches, repo_path

log = logging.getLogger(__name__)

GITLAB_CI_PATH = ".gitlab-ci.yml"
MAX_FILES = 20  # pipeline files read per task start
MAX_FILE_BYTES = 256 * 1024
MAX_ENTRIES = 200  # include entries looked at per file
UNKNOWN = ("*.yml", "*.yaml")  # guarded when the includes cannot all be known
_VARIABLE = re.compile(r"\$\{?\w+\}?")
_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml: ms, not seconds


def local_includes(document: object, own: str = "") -> tuple[str, ...]:
    """The repository paths (globs kept) a parsed GitLab CI file includes from its own
    repository: ``include: path``, ``include: [path, ...]`` and ``{local: path}``
    entries (a string that is a URL is a remote include), and the ``file`` entries of a
    ``project:`` include and the files of a ``component:`` that name the project ``own``
    (its path, any case) or a CI variable (``$CI_PROJECT_PATH``: it may be this one),
    and the same entries of a job's ``trigger: include:`` (a child pipeline). Other
    projects, templates and components are not this repository's."""
    if not isinstance(document, dict):
        return ()
    found: list[str] = []
    for entry in (*_entries(document), *_child_entries(document))[:MAX_ENTRIES]:
        for path in _entry_paths(entry, own):
            pattern = repo_path(_VARIABLE.sub("*", path))
            if pattern:
                found.append(pattern)
    return tuple(dict.fromkeys(found))


def _entries(holder: dict[Any, Any]) -> list[object]:
    entries = holder.get("include")
    if isinstance(entries, str | dict):
        return [entries]
    return entries if isinstance(entries, list) else []


def _child_entries(document: dict[Any, Any]) -> list[object]:
    """The ``include`` entries of the jobs' ``trigger:``: child pipelines run from files
    of this repository, with the project's CI variables."""
    found: list[object] = []
    for job in document.values():
        trigger = job.get("trigger") if isinstance(job, dict) else None
        if isinstance(trigger, dict):
            found += _entries(trigger)
    return found


def _names_own(project: str, own: str) -> bool:
    return "$" in project or (bool(own) and project.strip("/").lower() == own.lower())


def _entry_paths(entry: object, own: str) -> list[str]:
    """The paths of this repository one ``include`` entry names."""
    if isinstance(entry, str):
        return [entry] if "://" not in entry else []
    if not isinstance(entry, dict):
        return []
    local, project, component = entry.get("local"), entry.get("project"), entry.get("component")
    if isinstance(local, str) and "://" not in local:
        return [local]
    if isinstance(project, str) and _names_own(project, own):
        files = entry.get("file")
        files = [files] if isinstance(files, str) else files
        return [f for f in files if isinstance(f, str)] if isinstance(files, list) else []
    if isinstance(component, str):  # host/group/project/name@version
        address = component.rpartition("@")[0] or component
        where, _, name = address.partition("/")[2].rpartition("/")
        if name and _names_own(where, own):
            return [f"templates/{name}.yml", f"templates/{name}/**"]
    return []


def literal(path: str) -> str:
    """A GitLab include path as the approval guard's glob: GitLab's only wildcard is
    ``*`` (``**``), so ``?`` and ``[`` name themselves."""
    return path.replace("[", "[[]").replace("?", "[?]")


def own_ci_file(setting: str) -> str | None:
    """The repository path of the project's CI file from its ``ci_config_path``: "" is
    ``.gitlab-ci.yml``; a file of another project (``path@group/project``) or a URL is
    none of this repository's (None)."""
    text = setting.strip()
    if not text:
        return GITLAB_CI_PATH
    if "://" in text or "@" in text:
        return None
    return repo_path(text) or None


def _parse(content: bytes) -> object:
    try:
        return yaml.load(content.decode("utf-8"), Loader=_Loader)  # noqa: S506 (a safe loader)
    except (UnicodeDecodeError, yaml.YAMLError):
        return None  # GitLab refuses it too: it runs nothing


async def load_ci_includes(forge: Forge, repo: RepoRef, ref: str) -> tuple[str, ...]:
    """The local files a GitLab project's pipeline at ``ref`` includes, its own CI file
    when the project's settings name one (nothing without a CI file); on GitHub the
    folders of the local actions its workflows run. Forge errors other than
    ``NotFound`` propagate."""
    if repo.forge is ForgeKind.GITHUB:
        return await load_local_actions(forge, repo, ref)
    start = own_ci_file((await forge.get_repo_info(repo)).ci_config_path)
    if start is None:
        return ()
    found: list[str] = [] if start == GITLAB_CI_PATH else [literal(start)]
    queue, seen = [start], set[str]()
    tree: list[str] | None = None
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
        for included in local_includes(_parse(file.content), repo.full_name):
            found.append(literal(included))
            if "*" not in included:
                queue.append(included)
                continue
            if tree is None:  # the files a wildcard matches include files of their own
                tree = await _yaml_files(forge, repo, ref)
            queue.extend(p for p in tree if path_matches(p, literal(included)))
    return tuple(dict.fromkeys(found))


async def _yaml_files(forge: Forge, repo: RepoRef, ref: str) -> list[str]:
    """Every YAML file of the repository at ``ref`` (what a wildcard include may match)."""
    try:
        entries = await forge.list_tree(repo, ref=ref, recursive=True)
    except NotFound:
        return []
    return sorted(
        e.path for e in entries if e.kind == EntryKind.FILE and e.path.endswith((".yml", ".yaml"))
    )
