"""Phase documents: the specification's examples validate, bad ones explain themselves,
and ask_phase repairs, re-asks once, and gives up without raising."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from bot.llm.base import LLMBadRequest, LLMUnavailable, Message
from bot.llm.documents import REASK, ask_phase, extract_json, parse_answer
from bot.llm.phase_schemas import PHASES, phase_schema, validate_phase
from bot.llm.scripted import ScriptedLLM

# --- the examples of seed 004 (values translated, structure kept) -------------------------

GOAL = {  # section 2.1
    "main_objective": "Add a --verbose flag to the CLI",
    "success_criteria": ["the flag prints debug logs", "tests pass"],
    "constraints": ["do not change the public API"],
    "context": "Users asked for more output when debugging",
}
DECOMPOSITION = {  # section 2.2
    "reasoning": "Read the CLI first, then add the flag, then test it",
    "subtasks": [
        {
            "id": "task_1",
            "description": "Read the CLI module",
            "dependencies": [],
            "estimated_complexity": "low",
            "required_tools": ["github_get_file_contents"],
        },
        {
            "id": "task_2",
            "description": "Add the flag",
            "dependencies": ["task_1"],
            "estimated_complexity": "medium",
            "required_tools": ["github_create_or_update_file"],
        },
    ],
}
ACTION_PLAN = {  # section 2.3
    "execution_order": ["task_1", "task_2"],
    "actions": [
        {
            "task_id": "task_1",
            "action_type": "tool_call",
            "tool": "github_get_file_contents",
            "purpose": "Know how options are parsed",
            "expected_outcome": "The CLI source",
            "fallback_strategy": "Search the repository for argparse",
        }
    ],
}
PARALLEL_PLAN = {  # section 11.2.1
    "actions": [
        {
            "task_id": "task_1",
            "parallel_group": 1,
            "can_parallelize": True,
            "tool": "github_get_file_contents",
        },
        {
            "task_id": "task_2",
            "parallel_group": 1,
            "can_parallelize": True,
            "tool": "github_get_file_contents",
        },
        {
            "task_id": "task_3",
            "parallel_group": 2,
            "dependencies": ["task_1", "task_2"],
            "tool": "github_create_or_update_file",
        },
    ]
}
PLANNING = {
    "phase": "planning",
    "goal_understanding": GOAL,
    "task_decomposition": DECOMPOSITION,
    "action_plan": ACTION_PLAN,
    "comment": "Planning complete. Starting execution.",
}
UNCLEAR_GOAL = {  # 10.1.1
    "phase": "planning",
    "error": {
        "type": "unclear_goal",
        "message": "The goal of the task is not clear",
        "clarification_needed": ["Which commands need the flag?", "What should it print?"],
    },
    "comment": "Could you clarify the points above?",
}
DECOMPOSITION_FAILED = {  # 10.1.2
    "phase": "planning",
    "error": {
        "type": "decomposition_failed",
        "message": "The task could not be fully decomposed",
        "partial_plan": {
            "feasible_subtasks": ["task_1"],
            "infeasible_subtasks": [{"id": "task_9", "why": "needs a GPU"}],
            "alternative_approaches": ["Run it on CI"],
        },
    },
    "comment": "Part of the task is not feasible; here are alternatives.",
}
EXECUTION = {  # JSON response format: execution
    "phase": "execution",
    "current_task": "task_1",
    "function_call": {"name": "github_get_file_contents", "arguments": {"path": "cli.py"}},
    "comment": "Reading the file",
}
REFLECTION = {  # 8.2
    "phase": "reflection",
    "reflection": {
        "action_evaluated": "github_get_file_contents",
        "status": "partial",
        "evaluation": "The file exists but has no parser",
        "issues_identified": ["the parser lives elsewhere"],
        "plan_revision_needed": True,
    },
    "plan_revision": {"reason": "Wrong file", "changes": ["read main.py instead"]},
    "comment": "Revised the plan",
}
TOOL_FAILURE_REFLECTION = {  # 10.2.1
    "phase": "reflection",
    "reflection": {
        "action_evaluated": "github_get_file_contents",
        "status": "failure",
        "error": "File not found",
        "root_cause_analysis": "The path is probably wrong",
        "plan_revision_needed": True,
    },
    "plan_revision": {
        "reason": "The file path must be checked",
        "changes": [
            {
                "type": "add_action",
                "action": {
                    "action_type": "tool_call",
                    "tool": "github_list_files",
                    "purpose": "Find the right path",
                },
            }
        ],
    },
    "comment": "Checking the file path",
}
AUTO_REFLECTION = {  # 2.5, wrapped as a full document
    "phase": "reflection",
    "reflection": {
        "action_id": "task_1_action_1",
        "status": "success",
        "evaluation": "As expected",
        "alignment_with_plan": "On plan",
        "issues_identified": [],
        "plan_revision_needed": False,
    },
    "comment": "Continuing",
}
COMPLETION = {  # JSON response format: completion
    "phase": "completion",
    "summary": {
        "goal_achieved": True,
        "tasks_completed": 5,
        "tasks_failed": 0,
        "key_outcomes": ["flag added"],
        "lessons_learned": ["read the parser first"],
    },
    "done": True,
    "comment": "All tasks are complete",
}
HUMAN_INTERVENTION = {  # 10.4
    "phase": "completion",
    "status": "requires_human_intervention",
    "summary": {
        "goal_achieved": False,
        "tasks_completed": 3,
        "tasks_failed": 2,
        "revision_attempts": 3,
        "reason": "The revision limit was reached",
        "current_state": "Two files changed, tests failing",
        "recommendations": ["Check the file path by hand", "Check the token's permissions"],
    },
    "comment": "A person needs to take over; see the recommendations above.",
}


def _with(doc: dict[str, Any], **changes: Any) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    out.update(changes)
    return out


@pytest.mark.parametrize(
    ("phase", "doc"),
    [
        ("planning", PLANNING),
        ("planning", _with(PLANNING, action_plan=PARALLEL_PLAN)),
        ("planning", UNCLEAR_GOAL),
        ("planning", DECOMPOSITION_FAILED),
        ("execution", EXECUTION),
        ("reflection", REFLECTION),
        ("reflection", TOOL_FAILURE_REFLECTION),
        ("reflection", AUTO_REFLECTION),
        ("completion", COMPLETION),
        ("completion", HUMAN_INTERVENTION),
        ("planning", _with(PLANNING, extra_key="tolerated")),
    ],
)
def test_seed_examples_validate(phase: str, doc: dict[str, Any]) -> None:
    assert validate_phase(phase, doc) == []


def _drop(doc: dict[str, Any], *path: str | int) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    node: Any = out
    for part in path[:-1]:
        node = node[part]
    del node[path[-1]]
    return out


def _set(doc: dict[str, Any], value: Any, *path: str | int) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    node: Any = out
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return out


@pytest.mark.parametrize(
    ("phase", "doc", "expected"),
    [
        (
            "planning",
            _drop(PLANNING, "goal_understanding"),
            "$: 'goal_understanding' is a required",
        ),
        (
            "planning",
            _drop(PLANNING, "goal_understanding", "success_criteria"),
            "$.goal_understanding: 'success_criteria' is a required property",
        ),
        (
            "planning",
            _set(
                PLANNING, "very high", "task_decomposition", "subtasks", 1, "estimated_complexity"
            ),
            "$.task_decomposition.subtasks[1].estimated_complexity: 'very high' is not one of",
        ),
        (
            "planning",
            _drop(PLANNING, "action_plan", "actions", 0, "tool"),
            "$.action_plan.actions[0]: 'tool' is a required property",
        ),
        (
            "planning",
            _set(PLANNING, [], "action_plan", "actions"),
            "$.action_plan.actions: [] should be non-empty",
        ),
        (
            "planning",
            _set(UNCLEAR_GOAL, "confused", "error", "type"),
            "$.error.type: 'confused' is not one of ['unclear_goal', 'decomposition_failed']",
        ),
        ("planning", _drop(PLANNING, "comment"), "$: 'comment' is a required property"),
        ("planning", EXECUTION, "$.phase: 'planning' was expected"),
        (
            "execution",
            _set(EXECUTION, "path=cli.py", "function_call", "arguments"),
            "$.function_call.arguments: 'path=cli.py' is not of type 'object'",
        ),
        (
            "reflection",
            _drop(REFLECTION, "plan_revision"),
            "$: 'plan_revision' is a required property",
        ),
        (
            "reflection",
            _set(REFLECTION, "yes", "reflection", "plan_revision_needed"),
            "$.reflection.plan_revision_needed: 'yes' is not of type 'boolean'",
        ),
        (
            "reflection",
            _drop(AUTO_REFLECTION, "reflection", "action_id"),
            "$.reflection: {",
        ),
        (
            "completion",
            _set(COMPLETION, "5", "summary", "tasks_completed"),
            "$.summary.tasks_completed: '5' is not of type 'integer'",
        ),
        ("completion", _drop(COMPLETION, "done"), "$: 'done' is a required property"),
        (
            "completion",
            _drop(COMPLETION, "summary", "key_outcomes"),
            "$.summary: 'key_outcomes' is a required property",
        ),
        ("completion", [1, 2], "$: [1, 2] is not of type 'object'"),
    ],
)
def test_invalid_documents_give_readable_errors(phase: str, doc: Any, expected: str) -> None:
    errors = validate_phase(phase, doc)
    assert any(error.startswith(expected) for error in errors), errors


def test_unknown_phase_is_refused() -> None:
    with pytest.raises(ValueError, match=r"unknown phase 'plan'.*planning, execution"):
        validate_phase("plan", {})
    with pytest.raises(ValueError, match=r"unknown phase"):
        phase_schema("plan")


def test_phase_schema_is_a_fresh_copy_named_for_each_phase() -> None:
    for phase in PHASES:
        schema = phase_schema(phase)
        assert schema["properties"]["phase"] == {"const": phase}
        schema["required"].clear()
        assert phase_schema(phase)["required"]


def test_schemas_suit_tool_input_schemas() -> None:
    # Anthropic refuses oneOf / anyOf / allOf at the top level of a tool's input_schema.
    for phase in PHASES:
        assert not {"oneOf", "anyOf", "allOf"} & set(phase_schema(phase)), phase
        assert phase_schema(phase)["type"] == "object"


def test_long_error_lists_are_capped() -> None:
    doc: dict[str, Any] = {"phase": "planning", "comment": "x", "error": {"type": 1, "message": 2}}
    doc["error"]["clarification_needed"] = list(range(40))
    errors = validate_phase("planning", doc)
    assert len(errors) == 21
    assert errors[-1].startswith("... and ")


# --- extraction and repair ----------------------------------------------------------------

DOC_TEXT = json.dumps(EXECUTION)


@pytest.mark.parametrize(
    "text",
    [
        DOC_TEXT,
        f"```json\n{DOC_TEXT}\n```",
        f"Here is the plan:\n```\n{DOC_TEXT}\n```\nLet me know!",
        f"Sure! {DOC_TEXT} I hope this {{helps}}.",
        f"<think>maybe {{a}} or {{b}}</think>\n{DOC_TEXT}",
        DOC_TEXT.replace('"', "'"),
        DOC_TEXT[:-1] + ",}",
        DOC_TEXT.replace("}}", "},}"),
    ],
    ids=["plain", "fenced", "prose-fenced", "prose", "think", "quotes", "comma", "inner-comma"],
)
def test_extract_json_tolerates_fences_prose_and_broken_json(text: str) -> None:
    assert extract_json(text) == EXECUTION


@pytest.mark.parametrize("text", ["", "I cannot help with that.", "[1, 2, 3]", "{{{"])
def test_extract_json_finds_nothing_in_garbage(text: str) -> None:
    assert extract_json(text) is None


def test_parse_answer_skips_braces_in_prose_before_the_document() -> None:
    text = f"The {{tool}} field names a tool; {{x}} too. Answer:\n{DOC_TEXT}\nDone."
    assert parse_answer("execution", text) == (EXECUTION, [])


def test_parse_answer_reports_the_errors_of_the_most_likely_object() -> None:
    doc, errors = parse_answer("execution", json.dumps(_drop(EXECUTION, "current_task")))
    assert doc is None
    assert errors == ["$: 'current_task' is a required property"]


# --- ask_phase ------------------------------------------------------------------------------

MESSAGES = (Message("system", "You plan."), Message("user", "Add a --verbose flag"))


async def test_ask_phase_returns_a_valid_document_in_one_call() -> None:
    llm = ScriptedLLM([PLANNING])
    answer = await ask_phase(llm, "planning", MESSAGES, max_tokens=500, temperature=0.1)
    assert answer.data == PLANNING
    assert (answer.error, answer.calls) == (None, 1)
    assert answer.usage.prompt_tokens > 0 and answer.usage.completion_tokens > 0
    request = llm.requests[0]
    assert request.phase == "planning"
    assert request.schema == phase_schema("planning")
    assert (request.max_tokens, request.temperature) == (500, 0.1)
    assert request.messages == MESSAGES


async def test_ask_phase_repairs_without_re_asking() -> None:
    broken = "```json\n" + json.dumps(EXECUTION).replace('"', "'")[:-1] + ",}\n```"
    llm = ScriptedLLM([broken])
    answer = await ask_phase(llm, "execution", MESSAGES, max_tokens=100)
    assert answer.data == EXECUTION
    assert answer.calls == 1
    assert answer.raw == broken


async def test_ask_phase_gives_up_after_garbage_twice() -> None:
    llm = ScriptedLLM(["I am not sure what you mean.", "Still prose."])
    answer = await ask_phase(llm, "planning", MESSAGES, max_tokens=100)
    assert answer.data is None
    assert answer.calls == 2
    assert answer.error is not None and "no valid planning document" in answer.error
    assert "no JSON object" in answer.error
    assert answer.raw == "Still prose."
    first, second = llm.requests
    assert answer.usage.prompt_tokens > 0
    assert len(second.messages) == len(first.messages) + 2


async def test_ask_phase_re_asks_with_the_validation_errors() -> None:
    invalid = _drop(PLANNING, "goal_understanding")
    llm = ScriptedLLM([invalid, PLANNING])
    answer = await ask_phase(llm, "planning", MESSAGES, max_tokens=100)
    assert answer.data == PLANNING
    assert answer.calls == 2
    second = llm.requests[1]
    assert second.messages[: len(MESSAGES)] == MESSAGES
    bad_answer, reask = second.messages[len(MESSAGES) :]
    assert bad_answer == Message("assistant", json.dumps(invalid, ensure_ascii=False))
    assert reask.role == "user"
    assert "$: 'goal_understanding' is a required property" in reask.content
    assert reask.content.startswith(REASK.split("{phase}")[0])
    single = await ask_phase(ScriptedLLM([PLANNING]), "planning", MESSAGES, max_tokens=100)
    assert answer.usage.prompt_tokens > single.usage.prompt_tokens
    assert answer.usage.completion_tokens > single.usage.completion_tokens


async def test_ask_phase_re_asks_after_garbage_then_accepts_a_valid_answer() -> None:
    llm = ScriptedLLM(["no idea", EXECUTION])
    answer = await ask_phase(llm, "execution", MESSAGES, max_tokens=100)
    assert (answer.data, answer.calls) == (EXECUTION, 2)
    assert "contains no JSON object" in llm.requests[1].messages[-1].content


async def test_ask_phase_never_sends_an_empty_assistant_turn() -> None:
    llm = ScriptedLLM(["", "  "])
    answer = await ask_phase(llm, "reflection", MESSAGES, max_tokens=100)
    assert (answer.data, answer.calls, answer.raw) == (None, 2, "  ")
    assert llm.requests[1].messages[-2] == Message("assistant", "(empty answer)")


async def test_ask_phase_still_invalid_returns_the_errors() -> None:
    wrong = _set(COMPLETION, "5", "summary", "tasks_completed")
    llm = ScriptedLLM([wrong, wrong])
    answer = await ask_phase(llm, "completion", MESSAGES, max_tokens=100)
    assert answer.data is None
    assert answer.error is not None and "'5' is not of type 'integer'" in answer.error


@pytest.mark.parametrize(
    ("kind", "exc"), [("unavailable", LLMUnavailable), ("bad_request", LLMBadRequest)]
)
async def test_ask_phase_lets_endpoint_failures_through(kind: str, exc: type[Exception]) -> None:
    llm = ScriptedLLM(["garbage", {"error": kind}])
    with pytest.raises(exc):
        await ask_phase(llm, "planning", MESSAGES, max_tokens=100)
    assert len(llm.requests) == 2
