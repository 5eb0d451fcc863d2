"""The state carrier of a real runner: the previous run's artifact, found by name through
the Actions REST API and downloaded; ``action.yml`` uploads the next one
(``actions/upload-artifact``) from the folder this run packs.

Only artifacts of this repository's own runs are taken: a fork's pull request runs
workflows too, and may upload an artifact of any name, so an artifact whose run's head
is another repository is never read back. The archive is unpacked by hand: regular
files only, no absolute or ``..`` path, within a size bound.
"""

from __future__ import annotations

import io
import stat
import zipfile
from pathlib import Path, PurePosixPath

from bot.action.state import MAX_UNPACKED_BYTES, StateError, artifact_name
from bot.events import RepoRef
from bot.forges.github_artifacts import Artifact, GitHubArtifacts

MAX_ARTIFACT_BYTES = 1 << 30  # the zip as downloaded


class ArtifactCarrier:
    def __init__(self, artifacts: GitHubArtifacts, repo: RepoRef) -> None:
        self.artifacts = artifacts
        self.repo = repo

    async def fetch(self, issue: int, into: Path) -> str | None:
        usable = [a for a in await self.artifacts.find(self.repo, artifact_name(issue))
                  if not a.expired and not a.from_fork]  # fmt: skip
        if not usable:
            return None
        newest = usable[0]
        data = await self.artifacts.download(self.repo, newest, max_bytes=MAX_ARTIFACT_BYTES)
        extract_zip(data, into)
        return describe(newest)

    async def keep(self, issue: int, packed: Path) -> str:
        return f"artifact {artifact_name(issue)} (uploaded by the action's next step)"


def describe(artifact: Artifact) -> str:
    run = f" of run {artifact.run_id}" if artifact.run_id is not None else ""
    return f"artifact {artifact.name} ({artifact.id}{run}, {artifact.created_at})"


def extract_zip(data: bytes, into: Path) -> None:
    """Regular files of the zip ``data`` into ``into``; ``StateError`` for anything else."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile as exc:
        raise StateError(f"the kept state is not a zip archive: {exc}") from None
    with archive:
        infos = archive.infolist()
        total = sum(max(0, info.file_size) for info in infos)
        if total > MAX_UNPACKED_BYTES:
            raise StateError(f"the kept state unpacks to over {MAX_UNPACKED_BYTES} bytes")
        for info in infos:
            target = _target(into, info)
            if target is None:
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(info) as source, target.open("wb") as sink:
                while chunk := source.read(1 << 20):
                    sink.write(chunk)


def _target(into: Path, info: zipfile.ZipInfo) -> Path | None:
    """Where a member goes (None for a folder); ``StateError`` for a link or a path that
    leaves ``into``."""
    name = PurePosixPath(info.filename)
    if not name.parts or name.is_absolute() or ".." in name.parts or "\\" in info.filename:
        raise StateError(f"the kept state holds an unsafe path: {info.filename!r}")
    mode = info.external_attr >> 16
    if mode and stat.S_ISLNK(mode):
        raise StateError(f"the kept state holds a link: {info.filename!r}")
    if info.is_dir():
        (into / Path(*name.parts)).mkdir(parents=True, exist_ok=True)
        return None
    return into / Path(*name.parts)
