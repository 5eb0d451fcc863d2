"""Run git for the workspace, with credentials given to that one process only.

The token never goes into a URL, ``.git/config`` or any file: git asks for it through
``GIT_ASKPASS``, a small script in a private temporary directory outside the
workspace that prints ``BOT_GIT_USERNAME`` / ``BOT_GIT_PASSWORD`` from its own
environment. Credential helpers are switched off (so no helper stores the token),
hooks are switched off (a sandboxed command must never get git to run its code),
and git never prompts on a terminal.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from bot.forges.base import CloneAuth

_ASKPASS = """#!/bin/sh
case "$1" in
  [Uu]sername*) printf '%s\\n' "$BOT_GIT_USERNAME" ;;
  *) printf '%s\\n' "$BOT_GIT_PASSWORD" ;;
esac
"""
_PASSED_THROUGH = (
    "PATH", "HOME", "LANG", "LC_ALL", "TZ", "SSL_CERT_FILE", "SSL_CERT_DIR", "GIT_SSL_CAINFO",
    "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy",
)  # fmt: skip


class WorkspaceError(Exception):
    """A git operation on the workspace failed or was refused; the message says why."""


@dataclass(frozen=True, slots=True)
class GitResult:
    code: int
    stdout: str
    stderr: str


@dataclass(frozen=True, slots=True)
class Identity:
    name: str
    email: str


def git_config_env(identity: Identity) -> dict[str, str]:
    """Configuration given on the environment: it overrides the user's and the repo's."""
    settings = {
        "credential.helper": "",
        "core.hooksPath": "/dev/null",
        "core.fsmonitor": "false",
        # Never step into a nested repository the sandboxed agent may have made: its own
        # config (filters, textconv, fsmonitor) would run on the host, outside the sandbox.
        "diff.ignoreSubmodules": "all",
        "status.submoduleSummary": "false",
        "submodule.recurse": "false",
        "commit.gpgSign": "false",
        "advice.detachedHead": "false",
        "user.name": identity.name,
        "user.email": identity.email,
    }
    env = {"GIT_CONFIG_COUNT": str(len(settings))}
    for index, (key, value) in enumerate(settings.items()):
        env[f"GIT_CONFIG_KEY_{index}"] = key
        env[f"GIT_CONFIG_VALUE_{index}"] = value
    return env


def base_env(environ: Mapping[str, str], identity: Identity) -> dict[str, str]:
    env = {k: environ[k] for k in _PASSED_THROUGH if k in environ}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env["GIT_TERMINAL_PROMPT"] = "0"
    env["GCM_INTERACTIVE"] = "never"
    env.update(git_config_env(identity))
    return env


@contextlib.contextmanager
def askpass_env(auth: CloneAuth) -> Iterator[dict[str, str]]:
    """The environment entries that let one git process authenticate; the script is
    removed afterwards. It holds no secret: the secret is in the environment."""
    directory = Path(tempfile.mkdtemp(prefix="bot-askpass-"))
    try:
        script = directory / "askpass.sh"
        script.write_text(_ASKPASS, encoding="utf-8")
        script.chmod(0o700)
        yield {
            "GIT_ASKPASS": str(script),
            "BOT_GIT_USERNAME": auth.username,
            "BOT_GIT_PASSWORD": auth.password,
        }
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def redact(text: str, auth: CloneAuth | None) -> str:
    if auth is not None and auth.password:
        text = text.replace(auth.password, "***")
    return text


async def run_git(
    args: list[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout: float,
    auth: CloneAuth | None = None,
    stdin: bytes | None = None,
    check: bool = True,
) -> GitResult:
    """Run ``git args`` in ``cwd``; raises ``WorkspaceError`` (secret redacted) on failure
    when ``check``, or when git does not finish within ``timeout`` seconds."""
    with contextlib.ExitStack() as stack:
        full_env = dict(env)
        if auth is not None:
            full_env.update(stack.enter_context(askpass_env(auth)))
        proc = await asyncio.create_subprocess_exec(
            "git", *args, cwd=cwd, env=full_env, start_new_session=True,
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        try:
            out, err = await asyncio.wait_for(proc.communicate(stdin), timeout)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, 9)
            await proc.wait()
            raise WorkspaceError(f"git {args[0]} did not finish within {timeout:g} s") from None
    result = GitResult(
        proc.returncode or 0,
        out.decode("utf-8", errors="replace"),
        redact(err.decode("utf-8", errors="replace"), auth),
    )
    if check and result.code != 0:
        detail = result.stderr.strip() or result.stdout.strip()
        raise WorkspaceError(f"git {args[0]} failed (exit {result.code}): {detail}")
    return result
