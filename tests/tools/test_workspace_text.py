"""Decoding text of unknown encoding without mangling it, and capping long text."""

from __future__ import annotations

import codecs

import pytest

from bot.sandbox.output import OutputCapture
from bot.sandbox.textfiles import decode_output, decode_text, encode_text, looks_binary

JAPANESE = (
    "# 設定ファイル\n"
    "# これは日本語のコメントです。文字コードはシフトJISです。\n"
    "name = '山田太郎'\n"
    "message = 'こんにちは、世界'\n"
)
FRENCH = (
    "# Le garçon a mangé une pomme à la cantine.\n"
    "# C'était très bon, déjà fini! Crème brûlée, naïve façade, résumé.\n"
    "price = '5 EUR'\n"
)
GERMAN = "Größe = 'Übermaß'\nschön = True\n"


def test_utf8_is_read_as_utf8() -> None:
    decoded = decode_text("naïve — 日本\n".encode())
    assert decoded is not None
    assert (decoded.text, decoded.encoding, decoded.exact) == ("naïve — 日本\n", "utf_8", True)


@pytest.mark.parametrize(
    ("data", "encoding"),
    [
        (codecs.BOM_UTF8 + "héllo\n".encode(), "utf_8_sig"),
        ("héllo\n".encode("utf-16"), "utf_16"),
        ("héllo\n".encode("utf-32"), "utf_32"),
    ],
)
def test_byte_order_marks_decide_the_encoding_and_round_trip(data: bytes, encoding: str) -> None:
    decoded = decode_text(data)
    assert decoded is not None
    assert decoded.text == "héllo\n"
    assert decoded.encoding == encoding
    assert encode_text(decoded.text, decoded.encoding) == data
    assert not looks_binary(data)


@pytest.mark.parametrize(
    ("text", "codec", "expected"),
    [(JAPANESE, "shift_jis", {"cp932", "shift_jis"}), (JAPANESE, "euc_jp", {"euc_jp"}),
     (FRENCH, "latin-1", {"cp1252", "latin_1"}), (GERMAN, "latin-1", {"cp1252", "latin_1"})],
)  # fmt: skip
def test_legacy_encodings_are_detected_without_mangling(
    text: str, codec: str, expected: set[str]
) -> None:
    data = text.encode(codec)
    decoded = decode_text(data)
    assert decoded is not None
    assert decoded.text == text
    assert decoded.encoding in expected
    assert decoded.exact
    assert encode_text(decoded.text, decoded.encoding) == data


def test_binary_data_is_not_text() -> None:
    data = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00"
    assert looks_binary(data)
    assert decode_text(data) is None


def test_decode_output_tolerates_a_character_cut_at_the_edges() -> None:
    data = "日本語のテキスト".encode()
    assert decode_output(data[1:-1]).strip("\ufffd") == "本語のテキス"
    assert decode_output(JAPANESE.encode("shift_jis")) == JAPANESE


def test_output_capture_keeps_head_and_tail_with_bounded_memory() -> None:
    capture = OutputCapture(1000)
    for index in range(1000):
        capture.feed(f"line {index:04d}\n".encode())
    text = capture.text()
    assert capture.total == 10_000
    assert text.startswith("line 0000\n")
    assert text.endswith("line 0999\n")
    assert "[... 9000 bytes of output omitted ...]" in text
    assert len(text) < 1100
    small = OutputCapture(1000)
    small.feed(b"all of it\n")
    assert small.text() == "all of it\n"
