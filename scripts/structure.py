#!/usr/bin/env python3
"""The import structure of ``bot/``: circles, the deepest import chain, the agent's size.

Every import counts, wherever it stands: at the top, inside a function, or behind
``if TYPE_CHECKING:`` (a circle hidden that way is still a circle of the design).

    python scripts/structure.py                  # the figures
    python scripts/structure.py --edges          # and every module's imports
    python scripts/structure.py --root ../main   # the figures of another checkout

The figures: the modules of ``bot/``; the files in ``bot/agent/``; the modules over
300 lines; the deepest import chain; how many modules a pure decision module pulls in
(everything it imports, transitively); and the path of a task, two ways:

- the files ``docs/architecture.md`` names in its path of a webhook and of a task (what a
  reader is told to open, from the webhook to the change request), and
- the modules a reader meets following the imports from the webhook entry
  (``bot.app``) and the worker (``bot.worker.loop``) through the rooms that decide what
  happens on the way (``PATH_ROOMS``: the app, the webhook parsers, the triggers, the
  worker, the agent, the comments), plus the forge adapter that opens the change request.

The rules docs/architecture.md states, checked here and by ``tests/test_structure.py``:
its room table (``room_table``, read from the doc itself, so the doc and the check cannot
part) against the imports (``room_violations``); no circle (``circles``); the stage moved
only by the loop (``stage_moves``); no control value compared with a string literal
(``control_literals``); forge words at the edge only (``forge_words``); nothing read from
the environment or connected at import time (``import_time_effects``).
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "bot"

Graph = dict[str, set[str]]


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imported(node: ast.AST, here: str, is_package: bool) -> Iterator[str]:
    if isinstance(node, ast.Import):
        for alias in node.names:
            yield alias.name
    elif isinstance(node, ast.ImportFrom):
        if node.level:
            base = here.split(".")
            if not is_package:
                base = base[:-1]
            base = base[: len(base) - (node.level - 1)]
            stem = ".".join([*base, node.module] if node.module else base)
        else:
            stem = node.module or ""
        yield stem
        for alias in node.names:  # ``from bot.agent import loop`` imports bot.agent.loop
            yield f"{stem}.{alias.name}"


def import_graph(root: Path = ROOT, package: str = PACKAGE) -> Graph:
    """Module -> the modules of ``package`` it imports (directly, anywhere in the file)."""
    files = {module_name(p, root): p for p in sorted((root / package).rglob("*.py"))}
    graph: Graph = {}
    for name, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        is_package = path.name == "__init__.py"
        targets: set[str] = set()
        for node in ast.walk(tree):
            for target in _imported(node, name, is_package):
                while target and target not in files:
                    target = target.rpartition(".")[0]
                if target and target != name and not name.startswith(target + "."):
                    targets.add(target)
        graph[name] = targets
    return graph


def circles(graph: Graph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def visit(node: str) -> None:
        nonlocal counter
        index[node] = low[node] = counter
        counter += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10_000))
    try:
        for node in sorted(graph):
            if node not in index:
                visit(node)
    finally:  # the limit is the process's: put it back (tests run in one process)
        sys.setrecursionlimit(limit)
    return sorted(found)


def deepest_chain(graph: Graph) -> list[str]:
    """The longest chain of imports (modules in a circle are counted once each)."""
    memo: dict[str, list[str]] = {}
    visiting: set[str] = set()

    def longest(node: str) -> list[str]:
        if node in memo:
            return memo[node]
        visiting.add(node)
        best: list[str] = []
        for nxt in sorted(graph.get(node, ())):
            if nxt in visiting:
                continue
            chain = longest(nxt)
            if len(chain) > len(best):
                best = chain
        visiting.discard(node)
        memo[node] = [node, *best]
        return memo[node]

    return max((longest(n) for n in sorted(graph)), key=len, default=[])


PATH_ENTRIES = ("bot.app", "bot.worker.loop")
PATH_ROOMS = ("bot.app", "bot.webhooks", "bot.triggers", "bot.worker", "bot.agent", "bot.comments")
PATH_END = "bot.forges.github_git"  # opens the change request (GitHub's POST /pulls)
# Pure decision modules (or their successors): what they pull in should stay small.
PURE = ("bot.worker.outcomes", "bot.record.state", "bot.agent.state", "bot.comments.status")
LONG_MODULE = 300


def _in(module: str, rooms: tuple[str, ...]) -> bool:
    return any(module == room or module.startswith(room + ".") for room in rooms)


def pulled_in(graph: Graph, module: str) -> set[str]:
    """Every module ``module`` imports, directly or through others."""
    seen: set[str] = set()
    todo = [module]
    while todo:
        for nxt in graph.get(todo.pop(), ()):
            if nxt not in seen and nxt != module:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def path_modules(graph: Graph) -> list[str]:
    """The modules of ``PATH_ROOMS`` reachable from ``PATH_ENTRIES`` through those rooms,
    and the forge adapter at the end of the path."""
    found = {entry for entry in PATH_ENTRIES if entry in graph}
    todo = list(found)
    while todo:
        for nxt in graph.get(todo.pop(), ()):
            if nxt not in found and _in(nxt, PATH_ROOMS) and nxt != "bot.comments.templates":
                found.add(nxt)
                todo.append(nxt)
    return sorted(found | ({PATH_END} if PATH_END in graph else set()))


_DOC_FILE = re.compile(r"`((?:[a-z_]+/)*[a-z_]+\.py)`")


def documented_path(root: Path, package: str = PACKAGE) -> list[str]:
    """The files of ``package`` that docs/architecture.md's path sections name."""
    doc = root / "docs" / "architecture.md"
    if not doc.exists():
        return []
    text = doc.read_text(encoding="utf-8")
    start = text.find("## The path of a webhook")
    end = text.find("\n## ", text.find("## The path of a task"))
    section = text[start : end if end > 0 else len(text)] if start >= 0 else ""
    names = {m.group(1) for m in _DOC_FILE.finditer(section)}
    return sorted(n for n in names if (root / package / n).exists())


def long_modules(root: Path, package: str = PACKAGE) -> list[tuple[str, int]]:
    sizes = [
        (str(p.relative_to(root)), len(p.read_text(encoding="utf-8").splitlines()))
        for p in sorted((root / package).rglob("*.py"))
    ]
    return sorted(((n, size) for n, size in sizes if size > LONG_MODULE), key=lambda x: -x[1])


# --- the stage machine in one file, control values as values --------------------------------

LOOP = "bot/agent/loop.py"  # the one module that moves the stage and ends a run
STAGE_MOVERS = frozenset({"move", "to"})  # a call of these with a Stage moves the stage


def _is_stage(node: ast.AST) -> bool:
    """``Stage.X`` (or a name bound to one is not followed: moves pass the member)."""
    return (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "Stage"
    )


def _by_place(lines: list[str]) -> list[str]:
    """``path:line: what`` lines in file order, then line order."""

    def place(line: str) -> tuple[str, int]:
        path, number, _rest = line.split(":", 2)
        return path, int(number)

    return sorted(lines, key=place)


def stage_moves(root: Path = ROOT, package: str = PACKAGE) -> list[str]:
    """Where the stage is moved, or a run ended, outside ``LOOP``: an assignment to a
    ``.stage`` attribute, a ``move`` / ``to`` call with a ``Stage`` member, or a
    ``raise Exit(...)``. Each as ``path:line: what``."""
    found = []
    for path in sorted((root / package).rglob("*.py")):
        where = str(path.relative_to(root))
        if where == LOOP:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=where)
        for node in ast.walk(tree):
            targets: list[ast.expr] = []
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, ast.AugAssign | ast.AnnAssign):
                targets = [node.target]
            for target in targets:
                if isinstance(target, ast.Attribute) and target.attr == "stage":
                    found.append(f"{where}:{node.lineno}: assigns .stage")
            if isinstance(node, ast.Call):
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if name in STAGE_MOVERS and any(_is_stage(a) for a in node.args):
                    found.append(f"{where}:{node.lineno}: {name}(Stage...)")
                if name == "setattr" and any(
                    isinstance(a, ast.Constant) and a.value == "stage" for a in node.args
                ):
                    found.append(f"{where}:{node.lineno}: setattr stage")
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
                func = node.exc.func
                if isinstance(func, ast.Name) and func.id == "Exit":
                    found.append(f"{where}:{node.lineno}: raise Exit")
    return _by_place(found)


# Names whose values steer the bot (commands, actions, kinds, statuses, decisions): they
# are enums, never compared with a string literal.
CONTROL_NAMES = frozenset(
    {
        "action", "complexity", "decision", "error", "error_type", "kind", "message_kind",
        "mode", "name", "phase", "result", "stage", "state", "status", "subject", "text",
        "trigger", "type", "verdict",
    }
)  # fmt: skip


def _control_name(node: ast.AST) -> str | None:
    """The name an expression reads, when it is one (``x.kind``, ``x["name"]``,
    ``x.get("status")``, ``str(...)`` and ``.lower()`` of those, ``a or "default"``)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        return str(node.slice.value)
    if isinstance(node, ast.BoolOp):
        return _control_name(node.values[0])
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "get" and node.args:
            key = node.args[0]
            return str(key.value) if isinstance(key, ast.Constant) else None
        if isinstance(func, ast.Attribute) and func.attr in ("lower", "strip", "upper"):
            return _control_name(func.value)
        if isinstance(func, ast.Name) and func.id == "str" and node.args:
            return _control_name(node.args[0])
    return None


def _literals(node: ast.AST) -> list[str]:
    """The non-empty string literals ``node`` is or holds (a tuple, list or set of them)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value] if node.value else []
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return [v for e in node.elts for v in _literals(e)]
    return []


def control_literals(root: Path = ROOT, package: str = PACKAGE) -> list[str]:
    """Comparisons (``==``, ``!=``, ``in``, ``not in``, ``match`` cases) of a control value
    with a string literal in ``package``, as ``path:line: name == 'literal'``."""
    found = []
    for path in sorted((root / package).rglob("*.py")):
        where = str(path.relative_to(root))
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=where)
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare):
                sides = [node.left, *node.comparators]
                for op, left, right in zip(node.ops, sides, sides[1:], strict=False):
                    if not isinstance(op, ast.Eq | ast.NotEq | ast.In | ast.NotIn):
                        continue
                    for value, literal in ((left, right), (right, left)):
                        name = _control_name(value)
                        words = _literals(literal)
                        if name in CONTROL_NAMES and words:
                            found.append(f"{where}:{node.lineno}: {name} vs {words[0]!r}")
            if isinstance(node, ast.Match):
                name = _control_name(node.subject)
                for case in node.cases:
                    for pattern in ast.walk(case.pattern):
                        if (
                            name in CONTROL_NAMES
                            and isinstance(pattern, ast.MatchValue)
                            and _literals(pattern.value)
                        ):
                            words = _literals(pattern.value)
                            found.append(f"{where}:{pattern.lineno}: {name} case {words[0]!r}")
    return _by_place(found)


# --- the rules docs/architecture.md states ------------------------------------------------------

DOC = Path("docs") / "architecture.md"
_TICKED = re.compile(r"`([^`]+)`")
EVERYTHING = "everything"


@dataclass(frozen=True, slots=True)
class Row:
    """One row of the room table: its rooms, and what they may import (None: everything)."""

    rooms: tuple[str, ...]
    allowed: tuple[str, ...] | None


def _section(text: str, heading: str) -> str:
    start = text.find(f"\n{heading}\n")
    if start < 0:
        return ""
    end = text.find("\n## ", start + len(heading) + 2)
    return text[start : end if end > 0 else len(text)]


def room_table(root: Path = ROOT) -> list[Row]:
    """The rows of the table under ``## Rooms`` in docs/architecture.md, top to bottom:
    the backticked names of its first column (``app.py``, ``api/``) and of its last (what
    they may import; the word "everything"; or none)."""
    doc = root / DOC
    text = doc.read_text(encoding="utf-8") if doc.exists() else ""
    rows = []
    for line in _section(text, "## Rooms").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if not line.startswith("|") or len(cells) < 3 or not _TICKED.search(cells[0]):
            continue
        allowed = None if cells[-1] == EVERYTHING else tuple(_TICKED.findall(cells[-1]))
        rows.append(Row(tuple(_TICKED.findall(cells[0])), allowed))
    return rows


def _target(name: str, package: str = PACKAGE) -> str:
    """A backticked name as a module name: ``api/`` -> bot.api, ``record/state.py`` ->
    bot.record.state, ``__init__.py`` -> bot."""
    parts = [part for part in name.removesuffix(".py").split("/") if part]
    return ".".join([package, *parts]) if parts != ["__init__"] else package


def _names(module: str, name: str, package: str = PACKAGE) -> bool:
    """Whether the backticked ``name`` (a module, or a folder's package) covers ``module``."""
    target = _target(name, package)
    if name.endswith("/"):
        return module == target or module.startswith(target + ".")
    return module == target


def _row_of(rows: list[Row], module: str) -> int | None:
    found = [i for i, row in enumerate(rows) if any(_names(module, n) for n in row.rooms)]
    return found[0] if len(found) == 1 else None


def room_violations(root: Path = ROOT, graph: Graph | None = None) -> list[str]:
    """Where ``bot/`` parts from docs/architecture.md's room table: a name in the table
    that names nothing, a module in no row (or in two), a row allowed to import a row at
    or above it, and every import the table does not allow (imports within a row are
    allowed)."""
    graph = import_graph(root) if graph is None else graph
    rows = room_table(root)
    if not rows:
        return [f"{DOC}: no room table under '## Rooms'"]
    problems = []
    for index, row in enumerate(rows):
        for name in (*row.rooms, *(row.allowed or ())):
            covered = [m for m in graph if _names(m, name)]
            if not covered:
                problems.append(f"{DOC}: `{name}` names no module of {PACKAGE}/")
            elif name in (row.allowed or ()):
                below = {_row_of(rows, m) for m in covered}
                if any(i is None or i <= index for i in below):
                    problems.append(
                        f"{DOC}: `{', '.join(row.rooms)}` may import `{name}`, not below it"
                    )
    for module in sorted(graph):
        index = _row_of(rows, module)
        if index is None:
            problems.append(f"{module}: in no row of the room table, or in more than one")
            continue
        row = rows[index]
        for target in sorted(graph[module]):
            if row.allowed is None or _row_of(rows, target) == index:
                continue
            if not any(_names(target, name) for name in row.allowed):
                problems.append(f"{module} -> {target}: not in what `{row.rooms[0]}` may import")
    return problems


FORGE_WORDS = re.compile(r"pull_?request|merge_?request|installation", re.IGNORECASE)
FORGE_ROOMS = ("webhooks", "forges")  # the edge, where a forge's own words belong
FORGE_WORD_EXCEPTIONS = frozenset({("bot/events.py", "INSTALLATION")})


def _names_in(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Attribute):
        return [node.attr]
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return [node.name]
    if isinstance(node, ast.arg):
        return [node.arg]
    if isinstance(node, ast.keyword) and node.arg:
        return [node.arg]
    return []


def forge_words(root: Path = ROOT, package: str = PACKAGE) -> list[str]:
    """Names in the code outside the edge rooms that hold a forge's own word for a change
    request or an App's installation, as ``path:line: name``."""
    found = []
    for path in sorted((root / package).rglob("*.py")):
        where = str(path.relative_to(root))
        if path.relative_to(root / package).parts[0] in FORGE_ROOMS:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=where)
        for node in ast.walk(tree):
            for name in _names_in(node):
                if FORGE_WORDS.search(name) and (where, name) not in FORGE_WORD_EXCEPTIONS:
                    found.append(f"{where}:{getattr(node, 'lineno', 0)}: {name}")
    return _by_place(found)


# Reading the environment or opening a connection: never at import time.
IMPORT_TIME_CALLS = frozenset(
    {"getenv", "connect", "create_connection", "Client", "AsyncClient", "urlopen"}
)


def _at_import(body: list[ast.stmt]) -> Iterator[ast.AST]:
    """The nodes a module's import runs: everything but function bodies (class bodies run)."""
    todo: list[ast.AST] = list(body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            # Only the decorators and default values of a function run at import.
            todo.extend(node.args.defaults)
            todo.extend(d for d in node.args.kw_defaults if d is not None)
            if not isinstance(node, ast.Lambda):
                todo.extend(node.decorator_list)
            continue
        yield node
        todo.extend(ast.iter_child_nodes(node))


def import_time_effects(root: Path = ROOT, package: str = PACKAGE) -> list[str]:
    """Where a module reads the environment (``environ``, ``getenv``) or opens a
    connection outside a function, as ``path:line: what``."""
    found = []
    for path in sorted((root / package).rglob("*.py")):
        where = str(path.relative_to(root))
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=where)
        for node in _at_import(tree.body):
            if isinstance(node, ast.Attribute | ast.Name) and _names_in(node) == ["environ"]:
                found.append(f"{where}:{node.lineno}: environ")
            if isinstance(node, ast.Call):
                name = _names_in(node.func)
                if name and name[0] in IMPORT_TIME_CALLS:
                    found.append(f"{where}:{node.lineno}: {name[0]}()")
    return _by_place(found)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edges", action="store_true", help="print every module's imports")
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout to measure")
    args = parser.parse_args()
    root = args.root.resolve()
    graph = import_graph(root)
    agent = sorted((root / PACKAGE / "agent").glob("*.py"))
    loop = root / PACKAGE / "agent" / "loop.py"
    chain = deepest_chain(graph)
    found = circles(graph)
    print(f"modules in {PACKAGE}/: {len(graph)}")
    print(f"files in {PACKAGE}/agent/: {len(agent)}")
    if loop.exists():
        print(f"{PACKAGE}/agent/loop.py: {len(loop.read_text().splitlines())} lines")
    documented = documented_path(root)
    print(f"files docs/architecture.md's path names: {len(documented)}: {', '.join(documented)}")
    walked = path_modules(graph)
    print(f"modules on the path, by imports through {', '.join(PATH_ROOMS)}: {len(walked)}")
    print("  " + ", ".join(walked))
    long = long_modules(root)
    print(f"modules over {LONG_MODULE} lines: {len(long)}")
    for name, size in long:
        print(f"  {size:4d} {name}")
    for pure in PURE:
        if pure in graph:
            print(f"{pure} pulls in {len(pulled_in(graph, pure))} modules")
    print(f"deepest import chain: {len(chain)} modules: {' -> '.join(chain)}")
    moves = stage_moves(root)
    print(f"stage moves and run endings outside {LOOP}: {len(moves)}")
    for line in moves:
        print(f"  {line}")
    literals = control_literals(root)
    print(f"control values compared with a string literal: {len(literals)}")
    for line in literals:
        print(f"  {line}")
    for title, lines in (
        ("forge words outside webhooks/ and forges/", forge_words(root)),
        ("the environment read or a connection opened at import time", import_time_effects(root)),
    ):
        print(f"{title}: {len(lines)}")
        for line in lines:
            print(f"  {line}")
    wrong = room_violations(root, graph)
    print(f"imports and names that part from docs/architecture.md's room table: {len(wrong)}")
    for line in wrong:
        print(f"  {line}")
    print(f"circles: {len(found)}")
    for component in found:
        print(f"  {len(component)} modules: {', '.join(component)}")
    if args.edges:
        for name in sorted(graph):
            print(f"{name}: {', '.join(sorted(graph[name])) or '-'}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
