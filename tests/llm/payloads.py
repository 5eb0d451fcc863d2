"""Response bodies shaped like the providers' documented API objects."""

from __future__ import annotations

import json
from typing import Any

import httpx


def chat_completion(content: str | None, *, usage: bool = True, model: str = "gpt-4.1") -> Any:
    """OpenAI's chat.completion object (API reference: "The chat completion object")."""
    body: dict[str, Any] = {
        "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
        "object": "chat.completion",
        "created": 1741569952,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": content,
                    "refusal": None,
                    "annotations": [],
                },
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "service_tier": "default",
    }
    if usage:
        body["usage"] = {
            "prompt_tokens": 19,
            "completion_tokens": 10,
            "total_tokens": 29,
            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
        }
    return body


def openai_error(
    message: str,
    *,
    type_: str = "invalid_request_error",
    param: str | None = None,
    code: str | None = None,
) -> Any:
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


def model_list(*ids: str) -> Any:
    """GET /v1/models (OpenAI, also served by Ollama, vLLM, LM Studio, llama.cpp)."""
    return {
        "object": "list",
        "data": [
            {"id": model_id, "object": "model", "created": 1686935002, "owned_by": "library"}
            for model_id in ids
        ],
    }


def model_list_owned(owner: str, *ids: str) -> Any:
    """GET /v1/models as a given server answers it: ``owned_by`` is "vllm" on vLLM,
    "llamacpp" on llama.cpp's server, "organization_owner" on LM Studio, "library" on
    Ollama."""
    body = model_list(*ids)
    for item in body["data"]:
        item["owned_by"] = owner
    return body


def ollama_chat(content: str, *, model: str = "qwen2.5-coder") -> Any:
    """Ollama's native POST /api/chat answer with "stream": false (docs/api.md)."""
    return {
        "model": model,
        "created_at": "2024-12-06T19:17:39.129578Z",
        "message": {"role": "assistant", "content": content},
        "done_reason": "stop",
        "done": True,
        "total_duration": 4648158584,
        "load_duration": 1536271708,
        "prompt_eval_count": 26,
        "prompt_eval_duration": 1125000000,
        "eval_count": 12,
        "eval_duration": 1985000000,
    }


def anthropic_message(content: list[dict[str, Any]], *, stop_reason: str = "tool_use") -> Any:
    """The Messages API response object."""
    return {
        "id": "msg_013Zva2CMHLNnXjNJJKqJ2EF",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {
            "input_tokens": 2095,
            "output_tokens": 503,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        },
    }


def tool_use(name: str, data: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": "toolu_01A09q90qw90lq917835lq9", "name": name, "input": data}


def anthropic_error(type_: str, message: str) -> Any:
    return {"type": "error", "error": {"type": type_, "message": message}, "request_id": "req_01"}


def anthropic_models(*ids: str) -> Any:
    """GET /v1/models of the Anthropic API."""
    return {
        "data": [
            {
                "type": "model",
                "id": model_id,
                "display_name": model_id,
                "created_at": "2025-02-19T00:00:00Z",
            }
            for model_id in ids
        ],
        "has_more": False,
        "first_id": ids[0] if ids else None,
        "last_id": ids[-1] if ids else None,
    }


class Replay:
    """An httpx.MockTransport handler: answers in order, records every request."""

    def __init__(self, *answers: httpx.Response | Exception) -> None:
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if not self.answers:
            raise AssertionError(f"unexpected request {request.method} {request.url}")
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.MockTransport(self))

    def body(self, index: int) -> Any:
        return json.loads(self.requests[index].content)


def ok(body: Any, **headers: str) -> httpx.Response:
    return httpx.Response(200, json=body, headers=headers)


def status(code: int, body: Any = None, **headers: str) -> httpx.Response:
    if body is None:
        return httpx.Response(code, headers=headers)
    return httpx.Response(code, json=body, headers=headers)


def tool_call_completion(
    name: str, arguments: str, *, cached: int = 0, content: str | None = None
) -> Any:
    """A chat.completion whose message calls a function (API reference, "Function
    calling"): ``content`` null, ``tool_calls`` with the arguments as a JSON string,
    ``finish_reason`` "tool_calls"; ``cached`` prompt tokens in ``prompt_tokens_details``."""
    body = chat_completion(content)
    body["choices"][0]["message"]["tool_calls"] = [
        {
            "id": "call_12345xyz",
            "type": "function",
            "function": {"name": name, "arguments": arguments},
        }
    ]
    body["choices"][0]["finish_reason"] = "tool_calls"
    body["usage"] = {
        "prompt_tokens": 2006,
        "completion_tokens": 300,
        "total_tokens": 2306,
        "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
    }
    return body


def cached_usage(body: Any, *, read: int, written: int, uncached: int = 300) -> Any:
    """A Messages API response with prompt-caching usage: ``input_tokens`` is only the
    part after the last cache breakpoint (docs, "Prompt caching": "Tracking cache
    performance")."""
    body["usage"] = {
        "input_tokens": uncached,
        "output_tokens": 503,
        "cache_creation_input_tokens": written,
        "cache_read_input_tokens": read,
    }
    return body
