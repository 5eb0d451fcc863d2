"""Sending a review round's answers to GitLab: GraphQL documents, REST where refused.

``answer_threads`` sends the documents of ``gitlab_mutations`` through ``post`` and
reads what GitLab did with each: a thread whose reply or resolution failed is not
answered (a thread resolved without its reply is opened again), and
``UnansweredThreads`` names it after all were tried. A document refused as a whole
(``GraphQLRefused``: the endpoint answers 403 or 404, as on an instance or for a token
without GraphQL, or GitLab rejects the document before running any of it, as an old
schema would) falls back to the REST calls (``rest``: a note, then a resolution) for its
threads and the rest. ``GitLabAnswers`` is the adapter's side: the merge request's global
id (``createNote`` takes it, not the iid), kept from what was read anyway, and how long
a refusal is remembered. The one ``FakeForge`` runs ``answer_threads`` too, against its
own GraphQL endpoint.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from cachetools import LRUCache

from bot.change_state import ThreadAnswer
from bot.events import RepoRef
from bot.forges.base import AccessDenied, ForgeError, NotFound, RateLimited, UnansweredThreads
from bot.forges.gitlab_mutations import (
    GraphQLRefused,
    answers_document,
    documents,
    merge_request_gid,
    message,
    read_answers,
    reopen_document,
)

log = logging.getLogger("bot.forges.gitlab")

GRAPHQL_RETRY_SECONDS = 3600.0  # after GitLab refused GraphQL as a whole, REST this long
_NOTEABLES = 1024  # merge requests whose global id is kept

# The document as sent, and its variables -> GitLab's JSON answer.
Post = Callable[[str, dict[str, Any]], Awaitable[Mapping[str, Any]]]
# One thread's answer by REST: the reply note, then the resolution when asked.
RestAnswer = Callable[[ThreadAnswer], Awaitable[None]]
# A GraphQL document sent as a paced write: (what, document, variables) -> the JSON answer.
Send = Callable[[str, str, dict[str, Any]], Awaitable[Any]]
# One read of a merge request's global id: (repo, iid) -> GitLab's ``id``.
ReadId = Callable[[RepoRef, int], Awaitable[object]]


async def answer_threads(
    post: Post, rest: RestAnswer, noteable: str | None, answers: Sequence[ThreadAnswer]
) -> list[str]:
    """Answer every thread: GraphQL documents (``noteable``: the merge request's global
    id; None: GraphQL is known to be refused here), REST from the first refused one on.
    Returns the threads answered; raises ``UnansweredThreads`` when any failed, after
    all were tried."""
    answered: list[str] = []
    failed: dict[str, str] = {}
    chunks = documents(answers)
    for number, chunk in enumerate(chunks):
        if noteable is not None:
            try:
                found = read_answers(chunk, await post(*answers_document(noteable, chunk)))
            except GraphQLRefused as exc:
                log.info("GitLab GraphQL refused the answers (%s): answering by REST", exc)
                noteable = None
            except RateLimited as exc:  # the rest would be refused as well
                failed.update({a.thread_id: f"rate limited: {exc}" for c in chunks[number:]
                               for a in c})  # fmt: skip
                break
            except ForgeError as exc:  # nothing tells what of it was done
                failed.update({a.thread_id: message(exc) for a in chunk})
                continue
            else:
                answered += found.answered
                failed.update(found.failed)
                if found.resolved_bare:
                    await _reopen(post, found.resolved_bare)
                continue
        by_rest, refused = await _by_rest(rest, chunk)
        answered += by_rest
        failed.update(refused)
    if failed:
        raise UnansweredThreads(failed, tuple(answered))
    return answered


async def _reopen(post: Post, thread_ids: list[str]) -> None:
    """Threads resolved although their reply failed are opened again (a reviewer would
    read a resolved thread as answered); a failure here is logged, no more."""
    text, variables = reopen_document(thread_ids)
    try:
        await post(text, variables)
    except ForgeError as exc:
        log.warning("could not open again the threads resolved without a reply %s: %s",
                    ", ".join(thread_ids), exc)  # fmt: skip


async def _by_rest(
    rest: RestAnswer, answers: Sequence[ThreadAnswer]
) -> tuple[list[str], dict[str, str]]:
    answered: list[str] = []
    failed: dict[str, str] = {}
    for index, answer in enumerate(answers):
        try:
            await rest(answer)
        except RateLimited as exc:  # the rest would be refused as well
            for later in answers[index:]:
                failed[later.thread_id] = f"rate limited: {exc}"
            break
        except ForgeError as exc:
            failed[answer.thread_id] = message(exc)
        else:
            answered.append(answer.thread_id)
    return answered, failed


def _project_key(repo: RepoRef) -> str:
    return str(repo.project_id) if repo.project_id is not None else repo.full_name


class GitLabAnswers:
    """The adapter's answering: GraphQL through ``send`` (``GitLabClient.graphql``), the
    merge request's global id, and a refusal remembered for ``GRAPHQL_RETRY_SECONDS``."""

    def __init__(self, send: Send, read_id: ReadId, clock: Callable[[], float]) -> None:
        self._send = send
        self._read_id = read_id
        self._clock = clock
        self._noteables: LRUCache[tuple[str, int], int] = LRUCache(maxsize=_NOTEABLES)
        self._refused_at: float | None = None

    def keep_noteable(self, repo: RepoRef, number: int, global_id: object) -> None:
        """Keep merge request ``number``'s global id, read with it (its ``id``, a note's
        ``noteable_id``)."""
        if isinstance(global_id, int) and not isinstance(global_id, bool):
            self._noteables[(_project_key(repo), number)] = global_id

    def graphql_usable(self) -> bool:
        refused = self._refused_at
        return refused is None or self._clock() - refused >= GRAPHQL_RETRY_SECONDS

    async def noteable(self, repo: RepoRef, number: int) -> str:
        """The merge request's global id: kept, else one read of the merge request."""
        key = (_project_key(repo), number)
        if key not in self._noteables:
            self.keep_noteable(repo, number, await self._read_id(repo, number))
        known = self._noteables.get(key)
        if known is None:
            raise NotFound(f"the global id of merge request !{number} in {repo.full_name}")
        return merge_request_gid(known)

    async def answer(
        self, repo: RepoRef, number: int, answers: Sequence[ThreadAnswer], rest: RestAnswer
    ) -> list[str]:
        what = f"answers in the discussions of merge request !{number} in {repo.full_name}"

        async def post(document: str, variables: dict[str, Any]) -> Mapping[str, Any]:
            try:
                answer = await self._send(what, document, variables)
            except (NotFound, AccessDenied) as exc:  # no GraphQL here, or not for this token
                self._refused_at = self._clock()
                raise GraphQLRefused(str(exc), status=exc.status) from exc
            if not isinstance(answer, dict):
                raise ForgeError(f"GitLab GraphQL sent no JSON object for {what}")
            if not isinstance(answer.get("data"), dict):  # it ran none of the document
                self._refused_at = self._clock()
            return answer

        noteable = await self.noteable(repo, number) if self.graphql_usable() else None
        return await answer_threads(post, rest, noteable, answers)
