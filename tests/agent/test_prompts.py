"""Every phase template renders with its variables; a missing variable is an error."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bot.agent.briefing import RepoFacts
from bot.llm.prompts import PHASES, TEMPLATES, PromptError, PromptLibrary, default_prompt_dir
from bot.llm.tokens import count_messages
from bot.record.plan import Goal, PlannedAction

GOAL = Goal("Add installation steps", ("README has them",), (), "")
ACTION = PlannedAction("task_2", "task_2", "write", purpose="Write it", expected_outcome="done")
TOOLS = [{"name": "write", "purpose": "Write a file.", "schema": '{"type":"object"}'}]

VARIABLES: dict[str, dict[str, Any]] = {
    "planning": {
        "strategy": "chain_of_thought",
        "level": "moderate",
        "max_subtasks": 10,
        "replan_reason": "",
        "answers": [],
        "issue_block": "<untrusted>Fix</untrusted>",
        "comments_block": "",
        "repo": RepoFacts("acme/w", "main", ("README.md",), "", ()),
        "tools": "- write: Write a file.",
    },
    "execution": {
        "goal": GOAL,
        "action": ACTION,
        "tools": TOOLS,
        "known_arguments": "",
        "results": "(no actions yet)",
        "feedback": "",
    },
    "open_loop": {
        "repo": RepoFacts("acme/w", "main", ("README.md",), "", ()),
        "repo_instructions": "",
        "issue_block": "<untrusted>Fix</untrusted>",
        "comments_block": "",
        "previous_block": "",
        "tools": TOOLS,
        "results": "(no actions yet)",
        "notes": [],
        "steps": 0,
        "max_steps": 300,
    },
    "reflection": {
        "depth": "moderate",
        "trigger": "error",
        "goal": GOAL,
        "key": "task_1",
        "tool": "read",
        "purpose": "Read",
        "expected": "text",
        "status": "failed",
        "output": "not found",
        "remaining": "",
    },
    "revision": {
        "goal": GOAL,
        "number": 1,
        "limit": 3,
        "reason": "wrong path",
        "issues": ["missing"],
        "feedback": "",
        "done": "- [task_1] read -> failed",
        "remaining": "(nothing left)",
        "tools": "- write: Write a file.",
        "rejected": [],
    },
    "human_feedback": {
        "goal": GOAL,
        "feedback": "<untrusted>also usage</untrusted>",
        "done": "",
        "remaining": "",
        "tools": "- write: Write a file.",
    },
    "completion": {
        "status": "completed",
        "goal": GOAL,
        "results": "",
        "revisions": 0,
        "tasks_completed": 2,
        "tasks_failed": 0,
        "revision_attempts": 0,
        "reason": "",
        "delivery": {"branch": "agent/1-x"},
    },
    "summarise": {"goal": GOAL, "tool": "read", "output": "long text"},
    "history_summary": {"goal": GOAL, "previous": "read README.md", "calls": "- [step_2] ..."},
}


@pytest.fixture(scope="module")
def library() -> PromptLibrary:
    return PromptLibrary()


def test_every_template_exists_and_the_variables_cover_every_phase() -> None:
    names = {
        p.name.removesuffix(".j2") for p in default_prompt_dir().iterdir() if p.name.endswith(".j2")
    }
    assert names == set(TEMPLATES)
    assert set(VARIABLES) == set(PHASES)


@pytest.mark.parametrize("phase", PHASES)
def test_each_phase_renders_a_compact_prompt(library: PromptLibrary, phase: str) -> None:
    messages = library.messages(phase, **VARIABLES[phase])

    assert [m.role for m in messages] == ["system", "user"]
    assert messages[0].content.endswith(f"Phase: {phase}.")
    assert "{{" not in messages[1].content and "{%" not in messages[1].content
    assert count_messages(messages) < 1000  # the fixed part leaves room for the task


@pytest.mark.parametrize("phase", PHASES)
def test_a_missing_variable_is_an_error(library: PromptLibrary, phase: str) -> None:
    variables = dict(VARIABLES[phase])
    missing = sorted(variables)[0]
    del variables[missing]

    with pytest.raises(PromptError, match=rf"{phase}\.j2"):
        library.messages(phase, **variables)


def test_variants_change_the_prompt(library: PromptLibrary) -> None:
    def planning(**changes: Any) -> str:
        return library.render("planning", **{**VARIABLES["planning"], **changes})

    assert "step by step" in planning(strategy="chain_of_thought")
    assert "top-down" in planning(strategy="hierarchical")
    assert "flat list" in planning(strategy="simple")
    assert "as few subtasks" in planning(level="minimal")
    assert "fine-grained" in planning(level="detailed")
    assert "was rejected: unknown tool" in planning(replan_reason="unknown tool")
    reflection = VARIABLES["reflection"]
    assert "root cause" in library.render("reflection", **{**reflection, "depth": "deep"})
    assert "one-sentence" in library.render("reflection", **{**reflection, "depth": "shallow"})
    completion = {**VARIABLES["completion"], "status": "requires_human_intervention"}
    assert "recommendations" in library.render("completion", **completion)
    summary_system = library.messages("summarise", **VARIABLES["summarise"])[0].content
    assert "plain text" in summary_system and "JSON" not in summary_system


def test_unknown_phases_templates_and_directories_are_errors(tmp_path: Path) -> None:
    library = PromptLibrary()
    with pytest.raises(PromptError, match="unknown phase"):
        library.messages("dance")
    with pytest.raises(PromptError, match=r"no template nope\.j2"):
        library.render("nope")
    with pytest.raises(PromptError, match="does not exist"):
        PromptLibrary(tmp_path / "missing")
    (tmp_path / "broken.j2").write_text("{% if %}")
    with pytest.raises(PromptError, match=r"broken\.j2"):
        PromptLibrary(tmp_path).render("broken")
