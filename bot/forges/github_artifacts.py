"""GitHub Actions artifacts over the REST API: find them by name, download one.

``bot action`` keeps a task's state between workflow runs as an artifact of the run
(uploaded by ``actions/upload-artifact``) and finds it again here: ``GET
/repos/{owner}/{repo}/actions/artifacts?name=...`` lists the artifacts of that name,
newest first; ``GET .../actions/artifacts/{id}/zip`` answers with a redirect to a
short-lived signed URL, which is downloaded without credentials, within a size bound,
and checked against the artifact's ``digest`` when GitHub gives one.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import httpx

from bot.events import RepoRef
from bot.forges.base import ForgeError, NotFound
from bot.forges.github_auth import GitHubSession
from bot.forges.github_client import reading, repo_url
from bot.forges.github_graphql import status_error

PAGE = 100


@dataclass(frozen=True, slots=True)
class Artifact:
    """One artifact of a workflow run, as the list says it."""

    id: int
    name: str
    size: int
    created_at: str
    expired: bool
    digest: str = ""  # "sha256:<hex>" of the zip, when GitHub gives it
    run_id: int | None = None
    # The run's head came from another repository (a fork's pull request): its
    # artifacts are not this repository's own and are never trusted as state.
    from_fork: bool = False


def _artifact(data: dict[str, Any]) -> Artifact:
    run = data.get("workflow_run") or {}
    home, head = run.get("repository_id"), run.get("head_repository_id")
    return Artifact(
        id=int(data["id"]),
        name=str(data["name"]),
        size=int(data.get("size_in_bytes") or 0),
        created_at=str(data.get("created_at") or ""),
        expired=bool(data.get("expired")),
        digest=str(data.get("digest") or ""),
        run_id=int(run["id"]) if run.get("id") is not None else None,
        from_fork=home is None or head is None or home != head,
    )


class GitHubArtifacts:
    """The artifacts of one repository's workflow runs, through ``session``."""

    def __init__(self, session: GitHubSession) -> None:
        self._gh = session

    async def find(self, repo: RepoRef, name: str) -> list[Artifact]:
        """The artifacts named ``name`` (the newest page of them), newest first."""
        what = f"the artifacts named {name!r} of {repo.full_name}"
        path = repo_url(repo, "actions", "artifacts", query={"name": name, "per_page": PAGE})
        data = await self._gh.request(
            repo, "GET", path, what=what, url_vars={"name": name, "per_page": PAGE}
        )
        with reading(what):
            found = [_artifact(item) for item in data["artifacts"]]
        found = [a for a in found if a.name == name]  # the filter is the server's: check it
        return sorted(found, key=lambda a: (a.created_at, a.id), reverse=True)

    async def download(self, repo: RepoRef, artifact: Artifact, *, max_bytes: int) -> bytes:
        """The artifact's zip archive, at most ``max_bytes`` of it (larger raises)."""
        what = f"artifact {artifact.id} ({artifact.name}) of {repo.full_name}"
        if artifact.size > max_bytes:
            raise ForgeError(f"{what} holds {artifact.size} bytes, over the {max_bytes} kept")
        path = repo_url(repo, "actions", "artifacts", str(artifact.id), "zip")
        status, headers, body = await self._gh.raw(repo, "GET", self._gh.api_url + path)
        if status == 200:  # a server that answers with the archive itself
            data = body
        else:
            location = {k.lower(): v for k, v in headers.items()}.get("location")
            if status not in (301, 302, 303, 307, 308) or not location:
                if status == 410:
                    raise NotFound(f"{what} not found (expired)", status=410)
                now = self._gh.clock()
                raise status_error(status, headers, body, method="GET", path=path, what=what,
                                   now=now)  # fmt: skip
            data = await self._fetch(location, max_bytes, what)
        if len(data) > max_bytes:
            raise ForgeError(f"{what} is larger than the {max_bytes} bytes kept")
        _check_digest(data, artifact.digest, what)
        return data

    async def _fetch(self, url: str, max_bytes: int, what: str) -> bytes:
        """The archive at ``url``: no credentials go there (the URL is signed)."""
        if not url.startswith(("https://", "http://")):
            raise ForgeError(f"GitHub redirected {what} to an unusable address")
        chunks: list[bytes] = []
        size = 0
        try:
            async with self._gh.http.stream("GET", url) as response:
                if response.status_code != 200:
                    raise ForgeError(f"{what}: download answered {response.status_code}",
                                     status=response.status_code)  # fmt: skip
                async for chunk in response.aiter_bytes():
                    size += len(chunk)
                    if size > max_bytes:
                        raise ForgeError(f"{what} is larger than the {max_bytes} bytes kept")
                    chunks.append(chunk)
        except httpx.HTTPError as exc:
            raise ForgeError(f"{what}: download failed: {type(exc).__name__}") from exc
        return b"".join(chunks)


def _check_digest(data: bytes, digest: str, what: str) -> None:
    algorithm, _, expected = digest.partition(":")
    if algorithm != "sha256" or not expected:
        return  # older artifacts have no digest
    if hashlib.sha256(data).hexdigest() != expected.lower():
        raise ForgeError(f"{what}: the download does not match its sha256 digest")
