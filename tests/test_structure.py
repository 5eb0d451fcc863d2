"""The house keeps its shape: no import circle in bot/, and each room imports only the
rooms below it (docs/architecture.md). Imports inside functions and behind
``TYPE_CHECKING`` count too: a circle hidden that way is still a circle.

Two rules of the agent's house are checked on the code itself: only ``bot/agent/loop.py``
moves a task's stage and ends a run, and the bot's own control values (commands,
actions, kinds, statuses, decisions) are enums, never compared with a string literal."""

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
    # the run's vocabulary: the worker's decisions, the comments and the agent stand on it
    "bot.run_events": ("bot.config", "bot.storage", "bot.forges", "bot.llm", "bot.tools",
                       "bot.record", "bot.agent", "bot.comments", "bot.worker", "bot.webhooks",
                       "bot.runtime", "bot.triggers", "bot.app", "bot.cli"),
    "bot.config": ("bot.storage", "bot.forges", "bot.llm", "bot.tools", "bot.agent", "bot.comments",
                   "bot.worker", "bot.webhooks", "bot.runtime", "bot.app", "bot.cli"),
    "bot.storage": ("bot.tools", "bot.agent", "bot.comments", "bot.worker", "bot.forges",
                    "bot.llm", "bot.record", "bot.runtime", "bot.app", "bot.cli"),
    "bot.webhooks": ("bot.storage", "bot.forges", "bot.llm", "bot.tools", "bot.agent",
                     "bot.comments", "bot.worker", "bot.runtime", "bot.app"),
    "bot.forges": ("bot.storage", "bot.llm", "bot.tools", "bot.agent", "bot.comments",
                   "bot.worker", "bot.runtime", "bot.app"),
    "bot.llm": ("bot.storage", "bot.forges", "bot.tools", "bot.record", "bot.agent",
                "bot.comments", "bot.worker", "bot.runtime", "bot.app"),
    "bot.tools": ("bot.record", "bot.agent", "bot.comments", "bot.worker", "bot.runtime",
                  "bot.app", "bot.triggers", "bot.storage"),
    # the run's record: data and files, no model call, no forge call
    "bot.record": ("bot.forges.github", "bot.forges.gitlab", "bot.agent", "bot.comments",
                   "bot.worker", "bot.runtime", "bot.triggers", "bot.webhooks", "bot.app",
                   "bot.cli"),
    # comments render the run's progress events (bot.run_events) and the decisions of
    # bot.triggers: they stand beside the agent, and never read its record.
    "bot.comments": ("bot.agent", "bot.record", "bot.worker", "bot.app", "bot.cli",
                     "bot.tools"),
    "bot.agent": ("bot.comments", "bot.worker", "bot.runtime", "bot.app", "bot.cli",
                  "bot.triggers", "bot.webhooks"),
    "bot.runtime": ("bot.worker", "bot.agent", "bot.comments", "bot.app", "bot.cli"),
    "bot.worker": ("bot.app", "bot.cli"),
    # the after-PR decisions are pure: the vocabulary, the settings and redaction only
    "bot.followup": ("bot.storage", "bot.forges", "bot.llm", "bot.tools", "bot.agent",
                     "bot.comments", "bot.worker", "bot.webhooks", "bot.runtime", "bot.app",
                     "bot.cli", "bot.triggers"),
    # traces: one low room every other calls; it knows none of them (the vocabulary's
    # types only, for the run's attributes)
    "bot.tracing": ("bot.config", "bot.storage", "bot.forges", "bot.llm", "bot.tools",
                    "bot.record", "bot.agent", "bot.comments", "bot.worker", "bot.webhooks",
                    "bot.runtime", "bot.triggers", "bot.app", "bot.cli", "bot.followup",
                    "bot.metrics", "bot.offload", "bot.run_events"),
    "bot.change_state": ("bot.storage", "bot.forges", "bot.llm", "bot.tools", "bot.agent",
                         "bot.comments", "bot.worker", "bot.webhooks", "bot.runtime", "bot.app",
                         "bot.cli", "bot.triggers", "bot.config", "bot.followup"),
}  # fmt: skip


def test_the_graph_is_read_from_the_whole_package() -> None:
    assert "bot.worker.loop" in GRAPH and "bot.agent.loop" in GRAPH
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


# --- the stage machine in one file ---------------------------------------------------------------


def test_only_the_loop_moves_the_stage_and_ends_a_run() -> None:
    assert structure.stage_moves(ROOT) == []


def test_a_helper_that_moves_the_stage_or_ends_the_run_is_found(tmp_path: Path) -> None:
    """The guard itself, on planted helpers: each way of moving the stage is caught."""
    agent = tmp_path / "bot" / "agent"
    agent.mkdir(parents=True)
    (agent / "loop.py").write_text("def move(run, t):\n    run.state.stage = t\n")
    (agent / "review.py").write_text(
        "async def after(session, state):\n"
        "    state.stage = Stage.EXECUTE\n"
        "    session.to(Stage.DELIVER)\n"
        "    raise Exit(outcome)\n"
        "    return Continue(Stage.EXECUTE)\n"  # a result naming a stage moves nothing
    )
    assert structure.stage_moves(tmp_path) == [
        "bot/agent/review.py:2: assigns .stage",
        "bot/agent/review.py:3: to(Stage...)",
        "bot/agent/review.py:4: raise Exit",
    ]


# --- values instead of strings -------------------------------------------------------------------

# The rooms past the edge: what they compare is the bot's own control. The parsers at the
# edge (webhooks/, forges/, the llm providers, config's and storage's drivers) compare the
# outside world's own words where they decode them into these types.
CONTROL_ROOMS = ("bot/agent/", "bot/record/", "bot/worker/", "bot/comments/", "bot/triggers.py",
                 "bot/run_events.py", "bot/events.py", "bot/runtime.py")  # fmt: skip


def test_no_control_value_is_compared_with_a_string_literal() -> None:
    found = [line for line in structure.control_literals(ROOT) if line.startswith(CONTROL_ROOMS)]
    assert found == []


def test_a_control_value_compared_with_a_string_literal_is_found(tmp_path: Path) -> None:
    """The guard itself, on the shapes the code had before its enums: a command name, a
    message kind, a dispatcher action, a history entry kind, a reflection status, a
    complexity, a planning failure kind, a waiting subject, in a ``match`` too."""
    package = tmp_path / "bot"
    package.mkdir()
    (package / "planted.py").write_text(
        "def f(name, message, action, entry, evaluation, state, failed, data, c, subject):\n"
        "    a = name == 'stop'\n"
        "    b = message.kind == 'feedback'\n"
        "    c = action.message_kind != 'command'\n"
        "    d = entry['type'] == 'plan'\n"
        "    e = evaluation.get('status') != 'success'\n"
        "    f = state.complexity == 'simple'\n"
        "    g = failed.kind in ('unclear_goal', 'decomposition_failed')\n"
        "    h = str(data.get('subject') or '') in ('plan', 'revision')\n"
        "    i = c['name'] == 'approve' and name == Command.STOP and name == ''\n"
        "    match action.text:\n"
        "        case 'denied':\n"
        "            pass\n"
    )
    assert structure.control_literals(tmp_path) == [
        "bot/planted.py:2: name vs 'stop'",
        "bot/planted.py:3: kind vs 'feedback'",
        "bot/planted.py:4: message_kind vs 'command'",
        "bot/planted.py:5: type vs 'plan'",
        "bot/planted.py:6: status vs 'success'",
        "bot/planted.py:7: complexity vs 'simple'",
        "bot/planted.py:8: kind vs 'unclear_goal'",
        "bot/planted.py:9: subject vs 'plan'",
        "bot/planted.py:10: name vs 'approve'",
        "bot/planted.py:12: text case 'denied'",
    ]


# --- the size of the house ---------------------------------------------------------------------


def test_the_agent_is_at_most_twelve_files_of_at_most_400_lines() -> None:
    files = sorted((ROOT / "bot" / "agent").glob("*.py"))
    sizes = {f.name: len(f.read_text(encoding="utf-8").splitlines()) for f in files}
    assert len(files) <= 12, sorted(sizes)
    assert {name: size for name, size in sizes.items() if size > 400} == {}


def test_the_path_of_a_task_names_at_most_20_files() -> None:
    named = structure.documented_path(ROOT)
    assert "agent/loop.py" in named and "forges/github.py" in named
    assert len(named) <= 20, named


@pytest.mark.parametrize("module", ["bot.worker.outcomes", "bot.record.state"])
def test_a_pure_module_pulls_in_at_most_ten_modules(module: str) -> None:
    assert len(structure.pulled_in(GRAPH, module)) <= 10, sorted(structure.pulled_in(GRAPH, module))
