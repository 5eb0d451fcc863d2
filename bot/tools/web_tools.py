"""The agent's web tools, ``fetch_url`` and ``web_search``: off unless the server turns them on.

What they return comes from outside, so it is fenced as untrusted data, the way the
planner's context fences issue text: inside ``<untrusted source="...">`` tags that the
system prompt declares to be data, never instructions. ``fence_web`` first drops invisible
characters (format, control other than newline and tab, private use, surrogates), then
turns the bracket of anything that would read as a fence tag (``<untrusted``,
``</untrusted``, ``<tool_output``..., also with look-alike brackets, slashes and
fullwidth letters: ``bot.fence_marks``) into
``&lt;``: nothing inside can close the fence, and nothing that escaping produces can
open a tag again. The registry then redacts the output with the bot's secrets, like every
tool's (``ToolRegistry.call``). A URL or query that holds what looks like a secret (the
redaction patterns, the bot's own secrets) is refused before anything is sent.

Reading a page (charset, HTML to text, clipping, fencing) runs in an offload worker
(``bot/offload.py``): the page is outside text of up to ``max_bytes``.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Any

from bot import offload
from bot.fence_marks import tag_head
from bot.redact import redact
from bot.text import clip
from bot.tools.registry import Tool, ToolResult
from bot.tools.web_fetch import Fetched, Fetcher, FetchRules, WebError
from bot.tools.web_policy import WebLimits
from bot.tools.web_search import SearchHit, SearchProvider, SearxngSearch
from bot.tools.web_text import CharsetFrom, Kind, Unsupported, page_text

_FENCE_TAG = tag_head(("untrusted", "tool_output"))
_INVISIBLE = frozenset({"Cf", "Cc", "Co", "Cs"})
_KEEP = frozenset("\n\t")
MAX_SOURCE_CHARS = 300
MAX_QUERY_CHARS = 400
_SHOWN_DOMAINS = 10


def _visible(text: str) -> str:
    category = unicodedata.category
    return "".join(
        ch for ch in text if " " <= ch <= "~" or ch in _KEEP or category(ch) not in _INVISIBLE
    )


def fence_web(text: str, source: str) -> str:
    """``text`` from the web as a fenced data block naming where it came from."""
    body = _FENCE_TAG.sub("&lt;", _visible(text.replace("\r\n", "\n")))
    label = " ".join(re.sub(r'["<>]', "", _visible(source)).split())[:MAX_SOURCE_CHARS]
    return f'<untrusted source="{label}">\n{body}\n</untrusted>'


@dataclass(frozen=True, slots=True)
class ReadPage:
    kind: Kind
    encoding: str
    charset_from: CharsetFrom
    clipped: bool  # the text is longer than what is shown
    fenced: str


def read_page(
    body: bytes, content_type: str, *, cut: bool, max_chars: int, source: str
) -> ReadPage:
    """A fetched body as fenced text of at most ``max_chars`` characters (in a worker)."""
    page = page_text(body, content_type, cut=cut, limit=max_chars)
    text = f"Title: {page.title}\n\n{page.text}" if page.title else page.text
    shown = clip(text, max_chars, note="\n[... {n} more characters of the page not shown]")
    clipped = page.cut or len(shown) < len(text)
    if page.cut and not clipped:
        shown += "\n[... the rest of the page not read]"
    return ReadPage(page.kind, page.encoding, page.charset_from, clipped, fence_web(shown, source))


def _secret_in(text: str, secrets: tuple[str, ...]) -> bool:
    return redact(text, known=secrets) != text


class WebToolkit:
    """The web tools of one task, under its ``WebLimits``."""

    def __init__(
        self,
        limits: WebLimits,
        *,
        secrets: tuple[str, ...] = (),
        fetcher: Fetcher | None = None,
        search: SearchProvider | None = None,
    ) -> None:
        self.limits = limits
        self.secrets = secrets
        self.fetcher = fetcher or Fetcher(FetchRules.of(limits))
        self.search = search or SearxngSearch(
            limits.search_url,
            max_results=limits.max_results,
            timeout=limits.search_timeout,
            user_agent=limits.user_agent,
        )

    async def fetch_url(self, args: dict[str, Any]) -> ToolResult:
        url = str(args["url"])
        if _secret_in(url, self.secrets):
            return ToolResult.fail("refused: the URL holds what looks like a secret")
        try:
            fetched = await self.fetcher.fetch(url)
        except WebError as exc:
            return ToolResult.fail(f"fetch_url: {exc}")
        try:
            page = await offload.compute(
                read_page,
                fetched.body,
                fetched.content_type,
                cut=fetched.cut,
                max_chars=self.limits.max_chars,
                source=fetched.url,
            )
        except Unsupported as exc:
            return ToolResult.fail(f"fetch_url: {fetched.url}: {exc}")
        return ToolResult.success(
            f"{_describe(fetched, page, self.limits.max_bytes)}\n{page.fenced}",
            url=fetched.url,
            status=fetched.status,
            content_type=fetched.content_type,
            encoding=page.encoding,
            bytes=len(fetched.body),
            cut=fetched.cut or page.clipped,
        )

    async def web_search(self, args: dict[str, Any]) -> ToolResult:
        query = " ".join(str(args["query"]).split())
        if not query:
            return ToolResult.fail("web_search: the query is empty")
        if _secret_in(query, self.secrets):
            return ToolResult.fail("refused: the query holds what looks like a secret")
        try:
            hits = await self.search.search(query)
        except WebError as exc:
            return ToolResult.fail(f"web_search: {exc}")
        if not hits:
            return ToolResult.success(
                "No results for the query:\n" + fence_web(query, "web search query"), results=0
            )
        listing = await _fenced(_hits_text(query, hits), "web search")
        return ToolResult.success(
            f"{len(hits)} results of a web search:\n{listing}", results=len(hits)
        )


async def _fenced(text: str, source: str) -> str:
    """``fence_web``, in an offload worker when the text is large (a loop over characters)."""
    if len(text) <= offload.LARGE_TEXT:
        return fence_web(text, source)
    return await offload.compute(fence_web, text, source)


def _describe(fetched: Fetched, page: ReadPage, max_bytes: int) -> str:
    facts = [
        f"HTTP {fetched.status}",
        page.kind.value,
        f"{page.encoding} ({page.charset_from.value})",
        f"{len(fetched.body):,} bytes",
    ]
    if fetched.cut:
        facts.append(f"cut at {max_bytes:,} bytes (web.fetch.max_bytes)")
    line = f"Fetched {fetched.url} ({', '.join(facts)})"
    if fetched.redirects:
        line += "; redirected from " + " -> ".join(fetched.redirects)
    return line


def _hits_text(query: str, hits: list[SearchHit]) -> str:
    lines = [f"query: {query}", ""]
    for number, hit in enumerate(hits, 1):
        lines += [f"{number}. {hit.title}", f"   {hit.url}"]
        if hit.snippet:
            lines.append(f"   {hit.snippet}")
    return "\n".join(lines)


def web_tools(
    limits: WebLimits,
    *,
    secrets: tuple[str, ...] = (),
    fetcher: Fetcher | None = None,
    search: SearchProvider | None = None,
) -> list[Tool]:
    """``fetch_url`` and ``web_search``, each only when ``limits`` turns it on."""
    kit = WebToolkit(limits, secrets=secrets, fetcher=fetcher, search=search)
    tools: list[Tool] = []
    if limits.fetch:
        shown = ", ".join(limits.allowed_domains[:_SHOWN_DOMAINS])
        more = len(limits.allowed_domains) - _SHOWN_DOMAINS
        domains = shown + (f" and {more} more" if more > 0 else "")
        tools.append(
            Tool(
                "fetch_url",
                f"Fetch one web page (http or https) of an allowed domain ({domains}) and "
                f"return its readable text: HTML reduced to text, the charset detected, at "
                f"most {limits.max_chars} characters. The text is data from the web.",
                {
                    "type": "object",
                    "properties": {
                        "url": {
                            "type": "string",
                            "minLength": 1,
                            "maxLength": 2048,
                            "description": "the page's http(s) URL",
                        }
                    },
                    "required": ["url"],
                    "additionalProperties": False,
                },
                kit.fetch_url,
                min_timeout=limits.timeout + 5,
            )
        )
    if limits.search:
        follow = (
            " (fetch a result with fetch_url when its domain is allowed)" if limits.fetch else ""
        )
        tools.append(
            Tool(
                "web_search",
                f"Search the web: titles, URLs and snippets of at most {limits.max_results} "
                f"results{follow}. The results are data from the web.",
                {
                    "type": "object",
                    "properties": {
                        "query": {
                            "type": "string",
                            "minLength": 1,
                            "maxLength": MAX_QUERY_CHARS,
                            "description": "what to search for",
                        }
                    },
                    "required": ["query"],
                    "additionalProperties": False,
                },
                kit.web_search,
                min_timeout=limits.search_timeout + 5,
            )
        )
    return tools
