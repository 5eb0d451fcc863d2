"""Run git for the workspace, with credentials given to that one process only.

The token never goes into a URL, ``.git/config`` or any file: git asks for it through a
credential helper of the bot's own, a small script in a private temporary directory
outside the workspace that reads git's ``protocol=`` / ``host=`` lines and answers
``BOT_GIT_USERNAME`` / ``BOT_GIT_PASSWORD`` from its own environment only when they name
the clone URL's own scheme, host and port; any other host (one a repository's
``.lfsconfig`` names, a redirect's) gets nothing. Every other credential helper is
dropped, there is no askpass program and git never prompts on a terminal, so a refused
request fails. A helper reads structured fields where an askpass program would have to
parse a prompt written for people, whose form changes with git's version and caller.

Every git the bot runs ignores the system's and the user's configuration
(``GIT_CONFIG_NOSYSTEM``, ``GIT_CONFIG_GLOBAL=/dev/null``): where git-lfs is installed,
its filter and any ``url.*.insteadOf`` or helper of the machine never run. LFS content is
not fetched (``GIT_LFS_SKIP_SMUDGE``, the ``lfs`` filter emptied): a pointer file stays a
pointer, unless the settings ask for LFS (``lfs=True``: the filter is the bot's own, and the
workspace fetches and pushes LFS objects in steps of their own). Whenever git gets the
credential, git-lfs's endpoint is pinned to the clone URL's own (``lfs.url``,
``lfs.pushurl``: git's configuration overrides a repository's ``.lfsconfig``). Hooks are
switched off (a sandboxed command must never get git to run its code).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from bot.forges.base import CloneAuth

_HELPER = """#!/bin/sh
# git's credential helper for one git process: answers the forge's own scheme and host
# (BOT_GIT_PROTOCOL; BOT_GIT_HOST or BOT_GIT_HOST_PORT, compared literally) and no other.
[ "$1" = get ] || exit 0
protocol= host=
while IFS= read -r line; do
  case $line in
    protocol=*) protocol=${line#protocol=} ;;
    host=*) host=${line#host=} ;;
    '') break ;;
  esac
done
[ -n "$protocol" ] && [ "$protocol" = "$BOT_GIT_PROTOCOL" ] || exit 0
[ -n "$host" ] || exit 0
case $host in
  "$BOT_GIT_HOST"|"$BOT_GIT_HOST_PORT") ;;
  *) exit 0 ;;
esac
printf 'username=%s\\npassword=%s\\n' "$BOT_GIT_USERNAME" "$BOT_GIT_PASSWORD"
"""
_DEFAULT_PORTS = {"https": 443, "http": 80}
_FORBIDDEN = ("\n", "\r", "\0")
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


_LFS_OFF = {"process": "", "smudge": "", "clean": "", "required": "false"}
_LFS_ON = {
    "process": "git-lfs filter-process",
    "smudge": "git-lfs smudge -- %f",
    "clean": "git-lfs clean -- %f",
    "required": "true",
}


def git_config_env(identity: Identity, *, lfs: bool = False) -> dict[str, str]:
    """Configuration given on the environment: it overrides the user's and the repo's."""
    settings = {
        "credential.helper": "",  # no helper of any configuration; the bot's own comes after
        # git-lfs only as the bot sets it, even where a repository's own config names it
        **{f"filter.lfs.{key}": value for key, value in (_LFS_ON if lfs else _LFS_OFF).items()},
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


def base_env(
    environ: Mapping[str, str], identity: Identity, *, lfs: bool = False
) -> dict[str, str]:
    env = {k: environ[k] for k in _PASSED_THROUGH if k in environ}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env["GIT_TERMINAL_PROMPT"] = "0"
    env["GIT_ASKPASS"] = ""  # set and empty: no core.askPass, no SSH_ASKPASS
    env["GCM_INTERACTIVE"] = "never"
    env["GIT_CONFIG_NOSYSTEM"] = "1"
    env["GIT_CONFIG_GLOBAL"] = os.devnull
    env["GIT_LFS_SKIP_SMUDGE"] = "1"
    env.update(git_config_env(identity, lfs=lfs))
    return env


@dataclass(frozen=True, slots=True)
class CredentialScope:
    """What the helper answers: ``protocol`` and one of ``hosts`` (git's ``host`` field:
    the name, with ``:port`` when the URL gives one)."""

    protocol: str
    hosts: tuple[str, str]


def credential_scope(url: str) -> CredentialScope | None:
    """The scheme, host and port of an ``http(s)`` clone URL, as git's credential fields
    name them; ``None`` for any other URL (a ``file://`` remote needs no credential)."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    hostport = parts.netloc.rpartition("@")[2]
    if scheme not in _DEFAULT_PORTS or not hostport:
        return None
    try:
        port = parts.port
    except ValueError:
        raise WorkspaceError("the clone URL has an unreadable port") from None
    name = hostport.rsplit(":", 1)[0] if port is not None else hostport
    if port is None or port == _DEFAULT_PORTS[scheme]:
        default = f"{name}:{_DEFAULT_PORTS[scheme]}"
        return CredentialScope(scheme, (name, default))
    return CredentialScope(scheme, (hostport, hostport))


def lfs_endpoint(url: str) -> str:
    """The forge's own LFS endpoint for a clone URL (git-lfs's default: ``<repo>.git/info/lfs``;
    a ``file://`` remote is its own)."""
    if credential_scope(url) is None:
        return url
    base = url.rstrip("/")
    return f"{base if base.endswith('.git') else base + '.git'}/info/lfs"


def _with_settings(env: Mapping[str, str], settings: dict[str, str]) -> dict[str, str]:
    """``GIT_CONFIG_*`` entries for ``settings``, after those ``env`` has."""
    count = int(env.get("GIT_CONFIG_COUNT", "0"))
    added = {"GIT_CONFIG_COUNT": str(count + len(settings))}
    for index, (key, value) in enumerate(settings.items(), start=count):
        added[f"GIT_CONFIG_KEY_{index}"] = key
        added[f"GIT_CONFIG_VALUE_{index}"] = value
    return added


@contextlib.contextmanager
def credential_env(auth: CloneAuth, env: Mapping[str, str]) -> Iterator[dict[str, str]]:
    """The environment entries that let one git process authenticate to the clone URL's
    host and no other; the helper script is removed afterwards. It holds no secret: the
    secret is in the environment of that one process."""
    fields = (auth.username, auth.password, auth.url)
    if any(bad in value for value in fields for bad in _FORBIDDEN):
        raise WorkspaceError("the forge's credential holds a line break; it was not used")
    scope = credential_scope(auth.url)
    endpoint = lfs_endpoint(auth.url)
    pinned = {"lfs.url": endpoint, "lfs.pushurl": endpoint}
    if scope is None:
        yield _with_settings(env, pinned)
        return
    directory = Path(tempfile.mkdtemp(prefix="bot-git-credential-"))
    try:
        script = directory / "credential-helper.sh"
        script.write_text(_HELPER, encoding="utf-8")
        script.chmod(0o700)
        yield {
            **_with_settings(env, {**pinned, "credential.helper": "!" + shlex.quote(str(script))}),
            "BOT_GIT_PROTOCOL": scope.protocol,
            "BOT_GIT_HOST": scope.hosts[0],
            "BOT_GIT_HOST_PORT": scope.hosts[1],
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
            full_env.update(stack.enter_context(credential_env(auth, env)))
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
