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

A detected command whose program is not on the host is left out, with a note. What the
prepared environment is cached under is ``setup_key``'s.
"""

from __future__ import annotations

import re
import shutil
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from bot.sandbox.bwrap import DEFAULT_PATH

Argv = tuple[str, ...]  # a command as its arguments, never a shell line

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
    requirements = [name for name in REQUIREMENTS if plain_file(root / name)]
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
    if not plain_file(root / "package.json"):
        return []
    if any(plain_file(root / lock) for lock in NPM_LOCKS):
        return [("npm", "ci", "--no-audit", "--no-fund")]
    return [("npm", "install", "--no-audit", "--no-fund")]


def plain_file(path: Path) -> bool:
    return path.is_file() and not path.is_symlink()


def read_pyproject(root: Path) -> dict[str, object]:
    path = root / "pyproject.toml"
    if not plain_file(path):
        return {}
    try:
        return tomllib.loads(path.read_text("utf-8", errors="replace"))
    except tomllib.TOMLDecodeError:
        return {}


def _installable(root: Path) -> bool:
    """A project pip can install: setup.py, or a pyproject.toml that is more than the
    configuration of a tool (a build system or a [project] table)."""
    data = read_pyproject(root)
    return plain_file(root / "setup.py") or "build-system" in data or "project" in data


def _test_extras(root: Path) -> list[str]:
    project = read_pyproject(root).get("project")
    extras = project.get("optional-dependencies") if isinstance(project, dict) else None
    if not isinstance(extras, dict):
        return []
    return [name for name in TEST_EXTRAS if name in extras]


def sandbox_which(name: str) -> str | None:
    """Where a sandboxed command finds ``name``: the sandbox's PATH, not the bot's."""
    return shutil.which(name, path=DEFAULT_PATH)
