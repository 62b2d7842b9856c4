"""Teams over HTTP (issue 29): the watchlist's team profiles, every advisory judged for a team
(affected, affects your next upgrade, not affected, unknown, with the reason), and a team's
upgrade report on one repo: the same JSON as `tracker team list|show|affected|report --json`
(`tracker.teams.service`). Behind `require_read`; the watchlist is read per request, so an edit
to `teams:` shows at once."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response

from tracker.api.auth import require_read
from tracker.api.caching import LIST, NOT_MODIFIED, cached_json
from tracker.api.params import Name, Org, repo_id_of
from tracker.api.problem import Problem
from tracker.errors import NotFoundError, NotWatchedError
from tracker.teams.profile import Team

router = APIRouter(tags=["teams"], dependencies=[Depends(require_read)])


def _team(request: Request, team: str) -> Team:
    try:
        found: Team = request.app.state.app.load_watchlist().team(team)
    except NotFoundError as exc:
        raise Problem(404, "no-team", str(exc)) from exc
    return found


@router.get("/v1/teams", responses=NOT_MODIFIED, summary="The teams of the watchlist")
def teams(request: Request) -> Response:
    from tracker.teams.service import team_json

    body = [team_json(t) for t in request.app.state.app.load_watchlist().teams]
    return cached_json(request, body, LIST)


@router.get("/v1/teams/{team}", responses=NOT_MODIFIED, summary="One team's profile")
def team(team: str, request: Request) -> Response:
    from tracker.teams.service import team_json

    return cached_json(request, team_json(_team(request, team)), LIST)


@router.get(
    "/v1/teams/{team}/affected",
    responses=NOT_MODIFIED,
    summary="Every advisory of the team's repos judged for the team, with the reason",
)
def affected(
    team: str,
    request: Request,
    every: bool = Query(
        False, alias="all", description="Every advisory, not only the team's repos'."
    ),
    impact: list[str] | None = Query(
        None,
        description="Only these impacts (affected, affects your next upgrade, not affected, "
        "unknown); repeatable.",
    ),
) -> Response:
    from tracker.teams.impact import Impact
    from tracker.teams.service import affected_rows

    wanted = set(impact or ())
    known = {i.value for i in Impact}
    if wanted - known:
        bad = sorted(wanted - known)[0]
        raise Problem(
            400, "bad-impact", f"impact {bad!r} must be one of {', '.join(sorted(known))}"
        )
    rows: list[dict[str, Any]] = affected_rows(
        request.app.state.app, _team(request, team), every=every
    )
    if wanted:
        rows = [r for r in rows if r["impact"] in wanted]
    return cached_json(request, rows, LIST)


@router.get(
    "/v1/teams/{team}/report/{org}/{name}",
    responses=NOT_MODIFIED,
    summary="The team's upgrade report on one repo: from its pin to HEAD, with a verdict",
)
def report(team: str, org: Org, name: Name, request: Request) -> Response:
    from tracker.teams.service import report_json, report_of

    profile = _team(request, team)
    repo_id = repo_id_of(org, name)
    try:
        got = report_of(request.app.state.app, profile, repo_id)
    except NotWatchedError as exc:
        raise Problem(404, "not-used", str(exc)) from exc
    if isinstance(got, str):
        raise Problem(404, "no-position", f"{repo_id}: team {team}'s place in the history: {got}")
    return cached_json(request, report_json(got), LIST)
