"""A first and a second task on the same real repository (prints figures; not a test).

    .venv/bin/python bench/real_repo.py

The repository is a small Python package whose dependency (iniconfig) and test extra
(pytest) come from the package index, with a real test suite and a bug (``add`` subtracts),
served from a real git remote. Two issues ask for the fix; each is labelled in turn and run
by the real worker (`tests.harness.Harness`: the bot's app, store, worker and agent loop,
with the scripted model and the fake GitHub), which clones the repository, sets it up in
the sandbox, has the model's fix written, runs the project's tests as the quality gate,
pushes and opens the pull request.

Printed per task: wall time of set-up, of the agent (everything else) and of the gate,
and the forge calls: every call of the forge interface the bot made (the fake counts them),
and the GitHub REST requests they amount to with the real adapter (an issue read with its
comments is two requests, a repository's facts are read once in five minutes; both are
tested in tests/forges/test_github.py). Targets: the second task skips the installs, and a
simple task on a repository the bot has worked on before makes at most 25 forge calls.
Needs bubblewrap and the package index.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.e2e.support import GH_REPO, OWNER, gh_labeled, settle  # noqa: E402
from tests.e2e.test_real_repos import PYTHON_PACKAGE, fix_script  # noqa: E402
from tests.harness import Harness  # noqa: E402
from tests.tools.conftest import make_remote  # noqa: E402

TARGET_CALLS = 25
TITLES = {1: "add() subtracts", 2: "add() still subtracts on main"}


def rest_requests(calls: list[tuple[str, tuple[Any, ...]]], comments: int) -> int:
    """GitHub REST requests for these forge calls: one each, plus the comments page of an
    issue read with its comments, minus repository facts already read (cached 5 min)."""
    facts = sum(1 for name, _ in calls if name in ("get_repo_info", "clone_auth"))
    return len(calls) - facts + (1 if facts else 0) + comments


async def one_task(bot: Harness, number: int) -> dict[str, Any]:
    before = len(bot.github.calls)
    tally = Counter[str]()
    original = bot.github.get_issue

    async def counted(repo: Any, n: int, *, change_request: bool, comments: bool = True) -> Any:
        tally["with_comments"] += int(comments)
        return await original(repo, n, change_request=change_request, comments=comments)

    bot.github.get_issue = counted  # type: ignore[method-assign,assignment]
    started = time.monotonic()
    payload = gh_labeled(number=number, title=TITLES[number])
    assert (await bot.send_github("issues", payload)).status_code == 202
    await settle(bot)
    took = time.monotonic() - started
    bot.github.get_issue = original  # type: ignore[method-assign]
    task = next(t for t in await bot.tasks() if t.request.issue.number == number)
    checkpoint = await bot.store.load_checkpoint(task.id) or {}
    history = bot.settings.data_dir / "planning_history" / f"{task.id}.jsonl"
    entries = [json.loads(line) for line in history.read_text().splitlines()]
    gate = sum(float(e.get("duration", 0.0)) for e in entries if e["type"] == "quality")
    setup = checkpoint.get("setup") or {}
    calls = bot.github.calls[before:]
    return {
        "state": task.state.value,
        "setup_s": float(setup.get("duration", 0.0)),
        "setup": setup.get("status", "-"),
        "installs": len(setup.get("steps") or []),
        "gate_s": gate,
        "agent_s": took - float(setup.get("duration", 0.0)) - gate,
        "total_s": took,
        "calls": len(calls),
        "rest": rest_requests(calls, tally["with_comments"]),
        "by_method": Counter(name for name, _ in calls),
    }


async def main() -> int:
    with tempfile.TemporaryDirectory(prefix="bench-real-repo-") as tmp:
        base = Path(tmp)
        script = fix_script("a + b") + fix_script("a + b")
        async with Harness(base, script=script) as bot:
            remote = make_remote(base / "origin", PYTHON_PACKAGE)
            ref = bot.github.add_repo(
                GH_REPO, dict(PYTHON_PACKAGE), clone_url=remote.url, writers=(OWNER,)
            )
            for number, title in TITLES.items():
                bot.github.add_issue(ref, number, title=title, author=OWNER)
            rows = [await one_task(bot, number) for number in TITLES]
    print(
        f"{'task':<6}{'state':>8}{'set-up':>10}{'':>14}{'agent':>9}{'gate':>8}{'total':>9}"
        f"{'forge calls':>13}{'REST':>6}"
    )
    for number, row in enumerate(rows, start=1):
        setup = f"{row['setup']} ({row['installs']})"
        print(
            f"{number:<6}{row['state']:>8}{row['setup_s']:>9.2f}s{setup:>14}"
            f"{row['agent_s']:>8.2f}s{row['gate_s']:>7.2f}s{row['total_s']:>8.2f}s"
            f"{row['calls']:>13}{row['rest']:>6}"
        )
    for number, row in enumerate(rows, start=1):
        methods = ", ".join(f"{name} {count}" for name, count in row["by_method"].most_common())
        print(f"task {number} forge calls: {methods}")
    second = rows[1]
    skipped = second["setup"] == "restored" and second["installs"] == 0
    print("targets")
    print(f"  second task skips the installs: {'yes' if skipped else 'NO'}")
    print(
        f"  forge calls of the second task (target <= {TARGET_CALLS}): {second['calls']} "
        f"({second['rest']} GitHub REST requests)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
