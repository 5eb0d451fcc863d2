import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from bot.doctor import failed, format_checks, run_checks
from bot.llm.openai import OpenAICompatibleLLM
from bot.sandbox import sandbox as sandbox_module
from tests.harness import Harness
from tests.llm.model_server import Reply, Sent, model_server
from tests.llm.payloads import chat_completion, model_list_owned, openai_error


async def test_doctor_flags_a_bot_name_that_is_not_who_the_credentials_are(
    tmp_path: Path,
) -> None:
    async with Harness(tmp_path) as bot:
        bot.gitlab.bot_login = "ci-helper"
        checks = await run_checks(bot.settings, bot.runtime)
    text = format_checks(checks)
    assert "[ok  ] github: authenticated as coding-agent[bot]" in text
    assert "[FAIL] gitlab: authenticated as ci-helper, but bot.gitlab_username" in text
    assert "set bot.gitlab_username: 'ci-helper'" in text
    assert "[ok  ] llm: scripted" in text
    assert failed(checks)


async def test_doctor_passes_when_everything_is_in_order(tmp_path: Path) -> None:
    async with Harness(tmp_path) as bot:
        checks = await run_checks(bot.settings, bot.runtime)
    assert not failed(checks), format_checks(checks)
    if shutil.which("bwrap"):
        assert "[ok  ] workspace bounds: held by the kernel" in format_checks(checks)


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap missing")
async def test_doctor_warns_when_the_workspace_bounds_are_only_measured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sandbox_module._overlay_errors, shutil.which("bwrap"), "no overlay")
    async with Harness(tmp_path) as bot:
        checks = await run_checks(bot.settings, bot.runtime)
    text = format_checks(checks)
    assert "[warn] workspace bounds: checked once a second only" in text
    assert "no overlay" in text and "Linux 5.11+" in text
    assert not failed(checks)


def _vllm(*, chat: Reply | None = None) -> Callable[[Sent], Reply]:
    """A vLLM server (owned_by "vllm") that refuses response_format json_schema and
    answers guided_json, or answers every chat request with ``chat``."""

    def answer(sent: Sent) -> Reply:
        if sent.method == "GET":
            return Reply(200, model_list_owned("vllm", "qwen2.5-coder"))
        if chat is not None:
            return chat
        if sent.body.get("response_format", {}).get("type") == "json_schema":
            return Reply(400, openai_error("json_schema is not supported", param="response_format"))
        return Reply(200, chat_completion('{"ok": true}'))

    return answer


async def test_doctor_names_the_server_the_dialect_and_the_latency(tmp_path: Path) -> None:
    with model_server(_vllm()) as server:
        async with Harness(tmp_path) as bot:
            llm = OpenAICompatibleLLM(base_url=server.url + "/v1", model="qwen2.5-coder")
            bot.runtime.llm = llm
            try:
                checks = await run_checks(bot.settings, bot.runtime)
            finally:
                await llm.aclose()
    [line] = [line for line in format_checks(checks).splitlines() if " llm: " in line]
    assert line.startswith(
        f"[ok  ] llm: vLLM at {server.url}/v1, model qwen2.5-coder, dialect guided_json, "
        "a structured answer in "
    )
    # what each dialect got while probing
    assert line.endswith(" ms (probed: json_schema: refused (HTTP 400); guided_json: ok)")
    # the structured request was made in the dialect the bot will use
    assert server.requests[-1].body["guided_json"]["required"] == ["ok"]


async def test_doctor_fails_when_the_model_lists_but_does_not_answer(tmp_path: Path) -> None:
    busy = Reply(503, {"error": {"message": "CUDA out of memory"}})
    with model_server(_vllm(chat=busy)) as server:
        async with Harness(tmp_path) as bot:
            llm = OpenAICompatibleLLM(
                base_url=server.url + "/v1", model="qwen2.5-coder", probe=False
            )
            bot.runtime.llm = llm
            try:
                checks = await run_checks(bot.settings, bot.runtime)
            finally:
                await llm.aclose()
    text = format_checks(checks)
    assert f"[FAIL] llm: vLLM at {server.url}/v1 lists qwen2.5-coder but a structured " in text
    assert "CUDA out of memory" in text
    assert "pin llm.structured_output to json_object or none" in text
    assert failed(checks)
