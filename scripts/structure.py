#!/usr/bin/env python3
"""The import structure of ``bot/``: circles, the deepest import chain, the agent's size.

Every import counts, wherever it stands: at the top, inside a function, or behind
``if TYPE_CHECKING:`` (a circle hidden that way is still a circle of the design).

    python scripts/structure.py          # the figures
    python scripts/structure.py --edges  # and every module's imports

``tests/test_structure.py`` uses ``import_graph`` and ``circles`` to keep ``bot/``
free of circles and its rooms importing one way (docs/architecture.md).
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterator
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edges", action="store_true", help="print every module's imports")
    args = parser.parse_args()
    graph = import_graph()
    agent = sorted((ROOT / PACKAGE / "agent").glob("*.py"))
    loop = ROOT / PACKAGE / "agent" / "loop.py"
    chain = deepest_chain(graph)
    found = circles(graph)
    print(f"modules in {PACKAGE}/: {len(graph)}")
    print(f"files in {PACKAGE}/agent/: {len(agent)}")
    if loop.exists():
        print(f"{PACKAGE}/agent/loop.py: {len(loop.read_text().splitlines())} lines")
    print(f"deepest import chain: {len(chain)} modules: {' -> '.join(chain)}")
    print(f"circles: {len(found)}")
    for component in found:
        print(f"  {len(component)} modules: {', '.join(component)}")
    if args.edges:
        for name in sorted(graph):
            print(f"{name}: {', '.join(sorted(graph[name])) or '-'}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
