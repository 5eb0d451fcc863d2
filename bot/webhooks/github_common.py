"""What every GitHub event the bot handles is built from: who, where, and the event. Pure."""

from __future__ import annotations

from typing import Any

from bot.events import Actor, EventKind, ForgeEvent, ForgeKind, RepoRef
from bot.webhooks import github_payloads as p


def event(name: str, delivery_id: str, root: Any, kind: EventKind, **fields: Any) -> ForgeEvent:
    return ForgeEvent(
        forge=ForgeKind.GITHUB,
        kind=kind,
        name=name,
        action=root.action or "",
        delivery_id=delivery_id,
        actor=actor(root.sender),
        **fields,
    )


def actor(sender: p.User) -> Actor:
    login = sender.login
    is_bot = sender.type == "Bot" or login.endswith("[bot]")
    return Actor(login=login, id=str(sender.id), is_bot=is_bot)


def repo(repository: p.Repository, installation: p.Installation | None) -> RepoRef:
    return RepoRef(
        forge=ForgeKind.GITHUB,
        full_name=repository.full_name,
        scope_id=str(installation.id) if installation is not None else None,
        default_branch=repository.default_branch,
        web_url=repository.html_url or "",
    )
