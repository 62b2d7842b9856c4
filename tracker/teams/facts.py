"""The store's facts the impact of an advisory on a team needs (`tracker.teams.impact.Facts`):
where a revision sits in a repo's history, the stored preflight, config.json; each read once."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tracker.estimate import parse_config
from tracker.preflight.report import RemoteCode
from tracker.shared.domain import RepoId, Sha
from tracker.shared.errors import EstimateError, StoreError, StoreNotFoundError
from tracker.store.preflight import PreflightStore
from tracker.store.store import Store
from tracker.teams.audience import TeamAudience
from tracker.teams.impact import Position
from tracker.teams.profile import Team


class StoreFacts:
    """`Facts` over one store."""

    def __init__(self, store: Store, preflight: PreflightStore) -> None:
        self._store = store
        self._preflight = preflight
        self._orders: dict[RepoId, tuple[tuple[Sha, ...], Sha] | str] = {}
        self._configs: dict[tuple[RepoId, Sha], Mapping[str, Any] | None] = {}

    def _order(self, repo_id: RepoId) -> tuple[tuple[Sha, ...], Sha] | str:
        if repo_id not in self._orders:
            try:
                order = tuple(
                    r.sha for r in self._store.revisions(repo_id, include_rewritten=False)
                )
                self._orders[repo_id] = (order, self._store.resolve(repo_id, "HEAD"))
            except StoreNotFoundError:
                self._orders[repo_id] = f"nothing of {repo_id} is in the store yet"
        return self._orders[repo_id]

    def position(self, repo_id: RepoId, spec: str | None) -> Position | str:
        known = self._order(repo_id)
        if isinstance(known, str):
            return known
        order, head = known
        if spec is None:
            return Position(order, head, head)
        try:
            pinned = self._store.resolve(repo_id, spec)
        except (StoreNotFoundError, StoreError) as exc:
            return str(exc).removeprefix(f"{repo_id}: ")
        if pinned not in order:
            return f"{pinned[:12]} was rewritten away from the ref's history"
        return Position(order, pinned, head)

    def remote_code(self, repo_id: RepoId, sha: Sha) -> RemoteCode | None:
        stored = self._preflight.get(repo_id, sha)
        return stored.preflight.remote_code if stored and stored.preflight else None

    def config(self, repo_id: RepoId, sha: Sha) -> Mapping[str, Any] | None:
        key = (repo_id, sha)
        if key not in self._configs:
            try:
                data = self._store.snapshot(repo_id, sha).files.get("config.json")
                self._configs[key] = None if data is None else parse_config(data)
            except (StoreNotFoundError, EstimateError):
                self._configs[key] = None
        return self._configs[key]


def store_audience(
    teams: Callable[[], Sequence[Team]], store: Store, preflight: PreflightStore
) -> TeamAudience:
    """Which advisories affect each watchlist team (`teams`, read when first needed), judged on
    `store`'s facts as of now: the audience of the team-filtered webhook subscriptions, for the
    pipeline's deliveries and `tracker repair`'s alike."""
    return TeamAudience(teams, StoreFacts(store, preflight))
