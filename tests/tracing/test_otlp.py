"""Traces leave over OTLP/HTTP to a local receiver (decoded with the OpenTelemetry proto
package): a real ``bot serve --role web`` process takes the webhook and a worker takes the
task, each exporting on its own, and the receiver holds one trace from the delivery to the
task's model calls. The collector's headers come from the environment."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from bot import tracing
from bot.config import TracesSettings
from bot.storage.base import TaskState
from tests.e2e.support import gh_labeled, github_repo, settle
from tests.e2e.test_success import readme_script
from tests.harness import ROOT, Harness, bot_environment, github_signature
from tests.tools.conftest import Remote
from tests.tracing.conftest import Receiver

pytestmark = pytest.mark.sandbox  # the task's quality gate runs in bubblewrap

COLLECTOR_KEY = "collector-key-0123456789"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def web(tmp_path: Path, receiver: Receiver) -> Iterator[str]:
    """``bot serve --role web`` with traces on, exporting to the receiver."""
    port = free_port()
    env = {
        **os.environ,
        **bot_environment(tmp_path),
        "BOT_TRACES_ENABLED": "true",
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
        "OTEL_EXPORTER_OTLP_HEADERS": f"authorization=Bearer {COLLECTOR_KEY}",
        "OTEL_SERVICE_NAME": "bot-web",
        "OTEL_BSP_SCHEDULE_DELAY": "50",
        "BOT_LOG_LEVEL": "WARNING",
    }
    command = [sys.executable, "-m", "bot", "serve", "--role", "web", "--port", str(port)]
    process = subprocess.Popen(command, env=env, cwd=ROOT)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert process.poll() is None, "bot serve exited"
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(15)


async def received(receiver: Receiver, name: str) -> None:
    for _ in range(200):
        if any(span.name == name for _, span in receiver.spans()):  # type: ignore[attr-defined]
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"no {name} span reached the receiver")


async def test_a_delivery_is_one_trace_across_the_web_and_the_worker_over_otlp(
    tmp_path: Path, remote: Remote, receiver: Receiver, web: str
) -> None:
    traces = TracesSettings(enabled=True, endpoint=receiver.url, service_name="bot-worker")
    overrides = {"observability": {"traces": traces}}
    async with Harness(tmp_path, script=readme_script(), overrides=overrides) as bot:
        github_repo(bot, remote, labels=("bug", "coding agent"))
        body = httpx.Request("POST", "/", json=gh_labeled()).content
        headers = {"X-GitHub-Event": "issues", "X-GitHub-Delivery": "delivery-1",
                   "X-Hub-Signature-256": github_signature(body)}  # fmt: skip
        async with httpx.AsyncClient(base_url=web) as client:
            answer = await client.post("/webhooks/github", content=body, headers=headers)
        assert answer.status_code == 202 and answer.json()["message"] == "queued"
        await received(receiver, "POST /webhooks/github")

        # the worker: this process, the same store, its own exporter
        environ = {"OTEL_EXPORTER_OTLP_HEADERS": f"authorization=Bearer {COLLECTOR_KEY}"}
        bot.runtime.start_traces(environ)
        assert tracing.enabled()
        try:
            await settle(bot)
            [task] = await bot.tasks()
            assert task.state is TaskState.DONE
        finally:
            await bot.runtime.stop_traces()  # exports what is left
        assert not tracing.enabled()

    spans = receiver.spans()
    by_name: dict[str, list[tuple[str, object]]] = {}
    for service, span in spans:
        by_name.setdefault(span.name, []).append((service, span))  # type: ignore[attr-defined]
    [(web_service, hook)] = by_name["POST /webhooks/github"]
    [(worker_service, dispatch)] = by_name["dispatch issues"]
    [(_, run)] = by_name["task run"]
    assert (web_service, worker_service) == ("bot-web", "bot-worker")
    assert hook.kind == 2  # type: ignore[attr-defined]  # SPAN_KIND_SERVER
    web_attributes = {a.key: a.value for a in hook.attributes}  # type: ignore[attr-defined]
    assert web_attributes["http.response.status_code"].int_value == 202
    assert web_attributes["bot.webhook.outcome"].string_value == "queued"
    assert web_attributes["bot.webhook.event"].string_value == "issues"
    assert web_attributes["bot.webhook.action"].string_value == "labeled"
    assert web_attributes["bot.webhook.delivery"].string_value == "delivery-1"
    assert hook.end_time_unix_nano > hook.start_time_unix_nano  # type: ignore[attr-defined]
    trace = hook.trace_id  # type: ignore[attr-defined]
    assert dispatch.trace_id == trace and dispatch.parent_span_id == hook.span_id  # type: ignore[attr-defined]
    assert run.trace_id == trace and run.parent_span_id == dispatch.span_id  # type: ignore[attr-defined]
    attributes = {a.key: a.value for a in run.attributes}  # type: ignore[attr-defined]
    assert attributes["bot.task.id"].string_value == task.id
    assert attributes["bot.outcome"].string_value == "done"
    chats = [span for _, span in by_name["chat scripted"]]
    assert len(chats) == 3 and all(c.trace_id == trace for c in chats)  # type: ignore[attr-defined]
    chat = {a.key: a.value for a in chats[0].attributes}  # type: ignore[attr-defined]
    assert chat["gen_ai.operation.name"].string_value == "chat"
    assert chat["gen_ai.usage.input_tokens"].int_value > 0
    assert {"stage plan", "stage execute", "stage deliver", "gate lint"} <= set(by_name)
    # OTLP/HTTP at /v1/traces, with the collector's key from the environment only
    assert set(receiver.paths) == {"/v1/traces"}
    assert {h.get("authorization") for h in receiver.headers} == {f"Bearer {COLLECTOR_KEY}"}
    assert {h.get("content-type") for h in receiver.headers} == {"application/x-protobuf"}
