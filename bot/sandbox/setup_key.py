"""What a prepared environment depends on, and the key it is cached under: the set-up
commands, the dependency manifests and lock files at the top of the clone, where the
programs the commands start live on the host (a new interpreter is a new environment),
what set-up executes from the clone (``executed_digests``: the files the commands name,
the Makefiles and their includes, the files package.json's install scripts name, an
in-tree build backend) and every link the clone holds (``tree_links``: a link where the
cache would write changes the key). Reads the clone's files; runs nothing.

``differences`` names what differs between two clones' inputs (the base branch's and the
working tree's on a follow-up): what set-up would install or run otherwise.
Whether set-up gets network does not rest on this list: it runs with network only on
what the base branch holds (``bot/sandbox/setup.py``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from bot.sandbox.setup_plan import MAKEFILES, Argv, SetupPlan, Which, plain_file, read_pyproject
from bot.sandbox.tree_walk import walk

MANIFESTS = (
    "pyproject.toml", "setup.py", "setup.cfg", "Pipfile", "Pipfile.lock", "poetry.lock",
    "uv.lock", "pdm.lock", "package.json", "package-lock.json", "npm-shrinkwrap.json",
    "yarn.lock", "pnpm-lock.yaml", "Makefile", "makefile", "GNUmakefile",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class SetupInputs:
    """What one clone's prepared environment depends on."""

    commands: tuple[Argv, ...]
    manifests: Mapping[str, str]  # name -> SHA-256
    executed: Mapping[str, str]  # name -> SHA-256
    links: Mapping[str, str]  # name -> where it points
    tools: Mapping[str, str]  # program -> its real path on the host

    @property
    def key(self) -> str:
        data = {
            "commands": [list(argv) for argv in self.commands],
            "manifests": dict(self.manifests),
            "executed": dict(self.executed),
            "links": dict(self.links),
            "tools": dict(self.tools),
        }
        encoded = json.dumps(data, sort_keys=True).encode()
        return hashlib.sha256(encoded).hexdigest()[:32]


def setup_inputs(root: Path, plan: SetupPlan, *, which: Which) -> SetupInputs:
    programs = sorted({argv[0] for argv in plan.commands if "/" not in argv[0]} | {"python3"})
    tools = {name: os.path.realpath(found) if (found := which(name)) else "" for name in programs}
    return SetupInputs(
        commands=plan.commands,
        manifests=manifest_digests(root),
        executed=executed_digests(root, plan),
        links=tree_links(root),
        tools=tools,
    )


def cache_key(root: Path, plan: SetupPlan, *, which: Which) -> str:
    """The key the environment set-up makes in ``root`` is cached under."""
    return setup_inputs(root, plan, which=which).key


def differences(base: SetupInputs, tree: SetupInputs) -> list[str]:
    """What set-up depends on that ``tree`` holds otherwise than ``base``: the files
    (manifests, files set-up executes, links) by name, and the commands or the tools."""
    found: list[str] = []
    if base.commands != tree.commands:
        found.append("the set-up commands")
    if base.tools != tree.tools:
        found.append("the tools set-up starts")
    for ours, theirs in ((base.manifests, tree.manifests), (base.executed, tree.executed),
                         (base.links, tree.links)):  # fmt: skip
        found += [name for name in sorted(set(ours) | set(theirs))
                  if ours.get(name) != theirs.get(name) and name not in found]  # fmt: skip
    return found


def manifest_digests(root: Path) -> dict[str, str]:
    """The SHA-256 of every dependency manifest and lock file at the top of the clone
    (and ``requirements/*.txt``)."""
    names = [n for n in MANIFESTS if plain_file(root / n)]
    names += [n for n in os.listdir(root) if n.endswith(".txt") and "requirements" in n]
    folder = root / "requirements"
    if folder.is_dir() and not folder.is_symlink():
        names += [f"requirements/{n}" for n in os.listdir(folder) if n.endswith(".txt")]
    digests = {}
    for name in sorted(set(names)):
        if plain_file(root / name):
            with (root / name).open("rb") as handle:
                digests[name] = hashlib.file_digest(handle, "sha256").hexdigest()
    return digests


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
    for folder, dirs, files in walk(root):
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
    queue = [name for name in MAKEFILES if plain_file(root / name)]
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
    if not plain_file(path):
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
    system = read_pyproject(root).get("build-system")
    folders = system.get("backend-path") if isinstance(system, dict) else None
    if not isinstance(folders, list):
        return []
    names: list[str] = []
    for folder in folders:
        top = _inside_folder(root, str(folder))
        if top is None:
            continue
        for here, dirs, files in walk(top):
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
