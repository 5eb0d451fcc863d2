"""`bot eval mine` on a repository with a known history, through the real sandbox."""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from bot.eval.mine import IssueSource, Mining, Source, Verdict, mine
from bot.eval.mine_cli import add_mine_command, run_mine
from bot.eval.scoring import score_patch
from bot.events import ForgeKind
from tests.eval.projects import TEST_COMMAND, commit, git, new_repo, settings_for
from tests.fakes import FakeForge

pytestmark = [
    pytest.mark.sandbox,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap missing"),
]

CALC = "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a + b\n"
TEST_ADD = "from calc import add, sub\n\n\ndef test_add():\n    assert add(1, 2) == 3\n"
NEG = "\n\ndef neg(x):\n    return -x\n"
MUL = "\n\ndef mul(a, b):\n    return a + b\n"
TEST_SUB = (
    "\n\nimport pytest\n\n\ndef test_sub():\n    assert sub(3, 1) == 2\n\n\n"
    "@pytest.mark.parametrize('a', [1, 2])\ndef test_sub_self(a):\n    assert sub(a, a) == 0\n"
)
TEST_MUL = "from calc import mul\n\n\ndef test_mul():\n    assert mul(2, 3) == 6\n"


def build_history(root: Path) -> dict[str, str]:
    """Seven commits: which qualify is known."""
    repo, initial = new_repo(root, {"calc.py": CALC, "tests/test_calc.py": TEST_ADD})
    shas = {"initial": initial}
    shas["code_only"] = commit(
        repo, {"calc.py": CALC + NEG}, "Add neg", date="2024-01-02T10:00:00Z"
    )
    shas["tests_only"] = commit(
        repo,
        {
            "tests/test_neg.py": "from calc import neg\n\n\ndef test_neg():\n"
            "    assert neg(2) == -2\n"
        },
        "Test neg",
        date="2024-01-03T10:00:00Z",
    )
    fixed = CALC.replace("def sub(a, b):\n    return a + b", "def sub(a, b):\n    return a - b")
    shas["fix"] = commit(
        repo,
        {"calc.py": fixed + NEG, "tests/test_calc.py": TEST_ADD + TEST_SUB},
        "Fix sub\n\nIt added.",
        date="2024-01-04T10:00:00Z",
    )
    shas["passed_before"] = commit(
        repo,
        {
            "calc.py": fixed.replace("return a + b", "return sum((a, b))") + NEG,
            "tests/test_more.py": "from calc import add\n\n\ndef test_add_more():\n"
            "    assert add(2, 2) == 4\n",
        },
        "Refactor add",
        date="2024-01-05T10:00:00Z",
    )
    current = fixed.replace("return a + b", "return sum((a, b))") + NEG
    shas["no_run"] = commit(
        repo,
        {"calc.py": current + MUL, "tests/test_mul.py": "def test_mul(:\n"},
        "Add mul",
        date="2024-03-01T10:00:00Z",
    )
    shas["fixes_3"] = commit(
        repo,
        {"calc.py": current + MUL.replace("a + b", "a * b"), "tests/test_mul.py": TEST_MUL},
        "Make mul multiply\n\nFixes #3",
        date="2024-03-02T10:00:00Z",
    )
    return shas


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    root = tmp_path_factory.mktemp("history") / "calc"
    return root, build_history(root)


P2P_AT_FIX = ["tests/test_calc.py::test_add", "tests/test_neg.py::test_neg"]
F2P_AT_FIX = [
    "tests/test_calc.py::test_sub",
    "tests/test_calc.py::test_sub_self[1]",
    "tests/test_calc.py::test_sub_self[2]",
]


async def test_mining_finds_exactly_the_qualifying_commits(
    history: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    repo, shas = history
    verdicts: list[Verdict] = []

    async def report(verdict: Verdict) -> None:
        verdicts.append(verdict)

    how = Mining(test_command=tuple(TEST_COMMAND), setup=(), report=report)
    tasks = await mine(
        Source(repo, "acme/calc"),
        settings=settings_for(tmp_path),
        work_dir=tmp_path / "work",
        how=how,
    )
    assert [t["commit"] for t in tasks] == [shas["fixes_3"], shas["fix"]]
    newest, fix = tasks
    assert json.loads(newest["FAIL_TO_PASS"]) == ["tests/test_mul.py::test_mul"]
    assert json.loads(fix["FAIL_TO_PASS"]) == F2P_AT_FIX
    assert json.loads(fix["PASS_TO_PASS"]) == P2P_AT_FIX
    assert (
        fix["base_commit"]
        == shas["tests_only"]
        == git(repo, "rev-parse", f"{shas['fix']}^").strip()
    )
    assert fix["instance_id"] == f"acme__calc-{shas['fix'][:12]}"
    assert fix["repo"] == "acme/calc" and fix["repo_path"] == str(repo)
    assert fix["problem_statement"] == "Fix sub\n\nIt added." and fix["statement"] == "commit"
    assert fix["created_at"] == "2024-01-04T10:00:00Z"
    assert fix["test_patch"].startswith("diff --git a/tests/test_calc.py b/tests/test_calc.py")
    assert "diff --git a/calc.py" not in fix["test_patch"]
    assert (
        fix["patch"].startswith("diff --git a/calc.py b/calc.py") and "tests/" not in fix["patch"]
    )
    dropped = {v.commit: v.reason for v in verdicts if v.task is None}
    assert dropped == {
        shas["no_run"]: "its tests do not run at the commit (no test passed)",
        shas["passed_before"]: "no test fails before it and passes after it",
    }
    assert len(verdicts) == 4  # the code-only and tests-only commits are no candidates


async def test_a_mined_task_scores_its_own_fix_as_resolved(
    history: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    repo, shas = history
    how = Mining(test_command=tuple(TEST_COMMAND), setup=(), limit=1, since="2024-03-01")
    settings = settings_for(tmp_path)
    [task] = await mine(
        Source(repo, "acme/calc"), settings=settings, work_dir=tmp_path / "w", how=how
    )
    assert task["commit"] == shas["fixes_3"]
    args: dict[str, Any] = {
        "repo": repo,
        "base_commit": task["base_commit"],
        "test_patch": task["test_patch"],
        "fail_to_pass": json.loads(task["FAIL_TO_PASS"]),
        "pass_to_pass": json.loads(task["PASS_TO_PASS"]),
        "test_command": task["test_command"],
        "setup": task["setup"],
        "settings": settings,
    }
    resolved = await score_patch(model_patch=task["patch"], work_dir=tmp_path / "a", **args)
    assert resolved.resolved, resolved.reason
    empty = await score_patch(model_patch="", work_dir=tmp_path / "b", **args)
    assert not empty.resolved


async def test_the_linked_issue_is_the_problem_statement(
    history: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    repo, shas = history
    forge = FakeForge(ForgeKind.GITHUB)
    ref = forge.add_repo("acme/calc")
    forge.add_issue(ref, 3, title="mul adds", body="mul(2, 3) gives 5, not 6.")
    how = Mining(
        test_command=tuple(TEST_COMMAND),
        setup=(),
        since="2024-03-01",
        limit=1,
        issues=IssueSource(forge, ref),
    )
    [task] = await mine(
        Source(repo, "acme/calc"), settings=settings_for(tmp_path), work_dir=tmp_path / "w", how=how
    )
    assert task["commit"] == shas["fixes_3"]
    assert task["problem_statement"] == "mul adds\n\nmul(2, 3) gives 5, not 6."
    assert task["statement"] == "issue"
    forge.issues.clear()  # the issue cannot be read: the commit message instead
    [task] = await mine(
        Source(repo, "acme/calc"),
        settings=settings_for(tmp_path),
        work_dir=tmp_path / "w2",
        how=how,
    )
    assert task["problem_statement"] == "Make mul multiply\n\nFixes #3"
    assert task["statement"] == "commit"


def test_the_command_writes_the_tasks_file(
    history: tuple[Path, dict[str, str]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo, shas = history
    parser = argparse.ArgumentParser(prog="bot eval")
    add_mine_command(parser.add_subparsers(dest="verb"))
    out = tmp_path / "tasks.jsonl"
    args = parser.parse_args(
        [
            "mine",
            str(repo),
            "--out",
            str(out),
            "--limit",
            "1",
            "--test-command",
            " ".join(TEST_COMMAND),
            "--setup",
            "true",
        ]
    )
    assert run_mine(args, settings_for(tmp_path)) == 0
    [line] = out.read_text().splitlines()
    task = json.loads(line)
    assert task["commit"] == shas["fixes_3"] and task["setup"] == ["true"]
    assert task["repo"] == "calc"  # no origin: the folder's name
    err = capsys.readouterr().err
    assert f"kept {shas['fixes_3'][:12]}: 1 FAIL_TO_PASS, 6 PASS_TO_PASS" in err
    assert "1 task(s) written to" in err
    assert run_mine(args, settings_for(tmp_path)) == 2  # the file is there: kept as it is
    assert out.read_text() == line + "\n"
    assert f"bot: {out} exists: name a new file" in capsys.readouterr().err
    out = tmp_path / "from-url.jsonl"
    url = f"file://{repo}"
    args = parser.parse_args(
        [
            "mine",
            url,
            "--out",
            str(out),
            "--limit",
            "1",
            "--no-issues",
            "--test-command",
            " ".join(TEST_COMMAND),
            "--setup",
            "true",
        ]
    )
    assert run_mine(args, settings_for(tmp_path)) == 0
    task = json.loads(out.read_text())
    assert task["repo"] == "calc" and task["repo_url"] == url and "repo_path" not in task
    assert task["commit"] == shas["fixes_3"]
    assert list((tmp_path / "data" / "eval").iterdir()) == []  # the clone is removed
    plain = tmp_path / "plain"
    plain.mkdir()
    args = parser.parse_args(["mine", str(plain), "--out", str(tmp_path / "none.jsonl")])
    assert run_mine(args, settings_for(tmp_path)) == 2
    assert f"bot: {plain} is not a git repository" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parser.parse_args(["mine", str(repo), "--out", str(out), "--since", "last week"])
