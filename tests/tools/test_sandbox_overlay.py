"""The workspace under the sandbox's overlay: what a command does to it lands on disk as
the command saw it, and nothing the command left in the layer reaches past the
workspace. With the real bubblewrap (as root here, and as a user that is not root)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.config import SandboxSettings
from bot.sandbox.sandbox import Sandbox, WorkspaceBound

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap missing")


def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / ".git" / "hooks").mkdir(parents=True)
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("print('v1')\n")
    (root / "docs").mkdir()
    (root / "docs" / "a.txt").write_text("a\n")
    (root / "docs" / "b.txt").write_text("b\n")
    return root


async def sh(sandbox: Sandbox, root: Path, script: str) -> str:
    result = await sandbox.run(["sh", "-c", script], cwd=root)
    assert result.exit_code == 0, result.stderr
    return result.stdout


async def test_changes_land_on_disk_as_the_command_saw_them(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    sandbox = Sandbox(SandboxSettings())
    assert await sandbox.bound() is WorkspaceBound.KERNEL
    await sh(sandbox, root, (
        "echo \"print('v2')\" > src/app.py && "
        "rm docs/a.txt && mv docs/b.txt docs/c.txt && "
        "mkdir -p new/deep && echo n > new/deep/n.txt && "
        "printf '#!/bin/sh\\n' > run.sh && chmod 755 run.sh && "
        "ln -s src/app.py link && mkfifo pipe && "
        "mv src moved"  # a folder of the workspace: the overlay copies it (EXDEV for mv)
    ))  # fmt: skip
    assert (root / "moved" / "app.py").read_text() == "print('v2')\n"
    assert not (root / "src").exists()
    assert sorted(p.name for p in (root / "docs").iterdir()) == ["c.txt"]
    assert (root / "new" / "deep" / "n.txt").read_text() == "n\n"
    assert stat.S_IMODE((root / "run.sh").stat().st_mode) == 0o755
    assert os.readlink(root / "link") == "src/app.py"
    assert (root / "pipe").is_fifo()
    # the next command sees what the last one left
    assert await sh(sandbox, root, "cat moved/app.py new/deep/n.txt") == "print('v2')\nn\n"


async def test_a_folder_replaced_by_a_file_and_back(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    sandbox = Sandbox(SandboxSettings())
    await sh(sandbox, root, "rm -r docs && echo file > docs && rm src/app.py && rmdir src "
             "&& mkdir src && echo fresh > src/only.txt")  # fmt: skip
    assert (root / "docs").read_text() == "file\n"
    assert sorted(p.name for p in (root / "src").iterdir()) == ["only.txt"]
    await sh(sandbox, root, "rm docs && mkdir docs && echo again > docs/x")
    assert sorted(p.name for p in (root / "docs").iterdir()) == ["x"]


async def test_git_stays_out_of_reach(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    sandbox = Sandbox(SandboxSettings())
    result = await sandbox.run(
        ["sh", "-c", "echo evil > .git/hooks/pre-commit; mv .git gone; rm -rf .git; "
         "ls /tmp/.bot-writes"], cwd=root,
    )  # fmt: skip
    assert "Read-only file system" in result.stderr
    assert result.stdout.strip() == ""  # the layer itself is not reachable
    assert sorted(p.name for p in (root / ".git").iterdir()) == ["hooks"]
    assert not (root / ".git" / "hooks" / "pre-commit").exists()


async def test_a_git_folder_a_command_makes_never_reaches_the_disk(tmp_path: Path) -> None:
    """Without a clone's .git to bind read-only, the layer may hold one: never applied
    (the bot's git on the host would run its hooks and config)."""
    root = tmp_path / "plain"
    root.mkdir()
    sandbox = Sandbox(SandboxSettings())
    await sh(sandbox, root, "mkdir -p .git/hooks && echo evil > .git/hooks/pre-commit && "
             "echo kept > kept.txt")  # fmt: skip
    assert (root / "kept.txt").is_file()
    assert not (root / ".git").exists()


async def test_a_link_left_on_disk_is_replaced_not_followed(tmp_path: Path) -> None:
    """A link to a folder outside, left by one command: the next one replaces it by a
    folder of files; the sync on the host must not write through the old link."""
    root = workspace(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    sandbox = Sandbox(SandboxSettings())
    await sh(sandbox, root, f"ln -s {outside} out")
    assert (root / "out").is_symlink()
    await sh(sandbox, root, "rm out && mkdir out && echo planted > out/f")
    assert list(outside.iterdir()) == []
    assert not (root / "out").is_symlink() and (root / "out" / "f").read_text() == "planted\n"


async def test_commands_run_as_the_bot_with_no_capability(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    sandbox = Sandbox(SandboxSettings())
    out = await sh(sandbox, root, "id -u; grep -E '^Cap(Eff|Prm|Amb):' /proc/self/status; "
                   "umount . 2>&1 || true")  # fmt: skip
    lines = out.splitlines()
    assert lines[0] == str(os.getuid())
    assert all(line.split()[1] == "0000000000000000" for line in lines[1:4])
    assert (root / "src" / "app.py").is_file()


async def test_a_command_that_times_out_keeps_what_it_wrote(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    sandbox = Sandbox(SandboxSettings())
    result = await sandbox.run(["sh", "-c", "echo w > wrote.txt; sleep 30"], cwd=root, timeout=1)
    assert result.timed_out
    assert (root / "wrote.txt").read_text() == "w\n"


async def test_a_cancelled_command_leaves_the_workspace_and_nothing_open(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    sandbox = Sandbox(SandboxSettings())
    await sh(sandbox, root, "true")  # the probe and its pipes are behind us
    open_before = len(os.listdir("/proc/self/fd"))
    run = asyncio.create_task(sandbox.run(["sh", "-c", "echo w > wrote.txt; sleep 30"], cwd=root))
    await asyncio.sleep(1.0)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert not (root / "wrote.txt").exists()
    assert len(os.listdir("/proc/self/fd")) == open_before
    assert await sh(sandbox, root, "echo again > again.txt; cat again.txt") == "again\n"


SYSTEM_PYTHON = "/usr/bin/python3"
AS_USER = """
import asyncio, json, sys
from pathlib import Path
from bot.config import SandboxSettings
from bot.sandbox.sandbox import Sandbox

async def main() -> None:
    root = Path(sys.argv[1])
    sandbox = Sandbox(SandboxSettings(workspace_mb=16))
    bound = await sandbox.bound()
    fill = await sandbox.run(["sh", "-c", "id -u; echo kept > kept.txt; "
                              "head -c 40000000 /dev/zero > big"], cwd=root)
    print(json.dumps({"bound": bound.value, "stdout": fill.stdout, "stderr": fill.stderr}))

asyncio.run(main())
"""


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    """A folder another user can reach (pytest's tmp_path is root's own)."""
    folder = Path(tempfile.mkdtemp(prefix="bot-test-user-", dir="/var/tmp"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to become another user")
def test_a_bot_that_is_not_root_gets_the_same_bounds(shared_tmp: Path) -> None:
    """deploy/: the systemd units and the Kubernetes worker run the bot as a user."""
    if not Path(SYSTEM_PYTHON).is_file() or shutil.which("setpriv") is None:
        pytest.skip("a system python3 and setpriv are needed")
    here = Path(__file__).resolve().parents[2]
    site = [p for p in sys.path if p.endswith("site-packages")]
    tmp_path = shared_tmp
    root = tmp_path / "ws"
    (root / ".git").mkdir(parents=True)
    subprocess.run(["chown", "-R", "65534:65534", str(root)], check=True)
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": os.pathsep.join([str(here), *site])}
    done = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--",
         SYSTEM_PYTHON, "-c", AS_USER, str(root)],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    if "Permission denied" in done.stderr and "site-packages" in done.stderr:
        pytest.skip("the test's packages are not readable by another user")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["bound"] == "kernel"
    assert report["stdout"].splitlines()[0] == "65534"
    assert "No space left on device" in report["stderr"]
    assert (root / "kept.txt").read_text() == "kept\n"
    assert (root / "kept.txt").stat().st_uid == 65534
    used = subprocess.run(["du", "-s", "-B1", str(root)], capture_output=True, text=True)
    assert int(used.stdout.split()[0]) <= 16 << 20
