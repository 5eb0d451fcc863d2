"""Whether bubblewrap can make its sandbox here: tried once per binary (a container that
forbids user namespaces fails), and the error that says how to install or allow it.
"""

from __future__ import annotations

import asyncio

from bot.sandbox.bwrap import DEFAULT_PATH

INSTALL_HINT = (
    "bubblewrap (bwrap) is needed to run commands: install it with `apt-get install "
    "bubblewrap` (dnf/yum/apk: package bubblewrap). Only on a machine you can afford to "
    "lose, `sandbox.allow_unsandboxed_DANGEROUS: true` in config.yaml runs commands "
    "without a sandbox."
)
_probe_errors: dict[str, str | None] = {}


class SandboxUnavailable(Exception):
    """Commands cannot be sandboxed here; the message says how to fix it."""


async def ensure_bwrap_works(bwrap: str) -> None:
    """Start bwrap once per binary; a container that forbids namespaces fails here."""
    if bwrap not in _probe_errors:
        proc = await asyncio.create_subprocess_exec(
            bwrap, "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev",
            "--unshare-all", "--cap-drop", "ALL", "--die-with-parent", "--", "true",
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE, env={"PATH": DEFAULT_PATH},
        )  # fmt: skip
        _, err = await proc.communicate()
        failed = proc.returncode != 0
        _probe_errors[bwrap] = err.decode(errors="replace").strip() if failed else None
    error = _probe_errors[bwrap]
    if error is not None:
        raise SandboxUnavailable(
            f"bubblewrap cannot create its sandbox here: {error or 'unknown error'}. "
            "Allow user namespaces (e.g. sysctl kernel.unprivileged_userns_clone=1, or run "
            "the container with a seccomp profile that permits them)."
        )
