"""HTTP plumbing under ``HttpChatLLM`` (``http_chat.py``), the providers' one base.

``retry_wait`` is the pure retry policy: timeouts, connection failures, 408, 429
and 5xx wait 1, 2, 4 s (``Retry-After`` seconds win when given, capped at 60 s).
``send`` runs one request under that policy with an injected ``sleep`` and turns
exhausted retries into ``LLMUnavailable``. ``fetch_model_ids`` lists models for
health checks (one quick attempt, no retries). ``with_json_instructions`` adds the
schema to the prompt for endpoints that cannot enforce it themselves.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from bot.llm.base import LLMBadRequest, LLMUnavailable, Message

log = logging.getLogger(__name__)

Sleep = Callable[[float], Awaitable[None]]

BACKOFF_BASE = 1.0
MAX_WAIT = 60.0
HEALTH_TIMEOUT = 5.0
_MAX_ERROR_CHARS = 500

JSON_INSTRUCTIONS = (
    "Reply with exactly one JSON object and nothing else: no prose, no code fences. "
    "The object must match this JSON schema:\n"
)


def is_transient(status: int) -> bool:
    """Statuses worth retrying: the request may succeed later unchanged."""
    return status in (408, 429) or status >= 500


REFUSAL_STATUSES = (400, 422, 500)  # what a server says when it rejects the request itself
_GATEWAY = (502, 503, 504)
_REJECTION_WORDS = (
    "validation", "invalid", "unsupported", "not supported", "input should", "must be",
    "extra inputs", "field required", "unknown field", "unrecognized",
)  # fmt: skip


def rejects_request(status: int, message: str, fields: Iterable[str]) -> bool:
    """Whether a server error is the server refusing the request's own content, not an
    outage: some servers (vLLM, LiteLLM, FastAPI ones) answer a validation error with a
    500 whose message names the field they reject, e.g. ``response_format``. Both are
    needed (a rejection word and a field of the request): "the model is overloaded" names
    a field but is an outage. Retrying the same request cannot help a refusal."""
    if status < 500 or status in _GATEWAY:
        return False
    text = message.lower()
    rejected = any(word in text for word in _REJECTION_WORDS)
    return rejected and any(field.lower() in text for field in fields if len(field) > 3)


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header, or None when absent or not a number."""
    if value is None:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        return None
    if seconds != seconds:  # NaN
        return None
    return max(seconds, 0.0)


def retry_wait(
    status: int | None, retry_after: str | None, attempt: int, *, max_retries: int
) -> float | None:
    """Seconds to wait before retry number ``attempt + 1`` (from 0), or None: give up.

    ``status`` None means the connection failed or timed out.
    """
    if attempt >= max_retries:
        return None
    if status is not None and not is_transient(status):
        return None
    told = parse_retry_after(retry_after)
    if told is not None:
        return min(told, MAX_WAIT)
    return float(min(BACKOFF_BASE * 2**attempt, MAX_WAIT))


def error_message(response: httpx.Response) -> str:
    """The human part of an error body (OpenAI, Anthropic, Ollama shapes), else the text."""
    try:
        body = response.json()
    except ValueError:
        body = None
    message: object = None
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict):
            message = error.get("message")
        elif isinstance(error, str):
            message = error
        message = message or body.get("message") or body.get("detail")
    text = message if isinstance(message, str) and message else response.text
    return text.strip()[:_MAX_ERROR_CHARS] or response.reason_phrase


def describe_failure(exc: httpx.TransportError, url: str) -> str:
    if isinstance(exc, httpx.TimeoutException):
        return f"timed out talking to {url}"
    detail = str(exc) or type(exc).__name__
    return f"cannot connect to {url}: {detail}"


@dataclass(frozen=True, slots=True)
class Call:
    """One HTTP request to an LLM endpoint; ``what`` names it in errors and logs."""

    method: str
    url: str
    headers: Mapping[str, str]
    body: Mapping[str, Any] | None = None
    what: str = "LLM request"


async def send(
    client: httpx.AsyncClient,
    call: Call,
    *,
    timeout: float,
    sleep: Sleep,
    max_retries: int,
) -> httpx.Response:
    """Send ``call``, retrying transient failures; return any non-transient response.

    Raises ``LLMUnavailable`` when transient failures outlast the retries and
    ``LLMBadRequest`` when the URL itself is unusable.
    """
    attempt = 0
    while True:
        try:
            response = await client.request(
                call.method, call.url, headers=dict(call.headers), json=call.body, timeout=timeout
            )
        except (httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:
            raise LLMBadRequest(f"{call.what}: unusable URL {call.url!r}: {exc}") from exc
        except httpx.TransportError as exc:
            status, retry_after, failure = None, None, describe_failure(exc, call.url)
        else:
            if not is_transient(response.status_code):
                return response
            fields = call.body.keys() if call.body is not None else ()
            if rejects_request(response.status_code, error_message(response), fields):
                return response  # a refusal, not an outage: the caller may change the request
            status = response.status_code
            retry_after = response.headers.get("retry-after")
            failure = f"HTTP {status} from {call.url}: {error_message(response)}"
        wait = retry_wait(status, retry_after, attempt, max_retries=max_retries)
        if wait is None:
            raise LLMUnavailable(f"{call.what}: {failure} (gave up after {attempt + 1} attempts)")
        log.warning("%s: %s; retrying in %.1f s", call.what, failure, wait)
        await sleep(wait)
        attempt += 1


@dataclass(frozen=True, slots=True)
class ModelListing:
    """What a models endpoint said: ``status`` None means it could not be reached."""

    status: int | None
    models: tuple[str, ...] = ()
    error: str | None = None
    owners: tuple[str, ...] = ()  # the models' ``owned_by``: which server is speaking
    headers: Mapping[str, str] = field(default_factory=dict)


async def fetch_model_ids(
    client: httpx.AsyncClient, url: str, headers: Mapping[str, str]
) -> ModelListing:
    """GET a ``{"data": [{"id": ...}, ...]}`` model list (OpenAI and Anthropic shape)."""
    try:
        response = await client.get(url, headers=dict(headers), timeout=HEALTH_TIMEOUT)
    except (httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:
        return ModelListing(None, error=f"unusable URL {url!r}: {exc}")
    except httpx.TransportError as exc:
        return ModelListing(None, error=describe_failure(exc, url))
    headers = dict(response.headers)
    if response.status_code >= 400:
        return ModelListing(
            response.status_code,
            error=f"HTTP {response.status_code}: {error_message(response)}",
            headers=headers,
        )
    try:
        data = response.json().get("data")
        models = tuple(str(item["id"]) for item in data)
        owners = tuple(str(item.get("owned_by") or "") for item in data)
    except (ValueError, AttributeError, TypeError, KeyError):
        return ModelListing(
            response.status_code,
            error=f"{url} did not answer with a model list (data[].id)",
            headers=headers,
        )
    return ModelListing(response.status_code, models, owners=owners, headers=headers)


async def fetch_ollama_tags(client: httpx.AsyncClient, url: str) -> ModelListing:
    """GET Ollama's ``/api/tags`` (``{"models": [{"name": ...}, ...]}``)."""
    try:
        response = await client.get(url, timeout=HEALTH_TIMEOUT)
        response.raise_for_status()
        models = tuple(str(item["name"]) for item in response.json()["models"])
    except (httpx.HTTPError, ValueError, AttributeError, TypeError, KeyError) as exc:
        return ModelListing(None, error=f"{url}: {type(exc).__name__}")
    return ModelListing(response.status_code, models, owners=("ollama",) * len(models))


def with_json_instructions(
    messages: Sequence[Message], schema: Mapping[str, Any]
) -> tuple[Message, ...]:
    """``messages`` with the JSON-only instruction and schema added to the system prompt."""
    note = JSON_INSTRUCTIONS + json.dumps(schema, ensure_ascii=False)
    out = list(messages)
    for index, message in enumerate(out):
        if message.role == "system":
            out[index] = Message("system", f"{message.content}\n\n{note}")
            return tuple(out)
    return (Message("system", note), *out)
