"""Every error the HTTP app answers is an RFC 9457 problem document (`application/problem+json`).

Members: `type` (a URI naming the kind of problem: `urn:tracker:problem:<slug>` for ours,
`about:blank` for a plain HTTP status such as an unknown route or method), `title` (the short
summary of the type), `status`, `detail` (what went wrong in this request) and `instance` (the
request path). The OSV routes (`/v1/query`, `/v1/querybatch`, `/v1/vulns/ID`) add osv.dev's own
members `code` (a gRPC status code) and `message` (= `detail`), so OSV clients keep working.
A validation error adds `errors`: every `{location, message}` found.

- `Problem`: the exception our routes raise (status, slug, detail, extra members, headers).
- `install(api)`: the exception handlers: `Problem` (`OsvQueryError` is one), request validation errors
  (400, not FastAPI's 422: a malformed request is a bad request, as the OSV API has always said;
  422 is kept for well-formed input we refuse, e.g. a webhook target on a private network),
  Starlette's HTTP errors (404 unknown route, 405 wrong method), `StoreNotFoundError` (404: a
  repo or revision the store does not hold; but 400 `invalid-revision` for a revision name no
  revision can have, `InvalidRevisionError`), `StoreError` (503 with `Retry-After`), and
  everything else (500: logged with its traceback, never echoed).
- `problem_openapi(api)`: the OpenAPI schema declares the problem document (schema `Problem`)
  as the error answer of every operation (and drops FastAPI's `HTTPValidationError`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from http import HTTPStatus
from typing import Any

import structlog
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response
from starlette.routing import Match

from tracker.shared.errors import InvalidRevisionError, StoreError, StoreNotFoundError

log = structlog.get_logger(__name__)

PROBLEM_TYPE = "application/problem+json"
TYPE_PREFIX = "urn:tracker:problem:"
OSV_PATHS = ("/v1/query", "/v1/querybatch", "/v1/vulns/")
# HTTP status -> the gRPC status code osv.dev answers with it.
GRPC_CODES = {400: 3, 401: 16, 403: 7, 404: 5, 405: 12, 409: 6, 413: 3, 429: 8, 500: 13, 503: 14}
METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
"""The methods a route of the app may declare (`allowed_methods` tries each)."""
ERROR_STATUSES = (400, 401, 403, 404, 405, 413, 422, 500, 503)


class Problem(Exception):
    """An error answer: `status`, a `slug` naming the kind of problem (the `type` URI's last
    part; "" for `about:blank`), what went wrong (`detail`), extra members and headers."""

    def __init__(
        self,
        status: int,
        slug: str,
        detail: str,
        *,
        title: str | None = None,
        headers: Mapping[str, str] | None = None,
        **extensions: Any,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.slug = slug
        self.detail = detail
        self.title = title or _phrase(status)
        self.headers = dict(headers or {})
        self.extensions = extensions


class ProblemDocument(BaseModel):
    """An RFC 9457 problem document (`application/problem+json`)."""

    model_config = ConfigDict(extra="allow", title="Problem")

    type: str = Field(
        description="URI of the problem's kind: urn:tracker:problem:SLUG, or about:blank."
    )
    title: str = Field(description="Short summary of the problem's kind.")
    status: int = Field(ge=100, le=599, description="The HTTP status of this answer.")
    detail: str = Field(description="What went wrong in this request.")
    instance: str = Field(description="The request path.")
    code: int | None = Field(
        default=None, description="OSV routes only: osv.dev's gRPC status code."
    )
    message: str | None = Field(default=None, description="OSV routes only: = detail.")
    errors: list[dict[str, str]] | None = Field(
        default=None, description="Validation errors: every {location, message}."
    )


def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Error"


def is_osv_path(path: str) -> bool:
    """Whether `path` is one of the OSV API's routes (their problems carry `code` and `message`)."""
    return path in OSV_PATHS[:2] or path.startswith(OSV_PATHS[2])


def document(
    status: int,
    slug: str,
    detail: str,
    path: str,
    *,
    title: str | None = None,
    **extensions: Any,
) -> dict[str, Any]:
    """The problem document of one error answered at `path`."""
    doc: dict[str, Any] = {
        "type": f"{TYPE_PREFIX}{slug}" if slug else "about:blank",
        "title": title or _phrase(status),
        "status": status,
        "detail": detail,
        "instance": path,
    }
    if is_osv_path(path):
        doc["code"] = extensions.pop("code", GRPC_CODES.get(status, 2))
        doc["message"] = detail
    doc.update(extensions)
    return doc


def body_of(doc: Mapping[str, Any]) -> bytes:
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode()


def respond(
    status: int,
    slug: str,
    detail: str,
    path: str,
    *,
    headers: Mapping[str, str] | None = None,
    title: str | None = None,
    **extensions: Any,
) -> Response:
    """A problem document as a response."""
    doc = document(status, slug, detail, path, title=title, **extensions)
    return Response(body_of(doc), status_code=status, media_type=PROBLEM_TYPE, headers=headers)


def problem_response(request: Request, exc: Problem) -> Response:
    return respond(
        exc.status,
        exc.slug,
        exc.detail,
        request.url.path,
        headers=exc.headers,
        title=exc.title,
        **exc.extensions,
    )


API_PREFIXES = ("/v1/", "/openapi.json", "/docs", "/static", "/healthz", "/readyz", "/metrics")


def wants_page(request: Request) -> bool:
    """Whether an unknown path is a browser's (it accepts HTML, and the path is not the API's):
    it gets the pages' 404 page rather than a problem document."""
    accept = request.headers.get("accept", "")
    return "text/html" in accept and not request.url.path.startswith(API_PREFIXES)


def allowed_methods(request: Request) -> list[str]:
    """Every method some route of the app answers on the request's path (RFC 9110 §15.5.6: a 405
    lists them all in `Allow`). Starlette lists only the first matching route's, so a path that
    two routes share (`GET` and `POST /v1/subscriptions`) said `Allow: GET`. Each method is tried
    against every route (`BaseRoute.matches`, which included routers answer too); `HEAD` is
    answered wherever `GET` is (`tracker.api.head.HeadAsGet`)."""
    routes = request.app.router.routes
    methods = {
        method
        for method in METHODS
        if any(r.matches({**request.scope, "method": method})[0] is Match.FULL for r in routes)
    }
    if "GET" in methods:
        methods.add("HEAD")
    return sorted(methods)


def _location(loc: tuple[Any, ...] | list[Any]) -> str:
    return ".".join(str(part) for part in loc)


def install(api: FastAPI) -> None:
    """Answer every error of `api` with a problem document (see the module docstring)."""

    @api.exception_handler(Problem)
    async def _problem(request: Request, exc: Problem) -> Response:
        return problem_response(request, exc)

    @api.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> Response:
        found = [
            {"location": _location(e.get("loc", ())), "message": str(e.get("msg", "invalid"))}
            for e in exc.errors()
        ] or [{"location": "", "message": "invalid request"}]
        first = found[0]
        detail = (
            f"{first['location']}: {first['message']}" if first["location"] else first["message"]
        )
        if is_osv_path(request.url.path):
            detail = first["message"]
        return respond(400, "invalid-request", detail, request.url.path, errors=found)

    @api.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> Response:
        page = getattr(request.app.state, "html_error", None)
        if exc.status_code == 404 and page is not None and wants_page(request):
            message = f"There is no page at {request.url.path}."
            return page(404, "Not found", message)  # type: ignore[no-any-return]
        detail = exc.detail if isinstance(exc.detail, str) else _phrase(exc.status_code)
        if exc.status_code == 404 and detail == "Not Found":
            detail = f"no such resource: {request.url.path}"
        headers = dict(exc.headers or {})
        if exc.status_code == 405:
            headers["Allow"] = ", ".join(allowed_methods(request))
            if detail == "Method Not Allowed":
                detail = f"{request.method} is not allowed on {request.url.path}"
        return respond(exc.status_code, "", detail, request.url.path, headers=headers)

    @api.exception_handler(StoreNotFoundError)
    async def _missing(request: Request, exc: StoreNotFoundError) -> Response:
        return respond(404, "not-found", str(exc).splitlines()[0], request.url.path)

    @api.exception_handler(InvalidRevisionError)
    async def _bad_revision(request: Request, exc: InvalidRevisionError) -> Response:
        return respond(400, "invalid-revision", str(exc).splitlines()[0], request.url.path)

    @api.exception_handler(StoreError)
    async def _store(request: Request, exc: StoreError) -> Response:
        log.warning("api.store_unavailable", path=request.url.path, error=str(exc).splitlines()[0])
        return respond(
            503,
            "store-unavailable",
            "the store cannot be read right now; try again shortly",
            request.url.path,
            headers={"Retry-After": "5"},
        )

    @api.exception_handler(Exception)
    async def _crash(request: Request, exc: Exception) -> Response:
        log.error("api.unhandled", method=request.method, path=request.url.path, exc_info=exc)
        return respond(
            500,
            "internal",
            "an internal error occurred; it is logged on the server",
            request.url.path,
        )


_PROBLEM_REF = {"$ref": "#/components/schemas/Problem"}


def _error_response(status: int) -> dict[str, Any]:
    return {
        "description": f"{_phrase(status)} (a problem document, RFC 9457)",
        "content": {PROBLEM_TYPE: {"schema": _PROBLEM_REF}},
    }


def problem_openapi(
    api: FastAPI, *, then: Callable[[dict[str, Any]], dict[str, Any]] | None = None
) -> None:
    """Make `api.openapi()` declare problem documents as every operation's error answers (and
    pass the schema through `then`, once, when given)."""

    def openapi() -> dict[str, Any]:
        if api.openapi_schema:
            return api.openapi_schema
        schema = get_openapi(
            title=api.title,
            version=api.version,
            summary=api.summary,
            description=api.description,
            routes=api.routes,
        )
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        components["Problem"] = ProblemDocument.model_json_schema(
            ref_template="#/components/schemas/{model}"
        )
        for name in ("HTTPValidationError", "ValidationError"):
            components.pop(name, None)
        for item in schema.get("paths", {}).values():
            for method, op in item.items():
                if not isinstance(op, dict) or "responses" not in op:
                    continue
                responses = op["responses"]
                validation = responses.get("422", {})
                if "HTTPValidationError" in json.dumps(validation):
                    del responses["422"]
                for status in ERROR_STATUSES:
                    if status == 405 or (status == 422 and method == "get"):
                        continue
                    responses.setdefault(str(status), _error_response(status))
                responses.setdefault("default", _error_response(500))
        api.openapi_schema = then(schema) if then is not None else schema
        return schema

    api.openapi = openapi  # type: ignore[method-assign]


__all__ = [
    "PROBLEM_TYPE",
    "Problem",
    "ProblemDocument",
    "document",
    "install",
    "is_osv_path",
    "problem_openapi",
    "respond",
]
