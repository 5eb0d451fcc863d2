"""The bubblewrap command line of one sandboxed command: pure, no I/O.

The sandbox sees the host file system read-only, with secrets hidden (small read-only
tmpfs over home directories, ``/run`` and the bot's data directory; ``/dev/null`` over
files such as ``/etc/shadow``), a private ``/tmp`` of a bounded size (``sandbox.tmp_mb``),
``/proc``, a read-only ``/dev`` whose ``/dev/shm`` is bounded too (``sandbox.shm_mb``),
and exactly one writable directory: the workspace, whose ``.git`` stays read-only so a
command cannot plant hooks or configuration that git would later run outside the
sandbox. With ``Mounts.overlay_info_fd`` the workspace is shown read-only and the
command's wrapper (``overlay``) lays a size-bounded overlay over it; bwrap then gives
that wrapper the few capabilities it needs to mount it (the wrapper drops them all
before the command starts) and reports the sandbox's PID on that descriptor.

All namespaces are new (``--unshare-all``: the network namespace too, never the host's;
a command with network reaches the package indexes through the egress proxy, see
``egress``), all capabilities are dropped, the environment is cleared and rebuilt, and
resource limits are applied by ``prlimit`` inside the sandbox, just before the command.

What testing as root in a container (bubblewrap 0.8, Linux 6.x) taught:

- ``--unshare-all`` works there as is (it includes a user namespace mapping root to
  root); no flag had to be dropped. Where namespaces are forbidden, bwrap fails at
  start and ``Sandbox`` reports bwrap's own message.
- Started by root, bwrap keeps every capability inside the sandbox (a command could
  unmount the tmpfs hiding /root): hence ``--cap-drop ALL``.
- ``/proc/1/environ`` inside the sandbox is bwrap's own environment (PID 1 of the new
  namespace is bwrap's init): ``--clearenv`` alone would leak the bot's secrets, so
  bwrap itself is started with nothing but ``PATH``.
- ``RLIMIT_NPROC`` does not apply to root: see ``cgroups`` for the process limit.
- Unix sockets are files, not part of the network namespace: ``/run`` (docker.sock,
  database sockets) is hidden.
- ``--dev`` mounts a tmpfs of half the machine's memory at ``/dev``, and ``/dev/shm`` is
  only a folder of it: a command wrote 990 MB there. bwrap 0.8 cannot size it, so
  ``/dev/shm`` gets a tmpfs of its own and ``/dev`` is remounted read-only (its device
  nodes are binds of their own and stay usable).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from bot.config.sections import SandboxSettings

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# The sandbox's own private tmpfs, not the host's /tmp.
SANDBOX_TMP = "/tmp"  # noqa: S108
SANDBOX_HOME = SANDBOX_TMP
_CACHE = f"{SANDBOX_TMP}/.cache"

# Keep tool caches out of the workspace, so they are never committed.
BASE_ENV: Mapping[str, str] = {
    "PATH": DEFAULT_PATH,
    "HOME": SANDBOX_HOME,
    "LANG": "C.UTF-8",
    "TMPDIR": SANDBOX_TMP,
    "XDG_CACHE_HOME": _CACHE,
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONPYCACHEPREFIX": f"{_CACHE}/pycache",
    "RUFF_CACHE_DIR": f"{_CACHE}/ruff",
    "MYPY_CACHE_DIR": f"{_CACHE}/mypy",
    "npm_config_cache": f"{_CACHE}/npm",
    "CI": "true",
}

# A tmpfs is memory that the memory limit (RLIMIT_AS) does not count: every one gets a
# size. The ones that hide directories only hold the mount points of what is shown again.
HIDE_BYTES = 1 << 20
SHM = "/dev/shm"  # noqa: S108 (the sandbox's own, a tmpfs of sandbox.shm_mb)
# Where the overlay's tmpfs is mounted before the command starts (and unmounted, so the
# command never reaches the layer directly): under the private /tmp, a mount of its own.
WRITES_DIR = f"{SANDBOX_TMP}/.bot-writes"
# What the overlay wrapper needs, and only until it starts the command: mounting (the
# tmpfs, the overlay, .git read-only), the overlay's own work in its work directory,
# and mapping the bot's user into a nested user namespace.
OVERLAY_CAPS = ("CAP_SYS_ADMIN", "CAP_DAC_OVERRIDE", "CAP_SETFCAP")

SECRET_FILES: tuple[str, ...] = (
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/sudoers",
)
SECRET_DIRS: tuple[str, ...] = ("/root", "/home", "/run", "/var/run", "/etc/ssh", "/etc/sudoers.d")


@dataclass(frozen=True, slots=True)
class Limits:
    cpu_seconds: int
    memory_bytes: int
    max_processes: int
    max_file_bytes: int

    @classmethod
    def of(cls, s: SandboxSettings) -> Limits:
        return cls(
            cpu_seconds=s.cpu_seconds,
            memory_bytes=s.memory_mb * 1024 * 1024,
            max_processes=s.max_processes,
            max_file_bytes=s.max_file_mb * 1024 * 1024,
        )


def limit_argv(prlimit: str, limits: Limits) -> list[str]:
    """``prlimit`` applying the limits to the command that follows (no core dumps)."""
    return [
        prlimit,
        f"--cpu={limits.cpu_seconds}",
        f"--as={limits.memory_bytes}",
        f"--nproc={limits.max_processes}",
        f"--fsize={limits.max_file_bytes}",
        "--core=0",
        "--",
    ]


def sandbox_env(extra: Mapping[str, str] | None) -> dict[str, str]:
    """The minimal environment of a sandboxed command, ``extra`` on top."""
    env = dict(BASE_ENV)
    env.update(extra or {})
    return env


@dataclass(frozen=True, slots=True)
class Mounts:
    """What to hide and what to show again, read-only, inside a hidden directory (e.g. a
    Python installed under /root); existing paths only (the caller checks)."""

    writable: Path
    tmp_bytes: int = 512 << 20
    shm_bytes: int = 64 << 20
    hide_dirs: tuple[Path, ...] = ()
    hide_files: tuple[Path, ...] = ()
    readonly_inside: tuple[Path, ...] = ()
    expose: tuple[Path, ...] = ()
    overlay_info_fd: int | None = None  # see the module's docstring


def bwrap_argv(
    bwrap: str,
    mounts: Mounts,
    *,
    cwd: Path,
    env: Mapping[str, str],
) -> list[str]:
    """The bubblewrap prefix; the limited command follows it."""
    argv = [bwrap, "--ro-bind", "/", "/"]
    for directory in mounts.hide_dirs:  # each a small tmpfs, made read-only below
        argv += ["--size", str(HIDE_BYTES), "--tmpfs", str(directory)]
    for file in mounts.hide_files:
        argv += ["--ro-bind", "/dev/null", str(file)]
    argv += ["--size", str(mounts.tmp_bytes), "--tmpfs", SANDBOX_TMP]
    argv += ["--proc", "/proc", "--dev", "/dev"]
    argv += ["--size", str(mounts.shm_bytes), "--tmpfs", SHM, "--remount-ro", "/dev"]
    for path in mounts.expose:  # after every tmpfs, so a path under /tmp shows too
        argv += ["--ro-bind", str(path), str(path)]
    if mounts.overlay_info_fd is not None:  # the wrapper lays the overlay and makes .git read-only
        argv += ["--ro-bind", str(mounts.writable), str(mounts.writable), "--dir", WRITES_DIR]
    else:
        argv += ["--bind", str(mounts.writable), str(mounts.writable)]
        for path in mounts.readonly_inside:
            argv += ["--ro-bind", str(path), str(path)]
    for directory in mounts.hide_dirs:  # after the binds beneath them
        # one under /tmp is covered by the private /tmp (no longer a mount of its own)
        if not Path(directory).is_relative_to(SANDBOX_TMP):
            argv += ["--remount-ro", str(directory)]
    argv += ["--unshare-all"]
    argv += ["--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    if mounts.overlay_info_fd is not None:
        argv += ["--uid", "0", "--gid", "0"]  # the wrapper maps the bot's own user back
        for cap in OVERLAY_CAPS:
            argv += ["--cap-add", cap]
        argv += ["--info-fd", str(mounts.overlay_info_fd)]
    argv += ["--clearenv"]
    for key, value in sorted(env.items()):
        argv += ["--setenv", key, value]
    argv += ["--chdir", str(cwd), "--"]
    return argv
