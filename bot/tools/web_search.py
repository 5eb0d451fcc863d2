"""Web search through the operator's search service: titles, URLs and snippets.

The first kind is SearXNG's JSON API: ``GET <url>/search?q=<query>&format=json`` answers
``{"results": [{"title", "url", "content", ...}, ...], ...}`` (the instance must list
``json`` in ``search.formats`` of its settings.yml, or it answers 403). The service is the
operator's own, named in ``web.search.url``: it may sit on a private address, so the
address rules of ``fetch_url`` do not apply to it; the time limit, a bound on the answer
(``MAX_ANSWER_BYTES``) and the result count do, and a redirect is an error.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from bot import offload
from bot.text import clip
from bot.tools.web_fetch import WebError, read_bounded

MAX_ANSWER_BYTES = 2 * 1_048_576
MAX_TITLE_CHARS = 200
MAX_SNIPPET_CHARS = 500
MAX_URL_CHARS = 500
_PARSE_ON_LOOP = 65_536  # bytes; a larger answer is parsed in an offload worker


@dataclass(frozen=True, slots=True)
class SearchHit:
    title: str
    url: str
    snippet: str


class SearchProvider(Protocol):
    async def search(self, query: str) -> list[SearchHit]:
        """At most the configured number of hits; ``WebError`` says why there are none."""
        ...


def searxng_hits(answer: bytes, limit: int) -> list[SearchHit]:
    """The first ``limit`` usable results of a SearXNG JSON answer. Raises ``WebError``
    for an answer that is not SearXNG's JSON."""
    try:
        data = json.loads(answer)
    except ValueError:
        raise WebError("the search service did not answer JSON") from None
    results = data.get("results") if isinstance(data, dict) else None
    if not isinstance(results, list):
        raise WebError("the search service's answer has no results list")
    hits: list[SearchHit] = []
    for item in results:
        hit = _hit(item)
        if hit is not None:
            hits.append(hit)
        if len(hits) >= limit:
            break
    return hits


def _hit(item: Any) -> SearchHit | None:
    if not isinstance(item, dict):
        return None
    url = item.get("url")
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        return None
    title, snippet = item.get("title"), item.get("content")
    return SearchHit(
        title=clip(" ".join(str(title or "").split()), MAX_TITLE_CHARS, note="…"),
        url=clip(url, MAX_URL_CHARS, note="…"),
        snippet=clip(" ".join(str(snippet or "").split()), MAX_SNIPPET_CHARS, note="…"),
    )


class SearxngSearch:
    """A SearXNG instance at ``url`` (its base URL)."""

    def __init__(
        self,
        url: str,
        *,
        max_results: int,
        timeout: float,
        user_agent: str,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.endpoint = url.rstrip("/") + "/search"
        self.max_results = max_results
        self.timeout = timeout
        self.user_agent = user_agent
        self._transport = transport

    async def search(self, query: str) -> list[SearchHit]:
        try:
            async with asyncio.timeout(self.timeout):
                answer = await self._ask(query)
        except TimeoutError:
            raise WebError(
                f"the search service gave no whole answer within {self.timeout:g} s"
            ) from None
        if len(answer) <= _PARSE_ON_LOOP:
            return searxng_hits(answer, self.max_results)
        return await offload.compute(searxng_hits, answer, self.max_results)

    async def _ask(self, query: str) -> bytes:
        params = {"q": query, "format": "json", "pageno": "1"}
        headers = {"User-Agent": self.user_agent, "Accept": "application/json"}
        try:
            async with (
                httpx.AsyncClient(
                    transport=self._transport or httpx.AsyncHTTPTransport(trust_env=False),
                    trust_env=False,
                    follow_redirects=False,
                    timeout=self.timeout,
                ) as client,
                client.stream("GET", self.endpoint, params=params, headers=headers) as response,
            ):
                if response.status_code == 403:
                    raise WebError(
                        "the search service refused format=json (SearXNG: add json to "
                        "search.formats in its settings.yml)"
                    )
                if response.status_code != 200:
                    raise WebError(f"the search service answered HTTP {response.status_code}")
                answer, cut = await read_bounded(response, MAX_ANSWER_BYTES)
        except httpx.HTTPError as exc:
            raise WebError(
                f"the search service is unreachable: {type(exc).__name__}: {exc}"
            ) from None
        if cut:
            raise WebError(f"the search service's answer is larger than {MAX_ANSWER_BYTES} bytes")
        return answer
