"""The HTTP API: `create_app(app)` builds the FastAPI application: the OSV API (`osv`), the push
side's routes (`hooks`: webhook subscriptions, the Hub's webhook, the manual poll trigger), the
feeds (`feeds`: Atom and JSON Feed) and the model pages (`tracker.web`)."""

from __future__ import annotations

from typing import Protocol

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware
from fastapi_offline import FastAPIOffline

from tracker.api import advisories, feeds, hooks, ops, preflight, problem, repos, teams
from tracker.api.auth import optional_reads
from tracker.api.encoding import Compress
from tracker.api.head import HeadAsGet
from tracker.api.limits import BodyLimit
from tracker.api.memo import MemoHits
from tracker.api.osv import DEFAULT_PAGE_SIZE, router
from tracker.settings import Settings, cors_list
from tracker.store.advisories import AdvisoryStore
from tracker.store.ops import OpsReader
from tracker.store.statements import StatementCount
from tracker.web import mount as mount_pages
from tracker.web.views import PagesApp

CORS_EXPOSED = [
    "ETag",
    "Link",
    "Retry-After",
    "Allow",
    "Repr-Digest",
    "X-Content-SHA256",
    "X-Git-Blob-Id",
    "X-LFS-SHA256",
    "X-Revision",
    "X-Tracker-Stored",
]
"""The answer headers a cross-origin script may read beside the CORS-safelisted ones."""


class HasAdvisories(Protocol):
    """What the API needs from `tracker.app.App`: settings and the advisory store."""

    @property
    def settings(self) -> Settings: ...

    @property
    def advisories(self) -> AdvisoryStore: ...


def create_app(app: PagesApp, *, page_size: int = DEFAULT_PAGE_SIZE) -> FastAPI:
    """A FastAPI app serving the OSV API over `app.advisories` and the model pages
    (`tracker.web`, which read the App's stores at request time).

    Every error is a problem document (`tracker.api.problem`); on the OSV routes it also carries
    osv.dev's `code` and `message`: bad requests `400` (code 3), unknown ids `404` (code 5),
    store failures `503` (code 14); a body over 1 MB `413` while it streams in, a JSON body
    nested too deep `400` (`tracker.api.limits.BodyLimit`). Reads may need a token
    (`tracker.api.auth`). Nothing is created at import time.
    """
    # /docs (Swagger UI) loads its script and style from fastapi-offline's package
    # (/static-offline-docs/), not a CDN: the docs work with the network off. No /redoc: ReDoc's
    # sidebar loads its logo from cdn.redoc.ly.
    api = FastAPIOffline(
        title="tracker",
        summary="OSV advisories for Hugging Face model repos",
        version="0.1.0",
        redoc_url=None,
    )
    api.state.advisories = app.advisories
    api.state.page_size = page_size
    api.state.app = app  # the push side's routes read the App (tracker.api.hooks)
    api.include_router(router)
    api.include_router(repos.router)
    api.include_router(advisories.router)
    api.include_router(preflight.router)
    api.include_router(teams.router)
    api.include_router(hooks.router)
    api.include_router(feeds.router)
    mount_pages(api, app)
    api.add_middleware(MemoHits)  # inside BodyLimit, HeadAsGet and the metrics
    api.add_middleware(Compress)  # what MemoHits and the routes answer uncoded and untagged
    api.add_middleware(BodyLimit)
    api.add_middleware(HeadAsGet)
    origins = cors_list(app.settings.cors_origins)
    if origins:  # outermost: a preflight is answered before anything else reads the request
        api.add_middleware(
            CORSMiddleware,
            allow_origins=origins,
            allow_methods=["GET", "HEAD", "POST", "PATCH", "DELETE"],
            allow_headers=["Authorization", "Content-Type", "If-None-Match"],
            expose_headers=CORS_EXPOSED,
            max_age=600,
        )
    problem.install(api)
    problem.problem_openapi(api, then=optional_reads)
    # an App without a store (an advisories-only app, as some callers build) counts nothing
    store = getattr(app, "store", None)
    statements = StatementCount(store.engine) if store is not None else None
    api.state.statements = statements
    # /healthz, /readyz, /metrics
    settings = getattr(app, "settings", None)
    load = getattr(app, "load_watchlist", None)

    def intervals() -> dict[str, float]:  # the watchlist read at each scrape
        assert load is not None
        return {str(r.repo_id): r.poll_interval_s for r in load().repos}

    ops.install(
        api,
        lambda: OpsReader(app.store.engine),
        statements=statements,
        worker_lease_s=settings.worker_lease_s if settings is not None else 120.0,
        intervals=intervals if load is not None and settings is not None else None,
    )

    return api
