"""The planning settings one task gets: the server's, the repository's ``.agent.yaml``
``planning:`` and the requesting person's ``user_config_api`` settings, merged under the
server's bounds (``bot.config.overrides``).

Each task gets its own merged copy, built from its own requester: nothing of one
person's settings is kept anywhere another task could read it (the user-config cache
is keyed by person). The worker and the API (``GET /api/settings/effective``) share this.
"""

from __future__ import annotations

import logging

from bot.config import Settings
from bot.config.overrides import EffectivePlanning, Layer, OverrideLayer, merge_planning
from bot.config.user_service import UserConfigService
from bot.events import ForgeKind, RepoRef
from bot.forges.base import Forge
from bot.tools.repo_config import RepoConfig, RepoConfigError, load_repo_config

log = logging.getLogger("bot.worker")


async def task_planning(
    user_config: UserConfigService,
    settings: Settings,
    *,
    forge: ForgeKind,
    user: str,
    repo_config: RepoConfig | None,
) -> EffectivePlanning:
    """``settings.planning`` with the repository's and then ``user``'s overrides."""
    personal = await user_config.planning_for(
        settings.planning.user_config_api, forge=forge.value, user=user
    )
    layers = [
        OverrideLayer(Layer.REPOSITORY, repo_config.planning if repo_config else {}),
        OverrideLayer(Layer.USER, personal),
    ]
    effective = merge_planning(settings.planning, layers)
    for refusal in effective.refused:
        log.info("%s:%s: %s", forge.value, user, refusal.describe())
    return effective


async def repo_config_of(forge: Forge, repo: RepoRef) -> RepoConfig | None:
    """The repository's ``.agent.yaml`` on its default branch (None: it has none)."""
    info = await forge.get_repo_info(repo)
    return await load_repo_config(forge, repo, info.default_branch)


async def settings_for(
    settings: Settings,
    client: Forge | None,
    user_config: UserConfigService,
    *,
    forge: ForgeKind,
    repo: str | None,
    user: str | None,
) -> tuple[EffectivePlanning, str | None]:
    """What a task in ``repo`` (its ``.agent.yaml`` on the default branch) requested by
    ``user`` would get, and the reason its ``.agent.yaml`` would stop it (None: valid or
    none); ``client`` is the forge of kind ``forge`` (None: it is off). Forge errors (no
    such repository, no access) propagate."""
    repo_config, problem = None, None
    if repo and client is not None:
        try:
            repo_config = await repo_config_of(client, RepoRef(forge=forge, full_name=repo))
        except RepoConfigError as exc:
            problem = str(exc)
    planning = await task_planning(
        user_config, settings, forge=forge, user=user or "", repo_config=repo_config
    )
    return planning, problem
