"""The host's package-manager configuration, handed to set-up so it works behind a
mirror or a proxy: index and proxy variables from the bot's environment, and the pip
and npm configuration files of the bot's user (its home is hidden in the sandbox: the
files are shown read-only and named by ``PIP_CONFIG_FILE`` / ``NPM_CONFIG_USERCONFIG``).

A variable or file that holds one of the bot's own secrets (its forge tokens, keys and
webhook secrets, its LLM key) stays out, as does any of the bot's own files. Credentials
the operator gave pip or npm for a private index are theirs, and pass.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

VARIABLES = (
    "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_TRUSTED_HOST", "PIP_FIND_LINKS", "PIP_CERT",
    "PIP_CLIENT_CERT", "PIP_DEFAULT_TIMEOUT", "PIP_RETRIES", "PIP_CONFIG_FILE", "PIP_PROXY",
    "UV_INDEX_URL", "UV_EXTRA_INDEX_URL", "UV_DEFAULT_INDEX", "UV_INDEX",
    "NPM_CONFIG_REGISTRY", "npm_config_registry", "NPM_CONFIG_USERCONFIG",
    "npm_config_userconfig", "NPM_CONFIG_CAFILE", "npm_config_cafile",
    "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY",
    "http_proxy", "https_proxy", "no_proxy", "all_proxy",
    "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS",
)  # fmt: skip
# Variables that name a file the sandbox must be able to read.
FILE_VARIABLES = frozenset({
    "PIP_CERT", "PIP_CLIENT_CERT", "PIP_CONFIG_FILE", "NPM_CONFIG_USERCONFIG",
    "npm_config_userconfig", "NPM_CONFIG_CAFILE", "npm_config_cafile", "REQUESTS_CA_BUNDLE",
    "SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS",
})  # fmt: skip
USER_FILES = (
    ("PIP_CONFIG_FILE", ".config/pip/pip.conf"),
    ("PIP_CONFIG_FILE", ".pip/pip.conf"),
    ("NPM_CONFIG_USERCONFIG", ".npmrc"),
)
MAX_CONFIG_BYTES = 1 << 20


@dataclass(frozen=True, slots=True)
class PackageConfig:
    env: dict[str, str]
    expose: tuple[Path, ...]  # files to show read-only inside the sandbox
    left_out: tuple[str, ...] = ()  # what was not passed, and why (for the log)


def package_config(
    environ: Mapping[str, str],
    home: Path,
    *,
    secrets: Iterable[str],
    own_files: Sequence[Path],
) -> PackageConfig:
    """What set-up gets of the host's package-manager configuration (reads small files)."""
    known = [s for s in secrets if len(s) >= 4]
    own = {p.expanduser().absolute() for p in own_files}
    env: dict[str, str] = {}
    expose: list[Path] = []
    left_out: list[str] = []

    def holds_secret(text: str) -> bool:
        return any(secret in text for secret in known)

    def usable_file(path: Path, why: str) -> bool:
        if path.absolute() in own or any(path.absolute().is_relative_to(p) for p in own):
            left_out.append(f"{why}: {path} is one of the bot's own files")
            return False
        if path.is_file() and holds_secret(_read(path)):
            left_out.append(f"{why}: {path} holds a secret of the bot's")
            return False
        return path.exists()

    for name in VARIABLES:
        value = environ.get(name)
        if value is None:
            continue
        if holds_secret(value):
            left_out.append(f"{name}: holds a secret of the bot's")
            continue
        if name in FILE_VARIABLES:
            if not usable_file(Path(value), name):
                continue
            expose.append(Path(value))
        env[name] = value
    for name, relative in USER_FILES:
        path = home / relative
        if name in env or not path.is_file() or not usable_file(path, name):
            continue
        env[name] = str(path)
        expose.append(path)
    return PackageConfig(env, tuple(dict.fromkeys(expose)), tuple(left_out))


def _read(path: Path) -> str:
    """A configuration file's text ("" for one too large to be configuration: a CA bundle)."""
    try:
        if path.stat().st_size > MAX_CONFIG_BYTES:
            return ""
        return path.read_text("utf-8", errors="replace")
    except OSError:
        return ""
