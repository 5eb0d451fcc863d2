"""A webhook delivery's trace and span ids, derived from its key.

The web process records a delivery's span without ids (``bot.tracing.deliveries``): its
export process derives them from the delivery's key, the one the receiver de-duplicates
by and keeps in the inbox row, and the worker derives the same from the row to continue
the trace (``bot.tracing.spans.dispatch_span``). Nothing about the trace is stored with
the row, and nothing is made or formatted on the ack path.

- A delivery that made an inbox row (answered ``queued``): the trace id and span id are
  the BLAKE2b digest of its key (16 + 8 bytes), what the worker finds again.
- Any other delivery (a duplicate, a refusal): the trace id is still its key's (a
  redelivery shows in the trace of the delivery it repeats), the span id is salted with
  the span's start time and a salt of the export process (random, then counted up per
  span), so two spans never share one; a delivery without a key (its signature refused)
  gets both ids salted.
- Sampling is the SDK's ``TraceIdRatioBased`` rule on the derived trace id (its low 64
  bits against the ratio), so the web process and the worker decide alike.
"""

from __future__ import annotations

import hashlib

QUEUED = "queued"  # the receiver's answer when a delivery made an inbox row
SIZE = 24  # a trace id (16 bytes) and a span id (8)
_MASK = (1 << 64) - 1
_PERSON = b"bot-delivery"  # BLAKE2b's personalisation: these ids and no other hash
_blake2b = hashlib.blake2b
_BASE = _blake2b(digest_size=SIZE, person=_PERSON)  # copied: cheaper than the arguments


def bound(ratio: float) -> int:
    """The SDK's ``TraceIdRatioBased`` bound for ``ratio``."""
    return round(ratio * (_MASK + 1))


def sampled(trace: bytes, limit: int) -> bool:
    """Whether a trace id (16 bytes) is kept at the ``bound`` ``limit``."""
    return limit > _MASK or int.from_bytes(trace[8:16], "big") < limit


def derived(key: bytes) -> bytes:
    """A delivery's trace id and span id (16 + 8 bytes) from its key. The chance of an
    all-zero id (invalid in W3C trace context) is 2**-64 for the span id: left alone."""
    made = _BASE.copy()
    made.update(key)
    return made.digest()


def salted(key: bytes, start_ns: int, salt: int) -> bytes:
    """Ids (16 + 8 bytes) for a span that made no inbox row: its key's trace id (both
    salted when there is no key), a span id of its own from its start time and ``salt``
    (64 bits: the process that derives them starts at a random number and counts up)."""
    salts = (start_ns & _MASK).to_bytes(8, "little") + (salt & _MASK).to_bytes(8, "little")
    own = _blake2b(key, digest_size=SIZE, person=_PERSON, salt=salts).digest()
    return (derived(key)[:16] + own[16:]) if key else own


def traceparent(key: str, ratio: float) -> str:
    """The W3C ``traceparent`` of the span of the delivery that made the inbox row with
    ``key``: the parent of the worker's span for that row."""
    ids = derived(key.encode("utf-8"))
    flags = "01" if sampled(ids, bound(ratio)) else "00"
    return f"00-{ids[:16].hex()}-{ids[16:].hex()}-{flags}"
