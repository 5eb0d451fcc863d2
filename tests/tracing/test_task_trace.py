"""One trace per task run, read from the SDK's in-memory exporter: the README task from the
webhook to the pull request (names, parents, the GenAI conventions' attributes, no secret and
no prompt text), prompt text only with capture_content (redacted), and a task that waits for
the plan's approval and resumes in a trace of its own linked to the first."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.trace import SpanKind, StatusCode
from pydantic import SecretStr

from bot.storage.base import Task, TaskState
from tests.e2e.support import GH_REPO, gh_comment, gh_labeled, github_repo, settle
from tests.e2e.test_approval import write_plan
from tests.e2e.test_success import readme_script
from tests.harness import Harness
from tests.tools.conftest import Remote
from tests.tracing.conftest import Spans, in_memory

pytestmark = pytest.mark.sandbox  # the quality gate runs `make lint` in bubblewrap

SECRET = "ghp_" + "S" * 36  # a token someone pasted into the issue
BODY = f"The README needs an Installation section. My token is {SECRET}, do not tell."
TOKEN = "api-token-for-tests-0123456789abcdef"


@pytest.fixture
def content() -> Iterator[Spans]:
    yield from in_memory(capture_content=True)


async def readme_task(tmp_path: Path, remote: Remote) -> tuple[Harness, Task]:
    async with Harness(tmp_path, script=readme_script()) as bot:
        github_repo(bot, remote, labels=("bug", "coding agent"), body=BODY)
        response = await bot.send_github("issues", gh_labeled())
        assert response.status_code == 202
        await settle(bot)
        [task] = await bot.tasks()
        assert task.state is TaskState.DONE
    return bot, task


async def test_the_readme_task_is_one_trace_from_the_webhook_to_the_pull_request(
    tmp_path: Path, remote: Remote, spans: Spans
) -> None:
    bot, task = await readme_task(tmp_path, remote)

    hook = spans.one("POST /webhooks/github")
    assert hook.kind is SpanKind.SERVER and hook.parent is None
    assert hook.attributes is not None
    assert {k: hook.attributes[k] for k in ("http.response.status_code", "bot.webhook.outcome",
            "bot.webhook.event", "bot.webhook.action", "http.route")} == {
        "http.response.status_code": 202, "bot.webhook.outcome": "queued",
        "bot.webhook.event": "issues", "bot.webhook.action": "labeled",
        "http.route": "/webhooks/github",
    }  # fmt: skip
    dispatch = spans.one("dispatch issues")
    assert spans.parent(dispatch) is hook  # the worker's side of the same delivery
    assert dispatch.attributes is not None and dispatch.attributes["bot.task.id"] == task.id
    run = spans.one("task run")
    assert spans.parent(run) is dispatch
    assert run.attributes is not None
    assert {k: run.attributes[k] for k in ("bot.task.id", "bot.forge", "bot.repository",
            "bot.issue.number", "bot.outcome")} == {
        "bot.task.id": task.id, "bot.forge": "github", "bot.repository": GH_REPO,
        "bot.issue.number": 1, "bot.outcome": "done",
    }  # fmt: skip
    # one trace: everything the delivery led to
    assert {s.context.trace_id for s in spans.all} == {hook.context.trace_id}

    stages = [s for s in spans.all if s.name.startswith("stage ")]
    assert {s.name for s in stages} >= {"stage plan", "stage execute", "stage deliver"}
    assert all(spans.parent(s) is run for s in stages)

    chats = spans.named("chat scripted")
    assert len(chats) == len(bot.llm.requests) == 3  # plan, the write's arguments, completion
    for chat in chats:
        assert chat.kind is SpanKind.CLIENT and "task run" in spans.ancestors(chat)
        attributes = dict(chat.attributes or {})
        assert attributes["gen_ai.operation.name"] == "chat"
        assert attributes["gen_ai.provider.name"] == attributes["gen_ai.system"] == "scripted"
        assert attributes["gen_ai.request.model"] == attributes["gen_ai.response.model"]
        assert attributes["gen_ai.usage.input_tokens"] > 0  # type: ignore[operator]
        assert attributes["gen_ai.usage.output_tokens"] > 0  # type: ignore[operator]
        assert attributes["gen_ai.usage.cache_read.input_tokens"] == 0
        assert attributes["gen_ai.response.finish_reasons"] == ("stop",)
        assert attributes["bot.gen_ai.cost_usd"] == 0.0  # the scripted model has no price
        assert attributes["gen_ai.output.type"] in ("json", "text")
        assert "gen_ai.input.messages" not in attributes
        assert "gen_ai.output.messages" not in attributes
    # the plan, the write's arguments (asked before the call), the completion summary
    assert [spans.ancestors(c)[0] for c in chats] == ["stage plan", "stage execute",
                                                      "stage deliver"]  # fmt: skip

    read = spans.one("execute_tool read_file")
    write = spans.one("execute_tool write_file")
    for tool in (read, write):
        assert spans.parent(tool).name == "stage execute"  # type: ignore[union-attr]
        assert tool.attributes is not None
        assert tool.attributes["gen_ai.operation.name"] == "execute_tool"
        assert tool.attributes["bot.tool.outcome"] == "ok"
        assert "README.md" in str(tool.attributes["gen_ai.tool.call.arguments"])
        assert "gen_ai.tool.call.result" not in tool.attributes  # output only with content on
    assert spans.parent(spans.one("setup")).name == "stage execute"  # type: ignore[union-attr]
    gate = spans.one("gate lint")
    assert spans.parent(gate).name == "stage deliver"  # type: ignore[union-attr]
    assert gate.attributes is not None and gate.attributes["process.exit.code"] == 0
    assert gate.attributes["bot.command"] == "make lint"
    assert all(s.status.status_code is not StatusCode.ERROR for s in spans.all)

    text = "\n".join(spans.values())
    assert SECRET not in text and "T" * 36 not in text  # the and the bot's tokens
    assert "Installation section. My token" not in text  # no prompt text by default

    # the trace id is in the run report
    report = (bot.settings.data_dir / "runs" / task.id / "report.md").read_text()
    assert f"- **trace**: {run.context.trace_id:032x}\n" in report


async def test_content_is_captured_only_when_asked_and_redacted(
    tmp_path: Path, remote: Remote, content: Spans
) -> None:
    await readme_task(tmp_path, remote)
    chats = content.named("chat scripted")
    prompts = [str((c.attributes or {})["gen_ai.input.messages"]) for c in chats]
    answers = [str((c.attributes or {})["gen_ai.output.messages"]) for c in chats]
    assert any("Installation section. My token is [REDACTED]" in p for p in prompts)
    assert all('"role": "assistant"' in a for a in answers)
    assert SECRET not in "\n".join(content.values())
    write = content.one("execute_tool write_file")
    assert "gen_ai.tool.call.result" in (write.attributes or {})


async def test_a_task_waiting_for_approval_resumes_in_a_trace_linked_to_the_first(
    tmp_path: Path, remote: Remote, spans: Spans
) -> None:
    from tests.agent import docs

    async with Harness(tmp_path, script=[write_plan(), docs.completion(done=1)]) as bot:
        github_repo(bot, remote, labels=("bug",))
        await bot.send_github("issue_comment", gh_comment("/agent plan"))
        await settle(bot)
        [task] = await bot.tasks()
        assert task.state is TaskState.AWAITING_APPROVAL
        [first] = spans.named("task run")
        wait = spans.one("wait plan")
        assert "task run" in spans.ancestors(wait)
        assert (wait.attributes or {})["bot.wait.kind"] == "plan"
        # the wait lasts until the run that asked ends
        assert wait.end_time is not None and first.end_time is not None
        assert wait.start_time is not None and wait.end_time - wait.start_time > 0
        assert 0 <= first.end_time - wait.end_time < 50_000_000  # ns: ended by the run's end
        assert (first.attributes or {})["bot.outcome"] == "awaiting_approval"

        await bot.send_github("issue_comment", gh_comment("/agent approve"))
        await settle(bot)
        [task] = await bot.tasks()
        assert task.state is TaskState.DONE

    first_run, second = spans.named("task run")
    assert first_run.context == first.context
    assert second.parent is None  # a trace of its own
    assert second.context.trace_id != first.context.trace_id
    [link] = second.links
    assert link.context.span_id == first.context.span_id
    assert link.context.trace_id == first.context.trace_id
    assert (second.attributes or {})["bot.task.runs_before"] == 1
    assert (second.attributes or {})["bot.outcome"] == "done"
    # the approving comment is a delivery of its own, handled in its own trace
    approve_hooks = spans.named("POST /webhooks/github")
    assert len(approve_hooks) == 2


async def test_the_api_and_the_dashboard_show_the_trace_as_a_link(
    tmp_path: Path, remote: Remote, spans: Spans
) -> None:
    from bot.config import ObservabilitySettings

    observability = ObservabilitySettings(trace_url="http://jaeger.test:16686/trace/{trace_id}")
    overrides = {"server": {"api_token": SecretStr(TOKEN)}}
    async with Harness(tmp_path, script=readme_script(), overrides=overrides) as bot:
        bot.runtime.settings = bot.settings = bot.settings.model_copy(
            update={"observability": observability}
        )
        github_repo(bot, remote, labels=("bug", "coding agent"))
        await bot.send_github("issues", gh_labeled())
        await settle(bot)
        [task] = await bot.tasks()
        trace_id = f"{spans.one('task run').context.trace_id:032x}"
        auth = {"Authorization": f"Bearer {TOKEN}"}
        shown = (await bot.client.get(f"/api/tasks/{task.id}", headers=auth)).json()
        assert shown["trace_id"] == trace_id
        assert shown["trace_url"] == f"http://jaeger.test:16686/trace/{trace_id}"

        login = await bot.client.post("/dashboard/login", data={"token": TOKEN})
        assert login.status_code == 303
        page = await bot.client.get(f"/dashboard/tasks/{task.id}")
        assert page.status_code == 200
        assert (
            f'<p id="trace">trace: <a href="http://jaeger.test:16686/trace/{trace_id}" '
            f'rel="noopener noreferrer">{trace_id}</a></p>'
        ) in page.text
