"""OSV API routes (https://google.github.io/osv.dev/api/): `/v1/query`, `/v1/querybatch`, `/v1/vulns/{id}`.

Requests are checked by hand so every malformed query gets OSV's `{"code": 3, "message": ...}`
with status 400 (gRPC INVALID_ARGUMENT), never a 500. Withdrawn advisories are not returned by
queries but stay readable by id.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from tracker.api.auth import require_read
from tracker.api.caching import ADVISORY, NOT_MODIFIED, cached_json
from tracker.api.params import REPO_PART
from tracker.api.problem import Problem
from tracker.shared.domain import is_full_sha, parse_repo_id
from tracker.shared.errors import InvalidRepoIdError
from tracker.store.advisories import AdvisoryStore

DEFAULT_PAGE_SIZE = 100
MAX_BATCH = 1000  # osv.dev's querybatch limit
MAX_BODY = 1_000_000
_QUERY_KEYS = ("commit", "version", "package", "page_token")
_PACKAGE_KEYS = ("name", "ecosystem", "purl")
_PURL_PREFIX = "pkg:huggingface/"

_SHA_SCHEMA = {"type": "string", "pattern": "^[0-9a-fA-F]{40}$"}
_PART = REPO_PART.removeprefix("^").removesuffix("$")
QUERY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "anyOf": [{"required": ["commit"]}, {"required": ["package"]}],
    "not": {"anyOf": [{"required": ["commit", "package"]}, {"required": ["commit", "version"]}]},
    "description": "An OSV query: a commit, or a package (purl, or the repo URL with ecosystem "
    "GIT) with an optional version (a full commit id); page_token from a previous answer.",
    "properties": {
        "commit": _SHA_SCHEMA,
        "version": _SHA_SCHEMA,
        "package": {
            "oneOf": [
                {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["purl"],
                    "properties": {
                        "purl": {
                            "type": "string",
                            "pattern": f"^pkg:huggingface/{_PART}/{_PART}(@[0-9a-fA-F]{{40}})?$",
                        }
                    },
                },
                {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["name", "ecosystem"],
                    "properties": {
                        "name": {"type": "string", "minLength": 1},
                        "ecosystem": {"const": "GIT"},
                    },
                },
            ]
        },
        "page_token": {"type": "string"},
    },
}
BATCH_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["queries"],
    "properties": {"queries": {"type": "array", "maxItems": MAX_BATCH, "items": QUERY_SCHEMA}},
}


def _body_doc(schema: dict[str, Any]) -> dict[str, Any]:
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


router = APIRouter(tags=["osv"], dependencies=[Depends(require_read)])


class OsvQueryError(Problem):
    """A request the OSV API rejects (a problem document); `code` is the gRPC status code
    osv.dev answers with it."""

    def __init__(self, message: str, *, code: int = 3, status: int = 400) -> None:
        super().__init__(status, "not-found" if status == 404 else "invalid-request", message)
        self.extensions["code"] = code
        self.code = code


async def _body(request: Request) -> Any:
    raw = await request.body()
    if len(raw) > MAX_BODY:
        raise OsvQueryError(f"request body over {MAX_BODY} bytes")
    try:
        return json.loads(raw or b"null")
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise OsvQueryError(f"request body is not valid JSON: {exc}") from exc


def _sha(value: Any, field: str) -> str:
    if not isinstance(value, str) or not is_full_sha(value.lower()):
        raise OsvQueryError(f"{field} must be a full 40-hex commit id, got {value!r}")
    return value.lower()


def _check_keys(obj: Any, allowed: tuple[str, ...], where: str) -> Mapping[str, Any]:
    if not isinstance(obj, Mapping):
        raise OsvQueryError(f"{where} must be a JSON object")
    unknown = sorted(set(obj) - set(allowed))
    if unknown:
        raise OsvQueryError(
            f"{where}: unknown field(s) {', '.join(unknown)}; allowed: {', '.join(allowed)}"
        )
    return obj


def _offset(token: Any) -> int:
    if token is None or token == "":
        return 0
    try:
        text = base64.urlsafe_b64decode(str(token).encode()).decode()
        kind, _, n = text.partition(":")
        if kind != "offset" or not n.isdigit():
            raise ValueError(text)
        return int(n)
    except (ValueError, binascii.Error, UnicodeDecodeError) as exc:
        raise OsvQueryError(f"invalid page_token {token!r}") from exc


def _token(offset: int) -> str:
    return base64.urlsafe_b64encode(f"offset:{offset}".encode()).decode()


def _package_filter(package: Mapping[str, Any]) -> tuple[dict[str, str], str | None]:
    """Store filters for the package and the version a purl carried (if any)."""
    if "purl" in package:
        if "name" in package or "ecosystem" in package:
            raise OsvQueryError("package: give either purl or name and ecosystem, not both")
        purl = package["purl"]
        if not isinstance(purl, str) or not purl.startswith(_PURL_PREFIX):
            raise OsvQueryError(f"package.purl must be {_PURL_PREFIX}ORG/NAME[@SHA], got {purl!r}")
        rest, _, version = purl[len(_PURL_PREFIX) :].partition("@")
        try:
            repo_id = parse_repo_id(rest)
        except InvalidRepoIdError as exc:
            raise OsvQueryError(f"package.purl: {exc}") from exc
        return {"repo_id": repo_id}, (_sha(version, "purl version") if version else None)
    name, ecosystem = package.get("name"), package.get("ecosystem")
    if not isinstance(name, str) or not name or ecosystem != "GIT":
        raise OsvQueryError('package needs a purl, or a name (the repo URL) with ecosystem "GIT"')
    return {"package_name": name.rstrip("/")}, None


def run_query(store: AdvisoryStore, query: Any) -> list[str]:
    """Ids of all advisories one OSV query matches (before pagination), ordered by id.

    Raises OsvQueryError for a malformed query."""
    q = _check_keys(query, _QUERY_KEYS, "query")
    if "commit" in q and ("version" in q or "package" in q):
        raise OsvQueryError("query: commit cannot be combined with version or package")
    if "commit" in q:
        return store.query_ids(commit=_sha(q["commit"], "commit"))
    if "package" not in q:
        raise OsvQueryError("query needs a commit or a package")
    package = _check_keys(q["package"], _PACKAGE_KEYS, "package")
    filters, purl_version = _package_filter(package)
    version = q.get("version")
    if version is not None and purl_version is not None:
        raise OsvQueryError("query: version given both in the purl and in version")
    if version is not None:
        purl_version = _sha(version, "version")
    return store.query_ids(commit=purl_version, **filters)


def _page(ids: list[str], token: Any, size: int) -> tuple[list[str], str | None]:
    start = _offset(token)
    end = start + size
    return ids[start:end], (_token(end) if end < len(ids) else None)


@router.post("/v1/query", openapi_extra=_body_doc(QUERY_SCHEMA))
async def query(request: Request) -> dict[str, Any]:
    """OSV `POST /v1/query`: `{"vulns": [full records]}` plus `next_page_token` when more remain."""
    body = await _body(request)
    return await run_in_threadpool(
        _answer, request.app.state.advisories, body, request.app.state.page_size
    )


def _answer(store: AdvisoryStore, body: Any, size: int) -> dict[str, Any]:
    """One query's answer (store reads: run in the threadpool, off the event loop)."""
    found = run_query(store, body)
    page, nxt = _page(found, body.get("page_token"), size)
    out: dict[str, Any] = {"vulns": [dict(a.record) for a in store.get_many(page)]}
    if nxt:
        out["next_page_token"] = nxt
    return out


@router.post("/v1/querybatch", openapi_extra=_body_doc(BATCH_SCHEMA))
async def querybatch(request: Request) -> dict[str, Any]:
    """OSV `POST /v1/querybatch`: per query, `{"vulns": [{"id", "modified"}]}` (ids only, as osv.dev)."""
    body = _check_keys(await _body(request), ("queries",), "request")
    queries = body.get("queries")
    if not isinstance(queries, list):
        raise OsvQueryError("queries must be a list")
    if len(queries) > MAX_BATCH:
        raise OsvQueryError(f"too many queries: {len(queries)} > {MAX_BATCH}")
    return await run_in_threadpool(
        _answer_batch, request.app.state.advisories, queries, request.app.state.page_size
    )


def _answer_batch(store: AdvisoryStore, queries: list[Any], size: int) -> dict[str, Any]:
    """A batch's answers (store reads: run in the threadpool, off the event loop)."""
    results = []
    for i, q in enumerate(queries):
        try:
            found = run_query(store, q)
            page, nxt = _page(found, q.get("page_token"), size)
        except OsvQueryError as exc:
            raise OsvQueryError(f"queries[{i}]: {exc}") from exc
        item: dict[str, Any] = {"vulns": store.modified_of(page)}
        if nxt:
            item["next_page_token"] = nxt
        results.append(item)
    return {"results": results}


@router.get(
    "/v1/vulns/{advisory_id}",
    response_model=dict[str, Any],
    responses=NOT_MODIFIED,
)
def vuln(advisory_id: str, request: Request) -> Response:
    """OSV `GET /v1/vulns/{id}`: the full record (withdrawn ones too), or 404. Served with its
    ETag and `Cache-Control: no-cache` (an advisory changes only when modified: revalidate)."""
    store: AdvisoryStore = request.app.state.advisories
    adv = store.get(advisory_id)
    if adv is None:
        raise OsvQueryError("Bug not found.", code=5, status=404)
    return cached_json(request, dict(adv.record), ADVISORY)
