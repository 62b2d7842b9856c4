"""`GET /v1/advisories`: advisories filtered by repo, severity (or a floor), change kind, state
and `since` (modified at or after), a page at a time (opaque cursor, `Link: rel="next"`), each a
summary linking to its full OSV record (`/v1/vulns/ID`). Pages are read in SQL
(`tracker.store.advisories.listing`): 10,000 advisories cost one bounded query per page."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response

from tracker.api import paging
from tracker.api.auth import require_read
from tracker.api.caching import (
    JSON_TYPE,
    LIST,
    NOT_MODIFIED,
    Kept,
    json_bytes,
    keep,
)
from tracker.api.memo import memo_of, request_key
from tracker.api.models import AdvisoryPage, Order
from tracker.api.problem import Problem
from tracker.domain import (
    AdvisoryState,
    Artifact,
    Severity,
    parse_repo_id,
    parse_rfc3339,
    rfc3339,
)
from tracker.errors import InvalidRepoIdError
from tracker.store.advisories.listing import AdvisoryFilter, AdvisorySummary, advisory_page

router = APIRouter(tags=["advisories"], dependencies=[Depends(require_read)])
SEVERITY_ORDER = (Severity.LOW, Severity.MODERATE, Severity.HIGH, Severity.CRITICAL)


def _at_least(floor: Severity) -> frozenset[Severity]:
    return frozenset(SEVERITY_ORDER[SEVERITY_ORDER.index(floor) :])


def _item(a: AdvisorySummary) -> dict[str, Any]:
    return {
        "id": a.id,
        "repo": a.repo_id,
        "introduced": a.introduced,
        "kind": a.group.value,
        "severity": a.severity.value,
        "state": a.state.value,
        "published": rfc3339(a.published),
        "modified": rfc3339(a.modified),
        "summary": a.summary,
        "link": "/v1/vulns/" + quote(a.id, safe=""),
    }


def _since(text: str | None) -> datetime | None:
    if text is None:
        return None
    try:
        return parse_rfc3339(text)
    except ValueError:
        raise Problem(
            400,
            "invalid-request",
            f"since: {text!r} is not an RFC 3339 time (2026-11-30T09:30:00Z)",
        ) from None


@router.get(
    "/v1/advisories",
    response_model=AdvisoryPage,
    responses=NOT_MODIFIED,
    summary="Advisories, filtered, a page at a time (oldest or newest published first)",
)
def list_advisories(
    request: Request,
    repo: Annotated[str | None, Query(max_length=200, description="ORG/NAME")] = None,
    severity: Severity | None = None,
    min_severity: Annotated[
        Severity | None, Query(description="This severity or a higher one.")
    ] = None,
    kind: Annotated[Artifact | None, Query(description="The change kind (advisory group).")] = None,
    state: AdvisoryState | None = None,
    since: Annotated[
        str | None, Query(max_length=40, description="RFC 3339: modified at or after.")
    ] = None,
    order: Order = "oldest",
    limit: Annotated[int, Query(ge=1, le=paging.MAX_LIMIT)] = paging.DEFAULT_LIMIT,
    cursor: Annotated[str | None, Query(max_length=500)] = None,
) -> Response:
    if repo is not None:
        try:
            repo = parse_repo_id(repo)
        except InvalidRepoIdError as exc:
            raise Problem(400, "invalid-repo-id", f"repo: {exc}") from None
    severities: frozenset[Severity] | None = None
    if min_severity is not None:
        severities = _at_least(min_severity)
    if severity is not None:
        severities = (severities or frozenset(Severity)) & {severity}
    where = AdvisoryFilter(
        repo_id=repo, severities=severities, group=kind, state=state, since=_since(since)
    )
    params = {
        "repo": repo,
        "severity": severity,
        "min_severity": min_severity,
        "kind": kind,
        "state": state,
        "since": where.since,
        "order": order,
    }
    scope = paging.scope_of("advisories", params)
    key = paging.decode(cursor, scope)
    after: tuple[datetime, str] | None = None
    if key is not None:
        try:
            after = (datetime.fromtimestamp(int(key[0]), UTC), str(key[1]))
        except (IndexError, TypeError, ValueError, OverflowError, OSError):
            raise Problem(400, "invalid-cursor", "cursor: not a cursor this API gave out") from None
    app = request.app.state.app

    def render() -> Kept:
        page = advisory_page(
            app.store.engine, where, newest_first=order == "newest", after=after, limit=limit + 1
        )
        more = len(page) > limit
        page = page[:limit]
        nxt = None
        if more:
            last = page[-1]
            nxt = paging.encode(scope, [int(last.published.timestamp()), last.id])
        body = json_bytes({"items": [_item(a) for a in page], "next": nxt})
        headers = paging.next_link(request, nxt) if nxt else None
        return keep(request, body, JSON_TYPE, LIST, headers=headers)

    return memo_of(request).get_or_make(request_key(request), render).response(request)
