"""The OpenAI-compatible provider against transport-level fakes and a closed loopback port."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest

from bot.llm.base import LLMBadRequest, LLMError, LLMRequest, LLMUnavailable, Message
from bot.llm.dialect import Dialect
from bot.llm.openai import OpenAICompatibleLLM
from bot.llm.openai_wire import Quirks, adjust
from bot.llm.tokens import count_messages, count_tokens
from tests.llm.payloads import (
    Replay,
    chat_completion,
    model_list,
    ok,
    openai_error,
    status,
)

Sleep = Callable[[float], Awaitable[None]]
SCHEMA = {"type": "object", "required": ["phase"], "properties": {"phase": {"const": "planning"}}}
DOC = '{"phase": "planning"}'
REQUEST = LLMRequest(
    phase="planning",
    messages=(Message("system", "You plan."), Message("user", "Fix the bug")),
    schema=SCHEMA,
    max_tokens=300,
    temperature=0.1,
)
FORMAT_REJECTED = openai_error(
    "Invalid parameter: 'response_format' of type 'json_schema' is not supported with this model.",
    param="response_format",
)


def make(replay: Replay, sleep: Sleep, **kwargs: Any) -> OpenAICompatibleLLM:
    return OpenAICompatibleLLM(
        base_url="https://api.openai.com/v1/",
        model="gpt-4.1",
        api_key="sk-test",
        http=replay.client(),
        sleep=sleep,
        probe=False,  # these tests are about requests; tests/llm/test_dialect.py probes
        **kwargs,
    )


async def test_success_sends_the_json_schema_and_reads_usage(sleep: Sleep) -> None:
    replay = Replay(ok(chat_completion(DOC)))
    llm = make(replay, sleep)
    response = await llm.complete(REQUEST)
    assert response.text == DOC
    assert (response.usage.prompt_tokens, response.usage.completion_tokens) == (19, 10)
    assert (response.model, response.mode) == ("gpt-4.1", "json_schema")
    sent = replay.requests[0]
    assert sent.method == "POST"
    assert str(sent.url) == "https://api.openai.com/v1/chat/completions"
    assert sent.headers["authorization"] == "Bearer sk-test"
    assert replay.body(0) == {
        "model": "gpt-4.1",
        "messages": [
            {"role": "system", "content": "You plan."},
            {"role": "user", "content": "Fix the bug"},
        ],
        "max_tokens": 300,
        "temperature": 0.1,
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "planning", "schema": SCHEMA, "strict": False},
        },
    }


async def test_rejected_json_schema_falls_back_to_json_object_and_remembers(
    sleep: Sleep, waits: list[float]
) -> None:
    replay = Replay(
        status(400, FORMAT_REJECTED),
        ok(chat_completion(DOC)),
        ok(chat_completion(DOC)),
    )
    llm = make(replay, sleep)
    first = await llm.complete(REQUEST)
    assert first.mode == "json_object"
    assert replay.body(1)["response_format"] == {"type": "json_object"}
    system = replay.body(1)["messages"][0]
    assert system["role"] == "system"
    assert system["content"].startswith("You plan.\n\nReply with exactly one JSON object")
    assert json.dumps(SCHEMA) in system["content"]
    second = await llm.complete(REQUEST)
    assert second.mode == "json_object"
    assert len(replay.requests) == 3
    assert replay.body(2)["response_format"] == {"type": "json_object"}
    assert llm.mode == "json_object"
    assert waits == []


async def test_rejected_json_object_falls_back_to_instructions_only(sleep: Sleep) -> None:
    lm_studio = {"error": "'response_format.type' must be 'json_schema' or 'text'"}
    replay = Replay(status(400, FORMAT_REJECTED), status(400, lm_studio), ok(chat_completion(DOC)))
    llm = make(replay, sleep)
    response = await llm.complete(REQUEST)
    assert response.mode == "text"
    assert "response_format" not in replay.body(2)
    assert "Reply with exactly one JSON object" in replay.body(2)["messages"][0]["content"]


async def test_rejection_in_text_mode_is_a_bad_request(sleep: Sleep) -> None:
    unsupported = openai_error("unsupported feature: messages")
    replay = Replay(*(status(400, unsupported) for _ in range(3)))
    llm = make(replay, sleep)
    with pytest.raises(LLMBadRequest, match=r"unsupported feature"):
        await llm.complete(REQUEST)
    assert len(replay.requests) == 3
    assert llm.mode == "text"


async def test_newer_models_get_max_completion_tokens_and_default_temperature(
    sleep: Sleep,
) -> None:
    replay = Replay(
        status(
            400,
            openai_error(
                "Unsupported parameter: 'max_tokens' is not supported with this model. "
                "Use 'max_completion_tokens' instead.",
                param="max_tokens",
                code="unsupported_parameter",
            ),
        ),
        status(
            400,
            openai_error(
                "Unsupported value: 'temperature' does not support 0.1 with this model. "
                "Only the default (1) value is supported.",
                param="temperature",
                code="unsupported_value",
            ),
        ),
        ok(chat_completion(DOC)),
    )
    llm = make(replay, sleep)
    response = await llm.complete(REQUEST)
    assert response.mode == "json_schema"
    body = replay.body(2)
    assert body["max_completion_tokens"] == 300
    assert "max_tokens" not in body and "temperature" not in body


async def test_429_waits_as_retry_after_says(sleep: Sleep, waits: list[float]) -> None:
    limited = openai_error("Rate limit reached", type_="requests", code="rate_limit_exceeded")
    replay = Replay(status(429, limited, **{"retry-after": "3"}), ok(chat_completion(DOC)))
    response = await make(replay, sleep).complete(REQUEST)
    assert response.text == DOC
    assert waits == [3.0]


async def test_retry_after_is_capped_at_a_minute(sleep: Sleep, waits: list[float]) -> None:
    replay = Replay(status(503, **{"retry-after": "600"}), ok(chat_completion(DOC)))
    await make(replay, sleep).complete(REQUEST)
    assert waits == [60.0]


async def test_persistent_5xx_is_unavailable_after_1_2_4(sleep: Sleep, waits: list[float]) -> None:
    replay = Replay(*(status(500, openai_error("The server had an error")) for _ in range(4)))
    with pytest.raises(LLMUnavailable, match=r"HTTP 500.*server had an error.*4 attempts"):
        await make(replay, sleep).complete(REQUEST)
    assert waits == [1.0, 2.0, 4.0]
    assert len(replay.requests) == 4


async def test_timeout_then_success(sleep: Sleep, waits: list[float]) -> None:
    replay = Replay(httpx.ReadTimeout("read timed out"), ok(chat_completion(DOC)))
    response = await make(replay, sleep).complete(REQUEST)
    assert response.text == DOC
    assert waits == [1.0]


async def test_connection_refused_is_unavailable(sleep: Sleep, waits: list[float]) -> None:
    replay = Replay(*(httpx.ConnectError("[Errno 111] Connection refused") for _ in range(4)))
    with pytest.raises(LLMUnavailable, match=r"cannot connect to .*Connection refused"):
        await make(replay, sleep).complete(REQUEST)
    assert waits == [1.0, 2.0, 4.0]


async def test_real_closed_loopback_port_is_unavailable(
    sleep: Sleep, waits: list[float], closed_port: int
) -> None:
    llm = OpenAICompatibleLLM(
        base_url=f"http://127.0.0.1:{closed_port}/v1", model="qwen2.5-coder", sleep=sleep
    )
    try:
        with pytest.raises(LLMUnavailable, match=f"127.0.0.1:{closed_port}"):
            await llm.complete(REQUEST)
    finally:
        await llm.aclose()
    assert waits == [1.0, 2.0, 4.0]


async def test_max_retries_zero_gives_up_at_once(sleep: Sleep, waits: list[float]) -> None:
    replay = Replay(status(502))
    with pytest.raises(LLMUnavailable, match=r"1 attempts"):
        await make(replay, sleep, max_retries=0).complete(REQUEST)
    assert waits == []


async def test_401_is_a_bad_request_without_retries(sleep: Sleep, waits: list[float]) -> None:
    denied = openai_error("Incorrect API key provided: sk-test.", code="invalid_api_key")
    replay = Replay(status(401, denied))
    with pytest.raises(LLMBadRequest, match=r"HTTP 401.*Incorrect API key"):
        await make(replay, sleep).complete(REQUEST)
    assert waits == []
    assert len(replay.requests) == 1


async def test_other_400_does_not_change_the_mode(sleep: Sleep) -> None:
    too_long = openai_error(
        "This model's maximum context length is 8192 tokens.", code="context_length_exceeded"
    )
    replay = Replay(status(400, too_long))
    llm = make(replay, sleep)
    with pytest.raises(LLMBadRequest, match=r"maximum context length"):
        await llm.complete(REQUEST)
    assert llm.mode == "json_schema"


async def test_missing_usage_is_counted_locally(sleep: Sleep) -> None:
    replay = Replay(ok(chat_completion(DOC, usage=False)))
    response = await make(replay, sleep).complete(REQUEST)
    assert response.usage.prompt_tokens == count_messages(REQUEST.messages)
    assert response.usage.completion_tokens == count_tokens(DOC)


async def test_request_without_schema_is_plain_text(sleep: Sleep) -> None:
    replay = Replay(ok(chat_completion("hello")))
    plain = LLMRequest(phase="chat", messages=(Message("user", "hi"),))
    response = await make(replay, sleep).complete(plain)
    assert (response.text, response.mode) == ("hello", "text")
    assert "response_format" not in replay.body(0)
    assert replay.body(0)["messages"] == [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize(
    "answer",
    [
        httpx.Response(200, text="<html>It works!</html>"),
        ok({"object": "list", "data": []}),
        ok({"choices": [{"message": {"content": ["not", "text"]}}]}),
    ],
)
async def test_non_chat_completion_answers_are_errors(sleep: Sleep, answer: httpx.Response) -> None:
    with pytest.raises(LLMError, match=r"did not answer with a chat.completion.*LLM_BASE_URL"):
        await make(Replay(answer), sleep).complete(REQUEST)


async def test_unusable_url_is_a_bad_request(sleep: Sleep, waits: list[float]) -> None:
    llm = OpenAICompatibleLLM(base_url="ftp://example.com/v1", model="m", sleep=sleep)
    try:
        with pytest.raises(LLMBadRequest, match=r"unusable URL"):
            await llm.complete(REQUEST)
    finally:
        await llm.aclose()
    assert waits == []


def test_adjust_is_monotonic() -> None:
    text = json.dumps(FORMAT_REJECTED)
    schema, obj, text_only = Dialect.JSON_SCHEMA, Dialect.JSON_OBJECT, Dialect.INSTRUCTIONS
    assert adjust(Quirks(), schema, 400, text) == Quirks(dialect=obj)
    assert adjust(Quirks(), obj, 400, text) == Quirks(dialect=text_only)
    # another call already fell back further: never climb back up
    assert adjust(Quirks(dialect=text_only), schema, 400, text) == Quirks(dialect=text_only)
    assert adjust(Quirks(dialect=text_only), text_only, 400, text) is None
    # a 500 reaches adjust only when it rejects the request's content (see transport)
    assert adjust(Quirks(), schema, 500, text) == Quirks(dialect=obj)
    assert adjust(Quirks(), schema, 401, text) is None


# What a FastAPI-based server (vLLM's, LiteLLM's) answers to a request field it rejects:
# HTTP 500 with a validation message, although nothing is down.
VALIDATION_500 = {
    "object": "error",
    "message": "1 validation error for ChatCompletionRequest\nresponse_format.type\n  "
    "Input should be 'text' or 'json_object' [type=literal_error, input_value='json_schema']",
    "type": "BadRequestError",
    "param": None,
    "code": 500,
}


async def test_a_500_that_rejects_a_request_field_falls_back_at_once(
    sleep: Sleep, waits: list[float]
) -> None:
    """Not an outage: no retry, no backoff, no LLMUnavailable (which would pause the task
    as "the endpoint cannot be reached" although it answered every request)."""
    replay = Replay(status(500, VALIDATION_500), ok(chat_completion(DOC)))
    llm = make(replay, sleep)
    response = await llm.complete(REQUEST)
    assert response.mode == "json_object" and waits == []
    assert replay.body(1)["response_format"] == {"type": "json_object"}


async def test_a_500_that_names_no_field_of_the_request_is_still_an_outage(
    sleep: Sleep, waits: list[float]
) -> None:
    for message in ("Internal Server Error", "The model is overloaded, try again"):
        crash = {"error": {"message": message, "type": "server_error"}}
        replay = Replay(*(status(500, crash) for _ in range(4)))
        with pytest.raises(LLMUnavailable, match="gave up after 4 attempts"):
            await make(replay, sleep).complete(REQUEST)
    assert waits == [1.0, 2.0, 4.0] * 2


async def test_a_gateway_error_is_an_outage_whatever_its_text(
    sleep: Sleep, waits: list[float]
) -> None:
    bad_gateway = {"error": {"message": "upstream validation of response_format timed out"}}
    replay = Replay(*(status(502, bad_gateway) for _ in range(4)))
    with pytest.raises(LLMUnavailable):
        await make(replay, sleep).complete(REQUEST)
    assert len(waits) == 3


# --- health ---------------------------------------------------------------------------------


async def test_health_lists_models_and_finds_ollama_tags(sleep: Sleep) -> None:
    replay = Replay(
        ok(model_list("llama3.2:latest", "qwen2.5-coder:latest")),
        ok(chat_completion('{"ok": true}')),
    )
    llm = OpenAICompatibleLLM(
        base_url="http://127.0.0.1:11434/v1",
        model="qwen2.5-coder",
        http=replay.client(),
        sleep=sleep,
        probe=False,
    )
    report = await llm.health()
    assert str(replay.requests[0].url) == "http://127.0.0.1:11434/v1/models"
    assert "authorization" not in replay.requests[0].headers
    assert report.reachable and report.model_available
    assert report.models == ("llama3.2:latest", "qwen2.5-coder:latest")
    assert (report.error, report.setup_steps) == (None, ())
    # and one small structured request in the dialect the bot uses
    assert str(replay.requests[1].url) == "http://127.0.0.1:11434/v1/chat/completions"
    assert replay.body(1)["response_format"]["type"] == "json_schema"
    assert (report.answered, report.dialect, report.server) == (True, "json_schema", "Ollama")
    assert report.latency_ms is not None and report.ready


async def test_a_structured_answer_stands_for_a_minute_of_health_checks(sleep: Sleep) -> None:
    """/health/ai is public: on a hosted API each structured request is paid for."""
    replay = Replay(
        ok(model_list("gpt-4.1")),
        ok(chat_completion('{"ok": true}')),
        ok(model_list("gpt-4.1")),
    )
    llm = make(replay, sleep)
    first, second = await llm.health(), await llm.health()
    assert first.answered and second.answered and second.dialect == "json_schema"
    paths = [r.url.path for r in replay.requests]
    assert paths == ["/v1/models", "/v1/chat/completions", "/v1/models"]


async def test_health_missing_model_says_pull_it(sleep: Sleep) -> None:
    replay = Replay(ok(model_list("llama3.2:latest")))
    llm = OpenAICompatibleLLM(
        base_url="http://localhost:11434/v1",
        model="qwen2.5-coder",
        http=replay.client(),
        probe=False,
    )
    report = await llm.health()
    assert report.reachable and report.model_available is False
    assert report.error == "model 'qwen2.5-coder' is not served by http://localhost:11434/v1"
    assert report.setup_steps == (
        "Pull the model: ollama pull qwen2.5-coder",
        "Or set LLM_MODEL to one of: llama3.2:latest",
    )


async def test_health_unreachable_local_endpoint_explains_setup(closed_port: int) -> None:
    llm = OpenAICompatibleLLM(base_url=f"http://127.0.0.1:{closed_port}/v1", model="qwen2.5-coder")
    try:
        report = await llm.health()
    finally:
        await llm.aclose()
    assert not report.reachable
    assert report.model_available is None
    assert report.error is not None and "cannot connect" in report.error
    assert "Install Ollama: https://ollama.com/download" in report.setup_steps
    assert "Start it: ollama serve" in report.setup_steps
    assert "Pull the model: ollama pull qwen2.5-coder" in report.setup_steps


async def test_health_hosted_401_asks_for_the_key(sleep: Sleep) -> None:
    denied = openai_error("Incorrect API key provided: sk-test.", code="invalid_api_key")
    replay = Replay(status(401, denied))
    report = await make(replay, sleep).health()
    assert report.reachable and report.model_available is None
    assert report.error == "HTTP 401: Incorrect API key provided: sk-test."
    assert report.setup_steps == (
        "Set LLM_API_KEY (or OPENAI_API_KEY) to a valid API key for https://api.openai.com/v1",
    )
    assert replay.requests[0].headers["authorization"] == "Bearer sk-test"


async def test_health_answer_without_model_list(sleep: Sleep) -> None:
    replay = Replay(httpx.Response(200, text="<html>router login</html>"))
    report = await make(replay, sleep).health()
    assert report.reachable and report.model_available is None
    assert report.error is not None and "did not answer with a model list" in report.error
    assert report.setup_steps == (
        "Check LLM_BASE_URL: https://api.openai.com/v1 answered, but not with a model list",
    )


async def test_shared_client_is_left_open_own_client_is_closed() -> None:
    shared = Replay().client()
    llm = OpenAICompatibleLLM(base_url="http://x/v1", model="m", http=shared)
    await llm.aclose()
    assert not shared.is_closed
    await shared.aclose()
    own = OpenAICompatibleLLM(base_url="http://x/v1", model="m")
    await own.aclose()
    assert own._http.is_closed


async def test_an_ollama_without_the_openai_model_list_is_asked_for_its_tags(sleep: Sleep) -> None:
    """An Ollama whose ``/v1/models`` answers 404 (an older one) lists its models in
    ``/api/tags``: the health report (and the settings page) shows them."""
    tags = {"models": [{"name": "qwen2.5-coder:latest", "size": 4683087332}]}
    replay = Replay(
        status(404, {"error": "404 page not found"}),
        ok({"version": "0.1.14"}),
        ok(tags),
        ok(chat_completion('{"ok": true}')),
    )
    llm = OpenAICompatibleLLM(
        base_url="http://gpu.lan:11434/v1",
        model="qwen2.5-coder",
        http=replay.client(),
        sleep=sleep,
        probe=False,
    )
    report = await llm.health()
    paths = [r.url.path for r in replay.requests]
    assert paths[:3] == ["/v1/models", "/api/version", "/api/tags"]
    assert report.models == ("qwen2.5-coder:latest",)
    assert report.reachable and report.model_available and report.error is None


async def test_a_hosted_api_is_not_asked_for_ollamas_tags(sleep: Sleep) -> None:
    replay = Replay(status(404, {"error": "nope"}))
    llm = make(replay, sleep)
    report = await llm.health()
    assert [r.url.path for r in replay.requests] == ["/v1/models"]
    assert report.models == () and report.error == "HTTP 404: nope"
