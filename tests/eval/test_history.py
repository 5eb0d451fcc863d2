"""The pure parts of mining and scoring: test files, linked issues, git's listings, remotes."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.eval.checkout import apply_patch, numstat_paths, patch_paths
from bot.eval.history import Link, is_test_path, linked_issue, parse_log, split_paths, utc
from bot.eval.mine_cli import is_url, repo_name, web_url
from bot.eval.scoring import judge
from bot.eval.testrun import TestRun, TestStatus
from tests.eval.projects import diff_of, new_repo


@pytest.mark.parametrize(
    ("path", "test"),
    [
        ("tests/test_calc.py", True),
        ("src/pkg/tests/helpers.py", True),
        ("test_top.py", True),
        ("pkg/calc_test.py", True),
        ("conftest.py", True),
        ("web/src/app.test.tsx", True),
        ("web/src/app.spec.js", True),
        ("go/calc_test.go", True),
        ("src/test/java/CalcTest.java", True),
        ("calc.py", False),
        ("src/testing_utils.py", False),
        ("docs/tests.md", False),
        ("latest/calc.py", False),
    ],
)
def test_test_files_are_told_apart(path: str, test: bool) -> None:
    assert is_test_path(path) is test


def test_paths_split_into_tests_and_code() -> None:
    assert split_paths(["calc.py", "tests/test_calc.py", "README.md"]) == (
        ("tests/test_calc.py",),
        ("calc.py", "README.md"),
    )


@pytest.mark.parametrize(
    ("message", "link"),
    [
        ("Make mul multiply\n\nFixes #3", Link(3, False)),
        ("closes !12: the merge request", Link(12, True)),
        ("Resolved: #7", Link(7, False)),
        ("Resolves #8", Link(8, False)),
        ("fixed #40 and closes #41", Link(40, False)),
        ("Refers to #3", None),
        ("prefixes #3", None),
        ("Fixes acme/other#3", None),
    ],
)
def test_the_linked_issue_is_read_from_the_message(message: str, link: Link | None) -> None:
    assert linked_issue(message) == link


def test_the_log_is_read_with_dates_in_utc() -> None:
    text = (
        "a1\x1fp1\x1f2024-01-04T12:00:00+02:00\x1fFix sub\n\nBody\n\x1e\n"
        "a2\x1fp2 p3\x1f2024-01-05T10:00:00Z\x1fMerge\n\x1e\n"
    )
    assert parse_log(text) == [
        ("a1", ["p1"], "2024-01-04T10:00:00Z", "Fix sub\n\nBody"),
        ("a2", ["p2", "p3"], "2024-01-05T10:00:00Z", "Merge"),
    ]
    assert utc("not a date") == "not a date"


def test_numstat_lists_both_sides_of_a_rename() -> None:
    text = "1\t1\tcalc.py\x002\t0\t\x00old/a.py\x00new/a.py\x00-\t-\timg.png\x00"
    assert numstat_paths(text) == ["calc.py", "old/a.py", "new/a.py", "img.png"]


async def test_patch_paths_and_apply_on_a_real_repository(tmp_path: Path) -> None:
    repo, _ = new_repo(tmp_path / "r", {"a.py": "x = 1\n", "b.py": "y = 2\n"})
    patch = diff_of(repo, {"a.py": "x = 3\n", "b.py": None, "c.py": "z = 1\n"})
    assert await patch_paths(repo, patch) == ["a.py", "b.py", "c.py"]
    assert await apply_patch(repo, patch) == ""
    assert (repo / "a.py").read_text() == "x = 3\n" and not (repo / "b.py").exists()
    again = await apply_patch(repo, patch)
    assert again.startswith("error:")
    escape = patch.replace("a/c.py", "a/../escape.py").replace("b/c.py", "b/../escape.py")
    refused = await apply_patch(repo, escape)
    assert refused.startswith("error:") and not (tmp_path / "escape.py").exists()


@pytest.mark.parametrize(
    ("remote", "web"),
    [
        ("https://github.com/acme/calc.git", "https://github.com/acme/calc"),
        ("https://token:x@gitlab.example.com/g/sub/p.git", "https://gitlab.example.com/g/sub/p"),
        ("git@github.com:acme/calc.git", "https://github.com/acme/calc"),
        ("ssh://git@gitlab.example.com:2222/g/p.git", "https://gitlab.example.com/g/p"),
        ("/srv/git/calc", ""),
        ("file:///srv/git/calc", ""),
    ],
)
def test_a_remote_gives_its_web_address(remote: str, web: str) -> None:
    assert web_url(remote) == web


def test_urls_and_names() -> None:
    assert is_url("https://github.com/acme/calc") and is_url("git@github.com:acme/calc.git")
    assert not is_url("/srv/git/calc") and not is_url("calc")
    assert repo_name("https://gitlab.example.com/g/sub/p") == "g/sub/p"
    assert repo_name("") == ""


def _run(statuses: dict[str, TestStatus], **kw: object) -> TestRun:
    return TestRun(
        statuses,
        kw.pop("exit_code", 1),
        bool(kw.pop("timed_out", False)),
        2.0,
        error=str(kw.pop("error", "")),
    )  # type: ignore[arg-type]


def test_judging_names_the_first_tests_that_did_not_pass() -> None:
    f2p, p2p = ["a", "b", "c", "d", "e"], ["p"]
    run = _run({**dict.fromkeys(f2p, TestStatus.FAILED), "p": TestStatus.FAILED})
    assert judge(f2p, p2p, run) == (
        False,
        "FAIL_TO_PASS not passing: a (failed), b (failed), c (failed) and 2 more",
    )
    run = _run({**dict.fromkeys(f2p, TestStatus.PASSED), "p": TestStatus.ERROR})
    assert judge(f2p, p2p, run) == (False, "PASS_TO_PASS not passing: p (error)")
    run = _run({**dict.fromkeys(f2p, TestStatus.PASSED), "p": TestStatus.PASSED})
    assert judge(f2p, p2p, run) == (True, "")
    assert judge(f2p, p2p, _run({}, timed_out=True))[1].startswith("the tests did not finish")
    assert judge(f2p, p2p, _run({}, error="no bwrap")) == (
        False,
        "the tests could not run: no bwrap",
    )
