"""The composition root: `build(settings)` wires the store, the watchlist loader and repo sources.

Nothing is created at import time; the CLI, the daemon, the bench and tests call `build`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tracker.settings import Settings
from tracker.sources import RepoSource
from tracker.store import Store

if TYPE_CHECKING:
    from tracker.store import Engine
    from tracker.watchlist import WatchedRepo, Watchlist

DEFAULT_ENDPOINT = "https://huggingface.co"


@dataclass(frozen=True)
class App:
    """Everything a command needs, built once from settings. Call `close()` when done."""

    settings: Settings
    store: Store

    @property
    def engine(self) -> Engine:
        """The store's SQLAlchemy engine (for other store modules such as advisories)."""
        return self.store.engine

    @property
    def hf_endpoint(self) -> str:
        """Hub URL: settings, then HF_ENDPOINT, then the public Hub."""
        return (
            self.settings.hf_endpoint or os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT
        ).rstrip("/")

    @property
    def hf_token(self) -> str | None:
        """Hub token: settings, then HF_TOKEN (None: anonymous)."""
        return self.settings.hf_token or os.environ.get("HF_TOKEN") or None

    def load_watchlist(self) -> Watchlist:
        """Parse `settings.watchlist` (WatchlistError listing every problem)."""
        from tracker.watchlist import load_watchlist

        return load_watchlist(self.settings.watchlist)

    def source_for(self, repo: WatchedRepo) -> RepoSource:
        """The source a watched repo is read from: its `git` URL/path if set, else the Hub."""
        if repo.git:
            from tracker.sources.git import GitSource

            return GitSource(self.settings.state_dir / "git", url=repo.git)
        return self.hub_source()

    def hub_source(self) -> RepoSource:
        """A Hub source on `hf_endpoint` with `hf_token` and the settings' timeouts and retries."""
        from tracker.sources.hub import HubSource

        return HubSource(
            endpoint=self.hf_endpoint,
            token=self.hf_token,
            timeout_s=self.settings.http_timeout_s,
            retry_attempts=self.settings.retry_attempts,
        )

    def close(self) -> None:
        self.store.close()


def build(settings: Settings) -> App:
    """Open (and migrate) the store named by `settings` and return the App; StoreError on failure."""
    from tracker.logs import configure

    configure()
    settings.state_dir.mkdir(parents=True, exist_ok=True)
    return App(settings=settings, store=Store.open(settings.effective_database_url))
