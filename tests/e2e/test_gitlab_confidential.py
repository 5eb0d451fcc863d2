"""A task on a public GitLab issue: an internal note and a confidential issue of the same
project never reach the model, so they cannot reach the task's public comments either."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.forges.base import Comment
from tests.agent import docs
from tests.e2e.support import GL_REPO, bodies, gl_note, settle
from tests.e2e.test_gitlab import gitlab_project
from tests.harness import Harness
from tests.tools.conftest import Remote

pytestmark = pytest.mark.sandbox

INTERNAL = "Internal: the customer behind this is ACME-4471."
HIDDEN = "The admin password of staging is HUNTER-8812."


async def test_a_public_task_sees_no_internal_note_and_no_confidential_issue(
    tmp_path: Path, remote: Remote
) -> None:
    own = docs.action("task_1", "gitlab_get_issue", arguments={}, purpose="Read the issue")
    other = docs.action("task_2", "gitlab_get_issue", arguments={"number": 18},
                        purpose="Read the related issue")  # fmt: skip
    script = [docs.plan([own, other]), docs.reflection("task_2"),
              docs.completion(done=1, failed=1)]  # fmt: skip
    async with Harness(tmp_path, script=script) as bot:
        issue = gitlab_project(bot, remote)
        issue.comments.append(Comment(77, INTERNAL, "root", internal=True))
        repo = bot.gitlab.repos[GL_REPO].ref
        bot.gitlab.add_issue(repo, 18, title="Staging access", body=HIDDEN, confidential=True)
        payload = gl_note("/agent run")
        payload["issue"].update(title=issue.ref.title, description=issue.ref.body)
        assert (await bot.send_gitlab("Note Hook", payload)).status_code == 202
        await settle(bot)

        assert len(await bot.tasks()) == 1
        prompts = "\n".join(m.content for r in bot.llm.requests for m in r.messages)
        assert "Explain `make install`." in prompts  # the task did read its issue
        assert "refused: #18 is confidential and this task's issue #17 is not" in prompts
        assert "ACME-4471" not in prompts and "HUNTER-8812" not in prompts
        public = "\n".join(bodies(issue))
        assert "ACME-4471" not in public and "HUNTER-8812" not in public
