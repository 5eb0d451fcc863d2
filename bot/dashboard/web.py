"""What every dashboard page uses: the templates, the login check, reading a posted form,
the same-origin check of a POST, the redirect to the login form."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import jinja2
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse

from bot.dashboard import session

MAX_FORM_BYTES = 4096
REPORT_CHARS = 60_000
ICONS = {"done": "✔", "failed": "✘", "running": "…", "pending": "○"}  # a plan item's status

templates = jinja2.Environment(
    loader=jinja2.PackageLoader("bot.dashboard", "templates"),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
)


def logged_in(token: str, request: Request) -> bool:
    return session.valid(token, request.cookies.get(session.COOKIE), time.time())


def allowed(token: str, request: Request) -> bool:
    """A POST the dashboard acts on: logged in, and not a form from another site."""
    return logged_in(token, request) and same_origin(request)


def page(token: str, name: str, request: Request, status: int = 200, **values: Any) -> HTMLResponse:
    html = templates.get_template(name).render(
        root="",
        logged_in=logged_in(token, request),
        refresh=values.pop("refresh", 0),
        live=values.pop("live", ""),
        version=values.pop("version", ""),
        **values,
    )
    return HTMLResponse(html, status_code=status, headers={"Cache-Control": "no-store"})


def to_login() -> RedirectResponse:
    return RedirectResponse("/dashboard/login", status_code=303)


async def form(
    request: Request, limit: int = MAX_FORM_BYTES, fields: int = 10
) -> dict[str, str] | None:
    """The posted form's fields (the first value of each); None when over ``limit`` bytes."""
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            return None
    try:
        parsed = parse_qs(body.decode("utf-8", "replace"), max_num_fields=fields)
    except ValueError:  # more fields than any of the forms has
        return None
    return {k: v[0] for k, v in parsed.items()}


def same_origin(request: Request) -> bool:
    origin = request.headers.get("origin")
    if origin is None or origin == "null":
        return origin is None  # no Origin: not a browser's cross-site form
    return urlsplit(origin).netloc == request.headers.get("host", "")


def read_report(path: Path, limit: int = REPORT_CHARS) -> str:
    """A run report as a page shows it: cut at ``limit`` characters ("" when unreadable;
    a symbolic link is not followed)."""
    try:
        if path.is_symlink():
            return ""
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return text if len(text) <= limit else text[:limit] + "\n… (cut; the API serves it whole)"
