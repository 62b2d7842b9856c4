"""The model pages: server-rendered HTML on the same FastAPI app as the API (`mount(api, app)`).

Routes: `/` (watched repos, latest advisories), `/repos/{org}/{name}` (the model page at the head
or `?rev=`), `/advisories/{id}` (one OSV record for a person), `/static/style.css`. jinja2
templates with autoescaping; no JavaScript (a Content-Security-Policy forbids scripts); advisory
Markdown through `tracker.web.markdown`. Views read the App's stores (`tracker.web.views`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any
from urllib.parse import quote

from fastapi import FastAPI
from fastapi.responses import HTMLResponse, Response
from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

from tracker.errors import StoreError
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


def _gb(x: float) -> str:
    return f"{x:,.2f} GB" if x >= 0.1 or x == 0 else f"{x * 1000:,.1f} MB"


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
        num=_num, gb=_gb, bytes=_bytes, when=_when, day=_day, shape=_shape, plain=_plain
    )
    env.globals.update(
        repo_href=repo_href,
        advisory_href=advisory_href,
        commit_href=commit_href,
        diff_lines=views.diff_lines,
        setups=views.SETUPS,
        max_changes=MAX_CHANGES,
        max_title=MAX_TITLE,
        static_url=STYLESHEET,
        version=_version(),
    )
    return env


def alternates(page: str, **params: str) -> list[dict[str, str]]:
    """The feeds and JSON endpoints of the same view as `page` (linked `rel="alternate"`)."""
    if page == "advisory":
        aid = quote(params["advisory_id"], safe="")
        return [{"type": "application/json", "href": f"/v1/vulns/{aid}", "title": "OSV JSON"}]
    return []


def mount(api: FastAPI, app: views.PagesApp) -> None:
    """Add the pages to `api`, reading `app`'s stores at request time."""
    env = environment()
    css = (STATIC / "style.css").read_bytes()

    def page(name: str, status: int = 200, **ctx: Any) -> HTMLResponse:
        ctx.setdefault("alternates", [])
        html = env.get_template(name).render(**ctx)
        return HTMLResponse(html, status_code=status, headers=_headers())

    def missing(message: str) -> HTMLResponse:
        return page("error.html", 404, title="Not found", message=message)

    def unavailable() -> HTMLResponse:
        message = "The store cannot be read right now; try again shortly."
        return page("error.html", 503, title="Store unavailable", message=message)

    @api.get("/", response_class=HTMLResponse, include_in_schema=False)
    def home_page() -> HTMLResponse:
        names, problem = views.watchlist_names(app.load_watchlist)
        try:
            view = views.home(app, names, problem)
        except StoreError:
            return unavailable()
        return page("home.html", view=view, alternates=alternates("home"))

    @api.get("/repos/{org}/{name}", response_class=HTMLResponse, include_in_schema=False)
    def repo_page(org: str, name: str, rev: str | None = None) -> HTMLResponse:
        from tracker.web.charts import charts

        repo_id = f"{org}/{name}"
        try:
            view = views.repo(app, repo_id, rev.strip() if rev else None)
        except views.PageNotFound as exc:
            return missing(str(exc))
        except StoreError:
            return unavailable()
        est = view.estimate
        return page(
            "repo.html",
            view=view,
            headline=views.headline(repo_id, est) if est is not None else [],
            charts=charts(view.points),
            alternates=alternates("repo", repo_id=repo_id),
        )

    @api.get("/advisories/{advisory_id}", response_class=HTMLResponse, include_in_schema=False)
    def advisory_page(advisory_id: str) -> HTMLResponse:
        try:
            view = views.advisory(app, advisory_id)
        except views.PageNotFound as exc:
            return missing(str(exc))
        except StoreError:
            return unavailable()
        return page(
            "advisory.html",
            view=view,
            details_html=render_markdown(view.details),
            alternates=alternates(
                "advisory", advisory_id=advisory_id, repo_id=view.advisory.repo_id
            ),
        )

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
