"""The HTTP surface through the real ASGI app and a real SQLite store."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from pydantic import SecretStr

from bot.config import WebhookSecretSource
from bot.llm.base import HealthReport
from bot.llm.openai import OpenAICompatibleLLM
from tests.harness import GITHUB_SECRET, GITLAB_SECRET, Harness, fixture, github_signature
from tests.llm.model_server import Reply, Sent, model_server
from tests.llm.payloads import chat_completion, model_list_owned


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[Harness]:
    async with Harness(tmp_path) as harness:
        yield harness


def comment_payload(body: str = "/agent run") -> dict:
    payload = fixture("github", "issue_comment.created.json")
    payload["comment"]["body"] = body
    return payload


async def test_signed_delivery_is_queued_in_the_inbox(bot: Harness) -> None:
    response = await bot.send_github("issue_comment", comment_payload())
    assert response.status_code == 202
    assert response.json()["message"] == "queued"
    assert response.headers["content-length"] == str(len(response.content))
    assert "transfer-encoding" not in response.headers
    assert await bot.store.pending_events() == 1


async def test_github_documented_signature_vector_is_accepted(tmp_path: Path) -> None:
    # GitHub's documentation: secret "It's a Secret to Everybody", payload "Hello, World!".
    assert github_signature(b"Hello, World!", "It's a Secret to Everybody") == (
        "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
    )


@pytest.mark.parametrize("signature", [None, "sha256=" + "0" * 64, "sha1=abc", "garbage"])
async def test_missing_or_wrong_signature_is_401_and_nothing_stored(
    bot: Harness, signature: str | None
) -> None:
    body = json.dumps(comment_payload()).encode()
    headers = {"X-GitHub-Event": "issue_comment", "X-GitHub-Delivery": "d-1"}
    if signature:
        headers["X-Hub-Signature-256"] = signature
    response = await bot.client.post("/webhooks/github", content=body, headers=headers)
    assert response.status_code == 401
    assert await bot.store.pending_events() == 0


async def test_signature_with_another_secret_is_refused(bot: Harness) -> None:
    response = await bot.send_github("issue_comment", comment_payload(), secret="wrong")
    assert response.status_code == 401


async def test_oversized_body_is_413_before_parsing(bot: Harness) -> None:
    body = b"{" + b" " * (bot.settings.server.max_body_bytes + 10) + b"}"
    headers = {
        "X-GitHub-Event": "issue_comment",
        "X-Hub-Signature-256": github_signature(body),
    }
    response = await bot.client.post("/webhooks/github", content=body, headers=headers)
    assert response.status_code == 413
    assert await bot.store.pending_events() == 0


async def test_non_json_and_malformed_payloads_are_400(bot: Harness) -> None:
    body = b"this is not json"
    headers = {"X-GitHub-Event": "issue_comment", "X-Hub-Signature-256": github_signature(body)}
    response = await bot.client.post("/webhooks/github", content=body, headers=headers)
    assert response.status_code == 400
    assert "not JSON" in response.json()["message"]
    response = await bot.send_github("issue_comment", {"action": "created"})
    assert response.status_code == 400
    assert await bot.store.pending_events() == 0


async def test_other_methods_on_a_webhook_route_are_405(bot: Harness) -> None:
    response = await bot.client.get("/webhooks/github")
    assert response.status_code == 405 and response.headers["allow"] == "POST"
    assert (await bot.client.get("/nowhere")).status_code == 404


async def test_ping_is_200(bot: Harness) -> None:
    response = await bot.send_github("ping", fixture("github", "ping.json"))
    assert response.status_code == 200


async def test_uninteresting_events_get_2xx_and_are_not_queued(bot: Harness) -> None:
    response = await bot.send_github("star", {"action": "created", "sender": {"login": "x"}})
    assert response.status_code == 202
    response = await bot.send_github("issues", fixture("github", "issues.edited.json"))
    assert response.status_code == 202
    assert response.json()["message"] == "ignored"
    assert await bot.store.pending_events() == 0


async def test_redelivery_never_creates_a_second_task(bot: Harness) -> None:
    payload = comment_payload()
    first = await bot.send_github("issue_comment", payload, delivery="same-delivery")
    again = await bot.send_github("issue_comment", payload, delivery="same-delivery")
    assert first.json()["message"] == "queued"
    assert again.json()["message"] == "duplicate delivery: already queued"
    assert await bot.store.pending_events() == 1


async def test_concurrent_redeliveries_queue_once(bot: Harness) -> None:
    payload = comment_payload()
    responses = await asyncio.gather(
        *(bot.send_github("issue_comment", payload, delivery="race") for _ in range(20))
    )
    assert all(r.status_code == 202 for r in responses)
    assert sum(r.json()["message"] == "queued" for r in responses) == 1
    assert await bot.store.pending_events() == 1


async def test_gitlab_token_is_checked(bot: Harness) -> None:
    payload = fixture("gitlab", "note-hook-issue.json")
    response = await bot.send_gitlab("Note Hook", payload, token="wrong")
    assert response.status_code == 401
    response = await bot.client.post(
        "/webhooks/gitlab", content=json.dumps(payload), headers={"X-Gitlab-Event": "Note Hook"}
    )
    assert response.status_code == 401
    assert await bot.store.pending_events() == 0


async def test_gitlab_note_is_queued_and_idempotency_key_dedups(bot: Harness) -> None:
    payload = fixture("gitlab", "note-hook-issue.json")
    payload["object_attributes"]["note"] = "/agent run"
    payload["issue"]["state"] = "opened"
    first = await bot.send_gitlab("Note Hook", payload, idempotency_key="k-1")
    again = await bot.send_gitlab("Note Hook", payload, idempotency_key="k-1")
    assert first.json()["message"] == "queued"
    assert again.json()["message"].startswith("duplicate")
    assert await bot.store.pending_events() == 1


async def test_gitlab_uninteresting_events_get_2xx(bot: Harness) -> None:
    for name, file in [("Push Hook", "push-hook.json"), ("Pipeline Hook", "pipeline-hook.json")]:
        response = await bot.send_gitlab(name, fixture("gitlab", file))
        assert response.status_code == 202, name
    assert await bot.store.pending_events() == 0


async def test_disabled_forge_is_404_with_the_setting_to_set(tmp_path: Path) -> None:
    async with Harness(tmp_path) as harness:
        github = harness.settings.github.model_copy(update={"webhook_secret": None})
        harness.runtime.settings = harness.settings.model_copy(update={"github": github})
        response = await harness.send_github("issue_comment", comment_payload())
        assert response.status_code == 404
        assert "GITHUB_WEBHOOK_SECRET" in response.json()["message"]


async def test_health_endpoints(bot: Harness) -> None:
    assert (await bot.client.get("/healthz")).text == "ok"
    assert (await bot.client.get("/readyz")).status_code == 200
    report = (await bot.client.get("/health/ai")).json()
    assert report["reachable"] is True and report["provider"] == "scripted"
    metrics = await bot.client.get("/metrics")
    assert "bot_webhooks_total" in metrics.text


async def test_readyz_fails_when_the_store_is_closed(bot: Harness) -> None:
    await bot.store.close()
    response = await bot.client.get("/readyz")
    assert response.status_code == 503
    await bot.store.open()


async def test_health_ai_reports_setup_steps_when_down(bot: Harness) -> None:
    async def down() -> HealthReport:
        return HealthReport(
            reachable=False,
            provider="openai",
            base_url="http://127.0.0.1:11434/v1",
            model="qwen2.5-coder",
            error="connection refused",
            setup_steps=("ollama serve",),
        )

    bot.runtime.llm.health = down  # type: ignore[method-assign]  # the model's own probe
    response = await bot.client.get("/health/ai")
    assert response.status_code == 503
    assert response.json()["setup_steps"] == ["ollama serve"]


async def test_health_ai_makes_a_structured_request_and_is_503_when_it_fails(
    bot: Harness,
) -> None:
    """The model list alone predicts nothing: a server that lists the model but cannot
    answer is not healthy, and the answer says which server, dialect and how long."""
    sick = {"on": False}

    def answer(sent: Sent) -> Reply:
        if sent.method == "GET":
            return Reply(200, model_list_owned("llamacpp", "qwen2.5-coder"))
        if sick["on"]:
            return Reply(503, {"error": {"code": 503, "message": "Loading model"}})
        return Reply(200, chat_completion('{"ok": true}'))

    with model_server(answer) as server:
        llm = OpenAICompatibleLLM(base_url=server.url + "/v1", model="qwen2.5-coder")
        bot.runtime.llm = llm
        try:
            healthy = await bot.client.get("/health/ai")
            sick["on"] = True
            bot.runtime._health = None  # past the health cache
            llm._answered = None  # and past the minute a structured answer stands for
            failing = await bot.client.get("/health/ai")
        finally:
            await llm.aclose()
    assert healthy.status_code == 200
    report = healthy.json()
    assert (report["ready"], report["answered"]) == (True, True)
    assert (report["server"], report["dialect"]) == ("llama.cpp server", "json_schema")
    assert isinstance(report["latency_ms"], float)
    assert failing.status_code == 503
    down = failing.json()
    assert (down["reachable"], down["ready"], down["answered"]) == (True, False, False)
    assert "Loading model" in down["error"]


async def test_store_failure_is_503_and_asks_for_redelivery(bot: Harness) -> None:
    await bot.store.close()
    response = await bot.send_github("issue_comment", comment_payload())
    assert response.status_code == 503
    assert "redeliver" in response.json()["message"]
    await bot.store.open()


def test_secret_constant_is_used() -> None:
    assert GITHUB_SECRET


async def test_gitlab_secret_per_project_or_group(tmp_path: Path) -> None:
    def source(name: str) -> WebhookSecretSource:
        return WebhookSecretSource(env=name, secret=SecretStr(f"{name}-token"))

    scoped = {"gitlab-org/gitlab-test": source("project"), "gitlab-org": source("group")}
    async with Harness(tmp_path, overrides={"gitlab": {"webhook_secrets": scoped}}) as bot:
        payload = fixture("gitlab", "note-hook-issue.json")
        payload["object_attributes"]["note"] = "/agent run"
        payload["issue"]["state"] = "opened"
        # the project has its own secret: neither the shared one nor its group's gets in
        for token in (GITLAB_SECRET, "group-token"):
            assert (await bot.send_gitlab("Note Hook", payload, token=token)).status_code == 401
        assert await bot.store.pending_events() == 0
        assert (await bot.send_gitlab("Note Hook", payload, token="project-token")).json()[
            "message"
        ] == "queued"
        # another project of the group: the group's secret
        payload["project"]["path_with_namespace"] = "gitlab-org/other"
        assert (await bot.send_gitlab("Note Hook", payload)).status_code == 401
        ok = await bot.send_gitlab("Note Hook", payload, token="group-token")
        assert ok.status_code == 202
        # a project no entry covers: the shared secret
        payload["project"]["path_with_namespace"] = "someone/else"
        assert (await bot.send_gitlab("Note Hook", payload, token="group-token")).status_code == 401
        assert (await bot.send_gitlab("Note Hook", payload)).status_code == 202
        assert await bot.store.pending_events() == 3
