"""Text of unknown encoding: decode without mangling, write back in the same encoding.

Pure functions, no I/O. UTF-8 (with or without a byte order mark) and the UTF-16/32
byte order marks are recognised first; anything else goes to charset-normalizer.
Its best guess for short single-byte text is often a rare code page (cp1250 for a
Latin-1 file), so among the candidates that read about as cleanly as the best one
we prefer the encodings source files are commonly written in.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass

import charset_normalizer

_BOMS: tuple[tuple[bytes, str], ...] = (
    (codecs.BOM_UTF32_LE, "utf_32"),
    (codecs.BOM_UTF32_BE, "utf_32"),
    (codecs.BOM_UTF8, "utf_8_sig"),
    (codecs.BOM_UTF16_LE, "utf_16"),
    (codecs.BOM_UTF16_BE, "utf_16"),
)

# Most likely first: East Asian multi-byte encodings are strict enough that a clean
# decode is strong evidence; then the common Western and Cyrillic code pages.
_PREFERRED: tuple[str, ...] = (
    "cp932",
    "shift_jis",
    "euc_jp",
    "iso2022_jp",
    "gb18030",
    "gbk",
    "gb2312",
    "big5",
    "euc_kr",
    "cp949",
    "cp1252",
    "latin_1",
    "iso8859_15",
    "cp1251",
    "koi8_r",
    "cp1250",
)
_CHAOS_TOLERANCE = 0.1
_SNIFF_BYTES = 8192


@dataclass(frozen=True, slots=True)
class DecodedText:
    """A decoded file. ``exact`` is False when re-encoding would not give the same bytes
    (some code pages map two byte sequences to one character): such files are not
    rewritten, since an edit would silently change other lines."""

    text: str
    encoding: str
    exact: bool = True


def looks_binary(data: bytes) -> bool:
    """NUL bytes in the first 8 KiB of data without a byte order mark (UTF-16/32 has them)."""
    head = data[:_SNIFF_BYTES]
    return not any(head.startswith(bom) for bom, _ in _BOMS) and b"\0" in head


def decode_text(data: bytes) -> DecodedText | None:
    """The text of ``data``, or None when it is binary (or no encoding fits)."""
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            return _decoded(data, encoding)
    if looks_binary(data):
        return None
    try:
        return DecodedText(data.decode("utf-8"), "utf_8")
    except UnicodeDecodeError:
        pass
    guessed = _guess_encoding(data)
    return None if guessed is None else _decoded(data, guessed)


def _decoded(data: bytes, encoding: str) -> DecodedText | None:
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError:
        return None
    return DecodedText(text, encoding, exact=text.encode(encoding) == data)


def _guess_encoding(data: bytes) -> str | None:
    results = list(charset_normalizer.from_bytes(data))
    if not results:
        return None
    best = min(r.chaos for r in results)
    close = [r for r in results if r.chaos <= best + _CHAOS_TOLERANCE]
    possible = {name for r in close for name in r.could_be_from_charset}
    for name in _PREFERRED:
        if name in possible:
            return name
    return str(close[0].encoding)


def encode_text(text: str, encoding: str) -> bytes:
    """``text`` in ``encoding``; raises ``UnicodeEncodeError`` when it does not fit."""
    return text.encode(encoding)


def decode_output(data: bytes) -> str:
    """Command output: UTF-8 when it is (a character cut at either end of a captured
    chunk is tolerated), else the detected encoding; never an exception."""
    if _is_utf8_apart_from_edges(data):
        return data.decode("utf-8", errors="replace")
    decoded = decode_text(data)
    return data.decode("utf-8", errors="replace") if decoded is None else decoded.text


def _is_utf8_apart_from_edges(data: bytes) -> bool:
    for start in range(4):
        for end in range(4):
            try:
                data[start : len(data) - end].decode("utf-8")
            except UnicodeDecodeError:
                continue
            return True
    return False
