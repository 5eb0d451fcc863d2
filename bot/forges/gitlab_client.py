"""The GitLab transport: python-gitlab calls off the event loop, retried, with typed errors.

python-gitlab is synchronous (``requests``), so every call runs in a small thread
pool and the event loop never waits on the network. python-gitlab's own retrying
is switched off: ``GitLabClient`` retries by the shared policy of
``bot.forges.retry`` with an injectable ``sleep`` and ``clock``, paces writes, and
turns HTTP failures into the typed errors of ``bot.forges.base``.
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import gitlab
import requests
from gitlab.exceptions import GitlabError, GitlabHttpError, GitlabParsingError

from bot import metrics, tracing
from bot.forges.base import AccessDenied, Conflict, ForgeError, NotFound, RateLimited
from bot.forges.retry import WritePacer, retry_delay
from bot.forges.routes import route_template
from bot.progress import step

T = TypeVar("T")

_TRANSIENT = (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError)
_TIMEOUT = 30.0
_MAX_MESSAGE = 300


def error_for(
    status: int | None, message: str, *, what: str, retry_after: float = 0.0
) -> ForgeError:
    """The typed error for a failed call about ``what`` (e.g. a file path)."""
    message = message[:_MAX_MESSAGE]
    detail = f"{what}: {status or 'failed'} {message}".strip()
    if status == 404:
        return NotFound(f"{what} not found ({message})", status=status)
    if status in (401, 403):
        return AccessDenied(detail, status=status)
    if status in (409, 422) or (status == 400 and "already exists" in message.lower()):
        return Conflict(detail, status=status)
    if status == 429:
        return RateLimited(detail, retry_after=retry_after, status=status)
    return ForgeError(detail, status=status)


def _said(response: requests.Response) -> str:
    """What an error response says (GitLab: ``message``, or GraphQL's ``errors``)."""
    try:
        body = response.json()
    except ValueError:
        return response.text[:_MAX_MESSAGE]
    if isinstance(body, dict):
        errors = body.get("errors")
        if isinstance(errors, list) and errors and isinstance(errors[0], dict):
            return str(errors[0].get("message") or "")
        return str(body.get("message") or body.get("error") or "")
    return ""


class _Client(gitlab.Gitlab):
    """python-gitlab with its own sleeping and retrying switched off for every request."""

    def http_request(self, *args: Any, **kwargs: Any) -> requests.Response:
        kwargs["obey_rate_limit"] = False
        kwargs["retry_transient_errors"] = False
        return super().http_request(*args, **kwargs)


class GitLabClient:
    """One token's python-gitlab client, its thread pool, retries and write pacing."""

    def __init__(
        self,
        *,
        url: str,
        token: str,
        pacer: WritePacer | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
        session: requests.Session | None = None,
        max_workers: int = 4,
    ) -> None:
        self.token = token  # for git over HTTPS (clone and push)
        self._owns_session = session is None
        self._session = session or requests.Session()
        self.gl = _Client(
            url, private_token=token, session=self._session, timeout=_TIMEOUT, keep_base_url=True
        )
        self._pacer = pacer or WritePacer(interval=0.0)
        self._pace_key = f"gitlab:{url}:{hashlib.sha256(token.encode()).hexdigest()[:16]}"
        self._sleep = sleep
        self._clock = clock
        self._last = threading.local()
        self._session.hooks["response"].append(self._remember)
        self._executor = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="gitlab")

    def _remember(self, response: requests.Response, *args: Any, **kwargs: Any) -> None:
        self._last.response = response
        span: tracing.Span | None = getattr(self._last, "span", None)
        if span is not None:  # the call's span learns the route and status it got
            request = response.request
            method, url, status = request.method or "", request.url or "", response.status_code
            tracing.forge_seen(span, method, url, status, route_template)

    def _headers_for(self, status: int | None) -> Mapping[str, str]:
        response: requests.Response | None = getattr(self._last, "response", None)
        if response is None or response.status_code != status:
            return {}
        return response.headers

    def _run(self, what: str, op: Callable[[], T], method: str, span: tracing.Span) -> T:
        """Run ``op`` in this worker thread, retrying by the shared policy."""
        self._last.span = span
        try:
            return self._retried(what, op, method, span)
        finally:
            self._last.span = None

    def _retried(self, what: str, op: Callable[[], T], method: str, span: tracing.Span) -> T:
        attempt = 0
        while True:
            self._last.response = None
            metrics.forge_request("gitlab", method)
            try:
                return op()
            except (GitlabError, *_TRANSIENT) as exc:
                status = exc.response_code if isinstance(exc, GitlabError) else None
                headers = self._headers_for(status)
                delay = retry_delay(status, headers, attempt, now=self._clock())
                if delay is None or (isinstance(exc, GitlabError) and status is None):
                    message = str(exc.error_message if isinstance(exc, GitlabError) else exc)
                    told = retry_delay(status, headers, 0, now=self._clock()) or 0.0
                    raise error_for(status, message, what=what, retry_after=told) from exc
                metrics.forge_wait("gitlab", status)
                span.set("bot.forge.retries", attempt + 1)
                self._sleep(delay)
            attempt += 1

    async def read(self, what: str, op: Callable[[], T]) -> T:
        return await self._call(what, op, "GET")

    async def write(self, what: str, op: Callable[[], T]) -> T:
        async with self._pacer.slot(self._pace_key):
            return await self._call(what, op, "POST")

    async def _call(self, what: str, op: Callable[[], T], method: str) -> T:
        loop = asyncio.get_running_loop()
        traced = tracing.forge_span("gitlab", method, "", route_template)
        with step(f"GitLab: {what}"), traced as span:
            return await loop.run_in_executor(self._executor, self._run, what, op, method, span)

    def clock(self) -> float:
        return self._clock()

    @property
    def graphql_url(self) -> str:
        """``{gitlab}/api/graphql`` beside the REST API (the URL may hold a relative path)."""
        return f"{str(self.gl.url).rstrip('/')}/api/graphql"

    async def graphql(self, what: str, document: str, variables: dict[str, Any]) -> Any:
        """One GraphQL mutation document, as a paced write with the REST calls' retries
        and typed errors (GitLab answers 200 with ``errors`` for what it refused inside).
        The token goes in the ``Authorization: Bearer`` header GitLab documents for its
        GraphQL API (python-gitlab's own requests would send ``PRIVATE-TOKEN``)."""
        url = self.graphql_url

        def op() -> Any:
            response = self._session.post(
                url,
                json={"query": document, "variables": variables},
                headers={"Authorization": f"Bearer {self.token}"},
                timeout=_TIMEOUT,
            )
            if not 200 <= response.status_code < 300:
                raise GitlabHttpError(
                    response_code=response.status_code,
                    error_message=_said(response),
                    response_body=response.content,
                )
            try:
                return response.json()
            except ValueError:
                raise GitlabParsingError(error_message="GraphQL sent no JSON") from None

        return await self.write(what, op)

    async def exists(self, what: str, op: Callable[[], object]) -> bool:
        try:
            await self.read(what, op)
        except NotFound:
            return False
        return True

    async def aclose(self) -> None:
        def close() -> None:
            self._executor.shutdown(wait=True)
            if self._owns_session:
                self._session.close()

        await asyncio.to_thread(close)
