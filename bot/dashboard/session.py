"""The dashboard's login cookie: signed, expiring, tied to the API token. Pure.

The cookie holds an expiry time and an HMAC of it under a key derived from the token, so
changing ``BOT_API_TOKEN`` logs everyone out, and nothing but the bot can make one.
"""

from __future__ import annotations

import hashlib
import hmac

COOKIE = "bot_dashboard"
LIFETIME = 12 * 3600  # seconds a login lasts


def _key(token: str) -> bytes:
    return hashlib.sha256(b"bot dashboard session\0" + token.encode()).digest()


def _signature(token: str, expires: int) -> str:
    return hmac.new(_key(token), str(expires).encode(), hashlib.sha256).hexdigest()


def issue(token: str, now: float) -> str:
    expires = int(now) + LIFETIME
    return f"{expires}.{_signature(token, expires)}"


def valid(token: str, cookie: str | None, now: float) -> bool:
    if not cookie or cookie.count(".") != 1:
        return False
    expires_text, signature = cookie.split(".")
    if not expires_text.isdigit() or len(expires_text) > 12:
        return False
    expires = int(expires_text)
    return expires > now and hmac.compare_digest(signature, _signature(token, expires))


def token_matches(token: str, given: str) -> bool:
    return hmac.compare_digest(given.encode(), token.encode())
