"""What prepares a fresh clone before the agent works on it: the repository's own
``setup:`` commands (``.agent.yaml``), or commands detected from its files. Reads the
clone's files; runs nothing.

Detection, when the repository names no set-up (``setup: []`` turns it off):

- a Makefile with a ``setup`` target: ``make setup``, and nothing else (the project
  says how it is set up);
- a Python project (``pyproject.toml`` with a build system or a ``[project]`` table,
  ``setup.py``, ``requirements*.txt``): a virtualenv ``.venv`` in the workspace, the
  project installed in it (editable, with its test extras: ``test``, ``tests``,
  ``testing``, ``dev``) and each requirements file;
- a Node project (``package.json``): ``npm ci`` with a lock file, else ``npm install``.

A detected command whose program is not on the host is left out, with a note.
``cache_key`` is what the prepared environment is cached under: the commands, the
dependency manifests and lock files, the tools they run, what set-up executes from the
clone (``executed_digests``: the files the commands name, the Makefiles' includes, the
files package.json's install scripts name, an in-tree build backend) and the links the
clone holds (``tree_links``: a link where the cache would write changes the key).
Whether set-up gets network does not rest on this list: it runs with network only on
a tree the base branch holds as it is (``bot/tools/setup.py``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from bot.tools.bwrap import DEFAULT_PATH
from bot.tools.repo_config import Argv

VENV = ".venv"
TEST_EXTRAS = ("test", "tests", "testing", "dev")
REQUIREMENTS = (
    "requirements.txt",
    "requirements-dev.txt",
    "requirements-test.txt",
    "requirements_dev.txt",
    "requirements_test.txt",
    "dev-requirements.txt",
    "test-requirements.txt",
)
MANIFESTS = (
    "pyproject.toml", "setup.py", "setup.cfg", "Pipfile", "Pipfile.lock", "poetry.lock",
    "uv.lock", "pdm.lock", "package.json", "package-lock.json", "npm-shrinkwrap.json",
    "yarn.lock", "pnpm-lock.yaml", "Makefile", "makefile", "GNUmakefile",
)  # fmt: skip
NPM_LOCKS = ("package-lock.json", "npm-shrinkwrap.json")
MAKEFILES = ("GNUmakefile", "makefile", "Makefile")
_SETUP_TARGET = re.compile(r"^setup[ \t]*::?(?!=)", re.MULTILINE)
PIP = ("-m", "pip", "install", "--no-input", "--disable-pip-version-check", "--no-cache-dir")
Which = Callable[[str], str | None]


class SetupSource(StrEnum):
    REPOSITORY = "repository"  # .agent.yaml setup:
    DETECTED = "detected"
    NONE = "none"  # nothing to set up (or turned off with setup: [])


@dataclass(frozen=True, slots=True)
class SetupPlan:
    commands: tuple[Argv, ...]
    source: SetupSource
    notes: tuple[str, ...] = ()


def plan_setup(root: Path, configured: tuple[Argv, ...] | None, *, which: Which) -> SetupPlan:
    """The repository's commands, or the detected ones when it names none."""
    if configured is not None:
        source = SetupSource.REPOSITORY if configured else SetupSource.NONE
        return SetupPlan(configured, source)
    commands, notes = detect(root, which=which)
    return SetupPlan(tuple(commands), SetupSource.DETECTED if commands else SetupSource.NONE,
                     tuple(notes))  # fmt: skip


def detect(root: Path, *, which: Which) -> tuple[list[Argv], list[str]]:
    if has_setup_target(root):
        return _available([("make", "setup")], which)
    return _available(python_commands(root) + node_commands(root), which)


def _available(commands: list[Argv], which: Which) -> tuple[list[Argv], list[str]]:
    """Leave out the commands of a toolchain the host does not have (all of its steps:
    the venv's pip needs the python3 that made it)."""
    kept: list[Argv] = []
    notes: list[str] = []
    missing: set[str] = set()
    for argv in commands:
        program = "python3" if argv[0].startswith(f"{VENV}/") else argv[0]
        if program in missing or which(program) is None:
            if program not in missing:
                notes.append(f"set-up left out: {program} is not installed on this server")
            missing.add(program)
            continue
        kept.append(argv)
    return kept, notes


def has_setup_target(root: Path) -> bool:
    for name in MAKEFILES:
        path = root / name
        if path.is_file() and not path.is_symlink():
            return bool(_SETUP_TARGET.search(path.read_text("utf-8", errors="replace")))
    return False


def python_commands(root: Path) -> list[Argv]:
    project = _installable(root)
    requirements = [name for name in REQUIREMENTS if _file(root / name)]
    if not project and not requirements:
        return []
    python = f"{VENV}/bin/python"
    commands: list[Argv] = [("python3", "-m", "venv", VENV)]
    if project:
        extras = _test_extras(root)
        target = f".[{','.join(extras)}]" if extras else "."
        commands.append((python, *PIP, "--editable", target))
    commands += [(python, *PIP, "--requirement", name) for name in requirements]
    return commands


def node_commands(root: Path) -> list[Argv]:
    if not _file(root / "package.json"):
        return []
    if any(_file(root / lock) for lock in NPM_LOCKS):
        return [("npm", "ci", "--no-audit", "--no-fund")]
    return [("npm", "install", "--no-audit", "--no-fund")]


def _file(path: Path) -> bool:
    return path.is_file() and not path.is_symlink()


def _pyproject(root: Path) -> dict[str, object]:
    path = root / "pyproject.toml"
    if not _file(path):
        return {}
    try:
        return tomllib.loads(path.read_text("utf-8", errors="replace"))
    except tomllib.TOMLDecodeError:
        return {}


def _installable(root: Path) -> bool:
    """A project pip can install: setup.py, or a pyproject.toml that is more than the
    configuration of a tool (a build system or a [project] table)."""
    data = _pyproject(root)
    return _file(root / "setup.py") or "build-system" in data or "project" in data


def _test_extras(root: Path) -> list[str]:
    project = _pyproject(root).get("project")
    extras = project.get("optional-dependencies") if isinstance(project, dict) else None
    if not isinstance(extras, dict):
        return []
    return [name for name in TEST_EXTRAS if name in extras]


def manifest_digests(root: Path) -> dict[str, str]:
    """The SHA-256 of every dependency manifest and lock file at the top of the clone
    (and ``requirements/*.txt``)."""
    names = [n for n in MANIFESTS if _file(root / n)]
    names += [n for n in os.listdir(root) if n.endswith(".txt") and "requirements" in n]
    folder = root / "requirements"
    if folder.is_dir() and not folder.is_symlink():
        names += [f"requirements/{n}" for n in os.listdir(folder) if n.endswith(".txt")]
    digests = {}
    for name in sorted(set(names)):
        if _file(root / name):
            with (root / name).open("rb") as handle:
                digests[name] = hashlib.file_digest(handle, "sha256").hexdigest()
    return digests


def cache_key(root: Path, plan: SetupPlan, *, which: Which) -> str:
    """What the prepared environment depends on: the commands, the manifests, and where
    the programs they start live on the host (a new interpreter is a new environment)."""
    programs = sorted({argv[0] for argv in plan.commands if "/" not in argv[0]} | {"python3"})
    tools = {name: os.path.realpath(found) if (found := which(name)) else "" for name in programs}
    data = {
        "commands": [list(argv) for argv in plan.commands],
        "manifests": manifest_digests(root),
        "executed": executed_digests(root, plan),
        "links": tree_links(root),
        "tools": tools,
    }
    encoded = json.dumps(data, sort_keys=True).encode()
    return hashlib.sha256(encoded).hexdigest()[:32]


def sandbox_which(name: str) -> str | None:
    """Where a sandboxed command finds ``name``: the sandbox's PATH, not the bot's."""
    return shutil.which(name, path=DEFAULT_PATH)


MAX_EXECUTED_FILES = 2000
_INCLUDE = re.compile(r"^[ \t]*-?s?include[ \t]+(.+)$", re.MULTILINE)
LIFECYCLE_SCRIPTS = ("preinstall", "install", "postinstall", "prepublish", "preprepare",
                     "prepare", "postprepare")  # fmt: skip


def executed_digests(root: Path, plan: SetupPlan) -> dict[str, str]:
    """The SHA-256 of the clone's files that set-up runs or reads as code: files the
    commands name, Makefiles and what they include, files package.json's install
    scripts name, and the files of an in-tree build backend (``backend-path``)."""
    names = [word for argv in plan.commands for arg in argv for word in _words(arg)]
    names += _makefile_includes(root)
    names += _package_script_files(root)
    names += _backend_files(root)
    digests: dict[str, str] = {}
    for name in names:
        path = _inside(root, name)
        if path is not None and name not in digests and len(digests) < MAX_EXECUTED_FILES:
            with path.open("rb") as handle:
                digests[name] = hashlib.file_digest(handle, "sha256").hexdigest()
    return dict(sorted(digests.items()))


def tree_links(root: Path) -> dict[str, str]:
    """Every symbolic link in the clone (outside ``.git``) and where it points."""
    links = {}
    for folder, dirs, files in os.walk(root):
        here = Path(folder)
        if here == root:
            dirs[:] = [d for d in dirs if d != ".git"]
        for name in [*dirs, *files]:
            path = here / name
            if path.is_symlink():
                links[path.relative_to(root).as_posix()] = os.readlink(path)
    return dict(sorted(links.items()))


def _words(arg: str) -> list[str]:
    """The parts of an argument that may name a file: itself, what follows ``=``, and
    the words of a shell line."""
    words = [arg, arg.partition("=")[2]]
    words += re.split(r"[\s;&|()<>`'\"]+", arg) if any(c in arg for c in " ;&|") else []
    return [w.removeprefix("./") for w in words if w and not w.startswith("-")]


def _inside(root: Path, name: str) -> Path | None:
    """``root/name`` if it is a regular file of the clone reached without a link."""
    pure = Path(name)
    if pure.is_absolute() or ".." in pure.parts or not name.strip():
        return None
    path = root / pure
    try:
        if not path.is_file() or path.resolve() != root.resolve() / pure:
            return None
    except (OSError, ValueError):
        return None
    return path


def _makefile_includes(root: Path) -> list[str]:
    """Every Makefile at the top and the files they include (to a bounded depth)."""
    found: list[str] = []
    queue = [name for name in MAKEFILES if _file(root / name)]
    while queue and len(found) < MAX_EXECUTED_FILES:
        name = queue.pop(0)
        if name in found or (path := _inside(root, name)) is None:
            continue
        found.append(name)
        text = path.read_text("utf-8", errors="replace")
        for line in _INCLUDE.findall(text):
            queue += [w for w in line.split() if "$" not in w and "*" not in w]
    return found


def _package_script_files(root: Path) -> list[str]:
    path = root / "package.json"
    if not _file(path):
        return []
    try:
        scripts = json.loads(path.read_text("utf-8", errors="replace")).get("scripts")
    except (ValueError, AttributeError):
        return []
    if not isinstance(scripts, dict):
        return []
    lines = [scripts[n] for n in LIFECYCLE_SCRIPTS if isinstance(scripts.get(n), str)]
    return [word for line in lines for word in _words(line)]


def _backend_files(root: Path) -> list[str]:
    system = _pyproject(root).get("build-system")
    folders = system.get("backend-path") if isinstance(system, dict) else None
    if not isinstance(folders, list):
        return []
    names: list[str] = []
    for folder in folders:
        top = _inside_folder(root, str(folder))
        if top is None:
            continue
        for here, dirs, files in os.walk(top):
            dirs[:] = [d for d in dirs if not Path(here, d).is_symlink()]
            names += [Path(here, f).relative_to(root).as_posix() for f in files]
            if len(names) > MAX_EXECUTED_FILES:
                return names
    return names


def _inside_folder(root: Path, name: str) -> Path | None:
    pure = Path(name)
    if pure.is_absolute() or ".." in pure.parts:
        return None
    path = root / pure
    return path if path.is_dir() and path.resolve() == root.resolve() / pure else None
