"""deploy/github-action/prepare-sandbox.sh and the kernel's user-namespace setting
(``kernel.apparmor_restrict_unprivileged_userns``, Ubuntu 24.04): changed only on a
GitHub-hosted runner or when the workflow allows it, said in the log, and put back by
``--restore``. The script runs for real, in bubblewrap, where the setting's own path
``/proc/sys/kernel/apparmor_restrict_unprivileged_userns`` is a file of the test's: the
machine's setting is never touched."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "deploy" / "github-action" / "prepare-sandbox.sh"
KNOB = "/proc/sys/kernel/apparmor_restrict_unprivileged_userns"

pytestmark = pytest.mark.sandbox


class Machine:
    """The knob as a file of the test's, and a runner's temporary folder."""

    def __init__(self, tmp_path: Path, value: str) -> None:
        self.knob = tmp_path / "knob"
        self.knob.write_text(f"{value}\n")
        self.temp = tmp_path / "runner-temp"
        self.temp.mkdir()

    def run(self, *args: str, **env: str) -> str:
        command = [
            "bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
            "--tmpfs", "/proc/sys/kernel", "--bind", str(self.knob), KNOB,
            "--bind", str(self.temp), str(self.temp), "--unshare-pid", "--die-with-parent",
            "--clearenv", "--setenv", "PATH", "/usr/sbin:/usr/bin:/sbin:/bin",
            "--setenv", "RUNNER_TEMP", str(self.temp),
        ]  # fmt: skip
        for key, value in env.items():
            command += ["--setenv", key, value]
        command += ["--", "bash", str(SCRIPT), *args]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 0, done.stderr
        return done.stdout

    @property
    def value(self) -> str:
        return self.knob.read_text().strip()


def test_a_self_hosted_runner_is_left_alone_and_told_why(tmp_path: Path) -> None:
    machine = Machine(tmp_path, "1")
    log = machine.run(RUNNER_ENVIRONMENT="self-hosted")
    assert machine.value == "1"
    assert "::warning::this self-hosted runner restricts unprivileged user namespaces" in log
    assert "allow_kernel_change: true" in log
    machine.run("--restore", RUNNER_ENVIRONMENT="self-hosted")
    assert machine.value == "1"


@pytest.mark.parametrize(
    "env",
    [
        {"RUNNER_ENVIRONMENT": "self-hosted", "CODING_AGENT_ALLOW_KERNEL_CHANGE": "true"},
        {"RUNNER_ENVIRONMENT": "github-hosted"},
    ],
)
def test_a_change_is_said_and_put_back_when_the_job_ends(
    tmp_path: Path, env: dict[str, str]
) -> None:
    machine = Machine(tmp_path, "1")
    log = machine.run(**env)
    assert machine.value == "0"
    assert "kernel.apparmor_restrict_unprivileged_userns=0, machine-wide" in log
    assert "set back to 1 when the job ends" in log
    log = machine.run("--restore", **env)
    assert machine.value == "1"
    assert "Restoring kernel.apparmor_restrict_unprivileged_userns=1" in log
    machine.run("--restore", **env)  # a second restore has nothing left to do
    assert machine.value == "1"


def test_an_unrestricted_machine_is_not_changed_nor_restored(tmp_path: Path) -> None:
    machine = Machine(tmp_path, "0")
    machine.run(RUNNER_ENVIRONMENT="github-hosted")
    machine.knob.write_text("2\n")  # whatever happens meanwhile is not the action's doing
    assert "Restoring" not in machine.run("--restore", RUNNER_ENVIRONMENT="github-hosted")
    assert machine.value == "2"
