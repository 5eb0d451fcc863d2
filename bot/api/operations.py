"""The API's routes as typed operations, and the OpenAPI description read from them.

An ``Operation`` names its method and path, the endpoint, the model of its path and query
parameters, the model of its answer (or the media types of another answer) and the
refusals it may answer with. ``OperationRoute`` is a Starlette ``Route`` that serves one:
the bearer token first (``Guard``), then the parameters validated into their model (422
with the reasons otherwise), then the endpoint, whose answer is the model's JSON.
``describe`` builds the OpenAPI document from the routes themselves, so what is served
and what is described cannot part.
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from bot.api.models import InvalidParameters, Problem
from bot.throttle import FailureThrottle

P = TypeVar("P", bound=BaseModel)
Answer = BaseModel | Response
REFS = "#/components/schemas/{model}"
_PATH_PARAM = re.compile(r"{(\w+)(?::\w+)?}")


class Refusal(Exception):
    """An endpoint's refusal: ``status`` with a ``Problem`` body saying why."""

    def __init__(self, status: int, detail: str, headers: Mapping[str, str] | None = None):
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.headers = dict(headers or {})


def problem(status: int, detail: str, headers: Mapping[str, str] | None = None) -> Response:
    return JSONResponse({"detail": detail}, status_code=status, headers=headers)


async def http_problem(request: Request, exc: Exception) -> Response:
    """The router's own refusals (no such path, another method) as a ``Problem``."""
    assert isinstance(exc, HTTPException)
    return problem(exc.status_code, exc.detail, exc.headers)


@dataclass(frozen=True, slots=True)
class Operation(Generic[P]):
    method: str
    path: str
    call: Callable[[P], Awaitable[Answer]]
    params: type[P]
    answer: type[BaseModel] | None = None  # the JSON body of a 200
    content: Mapping[str, Any] = field(default_factory=dict)  # or: media type -> schema
    refusals: Mapping[int, str] = field(default_factory=dict)  # status -> when

    @property
    def name(self) -> str:
        return self.call.__name__


GUARD_REFUSALS = {
    401: "no or wrong token",
    429: "too many wrong tokens from this client lately (see Retry-After)",
}


@dataclass(frozen=True, slots=True)
class Guard:
    """The bearer token every operation requires, compared in constant time; a client
    that sent too many wrong ones lately is refused (429) whatever it sends
    (``GUARD_REFUSALS``)."""

    token: str
    throttle: FailureThrottle

    def refuse(self, request: Request) -> Response | None:
        """None when ``request`` carries the token; the refusal otherwise. On the event
        loop only: the throttle is not thread-safe."""
        client = request.client.host if request.client is not None else None
        wait = self.throttle.retry_after(client)
        if wait is not None:
            detail = "too many wrong tokens from this address; try again later"
            return problem(429, detail, {"Retry-After": str(wait)})
        given = request.headers.get("authorization", "").encode()
        if not hmac.compare_digest(given, f"Bearer {self.token}".encode()):
            self.throttle.failed(client)
            detail = "a valid bearer token is required"
            return problem(401, detail, {"WWW-Authenticate": "Bearer"})
        return None


class OperationRoute(Route, Generic[P]):
    """One operation served: token, parameters, endpoint, answer."""

    def __init__(self, operation: Operation[P], guard: Guard) -> None:
        self.operation = operation
        self.guard = guard
        super().__init__(
            operation.path, self.respond, methods=[operation.method], name=operation.name
        )

    async def respond(self, request: Request) -> Response:
        refused = self.guard.refuse(request)
        if refused is not None:
            return refused
        given = {**request.query_params, **request.path_params}
        try:
            params = self.operation.params.model_validate(given)
        except ValidationError as exc:
            return _invalid(exc, request.path_params)
        try:
            answer = await self.operation.call(params)
        except Refusal as exc:
            return problem(exc.status, exc.detail, exc.headers)
        if isinstance(answer, Response):
            return answer
        return Response(answer.model_dump_json(), media_type="application/json")


def _invalid(exc: ValidationError, path_params: Mapping[str, Any]) -> Response:
    problems = [
        {
            "loc": ["path" if error["loc"][0] in path_params else "query", *error["loc"]],
            "msg": error["msg"],
            "type": error["type"],
        }
        for error in exc.errors(include_url=False)
    ]
    return JSONResponse({"detail": problems}, status_code=422)


# --- the description -------------------------------------------------------------------------


def describe(routes: Sequence[BaseRoute], *, title: str, version: str) -> dict[str, Any]:
    """The OpenAPI 3.1 document of the operations among ``routes``."""
    schemas: dict[str, Any] = {}
    paths: dict[str, dict[str, Any]] = {}
    for route in routes:
        if isinstance(route, OperationRoute):
            operation = route.operation
            path = _PATH_PARAM.sub(r"{\1}", operation.path)
            entry = _operation(operation, schemas)
            paths.setdefault(path, {})[operation.method.lower()] = entry
    return {
        "openapi": "3.1.0",
        "info": {"title": title, "version": version},
        "paths": paths,
        "components": {"schemas": dict(sorted(schemas.items()))},
    }


def _schema(model: type[BaseModel], schemas: dict[str, Any]) -> dict[str, Any]:
    """A reference to ``model``'s schema, kept in ``schemas`` with those it refers to."""
    schema = model.model_json_schema(ref_template=REFS)
    schemas.update(schema.pop("$defs", {}))
    schemas[model.__name__] = schema
    return {"$ref": REFS.format(model=model.__name__)}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _operation(operation: Operation[Any], schemas: dict[str, Any]) -> dict[str, Any]:
    doc = (operation.call.__doc__ or "").strip()
    entry: dict[str, Any] = {
        "operationId": operation.name,
        "summary": operation.name.replace("_", " ").capitalize(),
        "description": " ".join(doc.split()),
    }
    parameters = _parameters(operation, schemas)
    if parameters:
        entry["parameters"] = parameters
    if operation.answer is not None:
        ok = _json(_schema(operation.answer, schemas), "the answer")
    else:
        ok = {"description": "the answer", "content": dict(operation.content)}
    responses: dict[str, Any] = {"200": ok}
    problem_ref = _schema(Problem, schemas)
    refusals = {**GUARD_REFUSALS, **operation.refusals}
    if parameters:
        refusals[422] = "the parameters are not valid"
    for status in sorted(refusals):
        model = InvalidParameters if status == 422 else None
        schema = _schema(model, schemas) if model is not None else problem_ref
        responses[str(status)] = _json(schema, refusals[status])
    entry["responses"] = responses
    return entry


def _parameters(operation: Operation[Any], schemas: dict[str, Any]) -> list[dict[str, Any]]:
    schema = operation.params.model_json_schema(ref_template=REFS)
    schemas.update(schema.pop("$defs", {}))
    in_path = set(_PATH_PARAM.findall(operation.path))
    required = set(schema.get("required", ()))
    return [
        {
            "name": name,
            "in": "path" if name in in_path else "query",
            "required": name in in_path or name in required,
            "schema": {k: v for k, v in prop.items() if k != "title"},
        }
        for name, prop in schema.get("properties", {}).items()
    ]
