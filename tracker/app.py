"""The composition root: `build(settings)` creates every collaborator once and wires them.

The App holds the settings, the stores (snapshots `store`, `advisories`, `analysis`, `preflight`),
the transformers `symbol_tables` preflight checks remote code against, the repo
`sources`, the `clock` and the `pipeline` built from them; commands, the daemon, the API, the bench
and tests take what they need from it and never build their own. Nothing is created at import time.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from tracker.settings import Settings
from tracker.shared.domain import Clock
from tracker.shared.errors import ConfigError, StoreError
from tracker.sources import RepoSource, Sources
from tracker.store import Store
from tracker.store.advisories import AdvisoryStore
from tracker.store.analysis import AnalysisStore
from tracker.store.webhooks import WebhookStore

if TYPE_CHECKING:
    from tracker.pipeline import Pipeline, Stages
    from tracker.preflight.wheels import SymbolTables
    from tracker.store.preflight import PreflightStore
    from tracker.watchlist import WatchedRepo, Watchlist


def utc_now() -> datetime:
    """The real clock (the App's default)."""
    return datetime.now(UTC)


@dataclass(frozen=True)
class App:
    """Everything a command needs, built once from settings by `build`. Call `close()` when done."""

    settings: Settings
    store: Store
    advisories: AdvisoryStore
    analysis: AnalysisStore
    sources: Sources
    clock: Clock
    stages: Stages | None = None

    def load_watchlist(self) -> Watchlist:
        """Parse `settings.watchlist` (WatchlistError listing every problem); re-read each call."""
        from tracker.watchlist import load_watchlist

        return load_watchlist(self.settings.watchlist)

    def source_for(self, repo: WatchedRepo) -> RepoSource:
        """The source a watched repo is read from (its own instance; see `Sources`)."""
        return self.sources.for_repo(repo.repo_id, repo.git)

    @cached_property
    def preflight(self) -> PreflightStore:
        """The preflight answers per revision (in the revision diff store)."""
        from tracker.store.preflight import PreflightStore

        return PreflightStore(self.store.engine)

    @cached_property
    def symbol_tables(self) -> SymbolTables:
        """transformers symbol tables by version (cached under the preflight cache dir)."""
        from tracker.preflight.wheels import SymbolTables

        return SymbolTables.from_settings(self.settings)

    @cached_property
    def pipeline(self) -> Pipeline:
        """The poll-cycle pipeline over this App's collaborators (built on first use)."""
        from tracker.pipeline import Pipeline

        return Pipeline(
            settings=self.settings,
            store=self.store,
            advisories=self.advisories,
            analysis=self.analysis,
            source_for=self.source_for,
            watchlist=self.load_watchlist,
            clock=self.clock,
            stages=self.stages,
            preflight=self.preflight,
            symbol_tables=self.symbol_tables.get,
        )

    @cached_property
    def webhooks(self) -> WebhookStore:
        """Webhook subscriptions, the delivery outbox and log, and the poll-request queue."""
        return WebhookStore(self.store.engine)

    def abandon_analysis(self) -> None:
        """SIGTERM: hand back the analysis under way, if a pipeline was built (`tracker.pipeline.
        Pipeline.abandon_analysis`)."""
        pipeline = self.__dict__.get("pipeline")
        if pipeline is not None:
            pipeline.abandon_analysis()

    def abandon_fetches(self) -> None:
        """SIGTERM: every Hub call under way ends at its next request or body chunk
        (`tracker.sources.Sources.stop`); the revision it was for stays pending."""
        self.sources.stop()

    def close(self) -> None:
        pipeline = self.__dict__.get("pipeline")
        if pipeline is not None:
            pipeline.close()
        self.store.close()


def _require_store(settings: Settings) -> None:
    """NoStoreError when the store named by `settings` is an SQLite file that is not there (so
    that connecting creates no file). A server database (PostgreSQL) is checked when opened
    without migrating (`Store.open(migrate=False)`): no schema is the same NoStoreError."""
    from tracker.shared.errors import NoStoreError

    url = settings.effective_database_url
    if not url.startswith("sqlite:///"):
        return
    path = url.removeprefix("sqlite:///").split("?", 1)[0]
    if path and path != ":memory:" and not Path(path).is_file():
        raise NoStoreError(
            f"no store at {path}: nothing has been polled into it yet (`tracker poll --once` "
            "or `tracker demo` fills it)"
        )


def build(
    settings: Settings,
    *,
    clock: Clock | None = None,
    stages: Stages | None = None,
    sources: Sources | None = None,
    read_only: bool = False,
    store_may_be_down: bool = False,
) -> App:
    """Open (and migrate) the store named by `settings` and wire the App; ConfigError when the
    state dir cannot be created, StoreError when the store cannot be opened.

    `clock`, `stages` and `sources` replace the real ones (tests pass fakes here). With
    `read_only` (commands that only read), nothing is created or migrated, on SQLite and on
    PostgreSQL alike: a store that does not exist yet, or a database without a schema, is a
    NoStoreError (a StoreNotFoundError, exit 3); one behind on migrations a StoreError (exit 6)
    that says `tracker poll --once` migrates it.

    `store_may_be_down` (`tracker serve`): a store that cannot be reached now
    (`tracker.store.outage.unreachable`) is not an error; the App is wired to it unopened and
    unmigrated, each request tries it again (`/readyz` says 503 until it answers at the head).
    """
    from tracker.logs import configure

    configure(level=settings.log_level, under_systemd=settings.under_systemd, force=True)
    if read_only:
        _require_store(settings)
    else:
        try:
            settings.state_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(
                f"TRACKER_STATE_DIR {settings.state_dir}: cannot create it: {exc.strerror or exc}"
            ) from exc
    try:
        store = Store.open(settings.effective_database_url, migrate=not read_only)
    except StoreError as exc:
        from tracker.store.outage import first_line, unreachable

        if not (store_may_be_down and unreachable(exc)):
            raise
        import structlog

        structlog.get_logger(__name__).error(
            "store.unreachable_at_start", error=first_line(exc.__cause__ or exc)
        )
        store = Store.unopened(settings.effective_database_url)
    budget = None
    if sources is None:
        from tracker.daemon.ratebudget import RateBudget, budget_enabled

        if budget_enabled(settings):
            from tracker.store.workers import WorkStore

            budget = RateBudget(WorkStore(store.engine), settings)
    return App(
        settings=settings,
        store=store,
        advisories=AdvisoryStore(store.engine),
        analysis=AnalysisStore(store.engine),
        sources=sources
        or Sources(
            endpoint=settings.hf_endpoint,
            token=settings.hf_token,
            timeout_s=settings.http_timeout_s,
            retry_attempts=settings.retry_attempts,
            git_root=settings.state_dir / "git",
            request_deadline_s=settings.request_deadline_s,
            retry_after_cap_s=settings.retry_after_cap_s,
            budget=budget,
        ),
        clock=clock or utc_now,
        stages=stages,
    )
