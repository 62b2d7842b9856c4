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
from tracker.shared.errors import NotFoundError, NotWatchedError
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


FEED_IMPACTS = ("affected", "affects your next upgrade")


def team_feed(app: Any, profile: Team, limit: int) -> Any:
    """The feed of the advisories that affect `profile` today or at its next upgrade, each
    entry's summary and content led by the verdict and its reason; the newest `limit`."""
    from dataclasses import replace

    from tracker.api.feeds import tag_prefix
    from tracker.feeds import advisory_entry, feed
    from tracker.teams.facts import StoreFacts
    from tracker.teams.impact import judge

    tag = tag_prefix(app.settings.public_url)
    facts = StoreFacts(app.store, app.preflight)
    entries = []
    for use in profile.repos:
        for adv, updated in app.advisories.newest_shown(limit, repo_id=use.repo_id):
            v = judge(adv, profile, facts)
            if v.impact.value not in FEED_IMPACTS:
                continue
            entry = advisory_entry(adv, tag, updated)
            said = f"{v.impact.value} (team {profile.name}): {v.reason}"
            entries.append(
                replace(
                    entry,
                    summary=f"{said}. {entry.summary}",
                    content=f"**{said}**\n\n{entry.content}",
                )
            )
    checked = max(
        (t for t in (app.store.last_ingested_at(r.repo_id) for r in profile.repos) if t),
        default=None,
    )
    base = feed(repo_id=None, floor=None, entries=entries, limit=limit, tag=tag, checked=checked)
    path = f"/v1/teams/{profile.name}"
    return replace(
        base,
        id=f"{tag}feed/team/{profile.name}",
        title=f"tracker: advisories that affect team {profile.name}",
        subtitle="Advisories that affect the team now or at its next upgrade, newest first",
        self_path=f"{path}/feed.atom",
        json_path=f"{path}/feed.json",
        page_path="/",
    )


def _feed(request: Request, team: str, limit: int, atom: bool) -> Response:
    from tracker.api.caching import cached_response
    from tracker.feeds import ATOM_TYPE, JSON_FEED_TYPE, render_atom, render_json_feed
    from tracker.web.markdown import render_markdown

    app = request.app.state.app
    built = team_feed(app, _team(request, team), limit)
    public = app.settings.public_url
    base = f"{public}/" if public else str(request.base_url)
    if atom:
        body = render_atom(built, base, html=render_markdown)
    else:
        body = render_json_feed(built, base, html=render_markdown)
    return cached_response(request, body, ATOM_TYPE if atom else JSON_FEED_TYPE, LIST)


@router.get(
    "/v1/teams/{team}/feed.atom",
    responses=NOT_MODIFIED,
    summary="Atom feed of the advisories that affect the team (now or at its next upgrade)",
)
def team_feed_atom(team: str, request: Request, limit: int = Query(100, ge=1, le=500)) -> Response:
    return _feed(request, team, limit, atom=True)


@router.get(
    "/v1/teams/{team}/feed.json",
    responses=NOT_MODIFIED,
    summary="JSON Feed of the advisories that affect the team (now or at its next upgrade)",
)
def team_feed_json(team: str, request: Request, limit: int = Query(100, ge=1, le=500)) -> Response:
    return _feed(request, team, limit, atom=False)
