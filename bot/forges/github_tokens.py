"""What a GitHub App's credentials are and what its installation tokens may do: the App's
key checked, its JWT, and the body of ``POST /app/installations/{id}/access_tokens``.

A token is minted for the one repository of the task (``repositories``: its name) with
only the permissions a task uses (``TASK_PERMISSIONS``), so a token that leaks, or a
writer of one repository, reaches no other repository of the installation and nothing
the bot never does (workflow files, administration, secrets). An installation that was
granted less gets the overlap of the two (``narrowed``). Pure, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from types import MappingProxyType
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from bot.events import RepoRef
from bot.forges.base import ForgeError

JWT_BACKDATE = 60
JWT_LIFETIME = 600

# What a task does on GitHub: push its branch (contents), comment and label (issues), open
# and answer its pull request (pull_requests), read its checks, statuses and job logs, and
# (`bot action`) the run's artifacts (actions: read). The App manifest asks for the same.
TASK_PERMISSIONS: Mapping[str, str] = MappingProxyType(
    {
        "metadata": "read",
        "contents": "write",
        "issues": "write",
        "pull_requests": "write",
        "checks": "read",
        "statuses": "read",
        "actions": "read",
    }
)
_LEVELS = {"read": 1, "write": 2, "admin": 3}


def narrowed(needed: Mapping[str, str], granted: Mapping[str, Any]) -> dict[str, str]:
    """Each needed permission at the lower of its level and the installation's; one the
    installation lacks is left out (GitHub refuses a request for more than it granted)."""
    result: dict[str, str] = {}
    for name, level in needed.items():
        have = granted.get(name)
        if not isinstance(have, str) or have not in _LEVELS:
            continue
        result[name] = level if _LEVELS[level] <= _LEVELS[have] else have
    return result


def token_request(repo: RepoRef, granted: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The access-token request for ``repo`` alone, with the task's permissions (narrowed
    to ``granted``, the installation's own, when given)."""
    owner, _, name = repo.full_name.partition("/")
    if not owner or not name or "/" in name:
        raise ValueError(f"not a GitHub repository name (owner/name): {repo.full_name!r}")
    permissions = dict(TASK_PERMISSIONS) if granted is None else narrowed(TASK_PERMISSIONS, granted)
    return {"repositories": [name], "permissions": permissions}


def check_credentials(
    app_id: str | None, private_key: str | None, token: str | None
) -> rsa.RSAPrivateKey | None:
    """Exactly one of (app_id with private_key) or token; returns the App's RSA key."""
    if token is not None and (app_id is not None or private_key is not None):
        raise ValueError("GitHub: give either app_id with private_key, or token, not both")
    if token is not None:
        if not token.strip():
            raise ValueError("GitHub: the token is empty")
        return None
    if not app_id or not private_key:
        raise ValueError("GitHub: give app_id with private_key (GitHub App) or a token")
    try:
        key = serialization.load_pem_private_key(private_key.encode("utf-8"), password=None)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"GitHub App private key is not a usable PEM key: {exc}") from None
    if not isinstance(key, rsa.RSAPrivateKey):
        raise ValueError("GitHub App private key must be an RSA key")
    return key


def app_jwt(app_id: str, key: rsa.RSAPrivateKey, *, now: float) -> str:
    """A GitHub App JWT (RS256): issued a minute back for clock drift, valid 9 minutes."""
    issued = int(now) - JWT_BACKDATE
    claims = {"iat": issued, "exp": issued + JWT_LIFETIME, "iss": app_id}
    return jwt.encode(claims, key, algorithm="RS256")


def token_expiry(text: object) -> float:
    """``expires_at`` of a minted token as a timestamp."""
    if not isinstance(text, str):
        raise ForgeError(f"GitHub sent an installation token without expires_at: {text!r}")
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        raise ForgeError(f"GitHub sent an unreadable token expiry: {text!r}") from None
