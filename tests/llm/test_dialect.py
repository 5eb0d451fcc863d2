"""Structured-output dialects: which server is speaking, what is tried in which order,
the request shape of each dialect (as its server documents it), and what is kept.

Probing runs through the real httpx client against a local HTTP server playing the
model endpoint (``model_server.py``); the kept dialect goes into a real SQLite store.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.llm.base import LLMBadRequest, LLMUnavailable
from bot.llm.dialect import Dialect, StructuredOutput, ladder, next_dialect, output_mode
from bot.llm.http_chat import PROBE
from bot.llm.openai import OpenAICompatibleLLM
from bot.llm.server_kind import ServerKind, recognise
from bot.storage.sqlite import SqliteStore
from tests.llm.model_server import ModelServer, Reply, Sent, model_server
from tests.llm.payloads import (
    chat_completion,
    model_list,
    model_list_owned,
    ollama_chat,
    openai_error,
)
from tests.llm.test_openai_provider import DOC, REQUEST, SCHEMA, Sleep

OK = '{"ok": true}'


# --- pure: the ladder and the server kind ----------------------------------------------------


def test_ladder_puts_the_servers_own_schema_form_after_the_openai_one() -> None:
    tail = (Dialect.JSON_OBJECT, Dialect.INSTRUCTIONS)
    assert ladder(ServerKind.OPENAI) == (Dialect.JSON_SCHEMA, *tail)
    assert ladder(ServerKind.OLLAMA) == (Dialect.JSON_SCHEMA, Dialect.OLLAMA_FORMAT, *tail)
    assert ladder(ServerKind.VLLM) == (Dialect.JSON_SCHEMA, Dialect.GUIDED_JSON, *tail)
    assert ladder(ServerKind.LLAMACPP) == (Dialect.JSON_SCHEMA, Dialect.LLAMACPP_SCHEMA, *tail)
    assert [output_mode(d) for d in ladder(ServerKind.VLLM)] == [
        "json_schema",
        "json_schema",
        "json_object",
        "text",
    ]


@pytest.mark.parametrize(
    ("pinned", "kind", "rungs"),
    [
        ("json_schema", ServerKind.VLLM, (Dialect.JSON_SCHEMA, Dialect.GUIDED_JSON)),
        ("json_schema", ServerKind.OPENAI, (Dialect.JSON_SCHEMA,)),
        ("json_object", ServerKind.OLLAMA, (Dialect.JSON_OBJECT,)),
        ("none", ServerKind.LLAMACPP, (Dialect.INSTRUCTIONS,)),
    ],
)
def test_a_pinned_mode_keeps_only_its_rung(
    pinned: StructuredOutput, kind: ServerKind, rungs: tuple[Dialect, ...]
) -> None:
    assert ladder(kind, pinned) == rungs


def test_next_dialect_never_climbs_back() -> None:
    rungs = ladder(ServerKind.VLLM)
    assert next_dialect(rungs, Dialect.JSON_SCHEMA, Dialect.JSON_SCHEMA) is Dialect.GUIDED_JSON
    # another call already moved down to JSON mode: a late refusal of the schema keeps it
    assert next_dialect(rungs, Dialect.JSON_SCHEMA, Dialect.JSON_OBJECT) is Dialect.JSON_OBJECT
    assert next_dialect(rungs, Dialect.INSTRUCTIONS, Dialect.INSTRUCTIONS) is None


@pytest.mark.parametrize(
    ("base_url", "signals", "kind"),
    [
        ("https://api.openai.com/v1", {}, ServerKind.OPENAI),
        ("https://openrouter.ai/api/v1", {}, ServerKind.OPENROUTER),
        ("https://api.anthropic.com", {}, ServerKind.ANTHROPIC),
        ("http://10.0.0.5:9000/v1", {"headers": {"x-litellm-version": "1.55.3"}}, "litellm"),
        ("http://10.0.0.5:9000/v1", {"owners": ["vllm"]}, ServerKind.VLLM),
        ("http://10.0.0.5:9000/v1", {"owners": ["llamacpp"]}, ServerKind.LLAMACPP),
        ("http://10.0.0.5:9000/v1", {"owners": ["organization_owner"]}, ServerKind.LM_STUDIO),
        ("http://10.0.0.5:9000/v1", {"owners": ["library"]}, ServerKind.OLLAMA),
        ("http://10.0.0.5:9000/v1", {"ollama_version": True}, ServerKind.OLLAMA),
        ("http://127.0.0.1:11434/v1", {}, ServerKind.OLLAMA),
        ("http://127.0.0.1:1234/v1", {}, ServerKind.LM_STUDIO),
        ("http://localhost:4000", {}, ServerKind.LITELLM),
        ("http://gpu-box:8000/v1", {}, ServerKind.VLLM),
        ("http://gpu-box:8080/v1", {}, ServerKind.LLAMACPP),
        ("http://ollama.internal/v1", {}, ServerKind.OLLAMA),
        # a stronger signal wins over the port: LiteLLM proxying on vLLM's port
        ("http://gpu-box:8000/v1", {"headers": {"x-litellm-call-id": "x"}}, ServerKind.LITELLM),
        ("http://10.0.0.5:9000/v1", {"owners": ["openai"]}, ServerKind.UNKNOWN),
    ],
)
def test_the_server_is_recognised_from_documented_signals(
    base_url: str, signals: dict[str, Any], kind: ServerKind
) -> None:
    assert recognise(base_url, **signals) == kind


# --- probing against a local model server ----------------------------------------------------


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    store = SqliteStore(tmp_path / "bot.sqlite3")
    await store.open()
    yield store
    await store.close()


def provider(
    server: ModelServer,
    sleep: Sleep,
    *,
    dialects: SqliteStore | None = None,
    structured_output: StructuredOutput = "auto",
) -> OpenAICompatibleLLM:
    return OpenAICompatibleLLM(
        base_url=server.url + "/v1",
        model="qwen2.5-coder",
        sleep=sleep,
        dialects=dialects,
        structured_output=structured_output,
    )


def vllm_without_json_schema(sent: Sent) -> Reply:
    """vLLM before response_format json_schema: a 400 naming it; guided_json works."""
    if sent.method == "GET" and sent.path == "/v1/models":
        return Reply(200, model_list_owned("vllm", "qwen2.5-coder"))
    body = sent.body or {}
    if body.get("response_format", {}).get("type") == "json_schema":
        message = "response_format.type 'json_schema' is not supported"
        return Reply(400, openai_error(message, param="response_format"))
    content = OK if body["messages"][-1]["content"] == "Are you there?" else DOC
    return Reply(200, chat_completion(content))


async def test_vllm_falls_to_guided_json_and_the_dialect_is_kept_in_the_store(
    sleep: Sleep, waits: list[float], store: SqliteStore
) -> None:
    with model_server(vllm_without_json_schema) as server:
        llm = provider(server, sleep, dialects=store)
        try:
            response = await llm.complete(REQUEST)
        finally:
            await llm.aclose()
        posts = server.of("/v1/chat/completions")
        # one probe per rung until one works, then the task's request in that dialect
        assert [p.body["messages"][-1]["content"] for p in posts] == [
            "Are you there?",
            "Are you there?",
            "Fix the bug",
        ]
        assert posts[0].body["response_format"]["type"] == "json_schema"
        assert posts[1].body["guided_json"] == PROBE.schema
        assert "response_format" not in posts[1].body
        assert posts[2].body["guided_json"] == SCHEMA  # vLLM's documented extra parameter
        assert response.text == DOC and response.mode == "json_schema" and waits == []
        assert (llm.server, llm.dialect) == (ServerKind.VLLM, Dialect.GUIDED_JSON)
        kept = await store.get_llm_dialect(server.url + "/v1", "qwen2.5-coder")
        assert kept is not None and kept[:2] == ("guided_json", "vllm")

        # a restart: the kept dialect is used at once, nothing is probed again
        again = provider(server, sleep, dialects=store)
        try:
            await again.complete(REQUEST)
            assert again.dialect is Dialect.GUIDED_JSON
            assert len(server.of("/v1/chat/completions")) == 4
            assert server.of("/v1/chat/completions")[-1].body["messages"][-1]["content"] == (
                "Fix the bug"
            )
            # after a configuration reload it probes again, and keeps what it finds
            again.forget_dialect()
            await again.complete(REQUEST)
        finally:
            await again.aclose()
        after = server.of("/v1/chat/completions")[4:]
        assert [p.body["messages"][-1]["content"] for p in after] == [
            "Are you there?",
            "Are you there?",
            "Fix the bug",
        ]


def old_ollama(sent: Sent) -> Reply:
    """An Ollama whose OpenAI endpoint ignores response_format (answers prose); its
    native /api/chat holds the model to a schema given as "format"."""
    if sent.path == "/v1/models":
        return Reply(200, model_list_owned("library", "qwen2.5-coder:latest"))
    if sent.path == "/api/chat":
        content = OK if sent.body["messages"][-1]["content"] == "Are you there?" else DOC
        return Reply(200, ollama_chat(content))
    return Reply(200, chat_completion("Sure! Here you go: ok = true"))


async def test_ollama_uses_its_native_format_when_the_openai_form_is_ignored(
    sleep: Sleep,
) -> None:
    with model_server(old_ollama) as server:
        llm = provider(server, sleep)
        try:
            response = await llm.complete(REQUEST)
        finally:
            await llm.aclose()
    assert (llm.server, llm.dialect) == (ServerKind.OLLAMA, Dialect.OLLAMA_FORMAT)
    assert [(s.method, s.path) for s in server.requests] == [
        ("GET", "/v1/models"),
        ("POST", "/v1/chat/completions"),  # the OpenAI form: answered, but not with JSON
        ("POST", "/api/chat"),  # the probe in Ollama's own form
        ("POST", "/api/chat"),  # the task's request
    ]
    native = server.requests[-1].body
    assert native == {  # Ollama's documented /api/chat request with structured outputs
        "model": "qwen2.5-coder",
        "messages": [
            {"role": "system", "content": "You plan."},
            {"role": "user", "content": "Fix the bug"},
        ],
        "stream": False,
        "format": SCHEMA,
        "options": {"temperature": 0.1, "num_predict": 300},
    }
    assert response.text == DOC
    assert (response.usage.prompt_tokens, response.usage.completion_tokens) == (26, 12)


def llamacpp_rejecting_response_format(sent: Sent) -> Reply:
    """A llama.cpp server build from before response_format json_schema: it answers a 500
    (the message and error object as such a server sends them, reported in
    ikawrakow/ik_llama.cpp#778); its own top-level "json_schema" works."""
    if sent.path == "/v1/models":
        return Reply(200, model_list_owned("llamacpp", "qwen2.5-coder"))
    if "response_format" in sent.body:
        message = (
            'response_format type must be one of "text" or "json_object", but got: json_schema'
        )
        return Reply(500, {"error": {"code": 500, "message": message, "type": "server_error"}})
    content = OK if sent.body["messages"][-1]["content"] == "Are you there?" else DOC
    return Reply(200, chat_completion(content))


async def test_llamacpp_uses_its_json_schema_field(sleep: Sleep, waits: list[float]) -> None:
    with model_server(llamacpp_rejecting_response_format) as server:
        llm = provider(server, sleep)
        try:
            await llm.complete(REQUEST)
        finally:
            await llm.aclose()
    assert (llm.server, llm.dialect) == (ServerKind.LLAMACPP, Dialect.LLAMACPP_SCHEMA)
    assert server.requests[-1].body["json_schema"] == SCHEMA
    assert waits == []  # a refusal is not an outage: no retry


async def test_a_pinned_mode_is_used_without_probing(sleep: Sleep) -> None:
    def any_server(sent: Sent) -> Reply:
        if sent.method == "GET":
            return Reply(200, model_list("qwen2.5-coder"))
        return Reply(200, chat_completion(DOC))

    with model_server(any_server) as server:
        llm = provider(server, sleep, structured_output="json_object")
        try:
            response = await llm.complete(REQUEST)
        finally:
            await llm.aclose()
    [post] = server.of("/v1/chat/completions")
    assert post.body["response_format"] == {"type": "json_object"}
    assert response.mode == "json_object"


async def test_a_server_that_refuses_every_dialect_is_a_bad_request_with_its_words(
    sleep: Sleep, store: SqliteStore
) -> None:
    def refuses(sent: Sent) -> Reply:
        if sent.method == "GET":
            return Reply(200, model_list("qwen2.5-coder"))
        return Reply(422, {"detail": "response_format and json schemas are not supported here"})

    with model_server(refuses) as server:
        llm = provider(server, sleep, dialects=store)
        try:
            with pytest.raises(LLMBadRequest, match=r"HTTP 422.*not supported here"):
                await llm.complete(REQUEST)
        finally:
            await llm.aclose()
    # JSON schema, JSON mode, then instructions only (which names nothing to drop)
    assert len(server.of("/v1/chat/completions")) == 3
    assert await store.get_llm_dialect(server.url + "/v1", "qwen2.5-coder") is None


async def test_an_outage_while_probing_keeps_nothing(
    sleep: Sleep, waits: list[float], store: SqliteStore
) -> None:
    def down(sent: Sent) -> Reply:
        if sent.method == "GET":
            return Reply(200, model_list("qwen2.5-coder"))
        return Reply(503, {"error": {"message": "model is loading"}})

    with model_server(down) as server:
        llm = provider(server, sleep, dialects=store)
        try:
            with pytest.raises(LLMUnavailable):
                await llm.complete(REQUEST)
        finally:
            await llm.aclose()
    assert waits == [1.0, 2.0, 4.0]
    assert await store.get_llm_dialect(server.url + "/v1", "qwen2.5-coder") is None


async def test_after_an_outage_the_dialect_is_probed_again(
    sleep: Sleep, store: SqliteStore
) -> None:
    """A server that went away may come back upgraded: what it refused before is asked
    again once, instead of being avoided for good."""
    state = {"down": False, "upgraded": False}

    def answer(sent: Sent) -> Reply:
        if sent.method == "GET":
            return Reply(200, model_list_owned("vllm", "qwen2.5-coder"))
        if state["down"]:
            return Reply(502, {"error": {"message": "bad gateway"}})
        schema = sent.body.get("response_format", {}).get("type") == "json_schema"
        if schema and not state["upgraded"]:
            return Reply(400, openai_error("json_schema is not supported", param="response_format"))
        content = OK if sent.body["messages"][-1]["content"] == "Are you there?" else DOC
        return Reply(200, chat_completion(content))

    with model_server(answer) as server:
        llm = provider(server, sleep, dialects=store)
        try:
            await llm.complete(REQUEST)
            assert llm.dialect is Dialect.GUIDED_JSON
            state["down"] = True
            with pytest.raises(LLMUnavailable):
                await llm.complete(REQUEST)
            state.update(down=False, upgraded=True)
            await llm.complete(REQUEST)
        finally:
            await llm.aclose()
    assert llm.dialect is Dialect.JSON_SCHEMA
    last = server.of("/v1/chat/completions")[-2:]
    assert [p.body["messages"][-1]["content"] for p in last] == ["Are you there?", "Fix the bug"]
    kept = await store.get_llm_dialect(server.url + "/v1", "qwen2.5-coder")
    assert kept is not None and kept[0] == "json_schema"


async def test_a_refused_rung_then_a_rung_answering_prose_moves_on_to_json_mode(
    sleep: Sleep,
) -> None:
    """vLLM refuses the OpenAI schema form and ignores guided_json (a build without a
    guided-decoding backend answers prose): JSON mode is next, and the probe ends."""

    def answer(sent: Sent) -> Reply:
        if sent.method == "GET":
            return Reply(200, model_list_owned("vllm", "qwen2.5-coder"))
        kind = sent.body.get("response_format", {}).get("type")
        if kind == "json_schema":
            return Reply(400, openai_error("json_schema is not supported", param="response_format"))
        if kind == "json_object":
            return Reply(200, chat_completion(OK))
        return Reply(200, chat_completion("ok!"))

    with model_server(answer) as server:
        llm = provider(server, sleep)
        try:
            await llm.dialect_ready()
        finally:
            await llm.aclose()
    assert llm.dialect is Dialect.JSON_OBJECT
    assert llm.tried == [
        (Dialect.JSON_SCHEMA, "refused (HTTP 400)"),
        (Dialect.GUIDED_JSON, "answered without a JSON document"),
        (Dialect.JSON_OBJECT, "ok"),
    ]
    assert len(server.of("/v1/chat/completions")) == 3


async def test_a_pinned_mode_is_not_kept_nor_read_from_the_store(
    sleep: Sleep, store: SqliteStore
) -> None:
    def any_server(sent: Sent) -> Reply:
        if sent.method == "GET":
            return Reply(200, model_list_owned("vllm", "qwen2.5-coder"))
        return Reply(200, chat_completion(DOC))

    with model_server(any_server) as server:
        endpoint = server.url + "/v1"
        await store.put_llm_dialect(endpoint, "qwen2.5-coder", dialect="guided_json", server="vllm")
        pinned = provider(server, sleep, dialects=store, structured_output="none")
        try:
            await pinned.complete(REQUEST)
        finally:
            await pinned.aclose()
        assert pinned.dialect is Dialect.INSTRUCTIONS  # the operator's word, not the store's
        kept = await store.get_llm_dialect(endpoint, "qwen2.5-coder")
        assert kept is not None and kept[0] == "guided_json"  # what auto found stays
