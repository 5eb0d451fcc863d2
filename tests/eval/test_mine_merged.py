"""`bot eval mine` with a forge: the merged change requests it lists are candidates too,
on a repository the test builds with a real merge commit and a squashed commit, through
the real sandbox; the one FakeForge lists them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bot.eval.history import Candidate
from bot.eval.mine import IssueSource, Mining, Source, Verdict, mine, problem_statement
from bot.eval.results import Statement
from bot.events import ForgeKind
from bot.forges.base import ForgeError
from bot.forges.merged import MergedChangeRequest
from tests.eval.projects import TEST_COMMAND, commit, git, new_repo, settings_for
from tests.eval.test_mine import CALC, MUL, NEG, TEST_ADD, TEST_MUL, TEST_SUB
from tests.fakes import FakeForge

pytestmark = [
    pytest.mark.sandbox,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap missing"),
]

FIXED = CALC.replace("def sub(a, b):\n    return a + b", "def sub(a, b):\n    return a - b")
TEST_NEG = "import calc\n\n\ndef test_neg():\n    assert calc.neg(2) == -2\n"
GONE = "f" * 40  # a change request whose merge commit this clone does not hold


def build_history(root: Path) -> dict[str, str]:
    """main: initial; a branch fixing sub in two commits (code only, then tests only: no
    commit of it is a candidate) merged with a merge commit; a squashed change request's
    commit (neg); a plain commit (mul)."""
    repo, initial = new_repo(root, {"calc.py": CALC, "tests/test_calc.py": TEST_ADD})
    shas = {"initial": initial}
    git(repo, "checkout", "-q", "-b", "fix-sub")
    shas["code_half"] = commit(repo, {"calc.py": FIXED}, "Fix sub", date="2024-02-01T09:00:00Z")
    shas["test_half"] = commit(
        repo, {"tests/test_calc.py": TEST_ADD + TEST_SUB}, "Test sub", date="2024-02-01T09:30:00Z"
    )
    git(repo, "checkout", "-q", "main")
    git(repo, "merge", "-q", "--no-ff", "-m", "Merge branch 'fix-sub'", "fix-sub",
        date="2024-02-01T10:00:00Z")  # fmt: skip
    shas["merge"] = git(repo, "rev-parse", "HEAD").strip()
    shas["squashed"] = commit(
        repo,
        {"calc.py": FIXED + NEG, "tests/test_neg.py": TEST_NEG},
        "Add neg (#6)",
        date="2024-02-02T10:00:00Z",
    )
    shas["plain"] = commit(
        repo,
        {"calc.py": FIXED + NEG + MUL.replace("a + b", "a * b"), "tests/test_mul.py": TEST_MUL},
        "Add mul",
        date="2024-02-03T10:00:00Z",
    )
    return shas


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    root = tmp_path_factory.mktemp("merged") / "calc"
    return root, build_history(root)


def forge_of(shas: dict[str, str]) -> tuple[FakeForge, IssueSource]:
    forge = FakeForge(ForgeKind.GITHUB)
    ref = forge.add_repo("acme/calc")
    forge.add_issue(ref, 3, title="sub adds", body="sub(3, 1) gives 4.")
    forge.add_merged(ref, 8, title="Gone", merge_commit=GONE, merged_at="2024-02-04T10:00:00Z")
    forge.add_merged(ref, 6, title="Add neg", body="neg(x) is -x.", merge_commit=shas["squashed"],
                     merged_at="2024-02-02T10:00:00Z")  # fmt: skip
    forge.add_merged(ref, 5, title="Fix sub", body="It added.\n\nFixes #3",
                     merge_commit=shas["merge"], merged_at="2024-02-01T10:00:00Z")  # fmt: skip
    return forge, IssueSource(forge, ref)


class Heard:
    def __init__(self) -> None:
        self.verdicts: list[Verdict] = []
        self.notices: list[str] = []

    async def report(self, verdict: Verdict) -> None:
        self.verdicts.append(verdict)

    async def notice(self, text: str) -> None:
        self.notices.append(text)


def how_for(heard: Heard, issues: IssueSource) -> Mining:
    return Mining(test_command=tuple(TEST_COMMAND), setup=(), issues=issues,
                  report=heard.report, notice=heard.notice)  # fmt: skip


async def test_merged_change_requests_are_candidates_once_each(
    history: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    repo, shas = history
    forge, issues = forge_of(shas)
    heard = Heard()
    tasks = await mine(Source(repo, "acme/calc"), settings=settings_for(tmp_path),
                       work_dir=tmp_path / "work", how=how_for(heard, issues))  # fmt: skip
    assert [t["commit"] for t in tasks] == [shas["plain"], shas["squashed"], shas["merge"]]
    assert len(heard.verdicts) == 3 and heard.notices == []  # the branch's commits: no candidates
    plain, squashed, merge = tasks
    assert plain["statement"] == "commit" and "change_request" not in plain
    assert squashed["statement"] == "change_request"  # the commit's and the change request's: one
    assert squashed["problem_statement"] == "Add neg\n\nneg(x) is -x."
    assert squashed["change_request"] == 6
    assert squashed["change_request_url"] == "https://github.example/acme/calc/pull/6"
    assert squashed["FAIL_TO_PASS"] == '["tests/test_neg.py::test_neg"]'
    assert merge["statement"] == "issue"
    assert merge["problem_statement"] == "sub adds\n\nsub(3, 1) gives 4."
    assert merge["change_request"] == 5
    assert merge["instance_id"] == f"acme__calc-{shas['merge'][:12]}"
    first_parent = git(repo, "rev-parse", f"{shas['merge']}^1").strip()
    assert merge["base_commit"] == shas["initial"] == first_parent
    assert merge["test_patch"].startswith("diff --git a/tests/test_calc.py b/tests/test_calc.py")
    assert merge["patch"].startswith("diff --git a/calc.py b/calc.py")
    assert "tests/" not in merge["patch"]
    assert '"tests/test_calc.py::test_sub"' in merge["FAIL_TO_PASS"]
    assert forge.calls_of("list_merged_change_requests") == [("acme/calc", None)]


async def test_a_forge_that_cannot_list_them_leaves_the_commits(
    history: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    repo, shas = history
    forge, issues = forge_of(shas)
    forge.fail("list_merged_change_requests", ForgeError("GitHub error 502", status=502))
    heard = Heard()
    tasks = await mine(Source(repo, "acme/calc"), settings=settings_for(tmp_path),
                       work_dir=tmp_path / "work", how=how_for(heard, issues))  # fmt: skip
    assert [t["commit"] for t in tasks] == [shas["plain"], shas["squashed"]]
    assert [t["statement"] for t in tasks] == ["commit", "commit"]
    assert heard.notices == [
        "the merged change requests of acme/calc could not be listed (GitHub error 502): "
        "mining commits only"
    ]


async def test_the_statement_is_the_linked_issue_s_else_the_change_request_s() -> None:
    forge = FakeForge(ForgeKind.GITLAB)
    ref = forge.add_repo("acme/calc")
    forge.add_issue(ref, 3, title="sub adds", body="It adds.")
    forge.add_issue(ref, 4, title="secret", confidential=True)
    issues = IssueSource(forge, ref)
    squashed = Candidate("a" * 40, "b" * 40, "", "Fix sub\n\nCloses #3", ("t.py",), ("c.py",))
    change = MergedChangeRequest(9, "Fix sub", "Closes #4", "u", "a" * 40, "")
    told = await problem_statement(squashed, change, issues)  # the body's issue is secret
    assert (told.text, told.kind, told.change) == ("sub adds\n\nIt adds.", Statement.ISSUE, change)
    forge.issues.clear()  # no issue can be read: the change request's own words
    told = await problem_statement(squashed, change, issues)
    assert (told.text, told.kind) == ("Fix sub\n\nCloses #4", Statement.CHANGE_REQUEST)
    told = await problem_statement(squashed, None, None)
    assert (told.text, told.kind, told.change) == (squashed.message, Statement.COMMIT, None)
