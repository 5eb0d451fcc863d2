"""One authenticated conversation with the GitHub REST API.

``GitHubSession`` sends requests through ``github_client.GitHubClient`` (gidgethub over
the shared ``httpx.AsyncClient``, retried there) and takes care of what every call needs
besides: credentials (a GitHub App's JWT and per-installation access tokens, cached and
refreshed five minutes before they expire, or a personal token), one write at a time per
installation (``WritePacer``), and typed errors (``github_client.forge_error``). An
installation token is minted for one repository with the task's permissions
(``github_tokens``).
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import quote

import httpx
from gidgethub import HTTPException, sansio

from bot.events import RepoRef
from bot.forges.base import Conflict, ForgeError
from bot.forges.github_client import (
    ACCEPT,
    Clock,
    GitHubClient,
    Sleep,
    account_id,
    api_headers,
    forge_error,
    repo_url,
)
from bot.forges.github_tokens import app_jwt, check_credentials, token_expiry, token_request
from bot.forges.retry import WritePacer
from bot.progress import step

TOKEN_REFRESH_MARGIN = 300.0


class GitHubSession:
    """Credentials, retries, pacing and typed errors for every GitHub API call."""

    def __init__(
        self,
        *,
        api_url: str,
        http: httpx.AsyncClient,
        app_id: str | None = None,
        private_key: str | None = None,
        token: str | None = None,
        user_agent: str = "coding-agent-bot",
        pacer: WritePacer | None = None,
        sleep: Sleep = asyncio.sleep,
        clock: Clock = time.time,
    ) -> None:
        """Raises ``ValueError`` unless the credentials are one kind (App or token) and
        well formed."""
        pacer = pacer or WritePacer()
        self._key = check_credentials(app_id, private_key, token)
        self._api = GitHubClient(
            http, requester=user_agent, base_url=api_url, sleep=sleep, clock=clock
        )
        self.api_url = api_url.rstrip("/")
        self.clock = clock
        self.http = http
        self.user_agent = user_agent
        self._app_id = app_id
        self._token = token
        self._pacer = pacer
        self._clock = clock
        self._tokens: dict[str, tuple[str, float]] = {}
        self._minted: list[str] = []  # every installation token this session made
        self._installations: dict[str, str] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    async def credentials(self, repo: RepoRef) -> tuple[str, str]:
        """``(pacing key, token)`` for calls about ``repo``."""
        if self._token is not None:
            digest = hashlib.sha256(self._token.encode("utf-8")).hexdigest()[:16]
            return f"github:token:{digest}", self._token
        installation = repo.scope_id or await self._installation_of(repo)
        return f"github:installation:{installation}", await self._installation_token(
            installation, repo
        )

    async def request(
        self,
        repo: RepoRef,
        method: str,
        path: str,
        *,
        what: str,
        data: Any = None,
        url_vars: Mapping[str, Any] | None = None,
        accept: str = ACCEPT,
    ) -> Any:
        """Send one request as the repository's credentials; writes are paced."""
        key, token = await self.credentials(repo)
        auth = {"oauth_token": token}
        if method == "GET":
            return await self._send(method, path, url_vars, data, auth, what, accept)
        async with self._pacer.slot(key):
            return await self._send(method, path, url_vars, data, auth, what, accept)

    async def paginate(
        self, repo: RepoRef, path: str, *, what: str, url_vars: Mapping[str, Any] | None = None
    ) -> list[Any]:
        """Every item of a paginated list, following ``Link: rel="next"``."""
        _, token = await self.credentials(repo)
        pages = self._api.getiter(
            path, url_vars, accept=ACCEPT, oauth_token=token, extra_headers=api_headers()
        )
        try:
            with step(f"GitHub GET {path} (all pages)"):
                return [item async for item in pages]
        except HTTPException as exc:
            raise forge_error(exc, method="GET", path=path, what=what, now=self._clock()) from exc

    async def raw(
        self,
        repo: RepoRef,
        method: str,
        url: str,
        *,
        body: bytes = b"",
        accept: str = ACCEPT,
        paced: bool | None = None,
    ) -> tuple[int, Mapping[str, str], bytes]:
        """One request as the repository's credentials, retried like every call, whose
        status the caller reads (GraphQL answers, redirects to job logs). ``paced``
        (default: anything but GET) waits for the installation's write turn."""
        key, token = await self.credentials(repo)
        headers = sansio.create_headers(self.user_agent, accept=accept, oauth_token=token)
        headers |= api_headers()
        if body:
            headers["content-type"] = "application/json; charset=utf-8"
        with step(f"GitHub {method} {url.split('?', 1)[0]}"):
            if not (method != "GET" if paced is None else paced):
                return await self._api._request(method, url, headers, body)
            async with self._pacer.slot(key):
                return await self._api._request(method, url, headers, body)

    async def identity(self) -> str:
        """Who the credentials are: ``<app slug>[bot]`` for an App, else the user's login."""
        if self._token is not None:
            auth, path, key = {"oauth_token": self._token}, "/user", "login"
        else:
            auth, path, key = self._jwt(), "/app", "slug"
        data = await self._send("GET", path, None, None, auth, "the bot's identity", ACCEPT)
        name = data.get(key) if isinstance(data, dict) else None
        if not isinstance(name, str) or not name:
            raise ForgeError(f"GitHub sent no {key} for GET {path}")
        return name if self._token is not None else f"{name}[bot]"

    async def account(self) -> tuple[str, str]:
        """(login, account id) of who the credentials act as: the token's user
        (``GET /user``), or the App's bot user (``GET /app`` for its slug, then the public
        ``GET /users/<slug>[bot]``)."""
        login, token = await self.identity(), self._token
        path = "/user" if token is not None else f"/users/{quote(login, safe='')}"
        auth = {"oauth_token": token} if token is not None else {}  # /users/...: public
        found = account_id(await self._send("GET", path, None, None, auth, "the bot", ACCEPT))
        if not found:
            raise ForgeError(f"GitHub sent no id for GET {path}")
        return login, found

    @property
    def is_app(self) -> bool:
        return self._token is None

    async def app_request(self, method: str, path: str, *, what: str) -> Any:
        """One call as the App itself (its JWT), e.g. about the App's own webhook."""
        return await self._send(method, path, None, b"" if method != "GET" else None,
                                self._jwt(), what, ACCEPT)  # fmt: skip

    async def app_items(
        self, path: str, *, what: str, take: Callable[[Any], bool], limit: int
    ) -> list[Any]:
        """Items of a paginated list as the App, page by page (``Link: rel="next"``),
        while ``take(item)`` says yes and fewer than ``limit`` were taken."""
        pages = self._api.getiter(path, accept=ACCEPT, jwt=self._jwt()["jwt"],
                                  extra_headers=api_headers())  # fmt: skip
        items: list[Any] = []
        try:
            with step(f"GitHub GET {path} (pages)"):
                async for item in pages:
                    if len(items) >= limit or not take(item):
                        break
                    items.append(item)
        except HTTPException as exc:
            raise forge_error(exc, method="GET", path=path, what=what, now=self._clock()) from exc
        finally:
            await pages.aclose()
        return items

    def forget(self) -> None:
        """Drop cached tokens and installation ids."""
        self._tokens.clear()
        self._installations.clear()

    async def revoke_tokens(self) -> int:
        """Revoke every installation token this session made (``DELETE
        /installation/token``, each as itself) and forget them: a short-lived process
        (``bot action``) leaves no usable token behind. Returns how many were revoked;
        one GitHub refuses is logged by the caller's error, the others are still tried."""
        minted, self._minted = self._minted, []
        self.forget()
        revoked, failed = 0, []
        for token in minted:
            try:
                await self._send("DELETE", "/installation/token", None, None,
                                 {"oauth_token": token}, "revoking an installation token",
                                 ACCEPT)  # fmt: skip
                revoked += 1
            except ForgeError as exc:
                failed.append(str(exc))
        if failed:
            raise ForgeError(f"{len(failed)} installation token(s) not revoked: {failed[0]}")
        return revoked

    async def _send(
        self,
        method: str,
        path: str,
        url_vars: Mapping[str, Any] | None,
        data: Any,
        auth: dict[str, str],
        what: str,
        accept: str,
    ) -> Any:
        api = self._api
        options: dict[str, Any] = {"accept": accept, "extra_headers": api_headers(), **auth}
        try:
            with step(f"GitHub {method} {path}"):
                if method == "GET":
                    return await api.getitem(path, url_vars, **options)
                if method == "DELETE":
                    return await api.delete(path, url_vars, **options)
                if method == "PATCH":
                    return await api.patch(path, url_vars, data=data, **options)
                if method == "PUT":
                    return await api.put(path, url_vars, data=data, **options)
                return await api.post(path, url_vars, data=data, **options)
        except HTTPException as exc:
            raise forge_error(exc, method=method, path=path, what=what, now=self._clock()) from exc

    def _jwt(self) -> dict[str, str]:
        assert self._app_id is not None and self._key is not None
        return {"jwt": app_jwt(self._app_id, self._key, now=self._clock())}

    async def _installation_of(self, repo: RepoRef) -> str:
        cached = self._installations.get(repo.full_name)
        if cached is not None:
            return cached
        what = f"the GitHub App installation for {repo.full_name}"
        path = repo_url(repo, "installation")
        data = await self._send("GET", path, None, None, self._jwt(), what, ACCEPT)
        if not isinstance(data, dict) or not isinstance(data.get("id"), int):
            raise ForgeError(f"GitHub sent no installation id for {repo.full_name}")
        self._installations[repo.full_name] = str(data["id"])
        return str(data["id"])

    async def _installation_token(self, installation: str, repo: RepoRef) -> str:
        key = f"{installation}:{repo.full_name}"
        async with self._locks.setdefault(key, asyncio.Lock()):
            cached = self._tokens.get(key)
            if cached is not None and self._clock() < cached[1] - TOKEN_REFRESH_MARGIN:
                return cached[0]
            data = await self._mint(installation, repo)
            token = data.get("token") if isinstance(data, dict) else None
            if not isinstance(token, str) or not token:
                raise ForgeError(f"GitHub sent no token for installation {installation}")
            self._tokens[key] = (token, token_expiry(data.get("expires_at")))
            self._minted.append(token)
            return token

    async def _mint(self, installation: str, repo: RepoRef) -> Any:
        """A token for ``repo`` alone with the task's permissions (``github_tokens``)."""
        app, what = (
            f"/app/installations/{quote(installation, safe='')}",
            f"{repo.full_name}'s token from installation {installation}",
        )
        try:
            return await self._send("POST", f"{app}/access_tokens", None, token_request(repo),
                                    self._jwt(), what, ACCEPT)  # fmt: skip
        except Conflict:  # the installation was granted less: ask for the overlap
            granted = await self._send("GET", app, None, None, self._jwt(), what, ACCEPT)
        permissions = granted.get("permissions") if isinstance(granted, dict) else None
        body = token_request(repo, permissions if isinstance(permissions, dict) else {})
        return await self._send("POST", f"{app}/access_tokens", None, body, self._jwt(), what,
                                ACCEPT)  # fmt: skip
