"""The read API over the store (issue 8, item 1): watched repos and their ingestion state,
revisions (cursor pages), a tracked file at a revision, the diff between two revisions, the
estimate at a revision and across revisions. All `GET`, all behind `require_read`, all served
through `tracker.api.caching` (strong ETag, 304, Cache-Control by how the content is named).

A revision is named as the CLI names it (`Store.resolve`): a full sha, a short sha, the ref,
`HEAD`, each with an optional `~n`. Content named only by full shas is immutable; anything named
by a ref or short sha can move and is `no-cache`. The diff and estimate answers are exactly the
CLI's (`tracker.store.queries.diff_revisions` + `render_json`, `tracker.cli.estimating.store_report`).
The routes are sync `def`s: Starlette runs them in its threadpool, so store reads never block
the event loop.
"""

from __future__ import annotations

import base64
import hashlib
from collections import OrderedDict
from pathlib import PurePosixPath
from threading import Lock
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response

from tracker.api import paging
from tracker.api.advisories import filter_problem
from tracker.api.auth import require_read
from tracker.api.caching import (
    IMMUTABLE,
    LIST,
    NOT_MODIFIED,
    Kept,
    cached_json,
    cached_response,
    keep,
)
from tracker.api.memo import kept_response
from tracker.api.models import (
    DiffOut,
    EstimateReport,
    EstimatesOut,
    HistoryOut,
    Order,
    RepoOut,
    ReposOut,
    RevisionPage,
)
from tracker.api.params import (
    REVISION,
    REVISION_WORDS,
    Cursor,
    Name,
    Org,
    Rev,
    any_case,
    repo_id_of,
)
from tracker.api.problem import Problem
from tracker.shared.domain import Artifact, is_full_sha, rfc3339
from tracker.shared.errors import ConfigError, EstimateError, StoreNotFoundError
from tracker.store.advisories.listing import counts_by_repo
from tracker.store.queries import FilterError, choice
from tracker.store.values import FileKind, RepoState, RepoStatus

router = APIRouter(tags=["store"], dependencies=[Depends(require_read)])
DIFF_CACHE_SIZE = 64
DIFF_KINDS = [a for a in Artifact if a is not Artifact.ESTIMATE]


def _app(request: Request) -> Any:
    return request.app.state.app


def _repo_href(repo_id: str) -> str:
    return "/v1/repos/" + quote(repo_id, safe="/")


def _when(value: Any) -> str | None:
    return rfc3339(value) if value is not None else None


def _repo_json(
    repo_id: str, st: RepoState | None, watched: bool, counts: dict[str, int] | None
) -> dict[str, Any]:
    href = _repo_href(repo_id)
    return {
        "repo": repo_id,
        "watched": watched,
        "state": (st.status if st else RepoStatus.NEW).value,
        "source_kind": st.source_kind if st else None,
        "url": st.url if st else None,
        "ref": st.ref if st else None,
        "head": st.cursor if st else None,
        "last_poll_at": _when(st.last_poll_at) if st else None,
        "last_success_at": _when(st.last_success_at) if st else None,
        "consecutive_failures": st.consecutive_failures if st else 0,
        "last_error": st.last_error if st else None,
        "revisions": st.revisions if st else 0,
        "could_not_analyse": [
            {"sha": sha, **overrun.as_json()} for sha, overrun in st.could_not_analyse
        ]
        if st
        else [],
        "advisories": counts or {"open": 0, "fixed": 0, "withdrawn": 0},
        "links": {
            "self": href,
            "revisions": f"{href}/revisions",
            "history": f"{href}/history",
            "estimates": f"{href}/estimates",
            "advisories": "/v1/advisories?repo=" + quote(repo_id, safe="/"),
        },
    }


def _watched(app: Any) -> list[str]:
    """The watchlist's repo ids (none when it is missing or invalid: the store still answers)."""
    try:
        return [r.repo_id for r in app.load_watchlist().repos]
    except (ConfigError, OSError):
        return []


@router.get(
    "/v1/repos",
    response_model=ReposOut,
    responses=NOT_MODIFIED,
    summary="Watched and stored repos with their ingestion state",
)
def list_repos(request: Request) -> Response:
    app = _app(request)
    states = {st.repo_id: st for st in app.store.repo_states()}
    watched = _watched(app)
    counts = counts_by_repo(app.store.engine)
    ids = sorted(set(states) | set(watched))
    body = {
        "repos": [_repo_json(r, states.get(r), r in watched, counts.get(r)) for r in ids],
    }
    return cached_json(request, body, LIST)


@router.get(
    "/v1/repos/{org}/{name}",
    response_model=RepoOut,
    responses=NOT_MODIFIED,
    summary="One repo's ingestion state",
)
def get_repo(org: Org, name: Name, request: Request) -> Response:
    app = _app(request)
    repo_id = repo_id_of(org, name)
    watched = repo_id in _watched(app)
    try:
        st: RepoState | None = app.store.repo_state(repo_id)
    except StoreNotFoundError:
        if not watched:
            raise Problem(404, "not-found", f"{repo_id} is neither watched nor stored") from None
        st = None
    counts = counts_by_repo(app.store.engine).get(repo_id)
    return cached_json(request, _repo_json(repo_id, st, watched, counts), LIST)


@router.get(
    "/v1/repos/{org}/{name}/revisions",
    response_model=RevisionPage,
    responses=NOT_MODIFIED,
    summary="Ingested revisions, oldest or newest first, a page at a time",
)
def revisions(
    org: Org,
    name: Name,
    request: Request,
    order: Order = "oldest",
    limit: Annotated[int, Query(ge=1, le=paging.MAX_LIMIT)] = paging.DEFAULT_LIMIT,
    cursor: Cursor = None,
) -> Response:
    from tracker.store.queries import revision_json

    app = _app(request)
    repo_id = repo_id_of(org, name)
    scope = paging.scope_of("revisions", {"repo": repo_id, "order": order})
    key = paging.decode(cursor, scope)
    after = key[0] if key else None
    # A cursor holds one sequence number this API gave out: anything else (forged, [], a bool,
    # a number out of the store's range) is refused, never read as the first page or a 500.
    if key is not None and (len(key) != 1 or type(after) is not int or not 0 <= after < 2**62):
        raise Problem(400, "invalid-cursor", "cursor: not a cursor this API gave out")
    page = app.store.revision_page(
        repo_id, newest_first=order == "newest", after_seq=after, limit=limit + 1
    )
    more = len(page) > limit
    page = page[:limit]
    nxt = paging.encode(scope, [page[-1].seq]) if more else None
    body = {
        "repo": repo_id,
        "order": order,
        "items": [revision_json(r) for r in page],
        "next": nxt,
    }
    return cached_json(request, body, LIST, headers=paging.next_link(request, nxt) if nxt else None)


@router.get(
    "/v1/repos/{org}/{name}/history",
    response_model=HistoryOut,
    responses=NOT_MODIFIED,
    summary="Every revision and event: exactly `tracker history --json`",
)
def history(org: Org, name: Name, request: Request) -> Response:
    from tracker.store.queries import history_json

    return cached_json(request, history_json(_app(request).store, repo_id_of(org, name)), LIST)


def _b64(digest: bytes) -> str:
    return base64.b64encode(digest).decode()


TEXT_MEDIA = {
    ".json": "application/json",
    ".md": "text/markdown; charset=utf-8",
    ".jinja": "text/plain; charset=utf-8",
    ".txt": "text/plain; charset=utf-8",
    ".py": "text/x-python; charset=utf-8",
    ".yaml": "application/yaml",
    ".yml": "application/yaml",
}
"""The media type of a tracked text file by its name's suffix (README.md, config.json, a chat
template, remote code); anything else, or bytes that are not UTF-8, is application/octet-stream."""


def media_type_of(path: str, data: bytes) -> str:
    """The `Content-Type` a stored file is served with (`TEXT_MEDIA`)."""
    suffix = PurePosixPath(path).suffix.lower()
    media = TEXT_MEDIA.get(suffix)
    if media is None:
        return "application/octet-stream"
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return "application/octet-stream"
    return media


@router.get(
    "/v1/repos/{org}/{name}/revisions/{rev}/files/{path:path}",
    response_class=Response,
    responses={
        200: {
            "description": "The file's stored bytes (a safetensors file: its parsed header as "
            "JSON, `X-Tracker-Stored: safetensors-header`; a GGUF file likewise, "
            "`X-Tracker-Stored: gguf-header`)",
            "content": {
                media.split(";")[0]: {"schema": {"type": "string"}}
                for media in ("application/octet-stream", *TEXT_MEDIA.values())
            },
        },
        **NOT_MODIFIED,
    },
    summary="A tracked file at a revision, raw, with its content hashes",
)
def file_at(org: Org, name: Name, rev: Rev, path: str, request: Request) -> Response:
    app = _app(request)
    repo_id = repo_id_of(org, name)
    sha = app.store.resolve(repo_id, rev)
    versions = app.store.file_versions(repo_id, sha)
    fv = versions.get(path)
    entry = next((e for e in app.store.tree(repo_id, sha) if e.path == path), None)
    if fv is None:
        where = "is in the tree but not tracked" if entry else "does not exist"
        raise Problem(404, "not-found", f"{repo_id}@{sha}: {path} {where}; nothing stored")
    if fv.kind is FileKind.UNREADABLE or fv.blob_sha256 is None:
        raise Problem(404, "not-stored", f"{repo_id}@{sha}: {path} could not be read: {fv.reason}")
    data = app.store.read_blob(fv.blob_sha256)
    digest = hashlib.sha256(data).digest()
    headers = {
        "Repr-Digest": f"sha-256=:{_b64(digest)}:",
        "X-Content-SHA256": digest.hex(),
        "X-Revision": sha,
    }
    if entry is not None:
        headers["X-Git-Blob-Id"] = entry.blob_id
        if entry.lfs_sha256:
            headers["X-LFS-SHA256"] = entry.lfs_sha256
    media = media_type_of(path, data)
    if fv.kind is FileKind.HEADER:
        headers["X-Tracker-Stored"] = "safetensors-header"
        media = "application/json"
    elif fv.kind is FileKind.GGUF_HEADER:
        headers["X-Tracker-Stored"] = "gguf-header"
        media = "application/json"
    policy = IMMUTABLE if _full(rev) else LIST
    return cached_response(request, data, media, policy, headers=headers)


def _full(rev: str) -> bool:
    return is_full_sha(rev.strip().lower())


def _kinds(values: list[str] | None) -> frozenset[Artifact] | None:
    """The diff's change kinds, read as the advisory filters read theirs (any case)."""
    if not values:
        return None
    try:
        kinds = frozenset(choice(Artifact, v, "kind") for v in values)
    except FilterError as exc:
        raise filter_problem(exc) from None
    if Artifact.ESTIMATE in kinds:
        raise Problem(400, "invalid-request", "kind: estimate is not a diff kind")
    return kinds


class _DiffCache:
    """The rendered diff of resolved sha pairs (deterministic: the same bytes every time)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.items: OrderedDict[tuple[Any, ...], bytes] = OrderedDict()
        self.lock = Lock()

    def get(self, key: tuple[Any, ...]) -> bytes | None:
        with self.lock:
            if key in self.items:
                self.items.move_to_end(key)
                return self.items[key]
        return None

    def put(self, key: tuple[Any, ...], value: bytes) -> None:
        with self.lock:
            self.items[key] = value
            while len(self.items) > self.size:
                self.items.popitem(last=False)


def _diff_cache(request: Request) -> _DiffCache:
    state = request.app.state
    if not hasattr(state, "diff_cache"):
        state.diff_cache = _DiffCache(DIFF_CACHE_SIZE)
    cache: _DiffCache = state.diff_cache
    return cache


@router.get(
    "/v1/repos/{org}/{name}/diff",
    response_model=DiffOut,
    responses=NOT_MODIFIED,
    summary="The structured diff between two ingested revisions: exactly `tracker diff --json`",
)
def diff(
    org: Org,
    name: Name,
    request: Request,
    from_: Annotated[
        str,
        Query(
            alias="from",
            min_length=1,
            max_length=200,
            description=REVISION_WORDS,
            json_schema_extra=REVISION,
        ),
    ],
    to: Annotated[
        str,
        Query(min_length=1, max_length=200, description=REVISION_WORDS, json_schema_extra=REVISION),
    ],
    kind: Annotated[
        list[str] | None,
        Query(
            description="Only these change kinds (repeat for several; any case); not estimate.",
            max_length=50,
            json_schema_extra={
                "items": {"type": "string", "pattern": any_case([a.value for a in DIFF_KINDS])}
            },
        ),
    ] = None,
) -> Response:
    from tracker.diff.render import render_json
    from tracker.store.queries import diff_revisions

    app = _app(request)
    repo_id = repo_id_of(org, name)
    kinds = _kinds(kind)

    def render() -> Kept:
        key = (
            repo_id,
            app.store.resolve(repo_id, from_),
            app.store.resolve(repo_id, to),
            tuple(sorted(kinds or ())),
        )
        cache = _diff_cache(request)
        body = cache.get(key)
        if body is None:
            found = diff_revisions(app.store, app.settings, repo_id, key[1], key[2], kinds)
            body = render_json(found).encode()
            cache.put(key, body)
        policy = IMMUTABLE if _full(from_) and _full(to) else LIST
        return keep(request, body, "application/json", policy)

    # Kept per request until the store changes: a repeat resolves nothing (`tracker.api.memo`);
    # the rendered diff of two shas outlives store changes (`_DiffCache`).
    return kept_response(request, render)


@router.get(
    "/v1/repos/{org}/{name}/revisions/{rev}/estimate",
    response_model=EstimateReport,
    responses=NOT_MODIFIED,
    summary="The estimate at a revision: exactly `tracker estimate ORG/NAME@REV --json`",
)
def estimate_at(org: Org, name: Name, rev: Rev, request: Request) -> Response:
    from tracker.cli.estimating import store_report

    app = _app(request)
    repo_id = repo_id_of(org, name)
    try:
        report = store_report(app.settings, app.store, repo_id, rev)
    except EstimateError as exc:
        raise Problem(404, "no-estimate", str(exc)) from None
    # No `immutable` even at a full sha: the watchlist's `estimate:` settings shape the report.
    return cached_json(request, report, LIST)


@router.get(
    "/v1/repos/{org}/{name}/estimates",
    response_model=EstimatesOut,
    responses=NOT_MODIFIED,
    summary="The stored estimate of every live revision, oldest first, with what moved",
)
def estimates(org: Org, name: Name, request: Request) -> Response:
    from tracker.estimate.delta import estimate_delta

    app = _app(request)
    repo_id = repo_id_of(org, name)
    items: list[dict[str, Any]] = []
    last: tuple[str, Any] | None = None
    for r in app.store.revisions(repo_id, include_rewritten=False):
        stored = app.analysis.estimate(repo_id, r.sha)
        est = stored.estimate if stored is not None else None
        delta: list[dict[str, Any]] = []
        compared_to = None
        if est is not None and last is not None:
            compared_to = last[0]
            delta = [c.to_json() for c in estimate_delta(last[1], est)]
        items.append(
            {
                "seq": r.seq,
                "sha": r.sha,
                "estimate": est.to_json() if est is not None else None,
                "error": stored.error if stored is not None else None,
                "analysed": r.analysed,
                "compared_to": compared_to,
                "delta": delta,
            }
        )
        if est is not None:
            last = (r.sha, est)
    return cached_json(request, {"repo": repo_id, "items": items}, LIST)
