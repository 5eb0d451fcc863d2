"""The scripted LLM: replay, phase assertions, errors, exhaustion, files, config."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.config import ConfigError, load_settings
from bot.llm.base import LLMBadRequest, LLMError, LLMRequest, LLMUnavailable, Message
from bot.llm.factory import make_llm
from bot.llm.scripted import ScriptedLLM
from bot.llm.tokens import count_messages, count_tokens

PLAN = {"phase": "planning", "comment": "ok"}
EXECUTE = {"phase": "execution", "current_task": "task_1"}


def request(phase: str = "planning") -> LLMRequest:
    return LLMRequest(phase=phase, messages=(Message("user", "Do the thing"),), schema={})


async def test_replays_documents_and_strings_in_order_and_records_requests() -> None:
    llm = ScriptedLLM([PLAN, "```json\n{broken\n```", EXECUTE])
    first = await llm.complete(request("planning"))
    assert json.loads(first.text) == PLAN
    assert first.usage.prompt_tokens == count_messages(request().messages)
    assert first.usage.completion_tokens == count_tokens(first.text) > 0
    assert (first.model, first.mode) == ("scripted", "json_schema")
    assert (await llm.complete(request("reflection"))).text == "```json\n{broken\n```"
    assert json.loads((await llm.complete(request("execution"))).text) == EXECUTE
    assert [r.phase for r in llm.requests] == ["planning", "reflection", "execution"]
    assert len(llm.requests) == len(llm.items)  # the whole script was used


async def test_phase_mismatch_names_both_phases() -> None:
    llm = ScriptedLLM([PLAN])
    with pytest.raises(
        LLMError,
        match=r"response 1 expects phase 'planning' but the request is for phase 'execution'",
    ):
        await llm.complete(request("execution"))


async def test_explicit_response_form_skips_or_sets_the_assertion() -> None:
    llm = ScriptedLLM([{"response": EXECUTE}, {"response": "text", "phase": "completion"}])
    assert json.loads((await llm.complete(request("planning"))).text) == EXECUTE
    with pytest.raises(LLMError, match=r"expects phase 'completion'"):
        await llm.complete(request("planning"))


async def test_exhaustion() -> None:
    llm = ScriptedLLM([PLAN, PLAN])
    await llm.complete(request())
    await llm.complete(request())
    with pytest.raises(LLMError, match=r"script exhausted after 2 responses"):
        await llm.complete(request())
    assert len(llm.requests) == 3


async def test_error_items_raise_their_kind() -> None:
    llm = ScriptedLLM(
        [
            {"error": "unavailable"},
            {"error": "bad_request", "message": "context too long", "phase": "planning"},
        ]
    )
    with pytest.raises(LLMUnavailable, match=r"scripted unavailable error"):
        await llm.complete(request())
    with pytest.raises(LLMBadRequest, match=r"context too long"):
        await llm.complete(request())


async def test_planning_error_document_is_a_document_not_an_error_item() -> None:
    doc = {"phase": "planning", "error": {"type": "unclear_goal", "message": "?"}, "comment": "?"}
    llm = ScriptedLLM([doc])
    assert json.loads((await llm.complete(request())).text) == doc


@pytest.mark.parametrize(
    ("items", "message"),
    [
        ([{"error": "boom"}], "item 1: error must be 'unavailable' or 'bad_request'"),
        ([PLAN, 42], "item 2: expected a mapping or a string, got int"),
        ([{"response": 3}], "item 1: 'response' must be a mapping or a string"),
        ([{"response": "x", "phase": 2}], "item 1: 'phase' must be a string"),
    ],
)
def test_bad_items_are_refused_at_load(items: list[object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        ScriptedLLM(items)


async def test_loads_yaml_file(tmp_path: Path) -> None:
    path = tmp_path / "script.yaml"
    path.write_text(
        "- phase: planning\n  comment: planned\n- |\n  not json at all\n- error: unavailable\n",
        encoding="utf-8",
    )
    llm = ScriptedLLM(path)
    assert json.loads((await llm.complete(request())).text) == {
        "phase": "planning",
        "comment": "planned",
    }
    assert (await llm.complete(request("execution"))).text == "not json at all\n"
    with pytest.raises(LLMUnavailable):
        await llm.complete(request())


async def test_loads_json_file(tmp_path: Path) -> None:
    path = tmp_path / "script.json"
    path.write_text(json.dumps([EXECUTE, "raw"]), encoding="utf-8")
    llm = ScriptedLLM(str(path))
    assert json.loads((await llm.complete(request("execution"))).text) == EXECUTE
    assert (await llm.complete(request())).text == "raw"


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("s.yaml", "phase: planning\n", "must be a list of responses"),
        ("s.yaml", "- [unclosed\n", "not valid"),
        ("s.json", "[1,", "not valid"),
    ],
)
def test_bad_files_are_refused(tmp_path: Path, name: str, content: str, message: str) -> None:
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ConfigError, match=message):
        ScriptedLLM(path)


def test_missing_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"cannot read the LLM script"):
        ScriptedLLM(tmp_path / "nope.yaml")


async def test_health_and_close() -> None:
    llm = ScriptedLLM([])
    report = await llm.health()
    assert report.reachable and report.model_available
    assert report.models == ("scripted",)
    assert report.provider == "scripted"
    await llm.aclose()


async def test_selected_from_config(tmp_path: Path) -> None:
    script = tmp_path / "script.yaml"
    script.write_text("- phase: planning\n  comment: from config\n", encoding="utf-8")
    config = tmp_path / "config.yaml"
    config.write_text(f"llm:\n  provider: scripted\n  script_path: {script}\n", encoding="utf-8")
    settings = load_settings({}, config)
    llm = make_llm(settings.llm)
    assert isinstance(llm, ScriptedLLM)
    assert json.loads((await llm.complete(request())).text)["comment"] == "from config"
