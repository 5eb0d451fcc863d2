"""Who and where, for every GitLab event the bot handles; which users are bots. Pure."""

from __future__ import annotations

import re

from bot.events import Actor, ForgeKind, RepoRef
from bot.webhooks import gitlab_payloads as p

# Project / group access-token users: ``project_<id>_bot_<hex>`` (GitLab >= 16) and the
# older ``project_<id>_bot`` / ``project_<id>_bot<n>``; service accounts likewise.
_TOKEN_BOT = re.compile(r"^(project|group)_\d+_bot(\d*|_[0-9a-f]+)$")
_SERVICE_ACCOUNT = re.compile(r"^service_account_(group_\d+_)?[0-9a-f]+$")
_INTERNAL_BOTS = frozenset(
    {"alert-bot", "support-bot", "visual-review-bot", "ghost", "automation-bot", "security-bot"}
)


def is_bot_user(username: str, *, bot_flag: object = None) -> bool:
    """Whether a GitLab user looks like a bot (access-token bot, service account, ...)."""
    if bot_flag is True:
        return True
    name = username.lower()
    return (
        bool(_TOKEN_BOT.match(name) or _SERVICE_ACCOUNT.match(name))
        or name in _INTERNAL_BOTS
        or name.endswith("[bot]")
    )


def actor(user: p.User) -> Actor:
    return Actor(
        login=user.username,
        id="" if user.id is None else str(user.id),
        is_bot=is_bot_user(user.username, bot_flag=user.bot),
    )


def repo(project: p.Project) -> RepoRef:
    return RepoRef(
        forge=ForgeKind.GITLAB,
        full_name=project.path_with_namespace,
        project_id=project.id,
        default_branch=project.default_branch,
        web_url=project.web_url or "",
    )
