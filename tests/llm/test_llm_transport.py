"""The shared retry policy and error-body reading."""

from __future__ import annotations

import httpx
import pytest

from bot.llm.base import Message
from bot.llm.transport import (
    error_message,
    is_transient,
    parse_retry_after,
    retry_wait,
    with_json_instructions,
)


@pytest.mark.parametrize(
    ("status", "retry_after", "attempt", "expected"),
    [
        (None, None, 0, 1.0),
        (None, None, 1, 2.0),
        (None, None, 2, 4.0),
        (None, None, 3, None),
        (500, None, 0, 1.0),
        (529, None, 2, 4.0),
        (408, None, 0, 1.0),
        (429, None, 1, 2.0),
        (429, "3", 0, 3.0),
        (503, "2.5", 2, 2.5),
        (429, "120", 0, 60.0),
        (429, "-4", 0, 0.0),
        (429, "Wed, 21 Oct 2015 07:28:00 GMT", 1, 2.0),
        (429, "nan", 0, 1.0),
        (400, None, 0, None),
        (401, "5", 0, None),
        (404, None, 0, None),
    ],
)
def test_retry_wait(
    status: int | None, retry_after: str | None, attempt: int, expected: float | None
) -> None:
    assert retry_wait(status, retry_after, attempt, max_retries=3) == expected


def test_retry_wait_respects_max_retries() -> None:
    assert retry_wait(500, None, 0, max_retries=0) is None
    assert retry_wait(500, None, 4, max_retries=10) == 16.0
    assert retry_wait(500, None, 9, max_retries=10) == 60.0


def test_transient_statuses() -> None:
    assert [
        s for s in (200, 400, 401, 403, 404, 408, 409, 422, 429, 500, 502, 529) if is_transient(s)
    ] == [408, 429, 500, 502, 529]
    assert parse_retry_after(None) is None


@pytest.mark.parametrize(
    ("response", "expected"),
    [
        (httpx.Response(400, json={"error": {"message": "bad param", "type": "x"}}), "bad param"),
        (
            httpx.Response(
                401,
                json={
                    "type": "error",
                    "error": {"type": "authentication_error", "message": "invalid x-api-key"},
                },
            ),
            "invalid x-api-key",
        ),
        (httpx.Response(404, json={"error": "model 'x' not found"}), "model 'x' not found"),
        (httpx.Response(422, json={"detail": "field required"}), "field required"),
        (httpx.Response(502, text="<html>Bad Gateway</html>"), "<html>Bad Gateway</html>"),
        (httpx.Response(503), "Service Unavailable"),
        (httpx.Response(500, text="x" * 2000), "x" * 500),
    ],
)
def test_error_message(response: httpx.Response, expected: str) -> None:
    assert error_message(response) == expected


def test_json_instructions_join_the_system_prompt_or_lead() -> None:
    schema = {"type": "object"}
    joined = with_json_instructions([Message("system", "S"), Message("user", "U")], schema)
    assert joined[0].content.startswith("S\n\nReply with exactly one JSON object")
    assert joined[0].content.endswith('{"type": "object"}')
    assert joined[1] == Message("user", "U")
    led = with_json_instructions([Message("user", "U")], schema)
    assert led[0].role == "system" and led[1] == Message("user", "U")
