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


# --- the rooms: docs/architecture.md's table is the rule ------------------------------------------

ROWS = structure.room_table(ROOT)


def test_the_room_table_is_read_from_the_architecture_doc() -> None:
    rooms = {name for row in ROWS for name in row.rooms}
    assert {"agent/", "worker/", "app.py", "events.py", "cli.py"} <= rooms
    assert ROWS[0].allowed is None  # the command wires everything
    assert ROWS[-1].allowed == ()  # the lowest modules import nothing of the bot


def test_every_module_keeps_to_the_room_table() -> None:
    """Each module imports only its own row and what its row may import; every name of
    the table names a module; what a row may import lies below it; no module is left out."""
    assert structure.room_violations(ROOT, GRAPH) == []


def test_a_room_that_parts_from_the_table_is_found(tmp_path: Path) -> None:
    """The guard itself, on a planted house: an import the table does not allow (at the
    top, in a function, behind TYPE_CHECKING), a row allowed to import upwards, a name
    that names nothing, and a module in no row."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "architecture.md").write_text(
        "# A\n\n## Rooms\n\n| Room | Job | May import |\n| --- | --- | --- |\n"
        "| `top.py` | wires | everything |\n"
        "| `work/` | works | `low.py`, `ghost/` |\n"
        "| `mid.py` | decides | `low.py`, `top.py` |\n"
        "| `low.py`, `__init__.py` | words | nothing |\n\n## Next\n"
    )
    package = tmp_path / "bot"
    (package / "work").mkdir(parents=True)
    for name in ("__init__.py", "top.py", "low.py", "stray.py", "work/__init__.py"):
        (package / name).write_text("")
    (package / "mid.py").write_text("from bot import low\n")
    (package / "work" / "run.py").write_text(
        "from typing import TYPE_CHECKING\nfrom bot import low\n"
        "if TYPE_CHECKING:\n    from bot import mid\n"
        "def f():\n    import bot.top\n"
    )
    assert structure.room_violations(tmp_path) == [
        "docs/architecture.md: `ghost/` names no module of bot/",
        "docs/architecture.md: `mid.py` may import `top.py`, not below it",
        "bot.stray: in no row of the room table, or in more than one",
        "bot.work.run -> bot.mid: not in what `work/` may import",
        "bot.work.run -> bot.top: not in what `work/` may import",
    ]


# --- the other rules docs/architecture.md states ------------------------------------------------

_DOC_TEXT = (ROOT / structure.DOC).read_text(encoding="utf-8")
RULES = _DOC_TEXT[_DOC_TEXT.index("### Rules") : _DOC_TEXT.index("### The table")]


def _rule(head: str) -> str:
    """The bullet of docs/architecture.md's rules that starts with ``head`` (bold)."""
    bullets = ["- " + b for b in RULES.split("\n- ")[1:]]
    [bullet] = [b for b in bullets if b.startswith(f"- **{head}")]
    return " ".join(bullet.split())


def _ticked(text: str) -> list[str]:
    return structure._TICKED.findall(text)


CHECKED_RULES = {
    "Imports run down the table.",
    "No import circle",
    "One module moves the stage.",
    "Control values are values.",
    "Forge words stay at the edge.",
    "Nothing happens at import time.",
}


def test_every_rule_the_doc_states_is_one_this_file_checks() -> None:
    """A rule added to docs/architecture.md without a check here (or a check whose rule
    left the doc) fails: the doc states what is enforced, no more, no less."""
    stated = {b.split("**")[1] for b in RULES.split("\n- ")[1:]}
    assert stated == CHECKED_RULES
    assert _ticked(_rule("One module moves the stage."))[0] == structure.LOOP.removeprefix("bot/")
    assert tuple(f"bot/{n}" for n in _ticked(_rule("Control values are values."))) == CONTROL_ROOMS
    forge = _ticked(_rule("Forge words stay at the edge."))
    assert forge[:2] == [f"{room}/" for room in structure.FORGE_ROOMS]
    assert {w.replace("_", "") for w in forge[2:5]} == {
        "pullrequest",
        "mergerequest",
        "installation",
    }
    [(where, name)] = structure.FORGE_WORD_EXCEPTIONS
    assert forge[5:] == [where.removeprefix("bot/"), f"EventKind.{name}"]
    calls = _ticked(_rule("Nothing happens at import time."))
    assert set(calls) == structure.IMPORT_TIME_CALLS | {"environ"}


def test_forge_words_stay_at_the_edge() -> None:
    assert structure.forge_words(ROOT) == []


def test_a_forge_word_outside_the_edge_is_found(tmp_path: Path) -> None:
    package = tmp_path / "bot"
    (package / "forges").mkdir(parents=True)
    (package / "forges" / "github.py").write_text("def open_pull_request(): pass\n")
    (package / "agent.py").write_text(
        "class MergeRequestView: pass\ndef f(installation_id, **kw):\n"
        "    return kw['pull_request'], x.pull_request\n"
    )
    assert structure.forge_words(tmp_path) == [
        "bot/agent.py:1: MergeRequestView",
        "bot/agent.py:2: installation_id",
        "bot/agent.py:3: pull_request",
    ]


def test_nothing_reads_the_environment_or_connects_at_import_time() -> None:
    assert structure.import_time_effects(ROOT) == []


def test_an_import_time_read_or_connection_is_found(tmp_path: Path) -> None:
    package = tmp_path / "bot"
    package.mkdir()
    (package / "planted.py").write_text(
        "import os, sqlite3, httpx\n"
        "TOKEN = os.environ.get('X')\n"
        "class Store:\n    db = sqlite3.connect('x')\n"
        "def later(client=httpx.AsyncClient()):\n    return os.getenv('Y')\n"
    )
    assert structure.import_time_effects(tmp_path) == [
        "bot/planted.py:2: environ",
        "bot/planted.py:4: connect()",
        "bot/planted.py:5: AsyncClient()",
    ]


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
CONTROL_ROOMS = ("bot/agent/", "bot/record/", "bot/worker/", "bot/comments/", "bot/triggers/",
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
    assert "agent/loop.py" in named and "forges/github_git.py" in named  # opens the PR
    assert len(named) <= 20, named


@pytest.mark.parametrize("module", ["bot.worker.outcomes", "bot.record.state"])
def test_a_pure_module_pulls_in_at_most_ten_modules(module: str) -> None:
    assert len(structure.pulled_in(GRAPH, module)) <= 10, sorted(structure.pulled_in(GRAPH, module))
