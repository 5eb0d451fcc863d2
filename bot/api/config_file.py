"""The configuration file over the API: read it, check a candidate, replace it.

``GET /config`` the file's text and hash (the text withheld when the file holds a
secret); ``POST /config/validate`` a candidate's problems key by key, or the settings it
gives (secrets masked); ``PUT /config`` a candidate checked the same way, refused when
the file changed since the client read it (its hash in ``If-Match``), written
atomically with the file it replaces kept beside it (``config.yaml.previous``), then
reloaded as SIGHUP reloads it. A candidate may not carry a secret (``secrets_in_file``
and the loader's own refusals): secrets stay in the environment and secret files.
Parsing and checking a candidate run in a thread of their own, after bounds on its size
and aliases. Keys only the file on the host may change (``bot.config.host_only``) are
refused by ``PUT`` (403, the keys named) and listed by ``POST /config/validate``: the
candidate is compared with the file on disk as written, whatever the environment sets.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import tempfile
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from bot.api.models import (
    ConfigCheck,
    ConfigFile,
    ConfigProblem,
    ConfigPut,
    ConfigSaved,
    ConfigText,
    NoParameters,
)
from bot.api.operations import Refusal
from bot.config import (
    DEFAULT_CONFIG_NAME,
    ConfigError,
    CurrentSettings,
    Settings,
    masked,
    parse_config,
    previous_config_path,
    problems_of,
    secrets_in_file,
    settings_from_text,
    written_changes,
)
from bot.config.host_only import REFUSED
from bot.runtime import RESTART_SECTIONS

T = TypeVar("T")
NO_FILE = "the bot was started without a configuration file (set BOT_CONFIG to one)"
HOST_ONLY_REFUSAL = (
    "the candidate changes keys only the file on the host may change: change it in the file "
    "on the host"
)


def file_hash(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return b""


def replace_keeping_previous(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` atomically (a file beside it, flushed, then renamed
    over it, with its mode), the replaced file kept at ``previous_config_path``."""
    previous = previous_config_path(path)
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o600
    if path.exists():
        _write_atomically(previous, path.read_bytes(), mode)
    _write_atomically(path, text.encode("utf-8"), mode)
    return previous


def _write_atomically(path: Path, data: bytes, mode: int) -> None:
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(name, mode)
        os.replace(name, path)
    except BaseException:
        Path(name).unlink(missing_ok=True)
        raise
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def _match(if_match: str) -> str:
    """The hash an ``If-Match`` header names (quoted or not, weak or not)."""
    return if_match.strip().removeprefix("W/").strip('"')


class ConfigApi:
    """The configuration file's operations, with what they use: the settings now, the
    environment the bot was started with (secrets, overrides) and the reload."""

    def __init__(
        self,
        *,
        settings: CurrentSettings,
        environ: Mapping[str, str],
        reload: Callable[[], list[str]],
    ) -> None:
        self.settings = settings
        self.environ = environ
        self.reload = reload
        self._lock = asyncio.Lock()  # one replacement at a time
        # Candidates are parsed and checked here, one at a time, never in the shared
        # default pool: a large one waits for its turn without holding up anything else.
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="config-check")

    async def _in_pool(self, call: Callable[..., T], *args: object) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._pool, call, *args)

    def _path(self) -> Path | None:
        return self.settings().source_path

    async def show_config(self, params: NoParameters) -> ConfigFile:
        """The configuration file: its path, hash (for ``If-Match``) and text (withheld
        when it holds a secret), and the running settings, secrets masked."""
        path = self._path()
        if path is None:
            raise Refusal(404, NO_FILE)
        data = await asyncio.to_thread(_read, path)
        text = data.decode("utf-8", errors="replace")
        try:
            on_disk = await self._in_pool(settings_from_text, self.environ, text, path)
        except ConfigError:  # edited since it was loaded: judged by what was loaded
            on_disk = self.settings()
        held = secrets_in_file(on_disk)
        withheld = "; ".join(f"{key}: {why}" for key, why in held) if held else None
        return ConfigFile(
            path=str(path),
            hash=file_hash(data),
            text=None if held else text,
            withheld=withheld,
            settings=masked(self.settings()),
        )

    async def validate_config(self, params: ConfigText) -> ConfigCheck:
        """A candidate ``config.yaml``: its problems key by key, or the effective settings
        it gives (with this environment), secrets masked, and the sections that would
        wait for a restart."""
        candidate, problems = await self._check(params.text)
        if candidate is None:
            return ConfigCheck(valid=False, problems=problems, settings=None, restart_needed=[])
        running = self.settings()
        later = [s for s in RESTART_SECTIONS if getattr(candidate, s) != getattr(running, s)]
        host_only = await self._in_pool(self._host_only, params.text)
        return ConfigCheck(
            valid=True,
            problems=[],
            settings=masked(candidate),
            restart_needed=later,
            refused_by_put=[ConfigProblem(key=key, message=REFUSED) for key in host_only],
        )

    async def replace_config(self, params: ConfigPut) -> ConfigSaved:
        """Replace the configuration file with a valid candidate and reload it; refused
        when the file changed since its hash was read (``If-Match``)."""
        path = self._path()
        if path is None:
            raise Refusal(409, NO_FILE)
        async with self._lock:
            current = file_hash(await asyncio.to_thread(_read, path))
            if _match(params.if_match) != current:
                raise Refusal(
                    409, f"the file changed since it was read (its hash is now {current})"
                )
            candidate, problems = await self._check(params.text)
            if candidate is None:
                raise Refusal(
                    422,
                    "the configuration is not valid",
                    extra={"problems": [p.model_dump() for p in problems]},
                )
            host_only = await self._in_pool(self._host_only, params.text)
            if host_only:
                problems = [ConfigProblem(key=key, message=REFUSED) for key in host_only]
                raise Refusal(
                    403, HOST_ONLY_REFUSAL, extra={"problems": [p.model_dump() for p in problems]}
                )
            try:
                previous = await asyncio.to_thread(replace_keeping_previous, path, params.text)
            except OSError as exc:
                raise Refusal(409, f"{path} cannot be written: {exc.strerror}") from None
            lines = self.reload()
        return ConfigSaved(
            path=str(path),
            hash=file_hash(params.text.encode("utf-8")),
            previous=str(previous),
            reload=lines,
            settings=masked(self.settings()),
        )

    def _host_only(self, text: str) -> list[str]:
        """The keys only the file on the host may change that ``text`` changes, compared
        with the file on disk as written, key by key (``written_changes``): neither is
        merged with the environment, so nothing it sets hides a change of the file. With
        no file on disk, compared with the defaults; with a file that does not parse,
        every host-only key the candidate writes counts."""
        path = self._path()
        where = str(path or DEFAULT_CONFIG_NAME)
        after = parse_config(text, where)  # parsed before (``_check``): it parses
        if path is None:
            return written_changes({}, after)
        try:
            before: dict[str, Any] | None = parse_config(_read(path).decode("utf-8"), where)
        except (ConfigError, UnicodeDecodeError):  # edited on the host since it was loaded
            before = None
        return written_changes(before, after)

    async def _check(self, text: str) -> tuple[Settings | None, list[ConfigProblem]]:
        """The settings ``text`` gives as the configuration file, or its problems."""
        path = self._path() or Path(DEFAULT_CONFIG_NAME)  # as the loader finds it
        try:
            candidate = await self._in_pool(
                partial(settings_from_text, running=self.settings()), self.environ, text, path
            )
        except ConfigError as exc:
            found = problems_of(exc, str(path))
            return None, [ConfigProblem(key=k, message=m) for k, m in found]
        held = secrets_in_file(candidate)
        if held:
            return None, [ConfigProblem(key=k, message=m) for k, m in held]
        return candidate, []
