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
from tracker.api.memo import kept_response
from tracker.api.models import AdvisoryPage, Order
from tracker.api.params import SEVERITY_ANY_CASE, Cursor, any_case
from tracker.api.problem import Problem
from tracker.shared.domain import AdvisoryState, Artifact, rfc3339
from tracker.shared.errors import InvalidRepoIdError
from tracker.store.advisories.listing import AdvisorySummary, advisory_page
from tracker.store.queries import FilterError, advisory_filter

router = APIRouter(tags=["advisories"], dependencies=[Depends(require_read)])
MAX_VALUES = 50  # values of one filter in one request


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


def _values(description: str, pattern: str | None = None, max_length: int = 200) -> Any:
    """A filter that may be repeated (any of its values); each value declared as `pattern` in
    the schema (the handler reads it in any case and answers its own 400 otherwise)."""
    items: dict[str, Any] = {"type": "string", "maxLength": max_length}
    if pattern is not None:
        items["pattern"] = pattern
    return Query(
        description=description + " Repeat for several: any of them.",
        max_length=MAX_VALUES,
        json_schema_extra={"items": items},
    )


SEVERITY_WORDS = "critical, high, moderate or low, any case."


def filter_problem(exc: FilterError) -> Problem:
    """The 400 for a filter value that is not one of its choices (advisories and feeds alike)."""
    return Problem(
        400,
        "invalid-request",
        f"{exc.name}: {exc.reason}",
        errors=[{"location": f"query.{exc.name}", "message": exc.reason}],
    )


Values = list[str] | None


@router.get(
    "/v1/advisories",
    response_model=AdvisoryPage,
    responses=NOT_MODIFIED,
    summary="Advisories, filtered, a page at a time (oldest or newest published first)",
)
def list_advisories(
    request: Request,
    repo: Annotated[Values, _values("ORG/NAME.")] = None,
    severity: Annotated[Values, _values(SEVERITY_WORDS, SEVERITY_ANY_CASE)] = None,
    min_severity: Annotated[
        Values, _values("This severity or a higher one: " + SEVERITY_WORDS, SEVERITY_ANY_CASE)
    ] = None,
    kind: Annotated[
        Values,
        _values(
            "The change kind (advisory group), any case.", any_case([a.value for a in Artifact])
        ),
    ] = None,
    state: Annotated[
        Values,
        _values("open, fixed or withdrawn, any case.", any_case([s.value for s in AdvisoryState])),
    ] = None,
    since: Annotated[
        Values,
        _values(
            "Modified (as shown, to the second) at or after: RFC 3339, or an ISO date or "
            "date-time read as UTC.",
            max_length=40,
        ),
    ] = None,
    order: Order = "oldest",
    limit: Annotated[int, Query(ge=1, le=paging.MAX_LIMIT)] = paging.DEFAULT_LIMIT,
    cursor: Cursor = None,
) -> Response:
    """Filters combine: every one given must hold; one given several times matches any of its
    values (`tracker.store.queries.advisory_filter`, as `tracker advisories list` applies them)."""
    try:
        where = advisory_filter(
            repos=repo or (),
            severities=severity or (),
            min_severities=min_severity or (),
            kinds=kind or (),
            states=state or (),
            since=since or (),
        )
    except InvalidRepoIdError as exc:
        raise Problem(400, "invalid-repo-id", f"repo: {exc}") from None
    except FilterError as exc:
        raise filter_problem(exc) from None
    params = {
        "repo": sorted(where.repo_ids or ()),
        "severity": sorted(where.severities or ()),
        "kind": sorted(where.groups or ()),
        "state": sorted(where.states or ()),
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

    return kept_response(request, render)
