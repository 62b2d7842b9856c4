"""Feed routes: Atom and JSON Feed 1.1 of the advisories and card-fit moves, for everything and
per repo, at an optional severity floor.

- `GET /v1/feeds/advisories.atom`, `GET /v1/feeds/advisories.json`
- `GET /v1/repos/{org}/{name}/feed.atom`, `GET /v1/repos/{org}/{name}/feed.json`

Query: `min_severity` (critical, high, moderate or low, any case; another value is a 400
problem document) and `limit` (1 to 500, default 100). `collect` reads only the newest `limit`
advisories and the newest `limit` fit moves from the store (`AdvisoryStore.newest`,
`AnalysisStore.fit_moves`), never a whole history. A fit move's severity is what the advisory
rules (the repo's watchlist overrides first) give its fit changes. Answers carry a strong ETag
and `Cache-Control: no-cache` (`tracker.api.caching`), and need the read token when one is set
(`tracker.api.auth`).
"""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import urlsplit

from fastapi import APIRouter, Depends, Query, Request
from starlette.responses import JSONResponse, Response

from tracker.advisories.classify import Overrides, classify, highest, parse_overrides
from tracker.api.advisories import SEVERITY_WORDS, _values, filter_problem
from tracker.api.auth import require_read
from tracker.api.caching import LIST, Kept, keep
from tracker.api.memo import kept_response
from tracker.api.params import SEVERITY_ANY_CASE, Name, Org, repo_id_of
from tracker.api.problem import Problem
from tracker.feeds import (
    ATOM_TYPE,
    DEFAULT_LIMIT,
    JSON_FEED_TYPE,
    MAX_LIMIT,
    Feed,
    FeedEntry,
    FitMove,
    advisory_entry,
    at_or_above,
    feed,
    fit_entry,
    render_atom,
    render_json_feed,
)
from tracker.feeds.entries import TAG
from tracker.feeds.jsonfeed import JsonFeed
from tracker.shared.domain import Artifact, ChangeKind, RepoId, Severity
from tracker.shared.errors import StoreNotFoundError, TrackerError
from tracker.store.queries import SEVERITY_ORDER, FilterError, advisory_filter
from tracker.web.markdown import render_markdown
from tracker.web.views import PagesApp, repo_url

router = APIRouter(tags=["feeds"], dependencies=[Depends(require_read)])
FIT_KINDS = (ChangeKind.FIT_LOST, ChangeKind.FIT_GAINED)


class AtomResponse(Response):
    media_type = ATOM_TYPE


class JsonFeedResponse(JSONResponse):
    """Declares the JSON Feed media type in OpenAPI (a JSON body, so its schema is `JsonFeed`)."""

    media_type = JSON_FEED_TYPE


def _overrides(app: PagesApp) -> dict[str, Overrides]:
    """Each watched repo's advisory overrides (none when the watchlist cannot be read: the
    default rules then decide, as they do for a repo no longer watched)."""
    try:
        repos = app.load_watchlist().repos
    except TrackerError:
        return {}
    out: dict[str, Overrides] = {}
    for r in repos:
        try:
            out[r.repo_id] = parse_overrides(r.advisories, where=f"{r.repo_id}.advisories")
        except TrackerError:
            continue
    return out


def tag_prefix(public_url: str | None) -> str:
    """The start of every feed and entry id: `tag:HOST,2026:` with the host of the deployment's
    public URL (lower case, no port: RFC 4151's authority is a DNS name), so two deployments,
    whose advisory numbers both start at 1, never mint the same id into one reader; `TAG`
    without one (`tracker.feeds.entries.TAG`). A one-time choice: changing the public URL changes every id."""
    if not public_url:
        return TAG
    host = (urlsplit(public_url).hostname or "").rstrip(".").lower()
    return f"tag:{host},2026:" if host else TAG


def collect(app: PagesApp, repo_id: str | None, floor: Severity | None, limit: int) -> Feed:
    """The feed of everything (`repo_id` None) or of one repo, reading only the newest `limit`
    advisories and fit moves (StoreNotFoundError for a repo the store does not hold)."""
    tag = tag_prefix(app.settings.public_url)
    urls: dict[str, str | None] = {}
    if repo_id is not None:
        urls[repo_id] = repo_url(app, app.store.repo_state(RepoId(repo_id)))
    allowed = at_or_above(floor)
    entries: list[FeedEntry] = [
        advisory_entry(a, tag, updated)
        for a, updated in app.advisories.newest_shown(
            limit, repo_id=repo_id, severities=allowed if floor is not None else None
        )
    ]
    moves = app.analysis.fit_moves(limit, repo_id=RepoId(repo_id) if repo_id else None)
    if moves:
        overrides = _overrides(app)
        reported = app.advisories.introduced_ids(
            [(m.repo_id, m.sha) for m in moves], Artifact.ESTIMATE
        )
        for m in moves:
            rules = overrides.get(m.repo_id, Overrides())
            fits = [c for c in m.changes if c.kind in FIT_KINDS]
            severity = highest([classify(c, rules).severity for c in fits])
            if severity not in allowed:
                continue
            if m.repo_id not in urls:
                urls[m.repo_id] = repo_url(app, app.store.repo_state(m.repo_id))
            move = FitMove(
                repo_id=m.repo_id,
                sha=m.sha,
                before=m.before,
                title=m.title,
                at=m.at,
                changes=m.changes,
                advisory_id=reported.get((m.repo_id, m.sha)),
            )
            entries.append(fit_entry(move, severity, urls[m.repo_id], tag))
    checked = app.store.last_ingested_at(RepoId(repo_id) if repo_id else None)
    return feed(
        repo_id=repo_id, floor=floor, entries=entries, limit=limit, tag=tag, checked=checked
    )


MIN_SEVERITY = _values(
    "Only entries of this severity or above: " + SEVERITY_WORDS
    + " Given several times, the lowest floor holds (as on /v1/advisories).",
    SEVERITY_ANY_CASE,
)  # fmt: skip
Floors = list[str] | None
LIMIT = Query(DEFAULT_LIMIT, ge=1, le=MAX_LIMIT, description="The newest this many entries.")
_ATOM_DOC: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "An Atom feed (RFC 4287), newest entry first.",
        "content": {ATOM_TYPE: {"schema": {"type": "string"}}},
    }
}
_JSON_DOC: dict[int | str, dict[str, Any]] = {
    200: {"description": "A JSON Feed 1.1, newest item first.", "model": JsonFeed}
}


def _serve(
    request: Request, repo_id: str | None, min_severity: Floors, limit: int, atom: bool
) -> Response:
    # The severity floor as /v1/advisories reads it (`tracker.store.queries.advisory_filter`): any
    # case, the lowest of several, an empty or unknown value a 400 naming the choices.
    try:
        where = advisory_filter(min_severities=min_severity or ())
    except FilterError as exc:
        raise filter_problem(exc) from None
    allowed = where.severities
    floor = None if allowed is None else min(allowed, key=SEVERITY_ORDER.index)
    app: PagesApp = request.app.state.app
    # Links are absolute against the configured public URL; without one, against the request's
    # own URL (Host header), which a reverse proxy may have rewritten.
    public = app.settings.public_url
    base = f"{public}/" if public else str(request.base_url)

    def render() -> Kept:
        try:
            built = collect(app, repo_id, floor, limit)
        except StoreNotFoundError as exc:
            raise Problem(404, "not-found", f"no repo {repo_id!r} in the store") from exc
        if atom:
            body = render_atom(built, base, html=render_markdown)
        else:
            body = render_json_feed(built, base, html=render_markdown)
        return keep(request, body, ATOM_TYPE if atom else JSON_FEED_TYPE, LIST)

    # The key holds the scheme, Host and root path: `base` when no public URL is set.
    return kept_response(request, render)


@router.get(
    "/v1/feeds/advisories.atom", response_class=AtomResponse, responses=_ATOM_DOC,
    summary="Atom feed of every repo's advisories and card-fit moves",
)  # fmt: skip
def advisories_atom(
    request: Request, min_severity: Annotated[Floors, MIN_SEVERITY] = None, limit: int = LIMIT
) -> Response:
    return _serve(request, None, min_severity, limit, atom=True)


@router.get(
    "/v1/feeds/advisories.json", response_class=JsonFeedResponse, responses=_JSON_DOC,
    summary="JSON Feed of every repo's advisories and card-fit moves",
)  # fmt: skip
def advisories_json(
    request: Request, min_severity: Annotated[Floors, MIN_SEVERITY] = None, limit: int = LIMIT
) -> Response:
    return _serve(request, None, min_severity, limit, atom=False)


@router.get(
    "/v1/repos/{org}/{name}/feed.atom", response_class=AtomResponse, responses=_ATOM_DOC,
    summary="Atom feed of one repo's advisories and card-fit moves",
)  # fmt: skip
def repo_atom(
    request: Request,
    org: Org,
    name: Name,
    min_severity: Annotated[Floors, MIN_SEVERITY] = None,
    limit: int = LIMIT,
) -> Response:
    return _serve(request, repo_id_of(org, name), min_severity, limit, atom=True)


@router.get(
    "/v1/repos/{org}/{name}/feed.json", response_class=JsonFeedResponse, responses=_JSON_DOC,
    summary="JSON Feed of one repo's advisories and card-fit moves",
)  # fmt: skip
def repo_json(
    request: Request,
    org: Org,
    name: Name,
    min_severity: Annotated[Floors, MIN_SEVERITY] = None,
    limit: int = LIMIT,
) -> Response:
    return _serve(request, repo_id_of(org, name), min_severity, limit, atom=False)
