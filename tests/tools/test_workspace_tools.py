"""The workspace tools through the registry, on a real clone of a bare repository."""

from __future__ import annotations

import asyncio
import os
import shutil
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bot.config import SandboxSettings
from bot.sandbox.sandbox import Sandbox
from bot.sandbox.workspace import Workspace
from bot.tools.registry import ToolRegistry, ToolResult
from bot.tools.workspace_tools import workspace_tools
from tests.tools.conftest import BASE_FILES, Remote, git, make_remote

SJIS_TEXT = "# 設定\nname = '山田太郎'\nmessage = 'こんにちは、世界。文字コードはシフトJISです。'\n"
LATIN_TEXT = "# Le garçon a mangé une pomme à la cantine.\ntitle = 'Crème brûlée'\nend = 1\n"
FILES = {
    **BASE_FILES,
    "legacy/sjis.py": SJIS_TEXT.encode("shift_jis"),
    "legacy/latin.py": LATIN_TEXT.encode("latin-1"),
    "img/logo.png": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR",
    "src/dup.py": b"x = 1\ny = 2\nx = 1\nz = 3\nx = 1\n",
    "node_modules/lib/index.js": b"module.exports = 1\n",
}
OUTPUT = 20_000
STOLEN = Path(f"/tmp/stolen-{uuid.uuid4().hex}.md")
needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap missing")


@pytest.fixture
def remote(tmp_path: Path) -> Remote:
    return make_remote(tmp_path / "origin", FILES)


@dataclass
class Setup:
    ws: Workspace
    registry: ToolRegistry

    async def call(self, name: str, **args: Any) -> ToolResult:
        return await self.registry.call(name, args, timeout=120)


@pytest.fixture
def setup(make_workspace: Callable[..., Workspace]) -> Setup:
    ws = make_workspace()
    sandbox = Sandbox(SandboxSettings(timeout=60, max_output_chars=OUTPUT))
    return Setup(ws, ToolRegistry(workspace_tools(ws, sandbox, max_output_chars=OUTPUT)))


def test_the_tool_set_is_complete_and_has_no_commit_or_push(setup: Setup) -> None:
    assert setup.registry.names() == sorted([
        "list_directory", "read_file", "read_many_files", "write_file", "replace_in_file",
        "move_path", "delete_file", "create_directory", "search_files", "git_diff",
        "run_command", "run_quality_gate",
    ])  # fmt: skip
    writes = {t.name for t in setup.registry.usable() if t.writes}
    assert writes == {"write_file", "replace_in_file", "move_path", "delete_file",
                      "create_directory", "run_command", "run_quality_gate"}  # fmt: skip
    for tool in setup.registry.usable():
        assert tool.purpose and tool.schema["type"] == "object"


async def test_the_first_tool_call_clones_the_repository(setup: Setup) -> None:
    assert not setup.ws.path.exists()
    result = await setup.call("read_file", path="README.md")
    assert result.ok, result.output
    assert "A demo project." in result.output
    assert git("symbolic-ref", "--short", "HEAD", cwd=setup.ws.path) == "agent/1-test"


# --- reading --------------------------------------------------------------------------------------


async def test_read_file_with_a_line_range(setup: Setup) -> None:
    result = await setup.call("read_file", path="src/dup.py", start_line=2, end_line=3)
    assert result.ok
    assert result.output == "--- src/dup.py: lines 2-3 of 5 (utf_8) ---\ny = 2\nx = 1\n"
    past = await setup.call("read_file", path="src/dup.py", start_line=9)
    assert not past.ok and "past the end (5 lines)" in past.output


async def test_read_file_refuses_binary_and_missing_files(setup: Setup) -> None:
    binary = await setup.call("read_file", path="img/logo.png")
    assert not binary.ok and "binary file" in binary.output
    missing = await setup.call("read_file", path="nope.txt")
    assert not missing.ok and "nope.txt: no such file" in missing.output


async def test_legacy_encodings_are_read_correctly(setup: Setup) -> None:
    sjis = await setup.call("read_file", path="legacy/sjis.py")
    assert sjis.ok and "山田太郎" in sjis.output and "(cp932)" in sjis.output
    latin = await setup.call("read_file", path="legacy/latin.py")
    assert latin.ok and "Crème brûlée" in latin.output


async def test_read_many_files_by_glob_skips_binary_and_default_excludes(setup: Setup) -> None:
    result = await setup.call("read_many_files", paths=["**/*.py", "img", "node_modules"])
    assert result.ok, result.output
    assert "--- src/app.py ---\ndef greet" in result.output
    assert "--- legacy/sjis.py ---" in result.output and "山田太郎" in result.output
    assert "img/logo.png (binary)" in result.output
    assert "node_modules" not in result.output
    assert "--- CHANGELOG.md ---" not in result.output
    top = await setup.call("read_many_files", paths=["**/*.md", "./docs/*.txt"])
    assert "--- CHANGELOG.md ---" in top.output and "--- README.md ---" in top.output
    assert "--- docs/guide.txt ---" in top.output
    excluded = await setup.call("read_many_files", paths=["src"], exclude=["src/dup.py"])
    assert "src/app.py" in excluded.output and "src/dup.py" not in excluded.output
    everything = await setup.call(
        "read_many_files", paths=["node_modules"], use_default_excludes=False
    )
    assert "module.exports = 1" in everything.output


async def test_read_many_files_caps_the_total_size(setup: Setup) -> None:
    await setup.ws.ensure()
    for index in range(5):
        (setup.ws.path / f"big{index}.txt").write_text("z" * 6000)
    result = await setup.call("read_many_files", paths=["big*.txt"])
    assert result.ok
    assert result.output.count("--- big") == 3
    assert "big3.txt (over the output budget: read it with read_file)" in result.output
    assert len(result.output) <= OUTPUT


async def test_read_many_files_with_nothing_matching_fails(setup: Setup) -> None:
    result = await setup.call("read_many_files", paths=["*.rs"])
    assert not result.ok and "no files match" in result.output


async def test_list_directory_hides_git_and_shows_sizes(setup: Setup) -> None:
    top = await setup.call("list_directory")
    assert top.ok
    lines = top.output.splitlines()
    assert "src/" in lines and "README.md (24 bytes)" in lines
    assert not any(line.startswith(".git") for line in lines)
    deep = await setup.call("list_directory", path="legacy", recursive=True)
    assert deep.output.splitlines()[0].startswith("legacy/latin.py (")


async def test_search_files_reports_path_and_line(setup: Setup) -> None:
    result = await setup.call("search_files", pattern=r"^x = \d")
    assert result.ok
    assert result.output.splitlines() == ["src/dup.py:1: x = 1", "src/dup.py:3: x = 1",
                                          "src/dup.py:5: x = 1"]  # fmt: skip
    capped = await setup.call("search_files", pattern="x", glob="*.py", max_hits=1)
    assert "more matches; narrow the search" in capped.output
    japanese = await setup.call("search_files", pattern="山田", path="legacy")
    assert japanese.output == "legacy/sjis.py:2: name = '山田太郎'"
    bad = await setup.call("search_files", pattern="(unclosed")
    assert not bad.ok and "invalid regular expression" in bad.output
    none = await setup.call("search_files", pattern="no-such-text-anywhere")
    assert none.ok and none.output.startswith("no matches")


# --- writing --------------------------------------------------------------------------------------


async def test_write_replace_move_delete_and_diff(setup: Setup) -> None:
    wrote = await setup.call("write_file", path="pkg/new.py", content="A = 1\n")
    assert wrote.ok and wrote.changed and "created pkg/new.py" in wrote.output
    replaced = await setup.call(
        "replace_in_file", path="src/app.py", old_text="'Hello, '", new_text="'Hi, '"
    )
    assert replaced.ok, replaced.output
    moved = await setup.call("move_path", source="docs/guide.txt", destination="docs/manual.txt")
    assert moved.ok
    made = await setup.call("create_directory", path="empty/dir")
    assert made.ok and (setup.ws.path / "empty" / "dir").is_dir()
    deleted = await setup.call("delete_file", path="CHANGELOG.md")
    assert deleted.ok and not (setup.ws.path / "CHANGELOG.md").exists()
    diff = await setup.call("git_diff")
    assert "+A = 1" in diff.output and "+    return 'Hi, ' + name" in diff.output
    assert "docs/manual.txt" in diff.output and "-- second commit" in diff.output
    stat = await setup.call("git_diff", stat=True)
    assert "files changed" in stat.output
    assert await setup.ws.changed_files() == [
        "CHANGELOG.md", "docs/guide.txt", "docs/manual.txt", "pkg/new.py", "src/app.py"
    ]  # fmt: skip


async def test_replace_fails_clearly_when_missing_or_ambiguous(setup: Setup) -> None:
    missing = await setup.call("replace_in_file", path="src/dup.py", old_text="w = 9", new_text="")
    assert not missing.ok and "old_text was not found (0 matches)" in missing.output
    ambiguous = await setup.call(
        "replace_in_file", path="src/dup.py", old_text="x = 1", new_text="x = 2"
    )
    assert not ambiguous.ok
    assert "ambiguous: 3 matches (at lines 1, 3, 5)" in ambiguous.output
    unique = await setup.call(
        "replace_in_file", path="src/dup.py", old_text="x = 1\nz", new_text="x = 1\nq"
    )
    assert unique.ok
    every = await setup.call(
        "replace_in_file", path="src/dup.py", old_text="x = 1", new_text="x = 2", replace_all=True
    )
    assert every.ok and "replaced 3 occurrence(s)" in every.output
    assert (setup.ws.path / "src/dup.py").read_text() == "x = 2\ny = 2\nx = 2\nq = 3\nx = 2\n"


async def test_replace_keeps_the_file_encoding(setup: Setup) -> None:
    sjis = await setup.call(
        "replace_in_file", path="legacy/sjis.py", old_text="山田太郎", new_text="鈴木花子"
    )
    assert sjis.ok, sjis.output
    data = (setup.ws.path / "legacy/sjis.py").read_bytes()
    assert data == SJIS_TEXT.replace("山田太郎", "鈴木花子").encode("shift_jis")
    latin = await setup.call(
        "replace_in_file", path="legacy/latin.py", old_text="Crème brûlée", new_text="Łódź"
    )
    assert not latin.ok and "cannot store ('Ł')" in latin.output
    latin = await setup.call(
        "replace_in_file", path="legacy/latin.py", old_text="Crème brûlée", new_text="Île flottante"
    )
    assert latin.ok
    expected = LATIN_TEXT.replace("Crème brûlée", "Île flottante").encode("latin-1")
    assert (setup.ws.path / "legacy/latin.py").read_bytes() == expected


async def test_replace_matches_lf_text_in_a_crlf_file(setup: Setup) -> None:
    await setup.ws.ensure()
    (setup.ws.path / "win.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    result = await setup.call("replace_in_file", path="win.txt", old_text="one\ntwo",
                              new_text="1\n2")  # fmt: skip
    assert result.ok
    assert (setup.ws.path / "win.txt").read_bytes() == b"1\r\n2\r\nthree\r\n"


async def test_write_file_keeps_an_existing_legacy_encoding(setup: Setup) -> None:
    result = await setup.call("write_file", path="legacy/sjis.py", content="x = '日本'\n")
    assert result.ok and "cp932" in result.output
    assert (setup.ws.path / "legacy/sjis.py").read_bytes() == "x = '日本'\n".encode("shift_jis")


async def test_move_and_delete_refuse_what_they_should(setup: Setup) -> None:
    exists = await setup.call("move_path", source="README.md", destination="src/app.py")
    assert not exists.ok and "already exists (set overwrite" in exists.output
    overwrite = await setup.call("move_path", source="README.md", destination="src/app.py",
                                 overwrite=True)  # fmt: skip
    assert overwrite.ok and not (setup.ws.path / "README.md").exists()
    full = await setup.call("delete_file", path="src")
    assert not full.ok and "not empty" in full.output
    root = await setup.call("delete_file", path=".")
    assert not root.ok and "root cannot be deleted" in root.output
    missing = await setup.call("delete_file", path="ghost.txt")
    assert not missing.ok and "no such file" in missing.output


# --- guard rails ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "args", "reason"),
    [
        ("read_file", {"path": "../origin/remote.git/config"}, "leaves the workspace"),
        ("read_file", {"path": "/etc/passwd"}, "absolute paths outside the workspace"),
        ("read_file", {"path": "etc-link/passwd"}, "points outside the workspace"),
        ("read_file", {"path": ".git/config"}, ".git directory is off limits"),
        ("write_file", {"path": ".git/hooks/pre-push", "content": "x"}, "off limits"),
        ("write_file", {"path": "etc-link/evil", "content": "x"}, "points outside"),
        ("write_file", {"path": "../evil.txt", "content": "x"}, "leaves the workspace"),
        ("delete_file", {"path": ".git/HEAD"}, "off limits"),
        ("move_path", {"source": "README.md", "destination": str(STOLEN)}, "absolute"),
        ("list_directory", {"path": "etc-link"}, "points outside"),
        ("search_files", {"pattern": "root", "path": "etc-link"}, "points outside"),
        ("read_many_files", {"paths": ["../origin/**"]}, "leaves the workspace"),
        ("run_command", {"argv": ["ls"], "cwd": "../"}, "leaves the workspace"),
    ],
)
async def test_path_escapes_are_refused_with_a_reason(
    setup: Setup, tool: str, args: dict[str, Any], reason: str
) -> None:
    await setup.ws.ensure()
    os.symlink("/etc", setup.ws.path / "etc-link")
    result = await setup.call(tool, **args)
    assert not result.ok
    assert reason in result.output
    assert not await asyncio.to_thread(STOLEN.exists)


async def test_files_over_the_size_limit_are_refused(setup: Setup) -> None:
    await setup.ws.ensure()
    limit = 10 * 1024 * 1024
    (setup.ws.path / "huge.log").write_bytes(b"a" * (limit + 1))
    read = await setup.call("read_file", path="huge.log")
    assert not read.ok and f"{limit + 1} bytes, over the limit of {limit} bytes" in read.output
    replace = await setup.call("replace_in_file", path="huge.log", old_text="a", new_text="b")
    assert not replace.ok and "over the limit" in replace.output
    write = await setup.call("write_file", path="new.log", content="b" * (limit + 1))
    assert not write.ok and "over the limit" in write.output
    assert not (setup.ws.path / "new.log").exists()
    many = await setup.call("read_many_files", paths=["huge.log", "README.md"])
    assert many.ok and "huge.log (10485761 bytes, over the limit)" in many.output


async def test_schema_rejects_a_shell_string_for_run_command(setup: Setup) -> None:
    result = await setup.call("run_command", argv="ls -la; rm -rf /")
    assert not result.ok and "invalid arguments for run_command" in result.output


async def test_a_clone_failure_comes_back_as_a_failed_result(
    make_workspace: Callable[..., Workspace], tmp_path: Path
) -> None:
    from tests.tools.conftest import static_auth

    ws = make_workspace("broken", auth=static_auth(f"file://{tmp_path}/nowhere.git"))
    registry = ToolRegistry(workspace_tools(ws, Sandbox(SandboxSettings()), max_output_chars=5000))
    result = await registry.call("list_directory", {}, timeout=60)
    assert not result.ok and "git clone failed" in result.output


# --- commands (real sandbox) ----------------------------------------------------------------------


@pytest.mark.sandbox
@needs_bwrap
async def test_run_command_runs_argv_in_the_sandbox(setup: Setup) -> None:
    ok = await setup.call(
        "run_command", argv=["sh", "-c", "echo out; echo err >&2; touch made.txt"]
    )
    assert ok.ok and ok.data == {"exit_code": 0, "timed_out": False}
    assert "--- stdout ---\nout" in ok.output and "--- stderr ---\nerr" in ok.output
    assert (setup.ws.path / "made.txt").exists()
    sub = await setup.call("run_command", argv=["pwd"], cwd="src")
    assert sub.output.splitlines()[2] == str(setup.ws.path.resolve() / "src")
    failed = await setup.call("run_command", argv=["sh", "-c", "exit 3"])
    assert not failed.ok and failed.output.startswith("exit code 3")
    slow = await setup.call("run_command", argv=["sleep", "30"], timeout=0.5)
    assert not slow.ok and slow.output.startswith("timed out (killed)")
    refused = await setup.call("run_command", argv=["rm", "-rf", "/"])
    assert not refused.ok and "refused: recursive deletion" in refused.output
    nowhere = await setup.call("run_command", argv=["ls"], cwd="no/such/dir")
    assert not nowhere.ok and "refused: " in nowhere.output and "does not exist" in nowhere.output
    git_dir = await setup.call("run_command", argv=["touch", ".git/hooks/pre-push"])
    assert not git_dir.ok and "Read-only file system" in git_dir.output


@pytest.mark.sandbox
@needs_bwrap
async def test_file_tools_wait_for_a_running_command(setup: Setup) -> None:
    """A command could swap a directory for a link outside between a file tool's check
    and its write; so file tools never overlap a command."""
    await setup.ws.ensure()
    script = "sleep 1; rm -rf src; ln -s /etc src; sleep 1; rm src; mkdir src"
    command = asyncio.create_task(setup.call("run_command", argv=["sh", "-c", script]))
    await asyncio.sleep(0.5)
    write = await setup.call("write_file", path="src/passwd-copy", content="x\n")
    assert command.done()
    assert (await command).ok
    assert write.ok and (setup.ws.path / "src" / "passwd-copy").read_text() == "x\n"
    assert not await asyncio.to_thread(Path("/etc/passwd-copy").exists)


@pytest.mark.sandbox
@needs_bwrap
async def test_run_quality_gate_tool_reports_the_gate(setup: Setup) -> None:
    await setup.ws.ensure()
    (setup.ws.path / "Makefile").write_text(
        "lint:\n\t@echo lint ok\ntest:\n\t@echo 'src/app.py:2: broken' && exit 1\n"
    )
    result = await setup.call("run_quality_gate")
    assert not result.ok
    assert "Tests failed: `make test` failed (exit code 2)" in result.output
    assert "src/app.py:2: broken" in result.output
    assert result.data["lint"]["status"] == "passed"


# --- a command's whole output ----------------------------------------------------------------


@needs_bwrap
async def test_a_timed_out_command_leaves_its_whole_output_in_the_run_directory(
    make_workspace: Callable[..., Workspace], tmp_path: Path
) -> None:
    """The agent sees the tail of a command that ran out of time; the whole output (more
    than the agent may read) is kept in the run directory's commands/ folder."""
    ws = make_workspace()
    run_dir = tmp_path / "run"
    sandbox = Sandbox(SandboxSettings(timeout=3, max_output_chars=1000))
    registry = ToolRegistry(
        workspace_tools(ws, sandbox, max_output_chars=1000, command_logs=run_dir / "commands")
    )
    noisy = (
        "import time\n"
        "for i in range(3000): print(f'line {i:05d}')\n"
        "print('last words', flush=True)\n"
        "time.sleep(60)\n"
    )
    result = await registry.call("run_command", {"argv": ["python3", "-c", noisy]}, timeout=1)
    assert not result.ok and result.data["timed_out"] is True
    assert "last words" in result.output  # the tail: where it stopped
    assert "line 00000" not in result.output  # the agent read only the end of it
    assert "commands/001-python3.log" in result.output
    assert str(tmp_path) not in result.output  # named in the run directory, not on the host
    kept = (run_dir / "commands" / "001-python3.log").read_text()
    lines = kept.splitlines()
    assert lines[0] == "line 00000" and "line 02999" in lines and "last words" in lines

    quick = await registry.call("run_command", {"argv": ["echo", "short"]}, timeout=10)
    assert quick.ok and "short" in quick.output and "run directory" not in quick.output
    assert sorted(p.name for p in (run_dir / "commands").iterdir()) == ["001-python3.log"]


@needs_bwrap
async def test_the_kept_output_is_bounded_by_max_file_mb(
    make_workspace: Callable[..., Workspace], tmp_path: Path
) -> None:
    ws = make_workspace()
    sandbox = Sandbox(SandboxSettings(timeout=30, max_output_chars=1000, max_file_mb=1))
    logs = tmp_path / "commands"
    registry = ToolRegistry(workspace_tools(ws, sandbox, max_output_chars=1000, command_logs=logs))
    flood = "import sys\nsys.stdout.write('x' * (3 << 20))\n"
    result = await registry.call("run_command", {"argv": ["python3", "-c", flood]}, timeout=30)
    assert result.ok, result.output
    kept = (logs / "001-python3.log").read_bytes()
    assert kept.startswith(b"x" * (1 << 20))
    note = f"[... {2 << 20} more bytes not kept (sandbox.max_file_mb) ...]\n"
    assert kept.endswith(note.encode())
