"""People's access to a repository, asked of the forge and kept for a minute: the
dispatcher asks for whoever sent an event, a review round for whoever wrote in a thread."""

from __future__ import annotations

from cachetools import TTLCache

from bot.events import RepoRef
from bot.forges.base import Forge, Permission


class PermissionCache:
    """Permission look-ups, cached for ``ttl`` seconds per (forge, repository, user)."""

    def __init__(self, *, ttl: float = 60.0, maxsize: int = 4096) -> None:
        self._cache: TTLCache[tuple[str, str, str], Permission] = TTLCache(maxsize, ttl)

    def cached(self, repo: RepoRef, login: str) -> Permission | None:
        """The answer kept for ``login``, if any (asks nothing)."""
        return self._cache.get((repo.forge.value, repo.full_name, login))

    async def of(self, forge: Forge, repo: RepoRef, login: str) -> Permission:
        key = (repo.forge.value, repo.full_name, login)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        permission = await forge.get_permission(repo, login)
        self._cache[key] = permission
        return permission
