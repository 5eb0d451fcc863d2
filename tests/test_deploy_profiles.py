"""The seccomp and AppArmor profiles of the task runners (deploy/seccomp, deploy/apparmor):
each relaxation of the runtime's defaults is documented and needed, and bubblewrap builds
the bot's real sandbox under the seccomp profile, as the pods' user (not root), with the
filter loaded by libseccomp as a container runtime loads it (tests/seccomp_exec.py)."""

from __future__ import annotations

import ctypes.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.config import SandboxSettings
from bot.sandbox.bwrap import Limits, Mounts, bwrap_argv, limit_argv, sandbox_env
from bot.sandbox.sandbox import Sandbox
from bot.sandbox.sandbox_runs import Command, probe_overlay

ROOT = Path(__file__).resolve().parents[1]
SECCOMP = ROOT / "deploy" / "seccomp" / "bwrap.json"
APPARMOR = ROOT / "deploy" / "apparmor" / "coding-agent-bot-bwrap"
RUNNER = ROOT / "tests" / "seccomp_exec.py"
RELAXED = {"clone", "unshare", "mount", "umount2", "pivot_root"}
NEVER = {
    "add_key", "bpf", "chroot", "clock_settime", "delete_module", "finit_module", "fsconfig",
    "fsmount", "fsopen", "fspick", "init_module", "io_uring_enter", "io_uring_register",
    "io_uring_setup", "kexec_file_load", "kexec_load", "keyctl", "mount_setattr", "move_mount",
    "open_by_handle_at", "open_tree", "perf_event_open", "reboot", "request_key", "setdomainname",
    "sethostname", "setns", "settimeofday", "swapoff", "swapon", "syslog", "userfaultfd",
}  # fmt: skip
NOBODY = 65534
BWRAP = shutil.which("bwrap")
real_sandbox = pytest.mark.skipif(
    BWRAP is None or ctypes.util.find_library("seccomp") is None or os.getuid() != 0,
    reason="needs bubblewrap, libseccomp and root (to become another user)",
)


def profile() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(SECCOMP.read_text(encoding="utf-8"))
    return data


def allowed(data: dict[str, Any]) -> set[str]:
    return {
        n for rule in data["syscalls"] if rule["action"] == "SCMP_ACT_ALLOW" for n in rule["names"]
    }


def test_the_seccomp_profile_refuses_by_default_and_documents_each_relaxation() -> None:
    data = profile()
    assert (data["defaultAction"], data["defaultErrnoRet"]) == ("SCMP_ACT_ERRNO", 1)
    assert all(rule.get("comment") for rule in data["syscalls"])
    relaxed = {
        n for r in data["syscalls"] if r["comment"].startswith("RELAXED") for n in r["names"]
    }
    assert relaxed == RELAXED
    assert not allowed(data) & NEVER
    (clone3,) = [r for r in data["syscalls"] if r["names"] == ["clone3"]]
    assert (clone3["action"], clone3["errnoRet"]) == ("SCMP_ACT_ERRNO", 38)  # ENOSYS
    readme = " ".join((ROOT / "deploy" / "README.md").read_text(encoding="utf-8").split())
    for name in RELAXED:
        assert f"`{name}`" in readme, name


@pytest.fixture
def workspace() -> Iterator[Path]:
    """A workspace the pods' user can write, under a directory it can reach."""
    with tempfile.TemporaryDirectory(prefix="bot-seccomp-") as top:
        os.chmod(top, 0o755)  # noqa: S103 (another user must reach the workspace)
        ws = Path(top) / "ws"
        ws.mkdir()
        os.chmod(ws, 0o777)  # noqa: S103 (and write in it)
        yield ws


def sandboxed(seccomp: Path, ws: Path, command: list[str]) -> subprocess.CompletedProcess[str]:
    """``command`` in the bot's real sandbox (bot/sandbox/bwrap.py), started by bwrap as
    the pods' user under ``seccomp``."""
    hidden = tuple(p for p in (Path("/root"), Path("/home"), Path("/run")) if p.is_dir())
    assert BWRAP is not None
    argv = bwrap_argv(
        BWRAP,
        Mounts(writable=ws, tmp_bytes=64 << 20, hide_dirs=hidden),
        cwd=ws,
        env=sandbox_env(None),
    )
    prlimit = shutil.which("prlimit") or "prlimit"
    limits = Limits(cpu_seconds=30, memory_bytes=2 << 30, max_processes=64, max_file_bytes=1 << 20)
    return subprocess.run(
        [sys.executable, str(RUNNER), str(seccomp), str(NOBODY), "--",
         *argv, *limit_argv(prlimit, limits), *command],
        capture_output=True, text=True, timeout=60, env={"PATH": os.environ["PATH"]},
    )  # fmt: skip


@real_sandbox
@pytest.mark.sandbox
def test_bubblewrap_builds_the_real_sandbox_under_the_profile(workspace: Path) -> None:
    script = (
        "git --version && python3 -c 'print(6 * 7)' && echo written > out.txt && "
        "grep -E '^(Uid|Seccomp):' /proc/self/status && ls /proc | grep -c '^[0-9]'"
    )
    done = sandboxed(SECCOMP, workspace, ["sh", "-c", script])
    assert done.returncode == 0, done.stderr
    assert "git version" in done.stdout and "\n42\n" in done.stdout
    assert re.search(r"Seccomp:\s+2", done.stdout)  # the filter is on, in the sandbox too
    assert re.search(rf"Uid:\s+{NOBODY}\b", done.stdout)
    assert int(done.stdout.split()[-1]) <= 4  # a fresh /proc: the sandbox's processes only
    assert (workspace / "out.txt").read_text() == "written\n"


@real_sandbox
@pytest.mark.sandbox
@pytest.mark.parametrize("name", sorted(RELAXED))
def test_each_relaxation_is_needed(name: str, workspace: Path, tmp_path: Path) -> None:
    data = profile()
    for rule in data["syscalls"]:
        rule["names"] = [n for n in rule["names"] if n != name]
    narrower = tmp_path / "narrower.json"
    narrower.write_text(json.dumps(data), encoding="utf-8")  # read before the user changes
    done = sandboxed(narrower, workspace, ["true"])
    assert done.returncode != 0
    assert "Operation not permitted" in done.stderr or "No permissions" in done.stderr


class UnderProfile(Sandbox):
    """The bot's own sandbox, each command started under ``profile`` as a container
    runtime starts the bot's process (the bot's side stays as it is)."""

    def __init__(self, profile: Path) -> None:
        super().__init__(SandboxSettings())
        self.profile = profile

    async def start(self, command: Command, argv: list[str], *args: Any, **kwargs: Any) -> Any:
        runner = [sys.executable, str(RUNNER), str(self.profile), str(os.getuid()), "--"]
        return await super().start(command, runner + argv, *args, **kwargs)


@real_sandbox
@pytest.mark.sandbox
async def test_the_workspace_overlay_is_laid_under_the_profile(tmp_path: Path) -> None:
    """The kernel-held workspace bound (a tmpfs and an overlay mounted by the sandbox's
    first process, then a nested user namespace) needs nothing the profile refuses; without
    ``mount`` it cannot be laid, so the probe does run under the filter."""
    assert await probe_overlay(UnderProfile(SECCOMP)) is None
    data = profile()
    for rule in data["syscalls"]:
        rule["names"] = [n for n in rule["names"] if n != "mount"]
    narrower = tmp_path / "narrower.json"
    narrower.write_text(json.dumps(data), encoding="utf-8")
    refused = await probe_overlay(UnderProfile(narrower))
    assert refused is not None and "Operation not permitted" in refused


@real_sandbox
@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs util-linux unshare")
@pytest.mark.parametrize("masked", [False, True])
def test_why_proc_must_be_unmasked(masked: bool) -> None:
    """A runtime's default masks parts of /proc by mounting over them; the kernel then
    refuses the fresh /proc bwrap mounts for the sandbox (procMount: Unmasked)."""
    assert BWRAP is not None
    cover = "mount --bind -o ro /proc/sys /proc/sys && " if masked else ""
    probe = f"{BWRAP} --ro-bind / / --proc /proc --dev /dev --unshare-all -- true"
    done = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c",
         f"{cover}setpriv --reuid={NOBODY} --regid={NOBODY} --clear-groups {probe}"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    if masked:
        assert done.returncode != 0 and "Can't mount proc" in done.stderr, done.stderr
    else:
        assert done.returncode == 0, done.stderr


def apparmor_rules(text: str) -> list[tuple[str, str]]:
    """(rule, the comment block right above it) for each rule of the profile's body."""
    found, comment = [], ""
    for raw in text.split("{", 1)[1].splitlines():
        line = raw.strip()
        if line.startswith("#"):
            comment += " " + line.lstrip("# ")
        elif line and line != "}":
            found.append((line, comment))
        else:
            comment = ""
    return found


def test_the_apparmor_profile_adds_only_what_bubblewrap_needs_and_says_why() -> None:
    text = APPARMOR.read_text(encoding="utf-8")
    assert re.search(r"^profile coding-agent-bot-bwrap ", text, re.M)
    rules = apparmor_rules(text)
    relaxed = {rule for rule, comment in rules if "RELAXED for bubblewrap" in comment}
    assert relaxed == {"userns,", "mount,", "remount,", "umount,", "pivot_root,"}
    denied = {rule.split()[1] for rule, _ in rules if rule.startswith("deny ")}
    assert {"@{PROC}/sys/**", "@{PROC}/sysrq-trigger", "/sys/firmware/**"} <= denied


@pytest.mark.skipif(
    shutil.which("apparmor_parser") is None or not Path("/etc/apparmor.d/tunables").is_dir(),
    reason="needs AppArmor's parser and its includes",
)
def test_the_apparmor_profile_compiles(tmp_path: Path) -> None:
    version = subprocess.run(["apparmor_parser", "--version"], capture_output=True, text=True)
    text = APPARMOR.read_text(encoding="utf-8")
    if re.search(r"version 3\.", version.stdout):  # the AppArmor 3 variant deploy/README.md gives
        text = text.replace("abi <abi/4.0>,", "abi <abi/3.0>,").replace("  userns,", "")
    path = tmp_path / "coding-agent-bot-bwrap"
    path.write_text(text, encoding="utf-8")
    done = subprocess.run(["apparmor_parser", "-QK", str(path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
