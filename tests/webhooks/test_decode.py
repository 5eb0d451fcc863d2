"""Decoding webhook bodies into payload structs: errors name the key path."""

from __future__ import annotations

import msgspec
import pytest

from bot.webhooks.decode import convert, decode, decoder, explain
from bot.webhooks.errors import PayloadError


class Inner(msgspec.Struct):
    number: int
    title: str | None = None


class Outer(msgspec.Struct):
    inner: Inner
    items: list[Inner] | None = None
    flag: bool | None = None


DECODER = decoder(Outer)


def test_a_well_formed_body_decodes_only_the_declared_fields() -> None:
    body = b'{"inner": {"number": 3, "unknown": [1, 2]}, "extra": {"deep": true}}'
    assert decode(DECODER, body) == Outer(inner=Inner(number=3))


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b'{"inner": {}}', "payload.inner.number: missing"),
        (b"{}", "payload.inner: missing"),
        (b'{"inner": null}', "payload.inner: missing"),
        (b'{"inner": {"number": "3"}}', "payload.inner.number: expected an integer, got str"),
        (b'{"inner": {"number": true}}', "payload.inner.number: expected an integer, got bool"),
        (b'{"inner":{"title":2,"number":1}}', "payload.inner.title: expected a string, got int"),
        (b'{"inner": {"number": 1}, "items": {}}', "payload.items: expected an array, got object"),
        (b'{"inner": {"number": 1},"items":[1]}', "payload.items[0]: expected an object, got int"),
        (b'{"inner": {"number": 1}, "flag": "y"}', "payload.flag: expected a boolean, got str"),
        (b"[]", "payload: expected an object, got array"),
    ],
)
def test_a_malformed_body_names_the_key(body: bytes, message: str) -> None:
    with pytest.raises(PayloadError) as raised:
        decode(DECODER, body)
    assert str(raised.value) == message


@pytest.mark.parametrize("body", [b"", b"{", b"not json", b'{"inner": {"number": 1}'])
def test_a_body_that_is_not_json_says_so(body: bytes) -> None:
    with pytest.raises(PayloadError, match=r"^the body is not JSON: "):
        decode(DECODER, body)


def test_convert_names_the_part_it_was_given() -> None:
    assert convert({"number": 2}, Inner, "payload.sender") == Inner(number=2)
    with pytest.raises(PayloadError, match=r"^payload\.sender: expected an object, got str$"):
        convert("x", Inner, "payload.sender")


def test_an_unrecognised_message_is_kept_whole() -> None:
    assert explain("Invalid enum value 'x' - at `$.kind`") == (
        "payload: Invalid enum value 'x' - at `$.kind`"
    )
