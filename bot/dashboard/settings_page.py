"""The dashboard's settings page (``/dashboard/settings``): the effective settings, secrets
masked, grouped by section with the descriptions the configuration file's comments give
and the keys only the file on the host may change marked read-only; the file's text to
edit, "validate" (``POST /api/config/validate``) and "save" (``PUT /api/config``: its
hash as If-Match, written atomically, reloaded), each the API's own operation; the
model's health (``/health/ai``) with the models its endpoint serves and a "test"."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from bot.api.models import MAX_CONFIG_CHARS, ConfigPut, ConfigText, NoParameters
from bot.api.operations import Refusal
from bot.api.routes import TaskApi
from bot.config import masked
from bot.dashboard import web
from bot.dashboard.settings_view import descriptions, host_only, sections, with_values

REFUSED = Response("refused", status_code=403)
FIELD = "set:"  # the form field of a key: set:<dotted key>
MAX_FIELDS = 2000


class SettingsPages:
    """The settings page over ``api`` (its ``config`` operations and the model's health)."""

    def __init__(self, api: TaskApi, token: str) -> None:
        self.api = api
        self.token = token

    async def _file(self) -> dict[str, Any] | None:
        try:
            shown = await self.api.config.show_config(NoParameters())
        except Refusal:
            return None  # started without a configuration file
        return shown.model_dump()

    async def _render(
        self, request: Request, status: int = 200, *, text: str | None = None, **result: Any
    ) -> Response:
        file = await self._file()
        described = descriptions(file["text"] or "") if file else {}
        health = (await self.api.llm_health()).to_dict()
        extensions = (await self.api.list_extensions(NoParameters())).extensions
        grouped = sections(masked(self.api.settings()), described)
        editable = [name for name, rows in grouped if any(not r.host_only for r in rows)]
        opened = getattr(request.state, "opened", None) or editable[:1]
        values = {
            "outcome": "", "problems": [], "restart_needed": [], "refused": [],
            "reload": [], "tested": False, **result,
        }  # fmt: skip
        return web.page(
            self.token, "settings.html", request, status, title="Settings",
            file=file, text=text if text is not None else (file or {}).get("text") or "",
            sections=grouped, health=health, opened=opened,
            extensions=[e.model_dump() for e in extensions],
            **values,
        )  # fmt: skip

    async def show(self, request: Request) -> Response:
        if not web.logged_in(self.token, request):
            return web.to_login()
        return await self._render(request)

    async def post(self, request: Request) -> Response:
        if not web.allowed(self.token, request):
            return REFUSED
        fields = await web.form(request, limit=4 * MAX_CONFIG_CHARS, fields=MAX_FIELDS)
        if fields is None:
            return await self._render(request, 413, outcome="The form is too large.")
        text = fields.get("text", "")
        action = fields.get("do", "")
        if action in ("validate-keys", "save-keys"):
            built = await self._changed(request, fields)
            if isinstance(built, Response):
                return built
            text, action = built, action.removesuffix("-keys")
        match action:
            case "validate":
                return await self._validate(request, text)
            case "save":
                return await self._save(request, text, fields.get("hash", ""))
            case "test":
                return await self._render(request, tested=True)
            case _:
                return await self._render(request, 400, outcome="Not a button of this page.")

    async def _changed(self, request: Request, fields: dict[str, str]) -> str | Response:
        """The file's text with the keys the form changed written in it (or the page
        saying why it cannot be)."""
        file = await self._file()
        if file is None or file["text"] is None:
            return Response("the file's text cannot be changed here", status_code=409)
        shown = {row.key: row.value for _, rows in sections(masked(self.api.settings()), {})
                 for row in rows}  # fmt: skip
        changes = {
            key: value.strip()
            for name, value in fields.items()
            if name.startswith(FIELD) and (key := name.removeprefix(FIELD)) in shown
            and not host_only(key) and value.strip() != shown[key]
        }  # fmt: skip
        request.state.opened = sorted({key.split(".")[0] for key in changes})
        text, problems = with_values(str(file["text"]), changes)
        if problems:
            return await self._render(
                request, 422, outcome="Not valid.",
                problems=[{"key": k, "message": m} for k, m in problems],
            )  # fmt: skip
        return text

    async def _validate(self, request: Request, text: str) -> Response:
        try:
            check = await self.api.config.validate_config(ConfigText(text=text))
        except ValueError:
            return await self._render(request, 413, text=text, outcome="The text is too long.")
        return await self._render(
            request, 200 if check.valid else 422, text=text,
            outcome="Valid." if check.valid else "Not valid.",
            problems=[p.model_dump() for p in check.problems],
            restart_needed=check.restart_needed,
            refused=[p.model_dump() for p in check.refused_by_put],
        )  # fmt: skip

    async def _save(self, request: Request, text: str, file_hash: str) -> Response:
        try:
            saved = await self.api.config.replace_config(ConfigPut(text=text, if_match=file_hash))
        except Refusal as exc:
            problems = exc.extra.get("problems", []) if exc.extra else []
            key = "refused" if exc.status == 403 else "problems"
            return await self._render(
                request, exc.status, text=text, outcome=f"Not saved: {exc.detail}",
                **{key: problems},
            )  # fmt: skip
        except ValueError:
            return await self._render(request, 413, text=text, outcome="The text is too long.")
        return await self._render(
            request, outcome=f"Saved and reloaded ({saved.path}; the previous file is kept"
            f" as {saved.previous}).", reload=saved.reload,
        )  # fmt: skip
