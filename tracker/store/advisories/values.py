"""Frozen values the advisory store hands out and takes in, and its conflict error."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from tracker.shared.domain import (
    Advisory,
    AdvisoryState,
    Artifact,
    JSONValue,
    RepoId,
    Severity,
    Sha,
    WithdrawnBy,
)
from tracker.shared.errors import StoreError


@dataclass(frozen=True)
class StoredAdvisory:
    """An advisory with its lifecycle state, its pending list and, when withdrawn, what withdrew it
    (None for an advisory withdrawn before migration 0005 for a reason other than a rewrite)."""

    advisory: Advisory
    state: AdvisoryState
    pending: tuple[dict[str, str], ...]
    withdrawn_by: WithdrawnBy | None = None


@dataclass(frozen=True)
class SuppressedChange:
    """A change a watchlist suppression kept out of the advisories, recorded with its reason and
    the (aware, UTC, whole-second) time it was recorded."""

    repo_id: RepoId
    sha: Sha
    group: Artifact
    severity: Severity
    reason: str
    change: dict[str, JSONValue]
    recorded_at: datetime


@dataclass(frozen=True)
class OpenCandidate:
    """An open advisory a new revision may extend or fix: its id, pending list and versions count."""

    id: str
    pending: tuple[dict[str, str], ...]
    n_versions: int


class AdvisoryConflictError(StoreError):
    """A concurrent writer published the same revision first; retrying sees its result."""


def id_key(advisory_id: str) -> tuple[str, int, int]:
    """Sort key for `x_P-YEAR-N` ids: prefix, year, then N numerically."""
    head, _, n = advisory_id.rpartition("-")
    prefix, _, year = head.rpartition("-")
    try:
        return (prefix, int(year), int(n))
    except ValueError:
        return (advisory_id, 0, 0)
