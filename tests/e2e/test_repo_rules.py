"""What a repository says in its `.agent.yaml`, and what it may never loosen, end to end."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.storage.base import TaskState
from tests.agent import docs
from tests.e2e.support import GH_REPO, ORIGIN_FILES, OWNER, gh_comment, origin, settle
from tests.fakes import FakeIssue
from tests.harness import Harness
from tests.tools.conftest import Remote

pytestmark = pytest.mark.sandbox

RULE = "Always write documentation in British English and keep lines under 80 characters."
AGENT_YAML = f"instructions: |\n  {RULE}\n"


def repo_with(bot: Harness, remote: Remote, files: dict[str, bytes]) -> FakeIssue:
    ref = bot.github.add_repo(GH_REPO, files, clone_url=remote.url, writers=(OWNER,))
    bot.github.add_issue(ref, 1, title="Spelling error in the README file", author=OWNER)
    return bot.github.issue(ref, 1)


async def test_repository_instructions_reach_the_planning_and_execution_prompts(
    tmp_path: Path,
) -> None:
    files = {**ORIGIN_FILES, ".agent.yaml": AGENT_YAML.encode()}
    remote = origin(tmp_path, files)
    action = docs.action("task_1", "write_file", purpose="Write the notes")
    script = [
        docs.plan([action]),
        docs.execution("task_1", "write_file", {"path": "NOTES.md", "content": "Notes\n"}),
        docs.completion(done=1),
    ]
    async with Harness(tmp_path, script=script) as bot:
        repo_with(bot, remote, files)
        await bot.send_github("issue_comment", gh_comment("/agent run"))
        await settle(bot)

        [task] = await bot.tasks()
        assert task.state is TaskState.DONE, task
        planning, execution = bot.llm.requests[0], bot.llm.requests[1]
        assert (planning.phase, execution.phase) == ("planning", "execution")
        for request in (planning, execution):
            prompt = request.messages[-1].content
            fenced = f'<untrusted source="instructions of the repository (.agent.yaml)">\n{RULE}'
            assert fenced in prompt, prompt
            assert "not system rules" in prompt
            # never in the system prompt
            assert RULE not in request.messages[0].content
