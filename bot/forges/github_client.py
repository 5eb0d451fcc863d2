"""The wire under every GitHub REST call, apart from whose credentials it carries.

``GitHubClient`` is gidgethub's sans-I/O client over the shared ``httpx.AsyncClient``,
with the retry loop below gidgethub (``retry_delay``: rate limits wait as told, 5xx and
connection failures back off 1, 2, 4 s) and an injectable ``sleep`` and clock;
``forge_error`` turns a GitHub error response into the typed errors of
``bot.forges.base``. Beside them, the small helpers every GitHub module shares: a
repository's URL (``repo_url``, ``split_path``), an answer read or refused
(``reading``, ``account_id``) and the API version header (``api_headers``). The
credentials and the write pacing are ``github_auth.GitHubSession``'s.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any
from urllib.parse import quote

import httpx
from gidgethub import HTTPException
from gidgethub import abc as gh_abc

from bot import metrics, tracing
from bot.events import RepoRef
from bot.forges.base import AccessDenied, Conflict, ForgeError, NotFound, RateLimited
from bot.forges.retry import retry_delay
from bot.forges.routes import route_template

ACCEPT = "application/vnd.github+json"
API_VERSION = "2022-11-28"

Sleep = Callable[[float], Awaitable[None]]
Clock = Callable[[], float]


class GitHubClient(gh_abc.GitHubAPI):
    """gidgethub over the shared ``httpx.AsyncClient``, retrying below gidgethub.

    gidgethub 6's own ``gidgethub.httpx.GitHubAPI`` binds to the ``httpx2`` package
    when that is installed; this is the same small adapter over ``httpx`` itself,
    with the retry loop and an injectable ``sleep`` and clock.
    """

    def __init__(
        self, http: httpx.AsyncClient, *, requester: str, base_url: str, sleep: Sleep, clock: Clock
    ) -> None:
        super().__init__(requester, base_url=base_url)
        self._http = http
        self._sleep = sleep
        self._clock = clock

    async def _request(
        self, method: str, url: str, headers: Mapping[str, str], body: bytes = b""
    ) -> tuple[int, Mapping[str, str], bytes]:
        with tracing.forge_span("github", method, url, route_template) as span:
            status, got, content = await self._retried(method, url, headers, body, span)
            tracing.forge_answered(span, status)
            return status, got, content

    async def _retried(
        self, method: str, url: str, headers: Mapping[str, str], body: bytes, span: tracing.Span
    ) -> tuple[int, Mapping[str, str], bytes]:
        attempt = 0
        while True:
            status: int | None = None
            metrics.forge_request("github", method)
            try:
                response = await self._http.request(
                    method, url, headers=dict(headers), content=body
                )
            except httpx.TransportError as exc:
                delay = retry_delay(None, {}, attempt, now=self._clock())
                if delay is None:
                    reason = f"{type(exc).__name__}: {exc}".rstrip(": ")
                    raise ForgeError(f"GitHub is unreachable ({method} {url}): {reason}") from exc
            else:
                status, got = response.status_code, response.headers
                delay = retry_delay(status, got, attempt, now=self._clock())
                if delay is None:
                    return status, got, response.content
            metrics.forge_wait("github", status)
            span.set("bot.forge.retries", attempt + 1)
            await self._sleep(delay)
            attempt += 1

    async def sleep(self, seconds: float) -> None:
        await self._sleep(seconds)


def forge_error(exc: HTTPException, *, method: str, path: str, what: str, now: float) -> ForgeError:
    """The ``bot.forges.base`` error for a GitHub error response."""
    status = int(exc.status_code)
    where = f"({method} {path.split('{?', 1)[0]})"
    detail = _detail(exc)
    if status == 404:
        return NotFound(f"{what} not found {where}", status=404)
    if status == 429 or (status == 403 and _rate_limited(exc.headers)):
        wait = retry_delay(status, exc.headers, 0, now=now) or 60.0
        message = f"GitHub rate limit reached for {what}; retry in {wait:.0f} s {where}"
        return RateLimited(message, retry_after=wait, status=status)
    if status in (401, 403):
        return AccessDenied(f"GitHub refused access to {what}: {detail} {where}", status=status)
    if status in (409, 422):
        return Conflict(f"GitHub refused {what}: {detail} {where}", status=status)
    return ForgeError(f"GitHub error {status} for {what}: {detail} {where}", status=status)


def _detail(exc: HTTPException) -> str:
    """GitHub's message plus the messages of its validation ``errors``, when any."""
    errors = getattr(exc, "errors", None)
    notes = [
        str(error.get("message") or f"{error.get('field')} {error.get('code')}")
        for error in (errors if isinstance(errors, list) else [])
        if isinstance(error, Mapping)
    ]
    return "; ".join([str(exc) or "no details", *notes])


def _rate_limited(headers: Mapping[str, str]) -> bool:
    lowered = {key.lower(): value for key, value in headers.items()}
    return "retry-after" in lowered or lowered.get("x-ratelimit-remaining") == "0"


def account_id(user: object) -> str:
    """A REST or GraphQL user's account id (``id`` / ``databaseId``); "" when none."""
    found = (user.get("id") or user.get("databaseId")) if isinstance(user, dict) else None
    return str(found) if isinstance(found, int) and not isinstance(found, bool) else ""


def repo_url(repo: RepoRef, *parts: str, query: Mapping[str, Any] | None = None) -> str:
    """``/repos/{owner}/{name}/...`` with each segment percent-encoded, plus a query template."""
    owner, _, name = repo.full_name.partition("/")
    if not owner or not name or "/" in name:
        raise ValueError(f"not a GitHub repository name (owner/name): {repo.full_name!r}")
    path = "/repos/" + "/".join(quote(part, safe="") for part in (owner, name, *parts))
    return path + ("{?" + ",".join(query) + "}" if query else "")


def split_path(path: str) -> list[str]:
    """A file path or ref name as URL segments (its slashes become separators).

    ``.`` and ``..`` segments are refused: the URL they make would be normalised into
    another endpoint (``contents/../../other-repo/...`` reads another repository with
    the installation's token)."""
    parts = [part for part in path.strip("/").split("/") if part]
    if any(part in (".", "..") for part in parts):
        raise ValueError(f"refusing a path with '.' or '..' segments: {path!r}")
    return parts


@contextmanager
def reading(what: str) -> Iterator[None]:
    """Turn a response of the wrong shape into a ``ForgeError`` naming the call."""
    try:
        yield
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise ForgeError(f"unexpected GitHub response for {what}: {exc!r}") from exc


def api_headers() -> dict[str, str]:
    """The headers every call sends besides gidgethub's own (the API version)."""
    return {"x-github-api-version": API_VERSION}
