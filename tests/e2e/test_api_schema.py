"""A property-based run of the API's own OpenAPI description against the real app
(schemathesis): for every operation, generated requests with the token never get a
server error, and every answer has the status, content type and body the description
promises."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings

from tests.e2e.support import run_labelled_issue
from tests.e2e.test_api import AUTH, WITH_API
from tests.e2e.test_success import readme_script
from tests.harness import Harness
from tests.tools.conftest import Remote

pytestmark = pytest.mark.sandbox

EXAMPLES = 30  # per operation


async def test_the_api_keeps_to_its_openapi_description(tmp_path: Path, remote: Remote) -> None:
    async with Harness(tmp_path, script=readme_script(), overrides=WITH_API) as bot:
        await run_labelled_issue(bot, remote)  # some generated ids can hit a real task
        description = (await bot.client.get("/api/openapi.json")).json()
        schema = schemathesis.openapi.from_dict(description)
        loop = asyncio.get_running_loop()
        checked: list[str] = []

        def send(case: Any) -> httpx.Response:
            kwargs = case.as_transport_kwargs(base_url="http://bot.test/api", headers=AUTH)
            request = bot.client.request(
                kwargs["method"],
                kwargs["url"],
                params=kwargs.get("params"),
                headers=kwargs.get("headers"),
                json=kwargs.get("json"),
                content=kwargs.get("data"),
            )
            return asyncio.run_coroutine_threadsafe(request, loop).result(timeout=30)

        def exercise() -> None:
            # Hypothesis drives the cases in this thread; each request runs on the test's
            # event loop, where the app and its store live.
            for found in schema.get_all_operations():
                operation = found.ok()

                @settings(max_examples=EXAMPLES, deadline=None, database=None,
                          derandomize=True, suppress_health_check=list(HealthCheck))  # fmt: skip
                @given(case=operation.as_strategy())
                def check(case: Any) -> None:
                    case.validate_response(send(case))

                check()
                checked.append(f"{operation.method.upper()} {operation.path}")

        await asyncio.to_thread(exercise)
        described = {
            f"{method.upper()} {path}"
            for path, methods in description["paths"].items()
            for method in methods
        }
        assert set(checked) == described, checked  # every operation of the description ran
        assert {"POST /tasks", "DELETE /tasks/{task_id}", "GET /tasks/{task_id}/artifacts",
                "POST /tasks/{task_id}/reject", "GET /config", "POST /config/validate",
                "PUT /config", "GET /status", "GET /extensions", "POST /tickets",
                "POST /tasks/{task_id}/answer"} <= described  # fmt: skip
