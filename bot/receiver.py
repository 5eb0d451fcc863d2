"""The webhook endpoints (``POST /webhooks/github`` and ``/webhooks/gitlab``): the hot path.

Size limit, in-flight budget and read deadline -> verify -> parse -> classify (pure, the
one classification of the event) -> one store transaction (an inbox row; its unique
delivery key is the dedup record) -> 202. The worker's dispatcher does the rest, so no
forge or LLM call ever happens here.

Every comment on every installed repository comes through here, so the endpoints are
plain ASGI in the app's route list: answered without the framework's request and
response objects, their cost is the verification, parsing and durable write they need
(``bench/webhook_ack.py`` measures it).
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson
from starlette.types import Receive, Scope, Send

from bot import metrics, tracing
from bot.config import CurrentSettings, Settings
from bot.events import EventKind, ForgeEvent, ForgeKind
from bot.storage.base import Inbox, StoreError
from bot.triggers import Ignore, classify, inbox_payload
from bot.webhooks import github as github_hooks
from bot.webhooks import gitlab as gitlab_hooks
from bot.webhooks.errors import PayloadError

log = logging.getLogger("bot.app")


class _TooLarge(Exception):
    pass


Answer = tuple[int, dict[str, Any]]
Wake = Callable[[], None]


@dataclass(frozen=True, slots=True)
class Delivery:
    """A verified delivery, parsed: its dedup key and the bot's event."""

    key: str
    event: ForgeEvent


def _answer(status: int, message: str, **extra: Any) -> Answer:
    return status, {"status": status, "message": message, **extra}


def _github(headers: Mapping[str, str], settings: Settings, body: bytes) -> Answer | Delivery:
    github = settings.github
    if github.webhook_secret is None:
        return _answer(404, "GitHub is not configured on this bot (set GITHUB_WEBHOOK_SECRET)")
    signature = headers.get("x-hub-signature-256")
    if not github_hooks.verify_signature(
        body, signature, secret=github.webhook_secret.get_secret_value()
    ):
        metrics.webhook("github", "bad_signature")
        return _answer(401, "missing or wrong X-Hub-Signature-256")
    name = headers.get("x-github-event", "")
    delivery = headers.get("x-github-delivery", "")
    if not name:
        raise PayloadError("no X-GitHub-Event header")
    event = github_hooks.parse_event(name, delivery, body)
    if event.kind is EventKind.PING:
        return _answer(200, "pong")
    return Delivery(github_hooks.delivery_key(delivery, github.app_id, body), event)


def _gitlab(headers: Mapping[str, str], settings: Settings, body: bytes) -> Answer | Delivery:
    gitlab = settings.gitlab
    if gitlab.webhook_secret is None and not gitlab.webhook_secrets:
        return _answer(404, "GitLab is not configured on this bot (set GITLAB_WEBHOOK_SECRET)")
    token = headers.get("x-gitlab-token")
    shared = gitlab.webhook_secret.get_secret_value() if gitlab.webhook_secret else None
    scoped = gitlab.scoped_webhook_secrets()
    if not gitlab_hooks.verify_delivery(token, body, shared=shared, scoped=scoped):
        metrics.webhook("gitlab", "bad_token")
        return _answer(401, "missing or wrong X-Gitlab-Token")
    name = headers.get("x-gitlab-event", "")
    if not name:
        raise PayloadError("no X-Gitlab-Event header")
    delivery = headers.get("x-gitlab-event-uuid", "")
    event = gitlab_hooks.parse_event(name, delivery, body)
    return Delivery(gitlab_hooks.delivery_key(headers, body), event)


# Verify and parse a delivery (pure, no I/O): an answer at once, or the delivery to queue.
Verifier = Callable[[Mapping[str, str], Settings, bytes], Answer | Delivery]
VERIFIERS: dict[ForgeKind, Verifier] = {ForgeKind.GITHUB: _github, ForgeKind.GITLAB: _gitlab}


async def _read_body(receive: Receive, limit: int) -> bytes:
    body = bytearray()
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise _TooLarge if len(body) > limit else ConnectionError("client went away")
        body += message.get("body", b"")
        if len(body) > limit:
            raise _TooLarge
        if not message.get("more_body", False):
            return bytes(body)


def _declared_length(headers: Mapping[str, str]) -> int | None:
    declared = headers.get("content-length", "")
    return int(declared) if declared.isdigit() else None


class BodyBudget:
    """The bytes of webhook bodies being read at once (``server.max_body_bytes_in_flight``).

    A request reserves its declared length before its body is read and gives it back
    when it is answered, on every path (cancellation included: see ``Receiver.answer``).
    One event loop touches it, and nothing awaits between the check and the reservation."""

    def __init__(self) -> None:
        self.in_flight = 0

    def take(self, size: int, limit: int) -> bool:
        if self.in_flight + size > limit:
            return False
        self.in_flight += size
        return True

    def give_back(self, size: int) -> None:
        self.in_flight -= size


class Receiver:
    """What the webhook endpoints share: the settings now, the inbox they write, the
    wake-up of a worker in this process, and the budget of bodies in flight."""

    def __init__(self, inbox: Inbox, *, settings: CurrentSettings, wake: Wake) -> None:
        self.inbox = inbox
        self.settings = settings
        self.wake = wake
        self.budget = BodyBudget()

    def endpoint(self, forge: ForgeKind) -> WebhookEndpoint:
        return WebhookEndpoint(self, forge)

    async def answer(self, forge: ForgeKind, headers: dict[str, str], receive: Receive) -> Answer:
        """Reserve the body's bytes, read it within the deadline, handle it, give them back."""
        server = self.settings().server
        declared = _declared_length(headers)
        if declared is not None and declared > server.max_body_bytes:
            metrics.webhook(forge.value, "too_large")
            return _answer(413, "the body is larger than server.max_body_bytes")
        size = server.max_body_bytes if declared is None else declared
        if not self.budget.take(size, server.max_body_bytes_in_flight):
            metrics.webhook(forge.value, "busy")
            retry = math.ceil(server.body_timeout)
            return _answer(503, "too many webhook bodies in flight", retry_after=retry)
        try:
            try:
                async with asyncio.timeout(server.body_timeout):
                    body = await _read_body(receive, server.max_body_bytes)
            except TimeoutError:
                metrics.webhook(forge.value, "too_slow")
                return _answer(408, "the body did not arrive within server.body_timeout")
            except _TooLarge:
                metrics.webhook(forge.value, "too_large")
                return _answer(413, "the body is larger than server.max_body_bytes")
            except ConnectionError:
                return _answer(400, "the request body did not arrive")
            return await self._handle(forge, headers, body)
        finally:
            self.budget.give_back(size)

    async def _handle(self, forge: ForgeKind, headers: dict[str, str], body: bytes) -> Answer:
        try:
            verified = VERIFIERS[forge](headers, self.settings(), body)
        except PayloadError as exc:
            metrics.webhook(forge.value, "bad_payload")
            log.warning("%s webhook rejected: %s", forge.value, exc)
            return _answer(400, f"malformed payload: {exc}")
        if isinstance(verified, Delivery):
            return await self._accept(verified.key, verified.event)
        return verified

    async def _accept(self, key: str, event: ForgeEvent) -> Answer:
        """Classify (the one classification of the event: its inbox row keeps it); queue
        what could matter in one transaction; answer at once."""
        verdict = classify(event, self.settings())
        if isinstance(verdict, Ignore):
            metrics.webhook(event.forge.value, "ignored")
            log.info("ignored %s %s/%s: %s", key, event.name, event.action, verdict.reason)
            return _answer(202, "ignored", reason=verdict.reason)
        payload = tracing.stamp_event(inbox_payload(verdict), event.name, event.action,
                                      event.delivery_id, key)  # fmt: skip
        try:
            fresh = await self.inbox.record_delivery(key, event.forge.value, payload)
        except StoreError as exc:
            log.error("could not queue delivery %s: %s", key, exc)
            return _answer(503, "the bot could not store this delivery; please redeliver it")
        if not fresh:
            metrics.webhook(event.forge.value, "duplicate")
            return _answer(202, "duplicate delivery: already queued")
        metrics.webhook(event.forge.value, "queued")
        self.wake()  # a worker in this process looks at the inbox now
        return _answer(202, tracing.QUEUED)  # the word its span's ids depend on


class WebhookEndpoint:
    """One forge's webhook route, as plain ASGI: POST only; a JSON answer."""

    def __init__(self, receiver: Receiver, forge: ForgeKind) -> None:
        self.receiver = receiver
        self.forge = forge

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        extra: list[tuple[bytes, bytes]] = []
        if scope["method"] != "POST":
            status, body = _answer(405, "webhooks are POSTed")
            extra = [(b"allow", b"POST")]
        else:
            headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
            with tracing.webhook_span(self.forge.value, scope["path"]) as span:
                status, body = await self.receiver.answer(self.forge, headers, receive)
                tracing.answered(span, status, body["message"])
            extra = _REFUSAL_HEADERS.get(status, [])
            if status == 503 and "retry_after" in body:
                extra = [*extra, (b"retry-after", str(body["retry_after"]).encode())]
        content = orjson.dumps(body)
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(content)).encode()),
                    *extra,
                ],
            }
        )
        await send({"type": "http.response.body", "body": content})


# A body refused before it was read whole leaves bytes on the connection: close it.
_CLOSE = [(b"connection", b"close")]
_REFUSAL_HEADERS: dict[int, list[tuple[bytes, bytes]]] = {408: _CLOSE, 413: _CLOSE, 503: _CLOSE}
