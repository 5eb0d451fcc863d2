"""The house keeps its shape: no import circle in bot/, and each room imports only the
rooms below it (docs/architecture.md). Imports inside functions and behind
``TYPE_CHECKING`` count too: a circle hidden that way is still a circle."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _structure() -> ModuleType:
    spec = importlib.util.spec_from_file_location("structure", ROOT / "scripts" / "structure.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("structure", module)
    spec.loader.exec_module(module)
    return module


structure = _structure()
GRAPH: dict[str, set[str]] = structure.import_graph(ROOT)

# room -> rooms it must never import (by module-name prefix)
FORBIDDEN = {
    "bot.events": ("bot.",),
    "bot.config": ("bot.storage", "bot.forges", "bot.llm", "bot.tools", "bot.agent", "bot.comments",
                   "bot.worker", "bot.webhooks", "bot.runtime", "bot.app", "bot.cli"),
    "bot.storage": ("bot.tools", "bot.agent", "bot.comments", "bot.worker", "bot.forges",
                    "bot.llm", "bot.runtime", "bot.app", "bot.cli"),
    "bot.webhooks": ("bot.storage", "bot.forges", "bot.llm", "bot.tools", "bot.agent",
                     "bot.comments", "bot.worker", "bot.runtime", "bot.app"),
    "bot.forges": ("bot.storage", "bot.llm", "bot.tools", "bot.agent", "bot.comments",
                   "bot.worker", "bot.runtime", "bot.app"),
    "bot.llm": ("bot.storage", "bot.forges", "bot.tools", "bot.agent", "bot.comments",
                "bot.worker", "bot.runtime", "bot.app"),
    "bot.tools": ("bot.agent", "bot.comments", "bot.worker", "bot.runtime", "bot.app",
                  "bot.triggers", "bot.storage"),
    # comments render the agent's progress events (bot.agent.session) and the decisions
    # of bot.triggers; they never read the agent's checkpoint or its state.
    "bot.comments": ("bot.record.state", "bot.record.snapshot", "bot.agent.loop",
                     "bot.worker", "bot.app", "bot.cli", "bot.tools"),
    "bot.agent": ("bot.comments", "bot.worker", "bot.runtime", "bot.app", "bot.cli",
                  "bot.triggers", "bot.webhooks"),
    "bot.runtime": ("bot.worker", "bot.agent", "bot.comments", "bot.app", "bot.cli"),
    "bot.worker": ("bot.app", "bot.cli"),
}  # fmt: skip


def test_the_graph_is_read_from_the_whole_package() -> None:
    assert "bot.worker.loop" in GRAPH and "bot.agent.session" in GRAPH
    assert "bot.config" in GRAPH["bot.worker.loop"] or any(
        target.startswith("bot.config") for target in GRAPH["bot.worker.loop"]
    )


def test_there_is_no_import_circle_in_bot() -> None:
    assert structure.circles(GRAPH) == []


def test_a_circle_is_found_wherever_its_imports_stand(tmp_path: Path) -> None:
    """The guard itself: a circle through a function-level and a TYPE_CHECKING import."""
    package = tmp_path / "bot"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("def f():\n    from bot import b\n")
    (package / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from bot.a import f\n"
    )
    assert structure.circles(structure.import_graph(tmp_path)) == [["bot.a", "bot.b"]]


@pytest.mark.parametrize("room", sorted(FORBIDDEN))
def test_each_room_imports_only_what_lies_below_it(room: str) -> None:
    wrong = sorted(
        f"{module} -> {target}"
        for module, targets in GRAPH.items()
        if module == room or module.startswith(room + ".")
        for target in targets
        if any(target == f or target.startswith(f if f.endswith(".") else f + ".")
               for f in FORBIDDEN[room])
    )  # fmt: skip
    assert wrong == []
