"""`comments.language`: auto answers in the issue's language; en / ja force one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bot.storage.base import TaskState
from tests.agent import docs
from tests.e2e.support import (
    bodies,
    gh_comment,
    gh_labeled,
    github_repo,
    of_kind,
    settle,
    status_comment,
)
from tests.harness import Harness
from tests.tools.conftest import Remote

pytestmark = pytest.mark.sandbox

JA_TITLE = "README にインストール手順を追加する"
JA_BODY = "インストールの方法が書かれていません。`make install` の説明を追加してください。"
JA_ISSUE = {"title": JA_TITLE, "body": JA_BODY}


def one_write() -> list[object]:
    action = docs.action("task_1", "write_file", arguments={"path": "a.txt", "content": "A\n"},
                         purpose="a.txt を書く")  # fmt: skip
    return [docs.plan([action], objective="a.txt を追加する"), docs.completion(done=1)]


def ja_comment(body: str, sender: str = "Codertocat") -> dict[str, Any]:
    return gh_comment(body, sender, **JA_ISSUE)


async def test_a_japanese_issue_gets_japanese_comments(tmp_path: Path, remote: Remote) -> None:
    async with Harness(tmp_path, script=one_write()) as bot:
        issue = github_repo(bot, remote, **JA_ISSUE)
        await bot.send_github("issue_comment", ja_comment("/agent plan"))
        await settle(bot)

        [ask] = of_kind(issue, "approval_request")
        assert ask.startswith(
            "### ✋ 承認をお願いします\n実行する前に、次の計画を承認してください:\n"
        )
        assert "`/agent reject <理由>` と返信してください。1 時間までお待ちします。" in ask
        status = status_comment(issue)
        assert status.startswith("### コーディングエージェント — ✋ 承認待ち\n")
        assert "> **対応をお待ちしています:** 計画の承認" in status
        assert "フェーズ: **行動の計画** · 進捗: **0/1** · トークン:" in status
        assert "- [ ] ⬜ do task_1" in status and "<summary>計画（JSON）</summary>" in status

        await bot.send_github("issue_comment", ja_comment("/agent approve"))
        await bot.send_github("issue_comment", ja_comment("/agent help"))
        await settle(bot)

        [task] = await bot.tasks()
        assert task.state is TaskState.DONE
        [ack] = [b for b in bodies(issue) if b.startswith("> /agent approve")]
        assert "@Codertocat さんが承認しました。続行します。" in ack
        [help_reply] = [b for b in bodies(issue) if b.startswith("> /agent help")]
        assert "使えるコマンドは次のとおりです:" in help_reply
        [done] = of_kind(issue, "completion")
        assert done.startswith("### ✅ 完了しました\n完了したサブタスク: **1**、失敗: **0**。")
        assert "ブランチ: `agent/1-readme` · 変更リクエスト: https://github.example/" in done
        assert remote.show("agent/1-readme", "a.txt") == b"A\n"
        status = status_comment(issue)
        assert status.startswith("### コーディングエージェント — ✅ 完了\n")
        assert "対応をお待ちしています" not in status
        assert issue.labels == ["coding agent done"]


@pytest.mark.parametrize(
    ("language", "issue_text", "heading"),
    [
        ("en", JA_ISSUE, "### Coding agent — ✅ Done\n"),
        ("ja", {}, "### コーディングエージェント — ✅ 完了\n"),
    ],
)
async def test_a_configured_language_wins_over_the_issues(
    tmp_path: Path, remote: Remote, language: str, issue_text: dict[str, str], heading: str
) -> None:
    overrides = {"comments": {"language": language}}
    async with Harness(tmp_path, script=one_write(), overrides=overrides) as bot:
        issue = github_repo(bot, remote, **issue_text)
        await bot.send_github("issues", gh_labeled(**issue_text))
        await bot.send_github("issue_comment", gh_comment("/agent run", "mallory", **issue_text))
        await settle(bot)

        assert status_comment(issue).startswith(heading)
        [denied] = [b for b in bodies(issue) if b.startswith("> /agent run")]
        if language == "en":
            assert "Sorry, only people with write, maintain or admin access" in denied
            assert of_kind(issue, "completion")[0].startswith("### ✅ Done\n")
        else:
            assert "申し訳ありません。コーディングエージェントの開始・操作ができるのは" in denied
            assert of_kind(issue, "completion")[0].startswith("### ✅ 完了しました\n")
