"""A fetched body as text: its kind, its character encoding, its readable text. Pure.

The kinds ``fetch_url`` reads: HTML (``text/html``, ``application/xhtml+xml``), reduced
to its readable text (``bot/tools/web_html.py``); other ``text/*``; JSON
(``application/json``, ``*+json``). Anything else is refused by its type; a body that
names no type is read as text unless it looks binary.

The encoding, first that applies (as browsers choose, WHATWG "encoding sniffing"): a byte
order mark; the ``charset`` of the Content-Type header; for HTML, a ``<meta charset>`` or
``<meta http-equiv="Content-Type">`` in the first 4 KiB; UTF-8 when the body is valid
UTF-8; else detection (charset-normalizer, through ``bot/sandbox/textfiles.py``, on the
first 64 KiB). A label names a text encoding or is ignored (``base64``, ``rot13``,
``unicode_escape``... are not a page's charset); ``Shift_JIS`` reads as Windows-31J and
``ISO-8859-1`` as Windows-1252, as browsers read them. Undecodable bytes become U+FFFD.

``page_text`` is the one entry point; it runs in an offload worker (``bot/offload.py``).
"""

from __future__ import annotations

import codecs
import enum
import re
from dataclasses import dataclass

from bot.sandbox.textfiles import decode_text, looks_binary
from bot.tools.web_html import html_text

META_BYTES = 4096
DETECT_BYTES = 65536

_BOMS = (
    (codecs.BOM_UTF8, "utf_8"),
    (codecs.BOM_UTF16_LE, "utf_16"),
    (codecs.BOM_UTF16_BE, "utf_16"),
)
_META = re.compile(
    rb"""<meta[^>]{0,1024}?charset\s*=\s*["']?\s*([A-Za-z0-9_.:()-]{1,40})""", re.IGNORECASE
)
# Labels read as browsers read them (WHATWG Encoding), then Python's own names.
_ALIASES = {
    "shift_jis": "cp932",
    "shift-jis": "cp932",
    "sjis": "cp932",
    "x-sjis": "cp932",
    "ms_kanji": "cp932",
    "csshiftjis": "cp932",
    "windows-31j": "cp932",
    "x-euc-jp": "euc_jp",
    "iso-8859-1": "cp1252",
    "iso8859-1": "cp1252",
    "latin1": "cp1252",
    "us-ascii": "cp1252",
    "ascii": "cp1252",
    "gb2312": "gb18030",
    "gbk": "gb18030",
    "x-gbk": "gb18030",
    "unicode-1-1-utf-8": "utf_8",
}
# Text codecs that no page is written in: they turn escapes into characters.
_NOT_A_CHARSET = frozenset(
    {"idna", "punycode", "unicode-escape", "raw-unicode-escape", "utf-7", "undefined"}
)


class Kind(enum.Enum):
    HTML = "html"
    TEXT = "text"
    JSON = "json"


class CharsetFrom(enum.Enum):
    BOM = "byte order mark"
    HEADER = "Content-Type header"
    META = "meta tag"
    UTF8 = "valid UTF-8"
    DETECTED = "detected"
    FALLBACK = "undetected, read as UTF-8"


@dataclass(frozen=True, slots=True)
class PageText:
    kind: Kind
    text: str
    encoding: str
    charset_from: CharsetFrom
    title: str = ""
    cut: bool = False  # the text was read only in part (``limit``)


class Unsupported(ValueError):
    """The body is of a type ``fetch_url`` does not read; the message names it."""


def media_type(content_type: str) -> tuple[str, str | None]:
    """``text/html; charset="Shift_JIS"`` -> (``text/html``, ``Shift_JIS``)."""
    kind, _, rest = content_type.partition(";")
    charset = None
    for param in rest.split(";"):
        key, _, value = param.partition("=")
        if key.strip().lower() == "charset":
            charset = value.strip().strip("\"'").strip() or None
    return kind.strip().lower(), charset


def content_kind(mtype: str, body: bytes) -> Kind:
    """The kind of a body of media type ``mtype`` ("" when the server named none)."""
    if mtype in ("text/html", "application/xhtml+xml"):
        return Kind.HTML
    if mtype in ("application/json", "text/json") or mtype.endswith("+json"):
        return Kind.JSON
    if mtype.startswith("text/"):
        return Kind.TEXT
    if not mtype and not looks_binary(body):
        head = body[:512].lstrip().lower()
        return Kind.HTML if head.startswith((b"<!doctype html", b"<html")) else Kind.TEXT
    raise Unsupported(f"a {mtype or 'binary'} body is not text, HTML or JSON")


def text_codec(label: str | None) -> str | None:
    """The Python codec for a charset label, or None for an unknown or unfit label."""
    if not label:
        return None
    name = label.strip().lower()
    name = _ALIASES.get(name, name)
    try:
        codec = codecs.lookup(name)
    except LookupError:
        return None
    if not codec._is_text_encoding or codec.name in _NOT_A_CHARSET:
        return None
    return codec.name


def meta_charset(body: bytes) -> str | None:
    """The charset a ``<meta>`` tag names in the first ``META_BYTES`` of an HTML body."""
    for found in _META.finditer(body[:META_BYTES]):
        codec = text_codec(found.group(1).decode("ascii"))
        if codec is not None:
            return codec
    return None


def _utf8(body: bytes, cut: bool) -> bool:
    """Valid UTF-8 (a character cut off at the end of a cut body forgiven)."""
    for trim in range(4 if cut else 1):
        try:
            body[: len(body) - trim].decode("utf-8")
        except UnicodeDecodeError:
            continue
        return True
    return False


def choose_encoding(
    body: bytes, kind: Kind, header: str | None, *, cut: bool
) -> tuple[str, CharsetFrom]:
    """The encoding to read ``body`` with, and what said so (module docstring)."""
    for bom, name in _BOMS:
        if body.startswith(bom):
            return name, CharsetFrom.BOM
    declared = text_codec(header)
    if declared is not None:
        return declared, CharsetFrom.HEADER
    if kind is Kind.HTML:
        meta = meta_charset(body)
        if meta is not None:
            return meta, CharsetFrom.META
    if _utf8(body, cut):
        return "utf_8", CharsetFrom.UTF8
    sample = body[:DETECT_BYTES]
    if cut or len(body) > DETECT_BYTES:  # a character cut at the sample's end is no clue
        sample = sample[: max(len(sample) - 3, 1)]
    guessed = decode_text(sample)
    if guessed is not None:
        return guessed.encoding, CharsetFrom.DETECTED
    return "utf_8", CharsetFrom.FALLBACK


def page_text(body: bytes, content_type: str, *, cut: bool, limit: int | None = None) -> PageText:
    """The readable text of a fetched body. Raises ``Unsupported`` for a body that is
    not text. ``limit``: the characters the caller keeps (HTML is read a few times that)."""
    mtype, header = media_type(content_type)
    kind = content_kind(mtype, body)
    encoding, source = choose_encoding(body, kind, header, cut=cut)
    text = body.decode(encoding, errors="replace")
    if text.startswith("\ufeff"):
        text = text[1:]
    if kind is not Kind.HTML:
        return PageText(kind, text, encoding, source)
    page = html_text(text, limit=limit)
    return PageText(kind, page.text, encoding, source, title=page.title, cut=page.cut)
