"""The coordinator's own cost (prints figures; not a test).

    .venv/bin/python -m bench.agent_overhead

1. Time per action with an instant model and instant tools: a plan of N actions
   whose arguments are complete (no model call per action), each checkpointed to
   SQLite and written to the history file (target < 5 ms per action).
2. Wall time of one parallel group of 4 actions that take 200 ms each
   (target < 300 ms: they overlap).
3. Model calls saved by the plan cache when a replay repeats tasks (exact repeats
   and reworded ones), against the same replay with the cache off.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.agent_tokens import open_env, run_task, simple_script  # noqa: E402
from bot.agent.cache import PlanCache  # noqa: E402
from bot.config import PlanningSettings  # noqa: E402
from bot.llm.base import HealthReport, LLMRequest, LLMResponse, Usage  # noqa: E402
from bot.llm.tokens import count_messages, count_tokens  # noqa: E402
from bot.run_events import ProgressEvent, ProgressKind  # noqa: E402
from bot.tools.registry import Tool, ToolResult  # noqa: E402

ACTIONS = 200


class ByPhaseLLM:
    """Answers each request with the next scripted document of the requested phase, so
    a run that skips planning (a cache hit) still gets the right answers."""

    name = "by-phase"

    def __init__(self, script: list[dict[str, Any]]) -> None:
        self.queues: dict[str, list[dict[str, Any]]] = {}
        for doc in script:
            self.queues.setdefault(str(doc["phase"]), []).append(doc)
        self.requests: list[LLMRequest] = []

    async def complete(self, request: LLMRequest) -> LLMResponse:
        self.requests.append(request)
        text = json.dumps(self.queues[request.phase].pop(0))
        usage = Usage(count_messages(request.messages), count_tokens(text))
        return LLMResponse(text=text, usage=usage, model="by-phase")

    async def health(self) -> HealthReport:
        return HealthReport(True, "by-phase", "", "by-phase")

    async def aclose(self) -> None:
        return None


SLOW_SECONDS = 0.2
_SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


def _tool(name: str, delay: float) -> Tool:
    async def handler(args: dict[str, Any]) -> ToolResult:
        if delay:
            await asyncio.sleep(delay)
        return ToolResult.success(f"result {args['n']}")

    return Tool(name, "Return a result.", _SCHEMA, handler)


def _plan(tool: str, count: int, *, group: int | None) -> dict[str, Any]:
    actions = [
        {
            "task_id": f"t{n}",
            "tool": tool,
            "arguments": {"n": n},
            "purpose": f"step {n}",
            **({"parallel_group": group} if group is not None else {}),
        }
        for n in range(count)
    ]
    subtasks = [
        {
            "id": a["task_id"],
            "description": a["purpose"],
            "dependencies": [],
            "estimated_complexity": "low",
            "required_tools": [tool],
        }
        for a in actions
    ]
    return {
        "phase": "planning",
        "goal_understanding": {
            "main_objective": "Run the steps",
            "success_criteria": [],
            "constraints": [],
            "context": "",
        },
        "task_decomposition": {"reasoning": "none needed", "subtasks": subtasks},
        "action_plan": {"actions": actions},
        "comment": "ok",
    }


def _completion(count: int) -> dict[str, Any]:
    return {
        "phase": "completion",
        "status": "completed",
        "summary": {
            "goal_achieved": True,
            "tasks_completed": count,
            "tasks_failed": 0,
            "key_outcomes": [],
            "lessons_learned": [],
        },
        "done": True,
        "comment": "done",
    }


def _quiet_planning(**changes: Any) -> PlanningSettings:
    base = PlanningSettings().model_dump()
    base["max_subtasks"] = 1000
    base["reflection"]["trigger_interval"] = 0
    base.update(changes)
    return PlanningSettings.model_validate(base)


async def per_action(tmp: Path) -> None:
    """The time between the first action starting and the last one ending, per action:
    planning and completion (one model call each) are left out. Beside the wall time, the
    process's CPU time over the same span (all threads: the store's writer too), which
    other load on a shared machine hardly moves, so two checkouts compare."""
    stamps: list[tuple[float, float]] = []

    async def on_event(event: ProgressEvent) -> None:
        if event.kind is ProgressKind.ACTION:
            stamps.append((time.perf_counter(), time.process_time()))

    async with contextlib.AsyncExitStack() as stack:
        env = await open_env(tmp, stack, planning=_quiet_planning())
        script = [_plan("instant", ACTIONS, group=None), _completion(ACTIONS)]
        task_cpu = time.process_time()
        run = await run_task(
            env,
            stack,
            script,
            number=1,
            title="Run the steps",
            body="Run them.",
            extra_tools=(_tool("instant", 0.0),),
            emit=on_event,
        )
        task_cpu = time.process_time() - task_cpu
    per = (stamps[-1][0] - stamps[0][0]) / ACTIONS * 1000
    cpu = (stamps[-1][1] - stamps[0][1]) / ACTIONS * 1000
    print(
        f"1. {ACTIONS} actions, instant model and tools: {per:.2f} ms per action "
        f"(target < 5 ms; whole task {run.seconds:.2f} s) [{run.outcome.state.value}]; "
        f"CPU time {cpu:.2f} ms per action, whole task {task_cpu:.2f} s"
    )


async def parallel_group(tmp: Path) -> None:
    async with contextlib.AsyncExitStack() as stack:
        env = await open_env(tmp, stack, planning=_quiet_planning())
        script = [_plan("slow", 4, group=1), _completion(4)]
        run = await run_task(
            env,
            stack,
            script,
            number=1,
            title="Run the steps",
            body="Run them.",
            extra_tools=(_tool("slow", SLOW_SECONDS),),
        )
    print(
        f"2. one parallel group of 4 x {SLOW_SECONDS * 1000:.0f} ms actions: "
        f"{run.seconds * 1000:.0f} ms wall time for the whole task (target < 300 ms) "
        f"[{run.outcome.state.value}]"
    )


REPLAY = [
    ("Add installation steps to the README", "Please explain `pip install widgets`."),
    ("Add installation steps to the README", "Please explain `pip install widgets`."),
    ("Add installation steps to the README.", "Please explain `pip install widgets`!"),
    ("Add install steps to the README", "Please explain `pip install widgets`."),
    ("Fix the typo in CONTRIBUTING", "It says 'recieve'."),
    ("Add installation steps to the README", "Please explain `pip install widgets`."),
]


async def _replay(tmp: Path, *, cached: bool) -> tuple[int, int]:
    """(model calls, planning calls) for the replay."""
    calls = planning = 0
    async with contextlib.AsyncExitStack() as stack:
        settings = _quiet_planning(cache={"enabled": cached, "ttl": 86400})
        env = await open_env(tmp, stack, planning=settings)
        if cached:
            env.cache = PlanCache(env.store, env.settings.planning)
        for number, (title, body) in enumerate(REPLAY, start=1):
            llm = ByPhaseLLM(simple_script())
            run = await run_task(env, stack, [], number=number, title=title, body=body, llm=llm)
            assert run.outcome.state.value == "done", run.outcome
            calls += len(llm.requests)
            planning += sum(1 for r in llm.requests if r.phase == "planning")
    return calls, planning


async def cache_savings(tmp: Path) -> None:
    without = await _replay(tmp / "off", cached=False)
    with_cache = await _replay(tmp / "on", cached=True)
    saved = without[0] - with_cache[0]
    print(
        f"3. replay of {len(REPLAY)} tasks (4 alike, 1 reworded, 1 different): "
        f"{without[0]} model calls without the cache ({without[1]} planning), "
        f"{with_cache[0]} with it ({with_cache[1]} planning): {saved} saved "
        f"({saved / without[0]:.0%})"
    )


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        await per_action(base / "per_action")
        await parallel_group(base / "parallel")
        await cache_savings(base / "cache")


if __name__ == "__main__":
    started = time.perf_counter()
    asyncio.run(main())
    print(f"(benchmark took {time.perf_counter() - started:.1f} s)")
