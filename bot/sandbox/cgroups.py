"""A per-command ``pids`` cgroup: the process limit that also holds for root.

``RLIMIT_NPROC`` (set by ``prlimit``) is not enforced for processes whose real user
is root, and bubblewrap started by root maps the sandbox user to root. So when the
bot may create cgroups (cgroup v2 with the ``pids`` controller delegated, or the
cgroup v1 ``pids`` hierarchy) each sandboxed command runs in its own cgroup with
``pids.max`` set; a fork bomb then hits ``EAGAIN`` instead of the machine's limit.
The command joins the cgroup before it starts (``join_argv``), so no child escapes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import uuid
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

CGROUP_ROOT = Path("/sys/fs/cgroup")
_JOIN_SCRIPT = 'echo $$ > "$0" && exec "$@"'


def _own_cgroup(controller: str, proc_cgroup: str) -> str | None:
    """Our path in the hierarchy of ``controller`` ("" = the v2 unified hierarchy)."""
    for line in proc_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if controller == "" and parts[0] == "0" and parts[1] == "":
            return parts[2]
        if controller and controller in parts[1].split(","):
            return parts[2]
    return None


def _parent_dir(root: Path, proc_cgroup: str) -> tuple[Path, bool] | None:
    """Where to create our cgroups, and whether it is cgroup v2."""
    v2_controllers = root / "cgroup.controllers"
    if v2_controllers.exists():
        own = _own_cgroup("", proc_cgroup)
        if own is None or "pids" not in v2_controllers.read_text().split():
            return None
        parent = root / own.lstrip("/")
        control = parent / "cgroup.subtree_control"
        if "pids" not in control.read_text().split():
            control.write_text("+pids")  # fails when the parent holds processes
        return parent, True
    own = _own_cgroup("pids", proc_cgroup)
    if own is None or not (root / "pids").is_dir():
        return None
    return root / "pids" / own.lstrip("/"), False


@dataclass(frozen=True, slots=True)
class PidsCgroup:
    path: Path
    v2: bool

    @classmethod
    def create(cls, max_pids: int, *, root: Path = CGROUP_ROOT) -> PidsCgroup | None:
        """A new cgroup allowing ``max_pids`` tasks, or None when we may not make one."""
        try:
            found = _parent_dir(root, Path("/proc/self/cgroup").read_text())
            if found is None:
                return None
            path = found[0] / f"bot-sandbox-{uuid.uuid4().hex[:12]}"
            path.mkdir()
        except OSError:
            return None
        group = cls(path, found[1])
        try:
            (path / "pids.max").write_text(str(max_pids))
        except OSError:
            group.remove()
            return None
        return group

    def join_argv(self) -> list[str]:
        """A prefix that moves the command into this cgroup, then runs it."""
        return ["/bin/sh", "-c", _JOIN_SCRIPT, str(self.path / "cgroup.procs")]

    def pids(self) -> list[int]:
        try:
            text = (self.path / "cgroup.procs").read_text()
        except OSError:
            return []
        return [int(p) for p in text.split()]

    def kill_all(self) -> None:
        if self.v2 and (self.path / "cgroup.kill").exists():
            with contextlib.suppress(OSError):
                (self.path / "cgroup.kill").write_text("1")
            return
        for _ in range(50):  # a forking process may add members while we kill
            members = self.pids()
            if not members:
                return
            for pid in members:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)

    def remove(self) -> bool:
        """Remove the (empty) cgroup; False when members are still exiting."""
        try:
            self.path.rmdir()
        except FileNotFoundError:
            return True
        except OSError:
            return False
        return True


async def remove_cgroup(cgroup: PidsCgroup) -> None:
    """Remove a command's cgroup, killing what is left in it (each try waits 50 ms)."""
    for _ in range(40):
        if cgroup.remove():
            return
        cgroup.kill_all()
        await asyncio.sleep(0.05)
    log.warning("could not remove the sandbox cgroup %s", cgroup.path)
