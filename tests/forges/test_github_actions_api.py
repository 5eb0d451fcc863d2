"""The Actions artifacts and the installation-token revocation, against a mocked GitHub REST
API (respx at the real httpx client's transport). The list's body is GitHub's own example
(tests/fixtures/github/rest/artifact-paginated.json), with single fields overridden."""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from bot.action.artifacts import ArtifactCarrier, extract_zip
from bot.action.state import StateError, artifact_name
from bot.events import ForgeKind, RepoRef
from bot.forges.base import ForgeError, NotFound, Permission
from bot.forges.github import GitHubForge
from bot.forges.github_artifacts import GitHubArtifacts
from bot.forges.github_auth import GitHubSession
from bot.forges.retry import WritePacer

REST = Path(__file__).resolve().parent.parent / "fixtures" / "github" / "rest"
API = "https://api.github.com"
REPO = RepoRef(
    ForgeKind.GITHUB, "octo-org/octo-docs", web_url="https://github.com/octo-org/octo-docs"
)
LIST = "/repos/octo-org/octo-docs/actions/artifacts"
SIGNED = "https://pipelines.example.net/artifacts/11.zip?sig=abc"
NAME = artifact_name(7)


def rest(name: str) -> Any:
    return json.loads((REST / f"{name}.json").read_text(encoding="utf-8"))


def zipped(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return buffer.getvalue()


STATE = zipped({"runs/t1/report.md": b"# Report\n", "state.tar.gz": b"not read here"})


def listing(*changes: dict[str, Any]) -> dict[str, Any]:
    """GitHub's example list, both artifacts named ``NAME`` (the first the newer), each
    with ``changes``."""
    data = rest("artifact-paginated")
    for index, artifact in enumerate(data["artifacts"]):
        artifact["name"] = NAME
        artifact["created_at"] = f"2024-05-0{2 - index}T10:00:00Z"
        artifact.update(changes[index] if index < len(changes) else {})
    return dict(data)


def digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@pytest.fixture
def mock() -> Iterator[respx.MockRouter]:
    with respx.mock(base_url=API, assert_all_called=False) as router:
        yield router


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient() as client:
        yield client


@pytest.fixture
def session(http: httpx.AsyncClient) -> GitHubSession:
    return GitHubSession(api_url=API, http=http, token="ghs_workflow", pacer=WritePacer(interval=0))


@pytest.fixture(scope="module")
def pem() -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    ).decode("ascii")


@pytest.fixture
def carrier(session: GitHubSession) -> ArtifactCarrier:
    return ArtifactCarrier(GitHubArtifacts(session), REPO)


# --- finding and downloading ----------------------------------------------------------------


async def test_the_newest_own_artifact_is_downloaded_from_its_signed_url(
    carrier: ArtifactCarrier, mock: respx.MockRouter, tmp_path: Path
) -> None:
    listed = mock.get(LIST).respond(json=listing(
        {"id": 11, "created_at": "2024-05-02T10:00:00Z", "digest": digest(STATE)},
        {"id": 13, "created_at": "2024-05-01T10:00:00Z"},
    ))  # fmt: skip
    redirect = mock.get(f"{LIST}/11/zip").respond(302, headers={"location": SIGNED})
    download = mock.get(SIGNED).respond(200, content=STATE)

    said = await carrier.fetch(7, tmp_path / "in")

    assert said == f"artifact {NAME} (11 of run 2332938, 2024-05-02T10:00:00Z)"
    query = listed.calls.last.request.url.params
    assert (query["name"], query["per_page"]) == (NAME, "100")
    assert redirect.calls.last.request.headers["authorization"] == "token ghs_workflow"
    assert "authorization" not in download.calls.last.request.headers  # the URL is signed
    assert (tmp_path / "in" / "runs" / "t1" / "report.md").read_bytes() == b"# Report\n"


async def test_a_forks_artifact_an_expired_one_and_other_names_are_never_taken(
    carrier: ArtifactCarrier, mock: respx.MockRouter, tmp_path: Path
) -> None:
    fork = {"id": 11, "created_at": "2024-05-03T00:00:00Z"}
    fork["workflow_run"] = {"id": 9, "repository_id": 1296269, "head_repository_id": 666}
    expired = {"id": 13, "created_at": "2024-05-02T00:00:00Z", "expired": True}
    data = listing(fork, expired)
    data["artifacts"].append({**data["artifacts"][1], "id": 15, "name": "coding-agent-state-77",
                              "expired": False})  # fmt: skip
    mock.get(LIST).respond(json=data)
    assert await carrier.fetch(7, tmp_path / "in") is None
    assert not (tmp_path / "in").exists()


async def test_no_artifact_yet_is_no_state(
    carrier: ArtifactCarrier, mock: respx.MockRouter, tmp_path: Path
) -> None:
    mock.get(LIST).respond(json={"total_count": 0, "artifacts": []})
    assert await carrier.fetch(7, tmp_path / "in") is None


async def test_a_download_that_does_not_match_its_digest_is_refused(
    carrier: ArtifactCarrier, mock: respx.MockRouter, tmp_path: Path
) -> None:
    mock.get(LIST).respond(json=listing({"id": 11, "digest": digest(b"something else")}))
    mock.get(f"{LIST}/11/zip").respond(302, headers={"location": SIGNED})
    mock.get(SIGNED).respond(200, content=STATE)
    with pytest.raises(ForgeError, match="does not match its sha256 digest"):
        await carrier.fetch(7, tmp_path / "in")


async def test_an_artifact_too_large_is_not_downloaded(
    session: GitHubSession, mock: respx.MockRouter
) -> None:
    artifacts = GitHubArtifacts(session)
    mock.get(LIST).respond(json=listing({"id": 11, "size_in_bytes": 5000}))
    download = mock.get(f"{LIST}/11/zip").respond(302, headers={"location": SIGNED})
    [newest, _] = await artifacts.find(REPO, NAME)
    with pytest.raises(ForgeError, match="holds 5000 bytes, over the 4000 kept"):
        await artifacts.download(REPO, newest, max_bytes=4000)
    assert not download.called


async def test_a_download_growing_past_the_bound_is_cut_off(
    session: GitHubSession, mock: respx.MockRouter
) -> None:
    artifacts = GitHubArtifacts(session)
    mock.get(LIST).respond(json=listing({"id": 11, "size_in_bytes": 10}))
    mock.get(f"{LIST}/11/zip").respond(302, headers={"location": SIGNED})
    mock.get(SIGNED).respond(200, content=b"x" * 5000)
    [newest, _] = await artifacts.find(REPO, NAME)
    with pytest.raises(ForgeError, match="larger than the 4000 bytes kept"):
        await artifacts.download(REPO, newest, max_bytes=4000)


async def test_an_expired_download_is_not_found(
    session: GitHubSession, mock: respx.MockRouter
) -> None:
    artifacts = GitHubArtifacts(session)
    mock.get(LIST).respond(json=listing({"id": 11}))
    mock.get(f"{LIST}/11/zip").respond(410, json={"message": "Artifact has expired"})
    [newest, _] = await artifacts.find(REPO, NAME)
    with pytest.raises(NotFound, match="expired"):
        await artifacts.download(REPO, newest, max_bytes=1 << 20)


# --- the zip ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["../escape", "/etc/cron.d/x", "runs\\..\\x"])
def test_a_zip_with_a_path_out_of_its_folder_is_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(StateError, match="unsafe path"):
        extract_zip(zipped({name: b"x"}), tmp_path / "in")
    assert not (tmp_path / "escape").exists()


def test_a_zip_with_a_link_is_refused(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        info = zipfile.ZipInfo("runs/link")
        info.external_attr = 0o120777 << 16  # a symbolic link, as zip stores one
        archive.writestr(info, "/etc/passwd")
    with pytest.raises(StateError, match="holds a link"):
        extract_zip(buffer.getvalue(), tmp_path / "in")


def test_a_zip_unpacking_past_the_bound_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bot.action import artifacts

    monkeypatch.setattr(artifacts, "MAX_UNPACKED_BYTES", 1000)
    with pytest.raises(StateError, match="over 1000 bytes"):
        extract_zip(zipped({"runs/big": b"\0" * 5000}), tmp_path / "in")


# --- installation tokens ----------------------------------------------------------------------


async def test_the_apps_installation_tokens_are_revoked_each_as_itself(
    http: httpx.AsyncClient, mock: respx.MockRouter, pem: str
) -> None:
    session = GitHubSession(api_url=API, http=http, app_id="12345", private_key=pem,
                            pacer=WritePacer(interval=0))  # fmt: skip
    token = rest("installation-token")
    mock.get("/repos/octo-org/octo-docs/installation").respond(json=rest("installation"))
    mock.post("/app/installations/1/access_tokens").respond(
        201, json={**token, "token": "ghs_minted", "expires_at": "2099-01-01T00:00:00Z"}
    )
    mock.get("/repos/octo-org/octo-docs/collaborators/octocat/permission").respond(
        json=rest("collaborator-permission")
    )
    revoke = mock.delete("/installation/token").respond(204)
    forge = GitHubForge(session)
    assert await forge.get_permission(REPO, "octocat") is Permission.ADMIN

    assert await session.revoke_tokens() == 1

    assert revoke.calls.last.request.headers["authorization"] == "token ghs_minted"
    assert await session.revoke_tokens() == 0  # forgotten: nothing is revoked twice
    assert revoke.call_count == 1


async def test_a_refused_revocation_is_an_error_after_trying_every_token(
    http: httpx.AsyncClient, mock: respx.MockRouter, pem: str
) -> None:
    session = GitHubSession(api_url=API, http=http, app_id="12345", private_key=pem,
                            pacer=WritePacer(interval=0))  # fmt: skip
    mock.get("/repos/octo-org/octo-docs/installation").respond(json=rest("installation"))
    mock.post("/app/installations/1/access_tokens").respond(
        201, json={"token": "ghs_minted", "expires_at": "2099-01-01T00:00:00Z"}
    )
    mock.get("/repos/octo-org/octo-docs/collaborators/octocat/permission").respond(
        json=rest("collaborator-permission")
    )
    mock.delete("/installation/token").respond(401, json={"message": "Bad credentials"})
    await GitHubForge(session).get_permission(REPO, "octocat")
    with pytest.raises(ForgeError, match="1 installation token"):
        await session.revoke_tokens()
