"""Hostile webhook bodies through the real app: deeply nested, invalid UTF-8, huge
strings. Each signed, so the parser sees it; each gets a clear 4xx and stores nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.harness import GITLAB_SECRET, Harness, github_signature


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[Harness]:
    async with Harness(tmp_path) as harness:
        yield harness


def nested(depth: int, key: str = "issue") -> bytes:
    return (
        b'{"action":"created","%s":' % key.encode() + b'{"a":' * depth + b"1" + b"}" * depth + b"}"
    )


BODIES = {
    "nested 5,000 deep": nested(5000),
    "nested 5,000 deep in an array": b'{"action":"created","x":' + b"[" * 5000 + b"]" * 5000 + b"}",
    "invalid UTF-8": b'{"action":"created","comment":{"body":"\xff\xfe\xfa"}}',
    "a lone surrogate escape": b'{"action":"created","comment":{"body":"\\ud800"}}',
}


@pytest.mark.parametrize("body", list(BODIES.values()), ids=list(BODIES))
async def test_a_signed_hostile_github_body_is_400(bot: Harness, body: bytes) -> None:
    headers = {
        "X-GitHub-Event": "issue_comment",
        "X-GitHub-Delivery": "d-1",
        "X-Hub-Signature-256": github_signature(body),
    }
    response = await bot.client.post("/webhooks/github", content=body, headers=headers)
    assert response.status_code == 400, response.text
    assert response.json()["message"].startswith("malformed payload")
    assert await bot.store.pending_events() == 0


async def test_a_gitlab_body_nested_5000_deep_is_400(bot: Harness) -> None:
    headers = {"X-Gitlab-Event": "Note Hook", "X-Gitlab-Token": GITLAB_SECRET}
    body = nested(5000, "object_attributes")
    response = await bot.client.post("/webhooks/gitlab", content=body, headers=headers)
    assert response.status_code == 400, response.text
    assert "nested too deeply" in response.json()["message"]
    assert await bot.store.pending_events() == 0
