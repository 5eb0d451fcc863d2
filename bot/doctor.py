"""``bot doctor``: check what the bot needs and say how to fix what is wrong."""

from __future__ import annotations

import shutil
from dataclasses import dataclass

from bot.config import Settings, disabled_forges
from bot.events import ForgeKind
from bot.forges.base import ForgeError
from bot.runtime import Runtime
from bot.sandbox.sandbox import Sandbox, SandboxUnavailable, WorkspaceBound
from bot.storage.base import StoreError


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""
    warning: bool = False


def format_checks(checks: list[Check]) -> str:
    lines = []
    for check in checks:
        mark = "ok  " if check.ok else ("warn" if check.warning else "FAIL")
        lines.append(f"[{mark}] {check.name}: {check.detail}")
        if check.fix and not check.ok:
            lines.extend(f"       -> {step}" for step in check.fix.splitlines())
    return "\n".join(lines)


async def run_checks(settings: Settings, runtime: Runtime) -> list[Check]:
    where = str(settings.source_path) if settings.source_path else "built-in defaults"
    checks = [Check("configuration", True, f"loaded from {where}")]
    checks.append(await _store_check(settings, runtime))
    checks.extend(await _forge_checks(settings, runtime))
    checks.append(await _llm_check(runtime))
    checks.append(_sandbox_check(settings))
    if shutil.which("bwrap"):
        checks.append(await _bounds_check(settings))
    return checks


async def _store_check(settings: Settings, runtime: Runtime) -> Check:
    try:
        await runtime.store.open()
        await runtime.store.ping()
    except StoreError as exc:
        return Check(
            "store",
            False,
            str(exc),
            fix=f"make {settings.storage.data_dir} writable, or set BOT_DATA_DIR",
        )
    backend = settings.storage.backend
    where = settings.storage.data_dir if backend == "sqlite" else "PostgreSQL"
    return Check("store", True, f"{backend} at {where} is writable")


async def _forge_checks(settings: Settings, runtime: Runtime) -> list[Check]:
    checks = [Check("forge", False, line, warning=True) for line in disabled_forges(settings)]
    for kind, forge in runtime.forges.items():
        try:
            who = await forge.whoami()
        except ForgeError as exc:
            checks.append(
                Check(
                    kind.value,
                    False,
                    f"credentials rejected: {exc}",
                    fix="check the app id / private key or token, and the API URL",
                )
            )
            continue
        configured = (
            settings.bot.github_login if kind is ForgeKind.GITHUB else settings.bot.gitlab_username
        )
        if who.lower() != configured.lower():
            key = "bot.github_login" if kind is ForgeKind.GITHUB else "bot.gitlab_username"
            checks.append(
                Check(
                    kind.value,
                    False,
                    f"authenticated as {who}, but {key} is {configured!r}: the bot would not "
                    "recognise its own comments",
                    fix=f"set {key}: {who!r} in the configuration",
                )
            )
            continue
        checks.append(Check(kind.value, True, f"authenticated as {who}"))
    if not runtime.forges:
        checks.append(
            Check(
                "forges",
                False,
                "no forge is enabled: the bot will not receive any task",
                warning=True,
            )
        )
    return checks


async def _llm_check(runtime: Runtime) -> Check:
    report = await runtime.llm_health()
    fix = "\n".join(report.setup_steps)
    if not report.reachable:
        return Check("llm", False, f"{report.base_url} unreachable: {report.error}", fix=fix)
    if report.model_available is False:
        return Check(
            "llm", False, f"model {report.model} is not served by {report.base_url}", fix=fix
        )
    server = report.server or report.provider
    if report.answered is False:
        return Check(
            "llm",
            False,
            f"{server} at {report.base_url} lists {report.model} but a structured request "
            f"in the {report.dialect} dialect failed: {report.error}",
            fix=fix,
        )
    detail = f"{server} at {report.base_url}, model {report.model}"
    if report.answered:
        detail += f", dialect {report.dialect}, a structured answer in {report.latency_ms:g} ms"
    if report.probed:
        detail += f" (probed: {'; '.join(report.probed)})"
    return Check("llm", True, detail)


def _sandbox_check(settings: Settings) -> Check:
    if shutil.which("bwrap"):
        return Check("sandbox", True, "bubblewrap found")
    if settings.sandbox.allow_unsandboxed_DANGEROUS:
        return Check(
            "sandbox",
            False,
            "bubblewrap missing; commands run UNSANDBOXED",
            fix="apt-get install bubblewrap",
            warning=True,
        )
    return Check(
        "sandbox",
        False,
        "bubblewrap missing: run_command is refused",
        fix="apt-get install bubblewrap",
    )


async def _bounds_check(settings: Settings) -> Check:
    """Whether the kernel holds the workspace's bounds (sandbox.workspace_mb, _files)."""
    sandbox = Sandbox(settings.sandbox)
    try:
        bound = await sandbox.bound()
    except SandboxUnavailable as exc:
        return Check("workspace bounds", False, str(exc))
    if bound is WorkspaceBound.KERNEL:
        return Check(
            "workspace bounds", True,
            f"held by the kernel: each command writes through an overlay of at most "
            f"sandbox.write_mb ({settings.sandbox.write_mb} MB, memory)",
        )  # fmt: skip
    return Check(
        "workspace bounds", False,
        f"checked once a second only, a fast command passes them: {sandbox.overlay_refused}",
        fix="Linux 5.11+ (6.6+ for a tmpfs layer) with util-linux's mount, unshare and "
        "setpriv; see docs/sandbox.md, \"The sandbox's bounds\"",
        warning=True,
    )  # fmt: skip


def failed(checks: list[Check]) -> bool:
    return any(not c.ok and not c.warning for c in checks)
