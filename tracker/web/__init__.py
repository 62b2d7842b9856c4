"""The model pages: server-rendered HTML on the same FastAPI app as the API (`mount(api, app)`).

Routes: `/` (watched repos, latest advisories), `/repos/{org}/{name}` (the model page at the head
or `?rev=`), `/repos/{org}/{name}/compare?from=&to=` (the diff between two revisions),
`/advisories/{id}` (one OSV record for a person), `/teams/{team}` and
`/teams/{team}/report/{org}/{name}` (a team's verdicts and upgrade report, from
`tracker.teams.service`), `/static/style.css`. jinja2 templates with autoescaping; no
JavaScript (a Content-Security-Policy forbids scripts); advisory
Markdown through `tracker.web.markdown`. Views read the App's stores (`tracker.web.views`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote, urlencode

from fastapi import FastAPI, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

from tracker.shared.errors import StoreError
from tracker.web import views
from tracker.web.markdown import render_markdown

STATIC = Path(__file__).with_name("static")
STYLESHEET = "/static/style.css"
CSP = (
    "default-src 'none'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
MAX_CHANGES = 40
MAX_TITLE = 200  # a longer commit title is cut on the page (shown whole under "Commit message")
HTML_TYPE = "text/html; charset=utf-8"


def _version() -> str:
    try:
        return version("tracker")
    except PackageNotFoundError:  # pragma: no cover - always installed
        return "dev"


def _num(x: Any) -> str:
    if isinstance(x, bool) or not isinstance(x, int | float):
        return str(x)
    return f"{x:,}" if isinstance(x, int) else f"{x:,.3f}"


_gb = views.gb_text


def _bytes(n: int) -> str:
    return f"{n / 1e9:,.2f} GB" if n >= 1e8 else f"{n / 1e6:,.1f} MB"


def _when(d: datetime | None) -> str:
    return "" if d is None else d.strftime("%Y-%m-%d %H:%M UTC")


def _day(d: datetime) -> str:
    return d.strftime("%Y-%m-%d")


def _shape(shape: Sequence[int] | None) -> str:
    return "" if not shape else "[" + " × ".join(f"{n:,}" for n in shape) + "]"


def _plain(value: Any) -> str:
    if isinstance(value, Mapping):
        return ", ".join(f"{k}: {_plain(v)}" for k, v in value.items())
    if isinstance(value, list | tuple):
        return ", ".join(_plain(v) for v in value)
    return _num(value) if isinstance(value, int | float) else str(value)


def repo_href(repo_id: str) -> str:
    return "/repos/" + quote(repo_id, safe="/")


def advisory_href(advisory_id: str) -> str:
    return "/advisories/" + quote(advisory_id, safe="")


def commit_href(repo_url: str | None, sha: str) -> str:
    """The commit's page upstream, or this revision's anchor on the repo page without one."""
    return f"{repo_url}/commit/{sha}" if repo_url else f"#rev-{sha}"


def environment() -> Environment:
    env = Environment(
        loader=PackageLoader("tracker.web", "templates"),
        autoescape=select_autoescape(["html"], default_for_string=True, default=True),
        undefined=StrictUndefined,
        trim_blocks=False,
        lstrip_blocks=False,
    )
    env.filters.update(
        num=_num,
        gb=_gb,
        bytes=_bytes,
        when=_when,
        day=_day,
        shape=_shape,
        plain=_plain,
        duration=views.duration_text,
    )
    env.globals.update(
        repo_href=repo_href,
        advisory_href=advisory_href,
        team_href=team_href,
        team_report_href=team_report_href,
        commit_href=commit_href,
        diff_lines=views.diff_lines,
        side_by_side=views.side_by_side,
        setups=views.SETUPS,
        estimate_word=views.estimate_word,
        estimate_words=views.ESTIMATE_WORDS,
        confident=views.confident,
        runnable_price=views.runnable_price,
        priced_card_runs=views.priced_card_runs,
        priced_card_chosen=views.priced_card_chosen,
        max_changes=MAX_CHANGES,
        max_title=MAX_TITLE,
        static_url=STYLESHEET,
        version=_version(),
    )
    return env


ATOM = "application/atom+xml"
JSON_FEED = "application/feed+json"


def feeds_of(repo_id: str | None) -> list[dict[str, str]]:
    """The Atom and JSON feeds of everything (`repo_id` None) or of one repo."""
    if repo_id is None:
        base, what = "/v1/feeds/advisories", "every repo"
    else:
        base, what = "/v1" + repo_href(repo_id) + "/feed", repo_id
    return [
        {"type": ATOM, "href": f"{base}.atom", "title": f"Atom feed: {what}"},
        {"type": JSON_FEED, "href": f"{base}.json", "title": f"JSON Feed: {what}"},
    ]


def alternates(page: str, **params: str) -> list[dict[str, str]]:
    """The feeds and JSON endpoints of the same view as `page` (linked `rel="alternate"`, so a
    feed reader given the page finds its feeds): home → the feeds of everything; a repo page →
    that repo's feeds; an advisory → its OSV JSON and its repo's feeds."""
    if page == "advisory":
        aid = quote(params["advisory_id"], safe="")
        osv = {"type": "application/json", "href": f"/v1/vulns/{aid}", "title": "OSV JSON"}
        return [osv, *feeds_of(params["repo_id"])]
    if page == "repo":
        return feeds_of(params["repo_id"])
    return feeds_of(None)


TEAM_IMPACTS = ("affected", "affects your next upgrade", "unknown", "not affected")


def team_href(team: str) -> str:
    return "/teams/" + quote(team, safe="")


def team_report_href(team: str, repo_id: str) -> str:
    return team_href(team) + "/report/" + quote(repo_id, safe="/")


def team_alternates(team: str) -> list[dict[str, str]]:
    """A team's feeds (the advisories that affect it now or at its next upgrade) and its
    verdicts as JSON."""
    base = "/v1" + team_href(team)
    return [
        {"type": ATOM, "href": f"{base}/feed.atom", "title": f"Atom feed: team {team}"},
        {"type": JSON_FEED, "href": f"{base}/feed.json", "title": f"JSON Feed: team {team}"},
        {"type": "application/json", "href": f"{base}/affected", "title": "Verdicts as JSON"},
    ]


class _Answer(Exception):
    """Raised inside a page's render: answer `response` (a 404 or 503 page) and keep nothing."""

    def __init__(self, response: Response) -> None:
        super().__init__(response.status_code)
        self.response = response


def mount(api: FastAPI, app: views.PagesApp) -> None:
    """Add the pages to `api`, reading `app`'s stores at request time.

    A page of status 200 is kept by the HTTP API's memo (`tracker.api.memo`), as the advisory
    list and the feeds are: keyed by the request (path and query, so `?rev=` too), served again
    without reading the store until the store's generation or the watchlist file changes (a new
    revision, analysis, advisory, fix or withdrawal, a repo's poll outcome: migration 0014), one
    render per key at a time. It answers a strong ETag over its bytes and honours
    `If-None-Match` with a 304 (`tracker.api.caching`, `Cache-Control: public, no-cache`), from
    the kept answer while it is current (no render). Nothing a page shows depends on the clock:
    dates are the stored ones, and a repo's poll time is shown only while its polls fail (each
    failed poll moves the generation). With a read token set, a page needs it
    (`tracker.web.access`: the bearer header, or the cookie the 401 page's form sets through
    `POST /session`), checked before a kept page is served (`Kept.access`); such a page is
    `private` and varies by `Authorization, Cookie`. 404 and 503 pages are not kept. A kept page
    holds its gzip form too (`tracker.api.encoding`: `Vary: Accept-Encoding`, the ETag suffixed
    `-gzip`), compressed once per render; an advisory page says `Last-Modified` (the record's
    `modified`)."""
    # Imported here: tracker.api imports this package (its app mounts the pages).
    from tracker.api.caching import LIST, Kept, keep
    from tracker.api.memo import kept_response, memo_of
    from tracker.web import access

    env = environment()
    css = (STATIC / "style.css").read_bytes()

    def may_read(request: Request) -> bool:
        return access.allowed(request, app.settings)

    def kept_page(
        request: Request, name: str, last_modified: datetime | None = None, **ctx: Any
    ) -> Kept:
        ctx.setdefault("alternates", [])
        body = env.get_template(name).render(**ctx).encode()
        shared = False
        if last_modified is None and (seen := memo_of(request).made_at()) is not None:
            last_modified, shared = seen.second, seen.shared
        return keep(
            request,
            body,
            HTML_TYPE,
            LIST,
            headers=_headers(),
            vary="Authorization, Cookie",
            access=may_read,
            last_modified=last_modified,
            modified_shared=shared,
        )

    def page(name: str, status: int = 200, **ctx: Any) -> Response:
        ctx.setdefault("alternates", [])
        html = env.get_template(name).render(**ctx)
        return HTMLResponse(html, status_code=status, headers=_headers())

    def unauthorized(request: Request, wrong: bool = False, target: str | None = None) -> Response:
        if target is None:
            target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        headers = {"WWW-Authenticate": 'Bearer realm="tracker"'}
        html = env.get_template("login.html").render(
            title="Read token needed", alternates=[], next=access.safe_next(target), wrong=wrong
        )
        return HTMLResponse(html, status_code=401, headers={**_headers(), **headers})

    def gate(request: Request) -> Response | None:
        """The 401 page when `request` may not read the pages, else None."""
        return None if may_read(request) else unauthorized(request)

    def missing(message: str) -> Response:
        return page("error.html", 404, title="Not found", message=message)

    def unavailable() -> Response:
        message = "The store cannot be read right now; try again shortly."
        return page("error.html", 503, title="Store unavailable", message=message)

    def answer(request: Request, render: Callable[[], Kept]) -> Response:
        """The kept page for `request` while current, else `render()`'s (kept when it is one)."""
        try:
            return kept_response(request, render)
        except _Answer as not_kept:
            return not_kept.response
        except StoreError:  # the store's generation could not be read
            return unavailable()

    @api.get("/", response_class=HTMLResponse, include_in_schema=False)
    def home_page(request: Request) -> Response:
        if (denied := gate(request)) is not None:
            return denied

        def render() -> Kept:
            names, problem = views.watchlist_names(app.load_watchlist)
            try:
                view = views.home(app, names, problem)
            except StoreError:
                raise _Answer(unavailable()) from None
            return kept_page(
                request,
                "home.html",
                view=view,
                teams=views.team_names(app.load_watchlist),
                alternates=alternates("home"),
            )

        return answer(request, render)

    @api.get("/repos/{org}/{name}", response_class=HTMLResponse, include_in_schema=False)
    def repo_page(request: Request, org: str, name: str, rev: str | None = None) -> Response:
        from tracker.web.charts import charts

        if (denied := gate(request)) is not None:
            return denied
        repo_id = f"{org}/{name}"

        def render() -> Kept:
            try:
                view = views.repo(app, repo_id, rev.strip() if rev else None)
            except views.PageNotFound as exc:
                raise _Answer(missing(str(exc))) from None
            except StoreError:
                raise _Answer(unavailable()) from None
            est = view.estimate
            return kept_page(
                request,
                "repo.html",
                view=view,
                headline=views.headline(repo_id, est) if est is not None else [],
                charts=charts(view.points),
                alternates=alternates("repo", repo_id=repo_id),
            )

        return answer(request, render)

    @api.get("/repos/{org}/{name}/compare", response_class=HTMLResponse, include_in_schema=False)
    def compare_page(
        request: Request,
        org: str,
        name: str,
        from_: Annotated[str | None, Query(alias="from")] = None,
        to: str | None = None,
    ) -> Response:
        """The diff between two stored revisions, rendered: the same changes as
        `GET /v1/repos/ORG/NAME/diff?from=&to=`. A missing or malformed revision is a 400, an
        unknown repo or revision a 404: a page for a browser, a problem document for a client
        that does not ask for HTML (`tracker.api.problem.wants_page`)."""
        from tracker.api.problem import respond, wants_page

        if (denied := gate(request)) is not None:
            return denied
        repo_id = f"{org}/{name}"

        def refused(status: int, slug: str, title: str, message: str) -> _Answer:
            if wants_page(request):
                return _Answer(page("error.html", status, title=title, message=message))
            return _Answer(respond(status, slug, message, request.url.path))

        def render() -> Kept:
            try:
                view = views.compare(app, repo_id, from_, to)
            except views.BadCompare as exc:
                raise refused(400, "invalid-request", "Bad comparison", str(exc)) from None
            except views.PageNotFound as exc:
                raise refused(404, "not-found", "Not found", str(exc)) from None
            except StoreError:
                raise _Answer(unavailable()) from None
            api_href = (
                "/v1"
                + repo_href(repo_id)
                + "/diff?"
                + urlencode({"from": view.base.sha, "to": view.head.sha})
            )
            return kept_page(
                request,
                "compare.html",
                view=view,
                api_href=api_href,
                alternates=alternates("repo", repo_id=repo_id),
            )

        return answer(request, render)

    @api.get("/advisories/{advisory_id}", response_class=HTMLResponse, include_in_schema=False)
    def advisory_page(request: Request, advisory_id: str) -> Response:
        if (denied := gate(request)) is not None:
            return denied

        def render() -> Kept:
            try:
                view = views.advisory(app, advisory_id)
            except views.PageNotFound as exc:
                raise _Answer(missing(str(exc))) from None
            except StoreError:
                raise _Answer(unavailable()) from None
            return kept_page(
                request,
                "advisory.html",
                view=view,
                details_html=render_markdown(view.details),
                last_modified=view.row.modified,
                alternates=alternates(
                    "advisory", advisory_id=advisory_id, repo_id=view.advisory.repo_id
                ),
            )

        return answer(request, render)

    @api.get("/advisories", response_class=HTMLResponse, include_in_schema=False)
    def advisory_index_page(request: Request) -> Response:
        """Every advisory, newest published first, filtered by repo, severity, state and kind
        as `/v1/advisories` filters, 50 a page."""
        from tracker.web import index

        if (denied := gate(request)) is not None:
            return denied
        q = request.query_params

        def values(name: str) -> list[str]:
            return [v for v in q.getlist(name) if v.strip()]

        def render() -> Kept:
            try:
                view = index.advisory_index(
                    app,
                    repo=values("repo"),
                    severity=values("severity"),
                    state=values("state"),
                    kind=values("kind"),
                    before=q.get("before"),
                )
            except index.BadQuery as exc:
                raise _Answer(
                    page("error.html", 400, title="Bad filter", message=str(exc))
                ) from None
            except StoreError:
                raise _Answer(unavailable()) from None
            first = [(k, v) for k, v in q.multi_items() if k != "before"]
            return kept_page(
                request,
                "advisory_index.html",
                view=view,
                severities=index.SEVERITIES,
                states=index.STATES,
                first_query=urlencode(first),
                alternates=alternates("home"),
            )

        return answer(request, render)

    def team_of(name: str) -> Any:
        from tracker.shared.errors import NotFoundError

        try:
            return app.load_watchlist().team(name)
        except NotFoundError as exc:
            raise _Answer(missing(str(exc))) from None

    @api.get("/teams", response_class=HTMLResponse, include_in_schema=False)
    def teams_page(request: Request) -> Response:
        """Every watchlist team with its repos and how many open advisories of them affect it
        today, at its next upgrade, or are unknown for it (`tracker.teams.service.index_rows`),
        each linking to its team page."""
        from tracker.shared.errors import TrackerError
        from tracker.teams.service import INDEX_IMPACTS, index_rows

        if (denied := gate(request)) is not None:
            return denied

        def render() -> Kept:
            error = None
            try:
                teams = app.load_watchlist().teams
            except TrackerError as exc:
                teams, error = (), str(exc).splitlines()[0]
            try:
                rows = index_rows(app, teams)
            except StoreError:
                raise _Answer(unavailable()) from None
            return kept_page(
                request, "teams.html", teams=rows, impacts=INDEX_IMPACTS, watchlist_error=error
            )

        return answer(request, render)

    @api.get("/teams/{team}", response_class=HTMLResponse, include_in_schema=False)
    def team_page(request: Request, team: str) -> Response:
        """A team's profile and every advisory of its repos judged for it, with the reason
        (`tracker team show|affected`'s rows, `tracker.teams.service`)."""
        from tracker.teams.service import affected_rows, team_json

        if (denied := gate(request)) is not None:
            return denied

        def render() -> Kept:
            profile = team_of(team)
            try:
                rows = affected_rows(app, profile, every=False)
            except StoreError:
                raise _Answer(unavailable()) from None
            groups = [(i, [r for r in rows if r["impact"] == i]) for i in TEAM_IMPACTS]
            return kept_page(
                request,
                "team.html",
                team=team_json(profile),
                positions={r.repo_id: r.position for r in profile.repos},
                rows=rows,
                groups=groups,
                alternates=team_alternates(profile.name),
            )

        return answer(request, render)

    @api.get(
        "/teams/{team}/report/{org}/{name}", response_class=HTMLResponse, include_in_schema=False
    )
    def team_report_page(request: Request, team: str, org: str, name: str) -> Response:
        """A team's upgrade report on one repo (`tracker team report`'s, from
        `tracker.teams.service.report_of`): its pin → HEAD, the advisories that apply, the
        verdict."""
        from tracker.shared.errors import InvalidRepoIdError, NotWatchedError
        from tracker.teams.service import report_json, report_of

        if (denied := gate(request)) is not None:
            return denied
        repo_id = f"{org}/{name}"

        def render() -> Kept:
            profile = team_of(team)
            try:
                got = report_of(app, profile, repo_id)
            except (NotWatchedError, InvalidRepoIdError) as exc:
                raise _Answer(missing(str(exc))) from None
            except StoreError:
                raise _Answer(unavailable()) from None
            if isinstance(got, str):
                said = f"{repo_id}: team {team}'s place in the history: {got}"
                raise _Answer(missing(said)) from None
            return kept_page(
                request,
                "team_report.html",
                report=report_json(got),
                alternates=[
                    {
                        "type": "application/json",
                        "href": "/v1" + team_report_href(profile.name, repo_id),
                        "title": "The report as JSON",
                    },
                    *team_alternates(profile.name),
                ],
            )

        return answer(request, render)

    @api.get("/repos", include_in_schema=False)
    @api.get("/repos/", include_in_schema=False)
    def repos_index() -> Response:
        """The watched repos are the home page's list."""
        return RedirectResponse("/", status_code=308)

    @api.get("/repos/{org}", response_class=HTMLResponse, include_in_schema=False)
    def org_page(request: Request, org: str) -> Response:
        """The repos of one organisation, as the home page lists them."""
        from tracker.web import index

        if (denied := gate(request)) is not None:
            return denied

        def render() -> Kept:
            names, problem = views.watchlist_names(app.load_watchlist)
            try:
                view = index.org_view(views.home(app, names, problem), org)
            except StoreError:
                raise _Answer(unavailable()) from None
            if not view.repos:
                raise _Answer(missing(f"No watched or stored repo of {org}."))
            return kept_page(
                request, "home.html", view=view, org=org, alternates=alternates("home")
            )

        return answer(request, render)

    api.state.html_error = lambda status, title, message: page(
        "error.html", status, title=title, message=message
    )

    @api.post("/session", include_in_schema=False)
    async def session(request: Request) -> Response:
        """The 401 page's form: a valid read token becomes the session's cookie (then back to
        the page asked for, 303); a wrong one gets the form again (401)."""
        fields = await access.form(request)
        target = access.safe_next(fields.get("next"))
        if not app.settings.api_tokens("read"):
            return RedirectResponse(target, status_code=303)  # the pages are open
        if not access.token_ok(fields.get("token", ""), app.settings):
            return unauthorized(request, wrong=True, target=target)
        out = RedirectResponse(target, status_code=303)
        out.set_cookie(
            access.COOKIE,
            fields["token"],
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
            path="/",
        )
        return out

    @api.get("/favicon.ico", include_in_schema=False)
    def favicon() -> Response:
        """No icon (the pages say `rel="icon" href="data:,"`); a browser showing a JSON answer
        asks anyway, and gets an empty 204 instead of a 404 in its console."""
        return Response(status_code=204, headers={"Cache-Control": "public, max-age=86400"})

    @api.get(STYLESHEET, include_in_schema=False)
    def stylesheet() -> Response:
        return Response(
            css,
            media_type="text/css; charset=utf-8",
            headers={"Cache-Control": "public, max-age=3600"},
        )


def _headers() -> dict[str, str]:
    return {
        "Content-Security-Policy": CSP,
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
    }
