"""The API's routes as typed operations, and the OpenAPI description read from them.

An ``Operation`` names its method and path, the endpoint, the model of its parameters
(from the path, the query, the headers it names and the body: ``Body``), the model of
its answer (or the media types of another answer) and the refusals it may answer with.
``OperationRoute`` is a Starlette ``Route`` that serves one: the bearer token first
(``Guard``), then the parameters validated into their model (422 with the reasons
otherwise), then the endpoint, whose answer is the model's JSON. ``describe`` builds
the OpenAPI document from the routes themselves, so what is served and what is
described cannot part. The MCP server (``mcp_server.py``) calls the same operations
with the same parameter models.
"""

from __future__ import annotations

import hmac
import json
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


MAX_BODY_BYTES = 1024 * 1024


class Refusal(Exception):
    """An endpoint's refusal: ``status`` with a ``Problem`` body saying why (and the
    ``extra`` fields the operation's refusal model adds)."""

    def __init__(
        self,
        status: int,
        detail: str,
        headers: Mapping[str, str] | None = None,
        extra: Mapping[str, Any] | None = None,
    ):
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.headers = dict(headers or {})
        self.extra = dict(extra or {})

    def body(self) -> dict[str, Any]:
        return {"detail": self.detail, **self.extra}


def problem(status: int, detail: str, headers: Mapping[str, str] | None = None) -> Response:
    return JSONResponse({"detail": detail}, status_code=status, headers=headers)


async def http_problem(request: Request, exc: Exception) -> Response:
    """The router's own refusals (no such path, another method) as a ``Problem``."""
    assert isinstance(exc, HTTPException)
    return problem(exc.status_code, exc.detail, exc.headers)


@dataclass(frozen=True, slots=True)
class Body:
    """What a request's body holds: some fields of the parameters as a JSON object
    (``fields``), or its whole text as one field (``text``, in ``media_types``)."""

    fields: tuple[str, ...] = ()
    text: str | None = None
    media_types: tuple[str, ...] = ("application/json",)

    @property
    def names(self) -> tuple[str, ...]:
        return (self.text,) if self.text is not None else self.fields


@dataclass(frozen=True, slots=True)
class Operation(Generic[P]):
    method: str
    path: str
    call: Callable[[P], Awaitable[Answer]]
    params: type[P]
    answer: type[BaseModel] | None = None  # the JSON body of a success
    content: Mapping[str, Any] = field(default_factory=dict)  # or: media type -> schema
    refusals: Mapping[int, str] = field(default_factory=dict)  # status -> when
    body: Body | None = None
    headers: Mapping[str, str] = field(default_factory=dict)  # parameter -> header name
    status: int = 200  # of a success
    refusal_models: Mapping[int, type[BaseModel]] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.call.__name__

    def where(self, name: str, path_params: Mapping[str, Any]) -> str:
        """Where parameter ``name`` comes from: path, header, body or query."""
        if name in path_params or name in _PATH_PARAM.findall(self.path):
            return "path"
        if name in self.headers:
            return "header"
        if self.body is not None and name in self.body.names:
            return "body"
        return "query"


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
        operation = self.operation
        try:
            given = await self._given(request)
        except Refusal as exc:
            return JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers)
        try:
            params = operation.params.model_validate(given)
        except ValidationError as exc:
            return _invalid(exc, operation, request.path_params)
        try:
            answer = await operation.call(params)
        except Refusal as exc:
            return JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers)
        if isinstance(answer, Response):
            return answer
        return Response(
            answer.model_dump_json(), status_code=operation.status, media_type="application/json"
        )

    async def _given(self, request: Request) -> dict[str, Any]:
        """The parameters as the request gives them: the query's (those not taken from
        elsewhere), the named headers, the body's fields, the path's."""
        operation = self.operation
        taken = {*operation.headers, *(operation.body.names if operation.body else ())}
        given: dict[str, Any] = {k: v for k, v in request.query_params.items() if k not in taken}
        for name, header in operation.headers.items():
            if header in request.headers:
                given[name] = request.headers[header]
        if operation.body is not None:
            given.update(await _body(request, operation.body))
        given.update(request.path_params)
        return given


async def _body(request: Request, body: Body) -> dict[str, Any]:
    """The fields ``body`` takes from the request's body (at most ``MAX_BODY_BYTES``)."""
    data = bytearray()
    async for chunk in request.stream():
        data += chunk
        if len(data) > MAX_BODY_BYTES:
            raise Refusal(413, f"the body is larger than {MAX_BODY_BYTES} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise Refusal(422, "the body is not UTF-8 text") from None
    if body.text is not None:
        return {body.text: text}
    if not text.strip():
        return {}
    try:
        fields = json.loads(text)
    except ValueError as exc:
        raise Refusal(422, f"the body is not JSON: {exc}") from None
    if not isinstance(fields, dict):
        raise Refusal(422, "the body must be a JSON object")
    unknown = sorted(set(fields) - set(body.fields))
    if unknown:
        raise Refusal(422, f"the body has fields this operation does not take: {unknown}")
    return fields


def _invalid(
    exc: ValidationError, operation: Operation[Any], path_params: Mapping[str, Any]
) -> Response:
    problems = [
        {
            "loc": [operation.where(str(error["loc"][0]), path_params), *error["loc"]]
            if error["loc"]
            else ["body"],
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
    body = _request_body(operation, schemas)
    if body is not None:
        entry["requestBody"] = body
    if operation.answer is not None:
        ok = _json(_schema(operation.answer, schemas), "the answer")
    else:
        ok = {"description": "the answer", "content": dict(operation.content)}
    responses: dict[str, Any] = {str(operation.status): ok}
    problem_ref = _schema(Problem, schemas)
    refusals = dict(GUARD_REFUSALS)
    if parameters or body is not None:
        refusals[422] = "the parameters are not valid"
    if body is not None:
        refusals[413] = f"the body is larger than {MAX_BODY_BYTES} bytes"
    refusals.update(operation.refusals)
    for status in sorted(refusals):
        # A refusal model adds fields to a Problem; the status may also come bare.
        shapes = [problem_ref]
        if status == 422:
            shapes.insert(0, _schema(InvalidParameters, schemas))
        model = operation.refusal_models.get(status)
        if model is not None:
            shapes.insert(0, _schema(model, schemas))
        schema = shapes[0] if len(shapes) == 1 else {"anyOf": shapes}
        responses[str(status)] = _json(schema, refusals[status])
    entry["responses"] = responses
    return entry


def _properties(
    operation: Operation[Any], schemas: dict[str, Any]
) -> tuple[dict[str, Any], set[str]]:
    schema = operation.params.model_json_schema(ref_template=REFS)
    schemas.update(schema.pop("$defs", {}))
    properties = {
        name: {k: v for k, v in prop.items() if k != "title"}
        for name, prop in schema.get("properties", {}).items()
    }
    return properties, set(schema.get("required", ()))


def _parameters(operation: Operation[Any], schemas: dict[str, Any]) -> list[dict[str, Any]]:
    properties, required = _properties(operation, schemas)
    found = []
    for name, prop in properties.items():
        where = operation.where(name, {})
        if where == "body":
            continue
        found.append(
            {
                "name": operation.headers.get(name, name),
                "in": where,
                "required": where == "path" or name in required,
                "schema": prop,
            }
        )
    return found


def _request_body(operation: Operation[Any], schemas: dict[str, Any]) -> dict[str, Any] | None:
    body = operation.body
    if body is None:
        return None
    properties, required = _properties(operation, schemas)
    if body.text is not None:
        text = properties[body.text]
        content = {media: {"schema": text} for media in body.media_types}
        return {"required": True, "content": content}
    fields = {name: properties[name] for name in body.fields}
    schema: dict[str, Any] = {
        "type": "object",
        "properties": fields,
        "additionalProperties": False,
    }
    needed = [name for name in body.fields if name in required]
    if needed:
        schema["required"] = needed
    return {"required": bool(needed), "content": {"application/json": {"schema": schema}}}
