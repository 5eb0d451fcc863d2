"""Tokens per phase for two scripted tasks, against seed 004's budgets (prints; not a test).

    .venv/bin/python -m bench.agent_tokens

Runs the real coordinator (real prompts, real tools, SQLite store, the test suite's
FakeForge) with scripted answers, and counts prompt and answer tokens locally
(cl100k_base) per call: the simple README task and a multi-file task (read three
files in parallel, write three, one periodic reflection). Budgets from seed 004
13.4: planning < 2,000 tokens per call, reflection < 500 per call, a whole simple
task < 10,000.

For each call it also prints Anthropic's prompt-caching figure: the tokens of the
request's cacheable prefix in the Messages API format the bot sends (tools, then the
system prompt, up to the ``cache_control`` breakpoint), and how many of them a call reads
from the cache: the same prefix was sent earlier in the task, and it is at least
Anthropic's minimum cacheable length (1,024 tokens on Sonnet and Opus; shorter prefixes
are not cached at all).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bot.agent.cache import PlanCache  # noqa: E402
from bot.agent.loop import AgentLoop  # noqa: E402
from bot.agent.session import TaskContext  # noqa: E402
from bot.comments.render import agent_comment  # noqa: E402
from bot.config import PlanningSettings, Settings, StorageSettings, secret_values  # noqa: E402
from bot.events import TaskRequest  # noqa: E402
from bot.llm.anthropic import cached_prefix, message_body  # noqa: E402
from bot.llm.base import LLM, LLMRequest  # noqa: E402
from bot.llm.scripted import ScriptedLLM  # noqa: E402
from bot.llm.tokens import count_tokens  # noqa: E402
from bot.record.history import history_path  # noqa: E402
from bot.run_events import Emit, Outcome, ProgressEvent  # noqa: E402
from bot.storage.sqlite import SqliteStore  # noqa: E402
from bot.tools.factory import build_tools  # noqa: E402
from bot.tools.registry import Tool  # noqa: E402
from tests.fakes import FakeForge  # noqa: E402

MULTI_FILE_BODY = (
    "The command line tool should accept a `--verbose` flag. With the flag it prints extra "
    "detail about what it does (which widget it builds and where the output goes); without "
    "it the output must stay exactly as it is today, because several deployment scripts "
    "parse it line by line.\n\n"
    "Please also add a test in tests/test_cli.py that runs the tool with the flag and checks "
    "the extra line, and document the flag in the README, in a Usage section that shows the "
    "full command line. The flag should be the only change in behaviour."
)
BUDGETS = {"planning": 2000, "reflection": 500}
ANTHROPIC_MIN_CACHED = 1024  # tokens: Sonnet's and Opus's minimum cacheable prefix
SIMPLE_TASK_BUDGET = 10_000
README = "# Widgets\n\nA small widget library for dashboards.\n"
CLI = (
    "import argparse\n\n\ndef main(argv=None):\n    parser = argparse.ArgumentParser()\n"
    "    parser.add_argument('name')\n    args = parser.parse_args(argv)\n"
    "    print(f'hello {args.name}')\n"
)
TEST = "from widgets.cli import main\n\n\ndef test_main(capsys):\n    main(['x'])\n"


@dataclass
class Run:
    outcome: Outcome
    llm: LLM
    usage: list[dict[str, Any]]
    seconds: float


@dataclass
class Env:
    """A store and a forge that several runs can share (for the cache figures)."""

    tmp: Path
    store: SqliteStore
    forge: FakeForge
    settings: Settings
    cache: PlanCache | None = None


async def open_env(
    tmp: Path, stack: contextlib.AsyncExitStack, *, planning: PlanningSettings | None = None
) -> Env:
    settings = Settings(
        storage=StorageSettings(data_dir=tmp / "data"), planning=planning or PlanningSettings()
    )
    store = SqliteStore(tmp / "bot.sqlite3")
    await store.open()
    stack.push_async_callback(store.close)
    forge = FakeForge()
    files = {"README.md": README, "src/widgets/cli.py": CLI, "tests/test_cli.py": TEST}
    forge.add_repo("acme/widgets", files)
    return Env(tmp, store, forge, settings)


async def run_task(
    env: Env,
    stack: contextlib.AsyncExitStack,
    responses: list[Any],
    *,
    number: int,
    title: str,
    body: str,
    extra_tools: tuple[Tool, ...] = (),
    llm: LLM | None = None,
    emit: Emit | None = None,
) -> Run:
    repo = env.forge.repos["acme/widgets"].ref
    issue = env.forge.add_issue(repo, number, title=title, body=body)
    task, _ = await env.store.create_task(TaskRequest(issue, requested_by="alice"))
    built = await build_tools(
        settings=env.settings,
        forge=env.forge,
        issue=issue,
        task_id=task.id,
        base_branch="main",
        repo_config=None,
        stack=stack,
        finish_comment=agent_comment(task.id, secret_values(env.settings)),
    )
    for tool in extra_tools:
        built.registry.add(tool)
    model = llm or ScriptedLLM(responses)

    async def ignore(event: ProgressEvent) -> None:
        return None

    ctx = TaskContext(
        task=task,
        issue=issue,
        settings=env.settings,
        store=env.store,
        forge=env.forge,
        llm=model,
        tools=built.registry,
        emit=emit or ignore,
        data_dir=env.settings.data_dir,
        built=built,
    )
    started = time.perf_counter()
    outcome = await AgentLoop(cache=env.cache).run(ctx)
    seconds = time.perf_counter() - started
    path = history_path(env.settings.data_dir, task.id)
    entries = [json.loads(line) for line in path.read_text().splitlines()]
    return Run(outcome, model, [e for e in entries if e["type"] == "usage"], seconds)


def simple_script() -> list[Any]:
    data = yaml.safe_load((ROOT / "tests/agent/scripts/readme_simple.yaml").read_text())
    return list(data["responses"])


def _action(task_id: str, tool: str, **extra: Any) -> dict[str, Any]:
    return {"task_id": task_id, "action_type": "tool_call", "tool": tool, **extra}


def multi_file_script() -> list[Any]:
    paths = ["src/widgets/cli.py", "tests/test_cli.py", "README.md"]
    reads = [
        _action(
            f"read_{n}",
            "github_get_file_contents",
            arguments={"path": p},
            parallel_group=1,
            purpose=f"Read {p}",
            expected_outcome="the file text",
        )
        for n, p in enumerate(paths, start=1)
    ]
    writes = [
        _action(
            f"write_{n}",
            "github_create_or_update_file",
            purpose=f"Update {p}",
            expected_outcome=f"{p} updated",
            dependencies=[f"read_{n}"],
        )
        for n, p in enumerate(paths, start=1)
    ]
    subtasks = [
        {
            "id": a["task_id"],
            "description": a["purpose"],
            "dependencies": a.get("dependencies", []),
            "estimated_complexity": "low",
            "required_tools": [a["tool"]],
        }
        for a in reads + writes
    ]
    plan = {
        "phase": "planning",
        "goal_understanding": {
            "main_objective": "Add a --verbose flag to the CLI, with a test and documentation",
            "success_criteria": [
                "--verbose prints extra detail",
                "a test covers it",
                "README documents it",
            ],
            "constraints": ["keep the current output unchanged without the flag"],
            "context": "The CLI is src/widgets/cli.py",
        },
        "task_decomposition": {
            "reasoning": "Read the three files at once, then change code, test and docs.",
            "subtasks": subtasks,
        },
        "action_plan": {
            "execution_order": [a["task_id"] for a in reads + writes],
            "actions": reads + writes,
        },
        "comment": "Planning completed.",
    }
    contents = [
        CLI.replace(
            "    parser.add_argument('name')\n",
            "    parser.add_argument('name')\n    parser.add_argument('--verbose', "
            "action='store_true')\n",
        )
        + "    if args.verbose:\n        print('verbose mode')\n",
        TEST + "\n\ndef test_verbose(capsys):\n    main(['x', '--verbose'])\n"
        "    assert 'verbose mode' in capsys.readouterr().out\n",
        README + "\n## Usage\n\n    widgets NAME [--verbose]\n",
    ]
    executions = [
        {
            "phase": "execution",
            "current_task": f"write_{n}",
            "function_call": {
                "name": "github_create_or_update_file",
                "arguments": {"path": p, "content": c, "message": f"Update {p}"},
            },
            "comment": f"Writing {p}.",
        }
        for n, (p, c) in enumerate(zip(paths, contents, strict=True), start=1)
    ]
    reflection = {
        "phase": "reflection",
        "reflection": {
            "action_evaluated": "read_3",
            "status": "success",
            "evaluation": "All three files were read; the plan still fits.",
            "issues_identified": [],
            "success_criteria_met": False,
            "plan_revision_needed": False,
        },
        "comment": "On track.",
    }
    completion = {
        "phase": "completion",
        "status": "completed",
        "summary": {
            "goal_achieved": True,
            "tasks_completed": 6,
            "tasks_failed": 0,
            "key_outcomes": ["--verbose flag", "test_verbose", "README usage"],
            "lessons_learned": ["Reading files in parallel saved time"],
        },
        "done": True,
        "comment": "Done.",
    }
    return [plan, reflection, *executions, reflection, completion]


def table(name: str, run: Run) -> int:
    state = run.outcome.state.value
    print(f"\n{name}: {state}, {len(run.usage)} model calls, {run.seconds:.2f} s")
    print(f"  {'phase':<14} {'prompt':>7} {'answer':>7} {'total':>7}  budget")
    total = 0
    for entry in run.usage:
        phase = entry["phase"]
        both = entry["prompt_tokens"] + entry["completion_tokens"]
        total += both
        budget = BUDGETS.get(phase)
        verdict = "" if budget is None else f"< {budget:,}: {'ok' if both < budget else 'OVER'}"
        print(
            f"  {phase:<14} {entry['prompt_tokens']:>7,} {entry['completion_tokens']:>7,} "
            f"{both:>7,}  {verdict}"
        )
    print(f"  {'whole task':<14} {'':>7} {'':>7} {total:>7,}")
    return total


def anthropic_cache(requests: list[LLMRequest]) -> list[tuple[str, int, int]]:
    """(phase, prefix tokens, tokens read from the cache) per request, as Anthropic's
    Messages API would count them for the bodies the bot sends it."""
    seen: set[str] = set()
    rows = []
    for request in requests:
        mode = "json_schema" if request.schema is not None else "text"
        native = bool(request.functions)
        body = message_body(request, model="claude", mode=mode, native=native, prompt_cache=True)
        prefix = cached_prefix(body)
        tokens = count_tokens(prefix)
        read = tokens if prefix in seen and tokens >= ANTHROPIC_MIN_CACHED else 0
        seen.add(prefix)
        rows.append((request.phase, tokens, read))
    return rows


def cache_table(run: Run) -> None:
    if not isinstance(run.llm, ScriptedLLM):
        return
    rows = anthropic_cache(run.llm.requests)
    print(f"  Anthropic prompt cache (min {ANTHROPIC_MIN_CACHED:,} tokens):")
    print(f"  {'document':<14} {'prefix':>7} {'cached':>7}")
    for phase, tokens, read in rows:
        print(f"  {phase:<14} {tokens:>7,} {read:>7,}")
    print(f"  {'whole task':<14} {sum(r[1] for r in rows):>7,} {sum(r[2] for r in rows):>7,}")


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        async with contextlib.AsyncExitStack() as stack:
            env = await open_env(Path(tmp), stack)
            simple = await run_task(
                env,
                stack,
                simple_script(),
                number=7,
                title="Add installation steps to the README",
                body="Please add a section that explains `pip install widgets`.",
            )
            total = table("Simple README task", simple)
            cache_table(simple)
            verdict = "ok" if total < SIMPLE_TASK_BUDGET else "OVER"
            print(f"  whole simple task < {SIMPLE_TASK_BUDGET:,}: {verdict}")
            multi = await run_task(
                env,
                stack,
                multi_file_script(),
                number=8,
                title="Add a --verbose flag to the CLI",
                body=MULTI_FILE_BODY,
            )
            table("Multi-file task", multi)
            cache_table(multi)


if __name__ == "__main__":
    asyncio.run(main())
