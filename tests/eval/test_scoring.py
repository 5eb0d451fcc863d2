"""Scoring through the real sandbox on a small real git repository with a pytest suite."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bot.eval.scoring import Score, TestStatus, score_patch
from tests.eval.projects import TEST_COMMAND, diff_of, git, new_repo, settings_for

pytestmark = [
    pytest.mark.sandbox,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap missing"),
]

CALC = "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a + b\n"
FIXED = CALC.replace("return a + b\n\n\ndef sub", "return a + b\n\n\ndef sub").replace(
    "def sub(a, b):\n    return a + b", "def sub(a, b):\n    return a - b"
)
TESTS = "from calc import add, sub\n\n\ndef test_add():\n    assert add(1, 2) == 3\n"
NEW_TESTS = TESTS + (
    "\n\ndef test_sub():\n    assert sub(3, 1) == 2\n\n\n"
    "import pytest\n\n\n@pytest.mark.parametrize('a,b,c', [(3, 1, 2), (5, 5, 0)])\n"
    "def test_sub_many(a, b, c):\n    assert sub(a, b) == c\n"
)
F2P = [
    "tests/test_calc.py::test_sub",
    "tests/test_calc.py::test_sub_many[3-1-2]",
    "tests/test_calc.py::test_sub_many[5-5-0]",
]
P2P = ["tests/test_calc.py::test_add"]


@pytest.fixture
def task(tmp_path: Path) -> dict[str, object]:
    repo, base = new_repo(tmp_path / "repo", {"calc.py": CALC, "tests/test_calc.py": TESTS})
    return {
        "repo": repo,
        "base_commit": base,
        "test_patch": diff_of(repo, {"tests/test_calc.py": NEW_TESTS}),
        "fix": diff_of(repo, {"calc.py": FIXED}),
        "settings": settings_for(tmp_path),
    }


async def _score(task: dict[str, object], patch: str, work: Path, **over: object) -> Score:
    args: dict[str, object] = {
        "repo": task["repo"],
        "base_commit": task["base_commit"],
        "model_patch": patch,
        "test_patch": task["test_patch"],
        "fail_to_pass": F2P,
        "pass_to_pass": P2P,
        "test_command": TEST_COMMAND,
        "setup": [],
        "settings": task["settings"],
        "work_dir": work,
    }
    return await score_patch(**{**args, **over})  # type: ignore[arg-type]


async def test_the_reference_fix_is_resolved(task: dict[str, object], tmp_path: Path) -> None:
    score = await _score(task, str(task["fix"]), tmp_path / "w")
    assert score.resolved, score.reason
    assert score.reason == ""
    assert score.fail_to_pass == dict.fromkeys(F2P, TestStatus.PASSED)
    assert score.pass_to_pass == dict.fromkeys(P2P, TestStatus.PASSED)
    assert 0 < score.setup_seconds + score.test_seconds < score.seconds
    assert score.test_seconds > 0
    assert "passed" in (tmp_path / "w" / "tests.log").read_text()
    assert not (tmp_path / "w" / "checkout").exists()  # the checkout is removed


async def test_an_empty_patch_is_unresolved(task: dict[str, object], tmp_path: Path) -> None:
    score = await _score(task, "", tmp_path / "w")
    assert not score.resolved
    assert score.fail_to_pass == dict.fromkeys(F2P, TestStatus.FAILED)
    assert score.pass_to_pass == dict.fromkeys(P2P, TestStatus.PASSED)
    assert score.reason.startswith(
        "FAIL_TO_PASS not passing: tests/test_calc.py::test_sub (failed)"
    )


async def test_a_fix_that_breaks_another_test_is_unresolved(
    task: dict[str, object], tmp_path: Path
) -> None:
    broken = str(FIXED).replace("return a + b", "return a * b")
    patch = diff_of(task["repo"], {"calc.py": broken})  # type: ignore[arg-type]
    score = await _score(task, patch, tmp_path / "w")
    assert not score.resolved
    assert score.fail_to_pass == dict.fromkeys(F2P, TestStatus.PASSED)
    assert score.pass_to_pass == {"tests/test_calc.py::test_add": TestStatus.FAILED}
    assert score.reason == "PASS_TO_PASS not passing: tests/test_calc.py::test_add (failed)"


async def test_a_patch_that_does_not_apply_says_why(
    task: dict[str, object], tmp_path: Path
) -> None:
    stale = str(task["fix"]).replace("return a + b", "return a + c")
    score = await _score(task, stale, tmp_path / "w")
    assert not score.resolved
    assert score.reason.startswith("the model patch was refused: it does not apply: error:")
    assert "calc.py" in score.reason
    assert score.test_seconds == 0.0  # no test ran
    assert set(score.fail_to_pass.values()) == {TestStatus.MISSING}


async def test_a_patch_touching_the_test_files_is_refused(
    task: dict[str, object], tmp_path: Path
) -> None:
    cheat = diff_of(
        task["repo"], {"calc.py": FIXED, "tests/test_calc.py": "def test_x():\n    pass\n"}
    )  # type: ignore[arg-type]
    score = await _score(task, cheat, tmp_path / "w")
    assert not score.resolved
    assert score.reason == (
        "the model patch was refused: it changes files the test patch changes: tests/test_calc.py"
    )


async def test_a_test_the_patch_removes_is_missing(task: dict[str, object], tmp_path: Path) -> None:
    score = await _score(
        task, str(task["fix"]), tmp_path / "w", pass_to_pass=[*P2P, "tests/test_gone.py::test_x"]
    )
    assert not score.resolved
    assert score.pass_to_pass["tests/test_gone.py::test_x"] is TestStatus.MISSING
    assert score.reason == "PASS_TO_PASS not passing: tests/test_gone.py::test_x (missing)"


async def test_an_unknown_commit_or_an_unreadable_set_up_is_unresolved(
    task: dict[str, object], tmp_path: Path
) -> None:
    score = await _score(task, str(task["fix"]), tmp_path / "w", base_commit="0" * 40)
    assert not score.resolved
    assert score.reason == (
        f"no checkout could be prepared: the commit {'0' * 40} is not in {task['repo']}"
    )
    assert score.fail_to_pass == dict.fromkeys(F2P, TestStatus.MISSING)
    score = await _score(task, str(task["fix"]), tmp_path / "x", setup=["pip install 'a"])
    assert score.reason == (
        "no checkout could be prepared: the set-up cannot be read: "
        'cannot split "pip install \'a": No closing quotation'
    )
    assert not (tmp_path / "x" / "checkout").exists()


async def test_set_up_runs_before_the_tests_and_is_cached(
    task: dict[str, object], tmp_path: Path
) -> None:
    """The task's set-up runs in the sandbox (its result seen by the tests), is cached,
    and a failing set-up leaves the task unresolved with the command named."""
    made = "python3 -c \"open('made.txt', 'w').write('ok')\""
    check = "\n\ndef test_made():\n    assert open('made.txt').read() == 'ok'\n"
    test_patch = diff_of(task["repo"], {"tests/test_calc.py": NEW_TESTS + check})  # type: ignore[arg-type]
    over = {
        "setup": [made],
        "test_patch": test_patch,
        "pass_to_pass": [*P2P, "tests/test_calc.py::test_made"],
    }
    first = await _score(task, str(task["fix"]), tmp_path / "a", **over)
    assert first.resolved, first.reason
    cache = tmp_path / "data" / "setup-cache"
    assert [p.name for p in cache.glob("*/*/files")] == ["files"]
    second = await _score(task, str(task["fix"]), tmp_path / "b", **over)
    assert second.resolved, second.reason
    copy = tmp_path / "copy"  # another clone of the project shares its cache
    git(tmp_path, "clone", "-q", str(task["repo"]), str(copy))
    third = await _score(task, str(task["fix"]), tmp_path / "b2", repo=copy, **over)
    assert third.resolved, third.reason
    assert [p.name for p in cache.glob("*/*/files")] == ["files"]
    failing = await _score(task, str(task["fix"]), tmp_path / "c", setup=["false"])
    assert not failing.resolved
    assert failing.reason == "set-up failed: `false` (exit code 1)"
