"""Short replies to commands and triggers, quoting what they answer."""

from __future__ import annotations

import datetime as dt

from bot.comments.language import choose_language
from bot.comments.render import Marker, excerpt, finish, quote, render
from bot.config import CurrentSettings, secret_values
from bot.events import CommandName, ForgeKind, IssueRef
from bot.forges.base import ForgeLookup
from bot.storage.base import Task
from bot.triggers import Action, Reply, ReplyKind, SendMessage, ShowStatus
from bot.webhooks.commands import help_text

_ACKS = frozenset(
    {CommandName.APPROVE, CommandName.REJECT, CommandName.STOP, CommandName.PAUSE,
     CommandName.RESUME}
)  # fmt: skip


def _when(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


class Replier:
    def __init__(self, settings: CurrentSettings, forges: ForgeLookup) -> None:
        self.settings = settings
        self.forges = forges

    def text_for(self, issue: IssueRef, action: Action, task: Task | None) -> str | None:
        """The reply for an action, or None when the action needs none. Pure."""
        settings = self.settings()
        lang = choose_language(settings, f"{issue.title}\n{issue.body}")
        prefix = settings.commands.prefix
        match action:
            case ShowStatus(quote=said):
                q = quote(said)
                if task is None:
                    return render("status_none", lang, quote=q, prefix=prefix)
                return render(
                    "status_reply",
                    lang,
                    quote=q,
                    task_id=task.id,
                    state=render(f"state_{task.state.value}", lang),
                    phase=task.phase,
                    created=_when(task.created_at),
                    updated=_when(task.updated_at),
                    error=task.error or "",
                )
            case SendMessage(command=command, quote=said) if command in _ACKS:
                assert command is not None
                return render(
                    f"ack_{command.value}",
                    lang,
                    quote=quote(said),
                    prefix=prefix,
                    author=action.payload.get("author", ""),
                    reason=excerpt(str(action.payload.get("args", ""))),
                )
            case Reply(text=ReplyKind.HELP, quote=said):
                q = quote(said)
                word = said.split()[1] if len(said.split()) > 1 else ""
                if word and word != CommandName.HELP:
                    return render(
                        "unknown_command",
                        lang,
                        quote=q,
                        word=excerpt(word, limit=40),
                        commands=help_text(prefix),
                    )
                return render("help", lang, quote=q, commands=help_text(prefix))
            case Reply(text=ReplyKind.DENIED, quote=said):
                who = "who_github" if issue.repo.forge is ForgeKind.GITHUB else "who_gitlab"
                return render("denied", lang, quote=quote(said), who=render(who, lang))
            case Reply(text=key, quote=said):
                return render(key.value, lang, quote=quote(said), prefix=prefix)
        return None

    async def reply(
        self, issue: IssueRef, action: Action, task: Task | None, *, seq: int = 0
    ) -> None:
        """Post the reply for ``action`` (if it needs one): redacted, cut to fit, and
        marked with the task, the kind of reply and ``seq`` (the inbox event it answers)."""
        text = self.text_for(issue, action, task)
        if text is None:
            return
        forge = self.forges(issue.repo.forge)
        if forge is None:
            return
        settings = self.settings()
        marker = Marker(task.id if task else "none", reply_kind(action), seq)
        body = finish(
            text,
            marker=marker,
            language=choose_language(settings, f"{issue.title}\n{issue.body}"),
            max_length=settings.comments.max_length,
            secrets=secret_values(settings),
        )
        await forge.create_comment(issue, body)


def reply_kind(action: Action) -> str:
    """The marker kind of a reply: ``reply-<template or command>``."""
    match action:
        case ShowStatus():
            return "reply-status"
        case SendMessage(command=command):
            return f"reply-{command.value if command is not None else 'message'}"
        case Reply(text=key):
            return f"reply-{key.value}"
    return "reply-text"
