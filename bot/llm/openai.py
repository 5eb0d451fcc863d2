"""Any OpenAI-compatible chat-completions endpoint: OpenAI, Ollama, vLLM, LM Studio,
llama.cpp server, LiteLLM, OpenRouter.

Plain httpx rather than the ``openai`` SDK: the bot needs its own retry policy
(1, 2, 4 s, ``Retry-After``, typed errors) and the servers above differ in what
they accept. On first use the provider finds the endpoint's structured-output
dialect (``dialect.py``): it recognises the server (``server_kind.py``), takes what
the store kept for this endpoint and model, or else sends one tiny request per
dialect, best first (``response_format`` with a JSON schema, the server's own
schema form, JSON mode, the schema in the instructions only), and keeps the first
that answers with a JSON document. It probes again after a configuration reload
and after a call that failed for good (the server may come back as another build).
A refusal of a later request (a 4xx, or a 500 that rejects a request field) moves
down one rung at once and is kept too. Other known refusals adjust the request
(OpenAI's newer models want ``max_completion_tokens`` and the default temperature).
A request with functions offers them as ``tools`` (``native.py``) on
/chat/completions and reads the first of ``message.tool_calls``. Prompt caching is the
server's own (OpenAI caches prompt prefixes of 1,024 tokens and more by itself): the
usage's ``prompt_tokens_details.cached_tokens`` says how much of the prompt it read from
the cache. Sending, retries and errors are ``HttpChatLLM``'s; this module builds the
body and reads the answer.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from typing import Any

import httpx

from bot.llm import server_kind
from bot.llm.base import (
    FunctionCall,
    LLMBadRequest,
    LLMRequest,
    LLMResponse,
    LLMUnavailable,
    OutputMode,
    Usage,
)
from bot.llm.dialect import (
    Dialect,
    DialectStore,
    KnownDialect,
    StructuredOutput,
    known_from_row,
    ladder,
    next_dialect,
    output_mode,
)
from bot.llm.health import is_local
from bot.llm.http_chat import PROBE, HttpChatLLM
from bot.llm.native import openai_tools
from bot.llm.openai_wire import (
    Quirks,
    adjust,
    chat_usage,
    first_tool_call,
    is_document,
    response_format,
)
from bot.llm.server_kind import ServerKind
from bot.llm.transport import (
    HEALTH_TIMEOUT,
    Call,
    ModelListing,
    error_message,
    fetch_model_ids,
    fetch_ollama_tags,
    send,
    with_json_instructions,
)

log = logging.getLogger(__name__)


class OpenAICompatibleLLM(HttpChatLLM):
    """``LLM`` over POST {base_url}/chat/completions (or Ollama's native /api/chat)."""

    name = "openai"
    chat_path = "/chat/completions"
    models_path = "/models"
    answer_shape = "a chat.completion object"

    def __init__(
        self,
        *,
        structured_output: StructuredOutput = "auto",
        probe: bool = True,
        dialects: DialectStore | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.structured_output: StructuredOutput = structured_output
        self.server = server_kind.recognise(self.base_url)
        rungs = ladder(self.server, structured_output)
        self.quirks = Quirks(dialect=rungs[0], rungs=rungs)
        self._probe = probe
        self._dialects = dialects
        self._trust_store = True
        self._ready = not probe
        self._lock = asyncio.Lock()
        self._listing: ModelListing | None = None  # the last model list seen
        self.tried: list[tuple[Dialect, str]] = []  # what each probed rung answered

    @property
    def dialect(self) -> Dialect:
        return self.quirks.dialect

    @property
    def dialect_name(self) -> str:
        return self.quirks.dialect.value

    @property
    def server_label(self) -> str:
        return server_kind.LABELS[self.server]

    @property
    def probe_log(self) -> tuple[str, ...]:
        return tuple(f"{dialect}: {what}" for dialect, what in self.tried)

    @property
    def mode(self) -> OutputMode:
        return output_mode(self.quirks.dialect)

    def forget_dialect(self) -> None:
        """Probe again before the next request (the configuration was reloaded, or a call
        failed for good)."""
        super().forget_dialect()
        self._ready = not self._probe
        self._trust_store = False

    # --- the dialect ----------------------------------------------------------------------------

    async def dialect_ready(self) -> Dialect:
        """The dialect to use, found first if not known yet. Raises ``LLMUnavailable``
        when the endpoint cannot be reached and ``LLMBadRequest`` when it refuses every
        dialect."""
        if self._ready:
            return self.quirks.dialect
        async with self._lock:
            if not self._ready:
                await self._find_dialect()
                self._ready = True
        return self.quirks.dialect

    async def _find_dialect(self) -> None:
        self.server = await self._recognise()
        rungs = ladder(self.server, self.structured_output)
        self.quirks = dataclasses.replace(self.quirks, dialect=rungs[0], rungs=rungs)
        trust = self._trust_store and self.structured_output == "auto"
        known = await self._stored() if trust else None
        if known is not None and known.dialect in rungs:
            self.quirks = dataclasses.replace(self.quirks, dialect=known.dialect)
            return
        if len(rungs) > 1:
            await self._probe_rungs()
        await self._keep()

    async def _keep(self) -> None:
        """Remember the dialect in use: in memory, and in the store unless the operator
        pinned the mode (a pinned rung says nothing of what ``auto`` would find)."""
        if self._dialects is None or self.structured_output != "auto":
            return
        try:
            await self._dialects.put_llm_dialect(
                self.base_url, self.model, dialect=self.quirks.dialect, server=self.server
            )
        except Exception as exc:  # the store's trouble must not stop the model call
            log.warning("could not keep the LLM dialect: %s", exc)

    async def _probe_rungs(self) -> None:
        """One tiny request per rung, best first, until one answers with a document."""
        self.tried = []
        for _ in self.quirks.rungs:  # each pass ends lower on the ladder, or returns
            answer = await self._request(PROBE, self._max_retries, keep=False)
            used = self.quirks.dialect  # where the refusals on the way left it
            if answer.mode == "text" or is_document(answer.text):
                self.tried.append((used, "ok"))
                return
            self.tried.append((used, "answered without a JSON document"))
            lower = next_dialect(self.quirks.rungs, used, self.quirks.dialect)
            if lower is None:
                return
            self.quirks = dataclasses.replace(self.quirks, dialect=lower)

    async def _recognise(self) -> ServerKind:
        """The server kind from its address, its model list and, for a local server that
        says nothing, Ollama's ``/api/version``."""
        kind = server_kind.from_url(self.base_url)
        if kind is not ServerKind.UNKNOWN:
            return kind
        listing = self._listing
        if listing is None or listing.status is None:
            url = self.base_url + self.models_path
            listing = await fetch_model_ids(self._http, url, self._headers())
        kind = server_kind.recognise(self.base_url, headers=listing.headers, owners=listing.owners)
        if kind is ServerKind.UNKNOWN and listing.status is not None:
            kind = server_kind.recognise(self.base_url, ollama_version=await self._is_ollama())
        return kind

    def _saw_models(self, listing: ModelListing) -> None:
        self._listing = listing
        if self.server is ServerKind.UNKNOWN:  # for the report; the ladder is found later
            self.server = server_kind.recognise(
                self.base_url, headers=listing.headers, owners=listing.owners
            )

    async def _list_models(self) -> ModelListing:
        """``{base}/models``; an Ollama that does not serve it (an older one, or a base URL
        without ``/v1``) is asked for its own list, ``/api/tags``."""
        listing = await super()._list_models()
        if listing.status is None or not listing.error or not is_local(self.base_url):
            return listing  # a hosted API is not asked for Ollama's paths
        if not await self._is_ollama():
            return listing
        tags = await fetch_ollama_tags(self._http, self._api_root() + "/api/tags")
        return tags if tags.error is None else listing

    async def _is_ollama(self) -> bool:
        try:
            response = await self._http.get(
                self._api_root() + "/api/version", timeout=HEALTH_TIMEOUT
            )
            return response.is_success and "version" in response.json()
        except (httpx.HTTPError, ValueError, TypeError, AttributeError):
            return False

    async def _stored(self) -> KnownDialect | None:
        if self._dialects is None:
            return None
        try:
            row = await self._dialects.get_llm_dialect(self.base_url, self.model)
        except Exception as exc:  # the store's trouble must not stop the model call
            log.warning("could not read the kept LLM dialect: %s", exc)
            return None
        return known_from_row(row)

    # --- requests -------------------------------------------------------------------------------

    async def _complete(self, request: LLMRequest, max_retries: int) -> LLMResponse:
        if request.schema is not None:
            await self.dialect_ready()
        try:
            return await self._request(request, max_retries, keep=True)
        except LLMUnavailable:
            self.forget_dialect()  # it failed repeatedly: it may come back as another build
            raise

    async def _request(self, request: LLMRequest, max_retries: int, *, keep: bool) -> LLMResponse:
        """Send ``request`` in the current dialect, moving down on refusals (``keep``:
        remember where it lands)."""
        while True:
            dialect = self.quirks.dialect if request.schema is not None else Dialect.INSTRUCTIONS
            native = self.native.offers(request)
            url = self.base_url + self.chat_path if native else self._chat_url(dialect)
            body = self._body_for(request, dialect, native)
            call = Call("POST", url, self._headers(), body, request.phase)
            response = await send(
                self._http, call, timeout=self._timeout, sleep=self._sleep, max_retries=max_retries
            )
            if response.is_success:
                mode: OutputMode = output_mode(dialect) if request.schema is not None else "text"
                return self._answer(response, request, mode, native)
            if self.native.learn(native, response.status_code, response.text):
                continue  # ask again for the JSON document, without tools
            adjusted = adjust(self.quirks, dialect, response.status_code, response.text)
            if adjusted is None:
                raise LLMBadRequest(
                    f"{request.phase}: HTTP {response.status_code} from {url}: "
                    f"{error_message(response)}"
                )
            moved = adjusted.dialect is not self.quirks.dialect
            self.quirks = adjusted
            if moved and not keep:  # probing: say what this rung got
                self.tried.append((dialect, f"refused (HTTP {response.status_code})"))
            if moved and keep:
                log.warning("%s refused %s; using %s from now on", url, dialect, adjusted.dialect)
                await self._keep()

    def _api_root(self) -> str:
        return self.base_url.removesuffix("/v1")

    def _chat_url(self, dialect: Dialect) -> str:
        if dialect is Dialect.OLLAMA_FORMAT:
            return self._api_root() + "/api/chat"
        return self.base_url + self.chat_path

    def _headers(self) -> dict[str, str]:
        headers = {"accept": "application/json"}
        if self._api_key:
            headers["authorization"] = f"Bearer {self._api_key}"
        return headers

    def _body(self, request: LLMRequest, mode: OutputMode, native: bool) -> dict[str, Any]:
        dialect = self.quirks.dialect if request.schema is not None else Dialect.INSTRUCTIONS
        return self._body_for(request, dialect, native)

    def _body_for(self, request: LLMRequest, dialect: Dialect, native: bool) -> dict[str, Any]:
        """The body for ``dialect``; ``native``: offer ``request.functions`` as OpenAI
        tools instead (the call is the answer: no response format to impose)."""
        messages = request.messages
        schema = request.schema
        plain = dialect in (Dialect.JSON_OBJECT, Dialect.INSTRUCTIONS)
        if schema is not None and plain and not native:
            messages = with_json_instructions(messages, schema)
        turns = [{"role": m.role, "content": m.content} for m in messages]
        if dialect is Dialect.OLLAMA_FORMAT and not native:
            return {
                "model": self.model,
                "messages": turns,
                "stream": False,
                "format": schema,
                "options": {"temperature": request.temperature, "num_predict": request.max_tokens},
            }
        body: dict[str, Any] = {
            "model": self.model,
            "messages": turns,
            self.quirks.length_field: request.max_tokens,
        }
        if self.quirks.temperature:
            body["temperature"] = request.temperature
        if native:
            body.update(openai_tools(request.functions))
            return body
        fmt = response_format(request.phase, schema, dialect)
        if fmt is not None:
            body["response_format"] = fmt
        if dialect is Dialect.GUIDED_JSON:
            body["guided_json"] = schema
        if dialect is Dialect.LLAMACPP_SCHEMA:
            body["json_schema"] = schema
        return body

    def _text(self, data: Any, request: LLMRequest) -> str:
        """The text of the first choice of a chat.completion object (or of Ollama's
        native chat answer)."""
        if "choices" not in data and isinstance(data.get("message"), dict):
            message = data["message"]
        else:
            message = data["choices"][0]["message"]
        content = message.get("content")
        if content is None:
            content = message.get("refusal") or ""
        if not isinstance(content, str):
            raise TypeError("message.content is not a string")
        return content

    def _function_call(self, data: Any, request: LLMRequest) -> FunctionCall | None:
        message = data["choices"][0]["message"]
        return first_tool_call(message, {f.name for f in request.functions})

    def _reported_usage(self, data: Any) -> Usage | None:
        return chat_usage(data)

    def _finish_reasons(self, data: Any) -> tuple[str, ...]:
        """Each choice's ``finish_reason`` (Ollama's native answer: ``done_reason``)."""
        if isinstance(data.get("done_reason"), str):
            return (data["done_reason"],)
        choices = data.get("choices")
        if not isinstance(choices, list):
            return ()
        reasons = [c.get("finish_reason") for c in choices if isinstance(c, dict)]
        return tuple(str(reason) for reason in reasons if reason)

    def _learn(self, mode: OutputMode, status: int, body: str) -> bool:
        adjusted = adjust(self.quirks, self.quirks.dialect, status, body)
        if adjusted is None:
            return False
        self.quirks = adjusted
        return True
