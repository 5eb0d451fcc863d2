"""A review round's answers on GitLab as GraphQL documents, and what GitLab said of them.

Pure: no I/O (``gitlab_answers`` sends them).

GitLab's GraphQL API (``POST {gitlab}/api/graphql``) runs the mutations of one document
one after the other. Each answer is ``createNote`` with the discussion's global id
(``r<i>``: a reply in that discussion; GitLab also requires the merge request's global
id, ``noteableId``, not its ``iid``), then, when it is to be resolved,
``discussionToggleResolve`` (``s<i>``). The replies travel as GraphQL variables, never
inside the document. A document holds at most ``THREADS_PER_DOCUMENT`` answers and about
``MAX_DOCUMENT_BYTES``; more make several documents.

``read_answers`` reads each mutation's own ``errors`` and the top-level ``errors`` that
name its alias (GitLab answers 200 with both); a document GitLab ran none of (errors and
no data) is ``GraphQLRefused``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bot.change_state import ThreadAnswer
from bot.forges.base import ANSWERS_PER_REQUEST, ForgeError

THREADS_PER_DOCUMENT = ANSWERS_PER_REQUEST
MAX_DOCUMENT_BYTES = 64 * 1024  # the document and its variables, as sent
_MAX_MESSAGE = 300
_FIELD_BYTES = 400  # a thread's mutations and variable names, beside its reply


class GraphQLRefused(ForgeError):
    """GitLab ran none of the document: fall back to REST."""


def merge_request_gid(global_id: int) -> str:
    return f"gid://gitlab/MergeRequest/{global_id}"


def discussion_gid(discussion_id: str) -> str:
    return f"gid://gitlab/Discussion/{discussion_id}"


def documents(answers: Sequence[ThreadAnswer]) -> list[tuple[ThreadAnswer, ...]]:
    """The answers in order, cut into documents of at most ``THREADS_PER_DOCUMENT``
    answers and about ``MAX_DOCUMENT_BYTES`` (a single longer answer goes alone)."""
    found: list[tuple[ThreadAnswer, ...]] = []
    current: list[ThreadAnswer] = []
    size = 0
    for answer in answers:
        cost = _FIELD_BYTES + len(answer.thread_id) + len(json.dumps(answer.body))
        if current and (len(current) >= THREADS_PER_DOCUMENT or size + cost > MAX_DOCUMENT_BYTES):
            found.append(tuple(current))
            current, size = [], 0
        current.append(answer)
        size += cost
    if current:
        found.append(tuple(current))
    return found


def answers_document(noteable: str, answers: Sequence[ThreadAnswer]) -> tuple[str, dict[str, Any]]:
    """One mutation document replying in (and resolving) each answer's discussion."""
    params = ["$mr: NoteableID!"]
    fields: list[str] = []
    variables: dict[str, Any] = {"mr": noteable}
    for index, answer in enumerate(answers):
        params += [f"$d{index}: DiscussionID!", f"$b{index}: String!"]
        variables[f"d{index}"] = discussion_gid(answer.thread_id)
        variables[f"b{index}"] = answer.body
        fields.append(
            f"r{index}: createNote(input: {{noteableId: $mr, discussionId: $d{index}, "
            f"body: $b{index}}}) {{ note {{ id }} errors }}"
        )
        if answer.resolve:
            fields.append(
                f"s{index}: discussionToggleResolve(input: {{id: $d{index}, resolve: true}}) "
                "{ discussion { id resolved } errors }"
            )
    text = "mutation(" + ", ".join(params) + ") {\n  " + "\n  ".join(fields) + "\n}"
    return text, variables


def reopen_document(thread_ids: Sequence[str]) -> tuple[str, dict[str, Any]]:
    """Threads resolved without their reply, opened again."""
    params = [f"$d{index}: DiscussionID!" for index in range(len(thread_ids))]
    fields = [
        f"o{index}: discussionToggleResolve(input: {{id: $d{index}, resolve: false}}) "
        "{ discussion { id resolved } errors }"
        for index in range(len(thread_ids))
    ]
    variables = {f"d{index}": discussion_gid(thread) for index, thread in enumerate(thread_ids)}
    return "mutation(" + ", ".join(params) + ") {\n  " + "\n  ".join(fields) + "\n}", variables


@dataclass
class Answered:
    """What one document did: threads answered, threads failed (with why), and threads
    resolved although their reply failed."""

    answered: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    resolved_bare: list[str] = field(default_factory=list)


def message(value: Any) -> str:
    """An error's words, bounded."""
    return str(value)[:_MAX_MESSAGE]


def _alias_errors(errors: Any) -> tuple[dict[str, str], list[str]]:
    """The top-level errors by the alias they name, and those that name none."""
    by_alias: dict[str, str] = {}
    loose: list[str] = []
    for error in errors if isinstance(errors, list) else []:
        entry = error if isinstance(error, dict) else {"message": error}
        path = entry.get("path")
        said = message(entry.get("message") or "error")
        if isinstance(path, list) and path and isinstance(path[0], str):
            by_alias.setdefault(path[0], said)
        else:
            loose.append(said)
    return by_alias, loose


def _refusal(payload: Any, alias: str, by_alias: dict[str, str], done: str) -> str | None:
    """Why the mutation under ``alias`` failed, or None when it did what was asked."""
    if alias in by_alias:
        return by_alias[alias]
    if not isinstance(payload, dict):
        return "GitLab sent no result"
    errors = payload.get("errors")
    if errors:
        return "; ".join(message(e) for e in errors) if isinstance(errors, list) else "error"
    if done == "note" and not isinstance(payload.get("note"), dict):
        return "GitLab created no note"
    if done == "resolved" and not (payload.get("discussion") or {}).get("resolved"):
        return "the discussion is not resolved"
    return None


def read_answers(answers: Sequence[ThreadAnswer], answer: Mapping[str, Any]) -> Answered:
    """What GitLab says it did with the document of ``answers``; raises ``GraphQLRefused``
    when it ran none of it (errors and no data)."""
    data = answer.get("data")
    by_alias, loose = _alias_errors(answer.get("errors"))
    if not isinstance(data, dict):
        raise GraphQLRefused("GitLab GraphQL refused the document: " + ("; ".join(loose)
                             or "no data"))  # fmt: skip
    found = Answered()
    for index, thread in enumerate(answers):
        reply = _refusal(data.get(f"r{index}"), f"r{index}", by_alias, "note")
        resolve = None
        if thread.resolve:
            resolve = _refusal(data.get(f"s{index}"), f"s{index}", by_alias, "resolved")
        if reply is None and resolve is None:
            found.answered.append(thread.thread_id)
            continue
        found.failed[thread.thread_id] = (
            f"reply refused: {reply}" if reply is not None else f"not resolved: {resolve}"
        )
        if reply is not None and thread.resolve and resolve is None:
            found.resolved_bare.append(thread.thread_id)
    return found
