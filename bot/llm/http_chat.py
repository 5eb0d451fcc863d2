"""The one HTTP chat base under the OpenAI-compatible and Anthropic providers.

``HttpChatLLM`` owns what both do alike: the HTTP client (shared, or its own to
close), sending under the retry policy of ``transport.send``, a refusal becoming
``LLMBadRequest`` unless the provider learns from it and asks again (a refused native
tools request asks again for the JSON document, ``native.py``), an answer of the wrong
shape becoming ``LLMError``, the usage the endpoint reported (else a local count), and
the health check (the model list, then one small structured request). A provider names
its paths, headers and answer shape, builds its request body, reads the text, a native
call and the usage out of its answer and says what a refusal teaches it.
"""

from __future__ import annotations

import asyncio
import time
from abc import ABC, abstractmethod
from typing import Any, ClassVar

import httpx

from bot.llm.base import (
    FunctionCall,
    HealthReport,
    LLMBadRequest,
    LLMError,
    LLMRequest,
    LLMResponse,
    Message,
    NativeTools,
    OutputMode,
    Usage,
)
from bot.llm.health import StructuredCheck, health_report, model_available
from bot.llm.native import NativeToolsPolicy
from bot.llm.server_kind import LABELS, recognise
from bot.llm.tokens import count_messages, count_tokens
from bot.llm.transport import Call, ModelListing, Sleep, error_message, fetch_model_ids, send
from bot.redact import redact

# How long a structured request that answered stands for the next health checks:
# ``/health/ai`` is public, and on a hosted API every check is a paid request.
CHECK_TTL = 60.0
# The one small structured request of a health check and of a dialect probe.
PROBE = LLMRequest(
    phase="probe",
    messages=(
        Message("system", 'Answer with the JSON object {"ok": true} and nothing else.'),
        Message("user", "Are you there?"),
    ),
    schema={"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]},
    max_tokens=32,
    temperature=0.0,
)


class HttpChatLLM(ABC):
    """``LLM`` over one chat endpoint at ``base_url + chat_path``."""

    name: str
    chat_path: ClassVar[str]
    models_path: ClassVar[str]
    answer_shape: ClassVar[str]  # what a good answer is, for the error when it is not

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str | None = None,
        http: httpx.AsyncClient | None = None,
        timeout: float = 120.0,
        max_retries: int = 3,
        sleep: Sleep = asyncio.sleep,
        native_tools: NativeTools = "auto",
    ) -> None:
        self.base_url = self._root(base_url)
        self.model = model
        self._api_key = api_key
        self._owns_http = http is None
        self._http = http if http is not None else httpx.AsyncClient()
        self._timeout = timeout
        self._max_retries = max_retries
        self._sleep = sleep
        self.native = NativeToolsPolicy(native_tools)
        self._answered: tuple[float, StructuredCheck] | None = None  # (when, the last success)

    # --- what each provider says ------------------------------------------------------------

    @staticmethod
    def _root(base_url: str) -> str:
        """``base_url`` as the paths are appended to it."""
        return base_url.rstrip("/")

    @property
    @abstractmethod
    def mode(self) -> OutputMode:
        """The output mode the next request with a schema will use."""

    @abstractmethod
    def _headers(self) -> dict[str, str]: ...

    @abstractmethod
    def _body(self, request: LLMRequest, mode: OutputMode, native: bool) -> dict[str, Any]:
        """The request body; ``native``: offer ``request.functions`` as the endpoint's tools."""

    @abstractmethod
    def _text(self, data: Any, request: LLMRequest) -> str:
        """The answer's text; any ``KeyError``, ``TypeError``, ... means the wrong shape."""

    @abstractmethod
    def _function_call(self, data: Any, request: LLMRequest) -> FunctionCall | None:
        """The native call of one of ``request.functions`` in the answer, if there is one."""

    @abstractmethod
    def _reported_usage(self, data: Any) -> Usage | None:
        """The usage the endpoint reported in ``data``, or None when it said nothing."""

    @abstractmethod
    def _learn(self, mode: OutputMode, status: int, body: str) -> bool:
        """Adjust the request shape after a refusal of a request in ``mode``; True to
        ask again, False when nothing is left to change."""

    # --- the same for every provider --------------------------------------------------------

    async def complete(self, request: LLMRequest) -> LLMResponse:
        return await self._complete(request, self._max_retries)

    async def _complete(self, request: LLMRequest, max_retries: int) -> LLMResponse:
        """One completion, retrying transient failures up to ``max_retries`` times."""
        url = self.base_url + self.chat_path
        while True:
            mode: OutputMode = self.mode if request.schema is not None else "text"
            native = self.native.offers(request)
            body = self._body(request, mode, native)
            call = Call("POST", url, self._headers(), body, request.phase)
            response = await send(
                self._http,
                call,
                timeout=self._timeout,
                sleep=self._sleep,
                max_retries=max_retries,
            )
            if response.is_success:
                return self._answer(response, request, mode, native)
            if self.native.learn(native, response.status_code, response.text):
                continue  # ask again for the JSON document, without tools
            if not self._learn(mode, response.status_code, response.text):
                raise LLMBadRequest(
                    f"{request.phase}: HTTP {response.status_code} from {url}: "
                    f"{error_message(response)}"
                )

    def _answer(
        self, response: httpx.Response, request: LLMRequest, mode: OutputMode, native: bool
    ) -> LLMResponse:
        try:
            data = response.json()
            text = self._text(data, request)
            function_call = self._function_call(data, request) if native else None
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
            raise LLMError(
                f"{request.phase}: {response.url} did not answer with {self.answer_shape} "
                f"({type(exc).__name__}: {exc}); check LLM_BASE_URL"
            ) from exc
        return LLMResponse(
            text=text,
            usage=self._usage(data, request, text, function_call),
            model=str(data.get("model") or self.model),
            mode=mode,
            function_call=function_call,
            finish_reasons=self._finish_reasons(data),
        )

    def _finish_reasons(self, data: Any) -> tuple[str, ...]:
        """Why the model stopped, in the endpoint's words (none when it did not say)."""
        return ()

    def _usage(
        self, data: Any, request: LLMRequest, text: str, function_call: FunctionCall | None
    ) -> Usage:
        """The token usage the endpoint reported, else a local count."""
        reported = self._reported_usage(data) if isinstance(data, dict) else None
        if reported is not None:
            return reported
        answer = text + (function_call.arguments if function_call is not None else "")
        return Usage(count_messages(request.messages), count_tokens(answer))

    @property
    def dialect_name(self) -> str:
        """The structured-output dialect the next request with a schema will use."""
        return self.mode

    @property
    def server_label(self) -> str:
        return LABELS[recognise(self.base_url)]

    @property
    def probe_log(self) -> tuple[str, ...]:
        """What each dialect got when the endpoint was last probed (none: not probed)."""
        return ()

    def _saw_models(self, listing: ModelListing) -> None:
        """What the model list said (a provider may learn the server kind from it)."""
        return None

    def forget_dialect(self) -> None:
        """Find the structured-output dialect again before the next request (after a
        configuration reload or an outage); providers that probe extend this."""
        self._answered = None

    async def health(self) -> HealthReport:
        """The model list, then (when the model is served) one small structured request
        in the dialect the bot uses, once, without retries: what a task's call would do."""
        listing = await self._list_models()
        self._saw_models(listing)
        check = None
        if listing.error is None and model_available(self.model, listing.models):
            check = await self._structured_check()
        return health_report(
            self.name,
            self.base_url,
            self.model,
            status=listing.status,
            models=listing.models,
            error=listing.error,
            check=check,
            server=self.server_label,
            probed=self.probe_log,
        )

    async def _list_models(self) -> ModelListing:
        """The models the endpoint serves (``{base}{models_path}``)."""
        return await fetch_model_ids(self._http, self.base_url + self.models_path, self._headers())

    async def _structured_check(self) -> StructuredCheck:
        """One small structured request (a success stands for ``CHECK_TTL`` seconds)."""
        started = time.monotonic()
        if self._answered is not None and started - self._answered[0] < CHECK_TTL:
            return self._answered[1]
        try:
            await self._complete(PROBE, 0)
        except LLMError as exc:  # the server's own words, without the key it may echo
            elapsed = (time.monotonic() - started) * 1000
            said = redact(str(exc), known=[self._api_key] if self._api_key else [])
            self._answered = None
            return StructuredCheck(False, self.dialect_name, elapsed, said)
        check = StructuredCheck(True, self.dialect_name, (time.monotonic() - started) * 1000)
        self._answered = (started, check)
        return check

    async def aclose(self) -> None:
        if self._owns_http:
            await self._http.aclose()
