"""Per-repository (``.agent.yaml`` ``planning:``) and per-person (``user_config_api``)
planning settings, end to end: bounds refused with a comment naming the key, the
effective settings in the run report and the API, and two people's tasks interleaved
against a real local user-config service without one's settings reaching the other's."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import pytest

from bot.config import PlanningSettings, UserConfigApiSettings
from bot.llm.base import LLMRequest
from bot.storage.base import TaskState
from tests.agent import docs
from tests.e2e.support import GH_REPO, ORIGIN_FILES, OWNER, gh_comment, of_kind, origin, settle
from tests.e2e.test_api import AUTH, WITH_API
from tests.harness import Harness
from tests.user_config_server import UserConfigServer, document, user_config_server

pytestmark = pytest.mark.sandbox

HIERARCHICAL = "Method: decompose top-down"
SIMPLE = "Method: a short flat list of steps"
CHAIN = 'Method: think step by step in "reasoning"'


def one_write(path: str = "NOTES.md") -> dict[str, object]:
    action = docs.action(
        "task_1", "write_file", arguments={"path": path, "content": "Notes\n"}, purpose="Write"
    )
    return docs.plan([action], objective=f"Write {path}")


def with_user_config(service: UserConfigServer, **extra: Any) -> dict[str, Any]:
    api = UserConfigApiSettings(enabled=True, url=service.url, timeout=5, cache_ttl=300)
    return {"planning": {"user_config_api": api}, **extra}


def planning_prompt(request: LLMRequest) -> str:
    assert request.phase == "planning"
    return request.messages[-1].content


async def test_repository_planning_keys_apply_within_bounds_and_refusals_are_named(
    tmp_path: Path,
) -> None:
    agent_yaml = (
        "planning:\n"
        "  strategy: hierarchical\n"
        "  revision:\n"
        "    max_revisions: 10\n"  # the server allows 3
        "  security:\n"
        "    forbidden_tools: []\n"
    )
    files = {**ORIGIN_FILES, ".agent.yaml": agent_yaml.encode()}
    remote = origin(tmp_path, files)
    async with Harness(tmp_path, script=[one_write(), docs.completion(done=1)]) as bot:
        ref = bot.github.add_repo(GH_REPO, files, clone_url=remote.url, writers=(OWNER,))
        bot.github.add_issue(ref, 1, title="Write the notes", author=OWNER)
        issue = bot.github.issue(ref, 1)
        await bot.send_github("issue_comment", gh_comment("/agent run"))
        await settle(bot)

        [task] = await bot.tasks()
        assert task.state is TaskState.DONE, task
        assert HIERARCHICAL in planning_prompt(bot.llm.requests[0])

        [refused] = of_kind(issue, "settings_refused")
        assert refused.startswith("### ⚠️ Some planning settings were not applied\n")
        assert (
            "- `planning.revision.max_revisions` = `10` from the repository's `.agent.yaml`: "
            "refused: at most `3` (the server's value)"
        ) in refused
        assert (
            "- `planning.security` = `{'forbidden_tools': []}` from the repository's "
            "`.agent.yaml`: refused: a server setting"
        ) in refused

        run_dir = bot.settings.data_dir / "runs" / task.id
        report = (run_dir / "report.md").read_text(encoding="utf-8")
        settings_part = report.split("## Planning settings\n", 1)[1]
        assert '- `planning.strategy` = `"hierarchical"` (repository)' in settings_part
        assert "- `planning.revision.max_revisions` = `3` (server)" in settings_part
        assert "- refused: planning.revision.max_revisions: 10 from the repository" in report
        recorded = json.loads((run_dir / "task.json").read_text(encoding="utf-8"))
        assert recorded["planning"]["values"]["planning.strategy"] == "hierarchical"


async def test_the_refusal_comment_is_posted_once_over_a_tasks_runs(tmp_path: Path) -> None:
    files = {**ORIGIN_FILES, ".agent.yaml": b"planning:\n  max_subtasks: 1000\n"}
    remote = origin(tmp_path, files)
    async with Harness(tmp_path, script=[one_write(), docs.completion(done=1)]) as bot:
        ref = bot.github.add_repo(GH_REPO, files, clone_url=remote.url, writers=(OWNER,))
        bot.github.add_issue(ref, 1, title="Write the notes", author=OWNER)
        issue = bot.github.issue(ref, 1)
        await bot.send_github("issue_comment", gh_comment("/agent plan"))
        await settle(bot)
        [task] = await bot.tasks()
        assert task.state is TaskState.AWAITING_APPROVAL
        await bot.send_github("issue_comment", gh_comment("/agent approve"))
        await settle(bot)

        [task] = await bot.tasks()
        assert task.state is TaskState.DONE, task
        [refused] = of_kind(issue, "settings_refused")  # the second run edited, not reposted
        assert "`planning.max_subtasks` = `1000`" in refused and "at most `100`" in refused


async def test_two_peoples_tasks_interleaved_each_get_their_own_settings(tmp_path: Path) -> None:
    remote = origin(tmp_path)
    with user_config_server() as service:
        alice_waits = threading.Event()  # alice's answer is held until bob's is sent
        service.answers["alice"] = document({"strategy": "hierarchical"})
        service.answers["alice"].hold = alice_waits
        service.answers["bob"] = document({"strategy": "simple", "max_subtasks": 5})
        service.answers["bob"].release = alice_waits
        script = [one_write("A.md"), one_write("B.md"), one_write("C.md")]  # any order
        async with Harness(tmp_path, script=script, overrides=with_user_config(service)) as bot:
            ref = bot.github.add_repo(
                GH_REPO, dict(ORIGIN_FILES), clone_url=remote.url, writers=("alice", "bob", "carol")
            )
            bot.github.add_issue(ref, 1, title="Alice's notes", author="alice")
            bot.github.add_issue(ref, 2, title="Bob's notes", author="bob")
            await bot.send_github("issue_comment", gh_comment("/agent plan", "alice"))
            await bot.send_github(
                "issue_comment", gh_comment("/agent plan", "bob", number=2, title="Bob's notes")
            )
            await bot.dispatch_all()
            first, second = await bot.worker.lease_next(), await bot.worker.lease_next()
            assert first is not None and second is not None
            await asyncio.gather(bot.worker.run_task(first), bot.worker.run_task(second))

            # both asked before either was answered; bob's answer went out first
            assert sorted(service.asked) == ["github/alice", "github/bob"]
            assert service.answered == ["bob", "alice"]
            tasks = {t.request.requested_by: t for t in await bot.tasks()}
            assert {p: t.state for p, t in tasks.items()} == {
                "alice": TaskState.AWAITING_APPROVAL,
                "bob": TaskState.AWAITING_APPROVAL,
            }
            prompts = {
                "alice": [p for p in map(planning_prompt, bot.llm.requests) if "Alice's" in p],
                "bob": [p for p in map(planning_prompt, bot.llm.requests) if "Bob's" in p],
            }
            [alice], [bob] = prompts["alice"], prompts["bob"]
            assert HIERARCHICAL in alice and SIMPLE not in alice
            assert SIMPLE in bob and HIERARCHICAL not in bob
            assert "At most 5 subtasks" in bob  # bob's max_subtasks
            assert "At most 100 subtasks" in alice

            # a third person has no settings: the server's, from the same cached service
            bot.github.add_issue(ref, 3, title="Carol's notes", author="carol")
            await bot.send_github(
                "issue_comment", gh_comment("/agent plan", "carol", number=3, title="Carol's notes")
            )
            await settle(bot)
            carol = planning_prompt(bot.llm.requests[-1])
            assert "Carol's" in carol and CHAIN in carol
            assert service.count("alice") == service.count("bob") == 1


async def test_the_api_answers_the_merged_settings_of_a_repository_and_a_person(
    tmp_path: Path,
) -> None:
    agent_yaml = b"planning:\n  decomposition_level: detailed\n  revision:\n    max_revisions: 1\n"
    with user_config_server() as service:
        service.answers["alice"] = document(
            {"strategy": "simple", "revision": {"max_revisions": 2}}
        )
        async with Harness(tmp_path, overrides=with_user_config(service, **WITH_API)) as bot:
            files = {**ORIGIN_FILES, ".agent.yaml": agent_yaml}
            bot.github.add_repo(GH_REPO, files, writers=(OWNER,))
            response = await bot.client.get(
                "/api/settings/effective",
                params={"repo": GH_REPO, "user": "alice"},
                headers=AUTH,
            )
            assert response.status_code == 200, response.text
            body = response.json()
            assert (body["repo"], body["user"], body["forge"]) == (GH_REPO, "alice", "github")
            planning = PlanningSettings.model_validate(body["settings"]["planning"])
            assert planning.decomposition_level == "detailed"
            assert planning.strategy == "simple"
            assert planning.revision.max_revisions == 1  # alice's 2 is above the repository's
            assert [(a["key"], a["source"]) for a in body["overrides_applied"]] == [
                ("planning.decomposition_level", "repository"),
                ("planning.revision.max_revisions", "repository"),
                ("planning.strategy", "user"),
            ]
            [refused] = body["refused"]
            assert refused["key"] == "planning.revision.max_revisions"
            assert (refused["layer"], refused["limit"], refused["limit_from"]) == (
                "user",
                1,
                "repository",
            )
            assert body["repo_config_error"] is None
            assert body["settings"]["server"]["api_token"] == "***"

            server_only = await bot.client.get("/api/settings/effective", headers=AUTH)
            assert server_only.json()["overrides_applied"] == []
            unknown = await bot.client.get(
                "/api/settings/effective", params={"repo": "nobody/nothing"}, headers=AUTH
            )
            assert unknown.status_code == 404

            bot.github.repos[GH_REPO].branches["main"][".agent.yaml"] = b"planing: {}\n"
            broken = await bot.client.get(
                "/api/settings/effective", params={"repo": GH_REPO}, headers=AUTH
            )
            assert broken.status_code == 200
            assert "planing: unknown key" in broken.json()["repo_config_error"]


async def test_the_api_falls_back_to_the_server_settings_when_the_service_fails(
    tmp_path: Path,
) -> None:
    with user_config_server() as service:
        service.answers["alice"] = document({"strategy": "simple"})
        service.answers["alice"].status = 503
        async with Harness(tmp_path, overrides=with_user_config(service, **WITH_API)) as bot:
            response = await bot.client.get(
                "/api/settings/effective", params={"user": "alice"}, headers=AUTH
            )
            assert response.status_code == 200, response.text
            body = response.json()
            assert body["overrides_applied"] == [] and body["refused"] == []
            assert body["settings"]["planning"]["strategy"] == "chain_of_thought"
            assert service.asked == ["github/alice"]
