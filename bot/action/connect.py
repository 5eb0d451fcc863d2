"""The real parts of a run on a runner: the GitHub adapter and the artifact carrier, from
the environment's credentials (``GITHUB_TOKEN``, or ``GITHUB_APP_ID`` with
``GITHUB_PRIVATE_KEY``: then every installation token the run made is revoked at its end,
whatever happened)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx

from bot.action.artifacts import ArtifactCarrier
from bot.action.environment import ActionError, RunnerEnv
from bot.action.state import StateCarrier
from bot.config import Settings
from bot.events import ForgeKind, RepoRef
from bot.forges.base import Forge, ForgeError
from bot.forges.github import GitHubForge
from bot.forges.github_artifacts import GitHubArtifacts
from bot.forges.github_auth import GitHubSession

log = logging.getLogger("bot.action")

WORKFLOW_LOGIN = "github-actions[bot]"  # who the workflow's own token writes as


@dataclass(frozen=True, slots=True)
class Connection:
    """What a run talks to: the forge, and where its state is kept between runs."""

    forge: Forge
    carrier: StateCarrier


def _session(settings: Settings, http: httpx.AsyncClient) -> GitHubSession:
    github = settings.github
    try:
        if github.app_id and github.private_key is not None:
            key = github.private_key.get_secret_value()
            return GitHubSession(api_url=github.api_url, http=http, app_id=github.app_id,
                                 private_key=key)  # fmt: skip
        if github.token is not None:
            token = github.token.get_secret_value()
            return GitHubSession(api_url=github.api_url, http=http, token=token)
    except ValueError as exc:
        raise ActionError(f"the GitHub credentials cannot be used: {exc}") from None
    raise ActionError(
        "no GitHub credentials: pass `github_token` (the default is the workflow's token) or "
        "`app_id` with `app_private_key` (GITHUB_TOKEN, or GITHUB_APP_ID with GITHUB_PRIVATE_KEY)"
    )


@contextlib.asynccontextmanager
async def connect_github(settings: Settings, runner: RunnerEnv) -> AsyncIterator[Connection]:
    """The GitHub adapter over one HTTP client; at the end, an App's tokens are revoked."""
    async with httpx.AsyncClient(timeout=httpx.Timeout(30.0, connect=10.0)) as http:
        session = _session(settings, http)
        repo = RepoRef(ForgeKind.GITHUB, runner.repository,
                       web_url=f"{runner.server_url}/{runner.repository}")  # fmt: skip
        carrier = ArtifactCarrier(GitHubArtifacts(session), repo)
        try:
            yield Connection(forge=GitHubForge(session), carrier=carrier)
        finally:
            if session.is_app:
                try:
                    revoked = await session.revoke_tokens()
                    log.info("revoked %d installation token(s)", revoked)
                except ForgeError as exc:
                    log.warning("%s", exc)


async def identity(forge: Forge) -> str:
    """The bot's own login: what the credentials say, or the workflow token's account
    (that token may not ask who it is)."""
    try:
        return await forge.whoami()
    except ForgeError:
        return WORKFLOW_LOGIN
