"""GitHub's GraphQL API, and responses whose status the caller reads, for ``GitHubSession``.

Review threads, their resolution, a pull request's mergeability with its commits, and
leaving draft exist only in GraphQL (or cost several REST calls there): one query or
mutation each. Requests go through ``GitHubSession.raw``, so they share the
credentials, the retries and the write pacing of the REST calls; failures become the
typed errors of ``bot.forges.base``.
"""

from __future__ import annotations

import http
import json
from collections.abc import Mapping
from typing import Any

from gidgethub import HTTPException

from bot.events import RepoRef
from bot.forges.base import AccessDenied, ForgeError, NotFound, RateLimited
from bot.forges.github_auth import GitHubSession
from bot.forges.github_client import forge_error
from bot.forges.retry import retry_delay

_ERROR_TYPES = {"NOT_FOUND": NotFound, "FORBIDDEN": AccessDenied}
_MAX_MESSAGE = 300


def graphql_url(api_url: str) -> str:
    """github.com: ``https://api.github.com/graphql``; GitHub Enterprise Server:
    ``https://HOST/api/graphql`` beside ``https://HOST/api/v3``."""
    base = api_url.rstrip("/")
    if base.endswith("/api/v3"):
        return base.removesuffix("/v3") + "/graphql"
    return base + "/graphql"


def status_error(
    status: int, headers: Mapping[str, str], body: bytes, *, method: str, path: str, what: str,
    now: float,
) -> ForgeError:  # fmt: skip
    """The typed error for an unexpected HTTP status, like every REST call's."""
    try:
        message = str(json.loads(body).get("message") or "")
    except (ValueError, AttributeError):
        message = body[:_MAX_MESSAGE].decode("utf-8", errors="replace")
    exc = HTTPException(http.HTTPStatus(status), message or "no details", headers=headers)
    return forge_error(exc, method=method, path=path, what=what, now=now)


def _query_error(
    errors: list[Any], what: str, headers: Mapping[str, str], now: float
) -> ForgeError:
    first = errors[0] if errors and isinstance(errors[0], dict) else {}
    kind = str(first.get("type") or "")
    message = str(first.get("message") or "no details")[:_MAX_MESSAGE]
    if kind == "RATE_LIMITED":
        wait = retry_delay(429, headers, 0, now=now) or 60.0
        return RateLimited(f"GitHub GraphQL rate limit reached for {what}", retry_after=wait)
    error = _ERROR_TYPES.get(kind, ForgeError)
    return error(f"GitHub GraphQL refused {what}: {message} ({kind or 'error'})")


class GraphQL:
    """One query or mutation at a time, as the credentials of the repository it is about."""

    def __init__(self, gh: GitHubSession) -> None:
        self._gh = gh
        self._clock = gh.clock
        self.url = graphql_url(gh.api_url)

    async def query(self, repo: RepoRef, text: str, variables: dict[str, Any], *, what: str) -> Any:
        """A query: a read, not paced."""
        return await self._post(repo, text, variables, what=what, paced=False)

    async def mutate(
        self, repo: RepoRef, text: str, variables: dict[str, Any], *, what: str
    ) -> Any:
        """A mutation: a write, paced like the REST writes."""
        return await self._post(repo, text, variables, what=what, paced=True)

    async def _post(
        self, repo: RepoRef, text: str, variables: dict[str, Any], *, what: str, paced: bool
    ) -> Any:
        body = json.dumps({"query": text, "variables": variables}).encode("utf-8")
        status, headers, raw = await self._gh.raw(
            repo, "POST", self.url, body=body, accept="application/json", paced=paced
        )
        now = self._clock()
        if status != 200:
            raise status_error(status, headers, raw, method="POST", path="/graphql", what=what,
                               now=now)  # fmt: skip
        try:
            answer = json.loads(raw)
        except ValueError:
            raise ForgeError(f"GitHub GraphQL sent no JSON for {what}") from None
        if not isinstance(answer, dict):
            raise ForgeError(f"unexpected GitHub GraphQL response for {what}")
        if answer.get("errors"):
            raise _query_error(answer["errors"], what, headers, now)
        data = answer.get("data")
        if not isinstance(data, dict):
            raise ForgeError(f"GitHub GraphQL sent no data for {what}")
        return data
