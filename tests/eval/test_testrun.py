"""Reading test statuses: pytest's JUnit report and -rA summary, the ids handed to the
command, and a real pytest run in the sandbox."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from bot.config import SandboxSettings
from bot.eval import testrun
from bot.eval.testrun import (
    TestCommand,
    TestStatus,
    command_line,
    discover,
    junit_key,
    junit_statuses,
    read_statuses,
    run_tests,
    runnable,
    summary_statuses,
    targets,
)
from bot.sandbox.sandbox import Sandbox
from tests.eval.projects import EXPOSE, PYPROJECT, TEST_COMMAND, write

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap missing")


@pytest.mark.parametrize(
    ("test_id", "key"),
    [
        ("tests/test_x.py::test_a", ("tests.test_x", "test_a")),
        ("tests/test_x.py::TestK::test_b", ("tests.test_x.TestK", "test_b")),
        ("t.py::test_c[a/b::c-1.5]", ("t", "test_c[a/b::c-1.5]")),
        ("pkg/sub/test_y.py::TestO::TestI::test_d[x]", ("pkg.sub.test_y.TestO.TestI", "test_d[x]")),
    ],
)
def test_an_id_maps_to_the_key_of_pytests_report(test_id: str, key: tuple[str, str]) -> None:
    assert junit_key(test_id) == key


REPORT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="tests.test_x" name="test_a" time="0.001" />
<testcase classname="tests.test_x.TestK" name="test_b"><failure message="x">x</failure></testcase>
<testcase classname="tests.test_x" name="test_p[1-2]" />
<testcase classname="tests.test_x" name="test_e"><error message="fixture">e</error></testcase>
<testcase classname="tests.test_x" name="test_t"><failure message="f">f</failure>
<error message="teardown">t</error></testcase>
<testcase classname="tests.test_x" name="test_skip"><skipped type="pytest.skip"/></testcase>
<testcase classname="tests.test_x" name="test_xf"><skipped type="pytest.xfail"/></testcase>
</testsuite></testsuites>"""


def test_the_report_gives_each_asked_id_its_status() -> None:
    ids = [
        "tests/test_x.py::test_a",
        "tests/test_x.py::TestK::test_b",
        "tests/test_x.py::test_p[1-2]",
        "tests/test_x.py::test_e",
        "tests/test_x.py::test_t",
        "tests/test_x.py::test_skip",
        "tests/test_x.py::test_xf",
        "tests/test_x.py::test_z",
    ]
    assert junit_statuses(REPORT, ids) == {
        "tests/test_x.py::test_a": TestStatus.PASSED,
        "tests/test_x.py::TestK::test_b": TestStatus.FAILED,
        "tests/test_x.py::test_p[1-2]": TestStatus.PASSED,
        "tests/test_x.py::test_e": TestStatus.ERROR,
        "tests/test_x.py::test_t": TestStatus.ERROR,  # the worse of failure and error
        "tests/test_x.py::test_xf": TestStatus.PASSED,
    }  # skipped and absent ids are not in it
    assert junit_statuses("<testsuites", ids) == {}  # a broken report tells nothing
    entity = '<!DOCTYPE t [<!ENTITY e "x">]>' + REPORT.split("?>", 1)[1]
    assert junit_statuses(entity, ids) == {}  # nor one with a document type


OUTPUT = """tests/test_x.py::test_a PASSED
FAILED tests/test_x.py::test_fake - this line is a test's own output, before the summary
=========================== short test summary info ============================
PASSED tests/test_x.py::test_a
PASSED tests/test_x.py::test_p[a - b]
FAILED tests/test_x.py::TestK::test_b - assert 1 == 2
ERROR tests/test_x.py::test_e - RuntimeError: fixture
XFAIL tests/test_x.py::test_xf - reason
XPASS tests/test_x.py::test_xp
SKIPPED [1] tests/test_x.py:9: no
========================= 2 passed, 1 failed in 0.1s ==========================
"""


def test_the_summary_names_every_test_it_ran() -> None:
    assert summary_statuses(OUTPUT) == {
        "tests/test_x.py::test_a": TestStatus.PASSED,
        "tests/test_x.py::test_p[a - b]": TestStatus.PASSED,
        "tests/test_x.py::TestK::test_b": TestStatus.FAILED,
        "tests/test_x.py::test_e": TestStatus.ERROR,
        "tests/test_x.py::test_xf": TestStatus.PASSED,
        "tests/test_x.py::test_xp": TestStatus.PASSED,
    }
    assert summary_statuses("1 passed in 0.1s\n") == {}


def test_the_report_comes_first_then_the_summary_then_missing() -> None:
    ids = ["tests/test_x.py::test_a", "tests/test_x.py::test_xp", "tests/test_x.py::test_fake"]
    report = REPORT.replace(
        'name="test_a" time="0.001" />', 'name="test_a"><failure message="f">f</failure></testcase>'
    )
    assert read_statuses(ids, report, OUTPUT) == {
        "tests/test_x.py::test_a": TestStatus.FAILED,  # the report wins
        "tests/test_x.py::test_xp": TestStatus.PASSED,  # only in the summary
        "tests/test_x.py::test_fake": TestStatus.MISSING,  # printed by a test, not run
    }


def test_only_ids_naming_a_file_of_the_workspace_are_handed_over(tmp_path: Path) -> None:
    write(tmp_path, {"tests/test_x.py": ""})
    outside = tmp_path.parent / "test_out.py"
    ids = [
        "::test_nofile",
        "tests/test_x.py::test_a",
        "tests/test_x.py::test_a",
        "--co",
        "-p::x",
        "tests/test_gone.py::test_b",
        "../test_out.py::t",
        f"{outside}::t",
        "tests/test_x.py",
    ]
    assert runnable(tmp_path, ids) == (
        ["tests/test_x.py::test_a", "tests/test_x.py"],
        [
            "::test_nofile",
            "--co",
            "-p::x",
            "tests/test_gone.py::test_b",
            "../test_out.py::t",
            f"{outside}::t",
        ],
    )


def test_too_many_ids_for_one_command_line_run_their_files() -> None:
    few = ["tests/test_a.py::test_1", "tests/test_b.py::TestK::test_2[x]"]
    assert targets(few) == few
    many = [f"tests/test_{n % 3}.py::test_{'x' * 100}_{n}" for n in range(6000)]
    assert targets(many) == ["tests/test_0.py", "tests/test_1.py", "tests/test_2.py"]


def test_pytest_gets_its_report_and_summary_options_and_others_only_the_ids() -> None:
    assert command_line(["python3", "-m", "pytest"], ["a.py::t"], "r.xml") == [
        "python3",
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "-rA",
        "--tb=short",
        "-o",
        "junit_logging=no",
        "--junitxml=r.xml",
        "a.py::t",
    ]
    assert command_line(["make", "test"], ["a.py::t"], "r.xml") == ["make", "test", "a.py::t"]


SUITE = {
    "pyproject.toml": PYPROJECT,
    "tests/test_k.py": (
        "import pytest\n\n\nclass TestK:\n    def test_ok(self):\n        pass\n\n"
        "    @pytest.mark.parametrize('v', ['a b', 'x::y'])\n    def test_v(self, v):\n"
        "        assert v != 'x::y'\n\n\n"
        "@pytest.fixture\ndef broken():\n    raise RuntimeError\n\n\n"
        "def test_e(broken):\n    pass\n\n\n@pytest.mark.xfail\ndef test_xf():\n    assert False\n"
    ),
}


@pytest.mark.sandbox
@needs_bwrap
async def test_a_real_run_reads_classes_parameters_errors_and_xfail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path, SUITE)  # type: ignore[arg-type]
    sandbox = Sandbox(SandboxSettings(), expose=[Path(p) for p in EXPOSE])
    how = TestCommand(tuple(TEST_COMMAND), timeout=120)
    ids = [
        "tests/test_k.py::TestK::test_ok",
        "tests/test_k.py::TestK::test_v[a b]",
        "tests/test_k.py::TestK::test_v[x::y]",
        "tests/test_k.py::test_e",
        "tests/test_k.py::test_xf",
        "tests/test_gone.py::test_g",
    ]
    run = await run_tests(tmp_path, ids, sandbox=sandbox, how=how, log_path=tmp_path / "t.log")
    assert run.statuses == {
        "tests/test_k.py::TestK::test_ok": TestStatus.PASSED,
        "tests/test_k.py::TestK::test_v[a b]": TestStatus.PASSED,
        "tests/test_k.py::TestK::test_v[x::y]": TestStatus.FAILED,
        "tests/test_k.py::test_e": TestStatus.ERROR,
        "tests/test_k.py::test_xf": TestStatus.PASSED,
        "tests/test_gone.py::test_g": TestStatus.MISSING,
    }
    assert run.notes == ("not run: tests/test_gone.py::test_g (no such file in the workspace)",)
    assert run.exit_code == 1 and run.ran
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".eval-report-")]
    found = await discover(tmp_path, sandbox=sandbox, how=how)
    assert found.statuses == {i: s for i, s in run.statuses.items() if "gone" not in i}
    monkeypatch.setattr(testrun, "MAX_ARGV_CHARS", 10)  # the files run, the ids are read
    by_file = await run_tests(tmp_path, ids, sandbox=sandbox, how=how)
    assert by_file.statuses == run.statuses


@pytest.mark.sandbox
@needs_bwrap
async def test_a_run_past_its_deadline_leaves_every_id_missing(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "pyproject.toml": PYPROJECT,
            "tests/test_slow.py": "import time\n\n\ndef test_s():\n    time.sleep(30)\n",
        },
    )
    sandbox = Sandbox(SandboxSettings(), expose=[Path(p) for p in EXPOSE])
    how = TestCommand(tuple(TEST_COMMAND), timeout=3)
    run = await run_tests(tmp_path, ["tests/test_slow.py::test_s"], sandbox=sandbox, how=how)
    assert run.timed_out and not run.ran
    assert run.statuses == {"tests/test_slow.py::test_s": TestStatus.MISSING}
