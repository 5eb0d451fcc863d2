"""What must hold before a task runs on a runner: a sender who may steer the bot, a key
for the model, and a sandbox that starts. Each check returns what is wrong, in words for
the summary and the issue, or None."""

from __future__ import annotations

import asyncio
import ipaddress
import tempfile
from pathlib import Path
from urllib.parse import urlsplit

from bot.config import Settings
from bot.events import ForgeEvent
from bot.forges.base import Forge
from bot.sandbox.sandbox import Sandbox, SandboxUnavailable, hidden_paths
from bot.triggers import may_steer

PROBE_TIMEOUT = 60.0


async def sender_problem(forge: Forge, event: ForgeEvent) -> str | None:
    """A run started by someone without write access (the dispatcher's own rule) neither
    reads nor keeps the issue's state and runs no task: it may only be answered. So it
    cannot take a maintainer's queued run's place, race it, or overwrite what it keeps."""
    assert event.issue is not None
    login = event.actor.login
    if may_steer(await forge.get_permission(event.issue.repo, login)):
        return None
    return (
        f"{login} has no write access here: this run was only answered; the issue's kept "
        "state was neither read nor written, and no task ran."
    )


def model_key_problem(settings: Settings) -> str | None:
    """A hosted model needs its key. None for the scripted model and for an endpoint on
    the runner itself (a self-hosted runner's local model)."""
    llm = settings.llm
    if llm.provider == "scripted" or llm.api_key is not None:
        return None
    if llm.provider != "anthropic" and _on_this_machine(llm.base_url):
        return None
    return (
        f"The model's API key is not set (llm.provider {llm.provider}). Add it as a "
        "repository secret and pass it to the action as `llm_api_key` "
        "(`llm_api_key: ${{ secrets.LLM_API_KEY }}`); outside a runner, set LLM_API_KEY."
    )


def _on_this_machine(url: str) -> bool:
    host = (urlsplit(url).hostname or "").lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


async def sandbox_problem(settings: Settings, scratch: Path) -> str | None:
    """Start the real sandbox once, with a command that does nothing, in a folder of
    ``scratch``. Commands never run without it (unless the configuration says
    ``sandbox.allow_unsandboxed_DANGEROUS``)."""
    sandbox = Sandbox(settings.sandbox, hide=hidden_paths(settings))
    if not sandbox.sandboxed and settings.sandbox.allow_unsandboxed_DANGEROUS:
        return None
    await asyncio.to_thread(scratch.mkdir, parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="sandbox-probe-", dir=scratch) as folder:
        try:
            result = await sandbox.run(["true"], cwd=Path(folder), timeout=PROBE_TIMEOUT)
        except SandboxUnavailable as exc:
            return f"The sandbox cannot start on this runner, so no command is run: {exc}"
    if result.exit_code != 0:
        return (
            "The sandbox cannot start on this runner, so no command is run: a command that "
            f"does nothing exited {result.exit_code}: {(result.stderr or '').strip()[:500]}"
        )
    return None
