"""Row ↔ domain-value conversions of the store (rows never leave `tracker.store`)."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from tracker.shared.domain import Commit, Sha
from tracker.shared.errors import StoreError
from tracker.store.tables import RevisionRow
from tracker.store.values import AnalysisOverrun, StoredRevision


class HasId(Protocol):
    id: int | None


def pk(row: HasId) -> int:
    if row.id is None:  # pragma: no cover - rows are flushed before their id is read
        raise StoreError("store: row has no primary key yet")
    return row.id


def to_commit(row: RevisionRow) -> Commit:
    return Commit(
        sha=Sha(row.sha),
        parents=tuple(Sha(p) for p in row.parents),
        date=datetime.fromisoformat(row.date),
        title=row.title,
        message=row.message,
        authors=tuple(row.authors),
    )


def to_stored(row: RevisionRow) -> StoredRevision:
    return StoredRevision(
        commit=to_commit(row),
        seq=row.seq,
        previous=Sha(row.previous_sha) if row.previous_sha else None,
        analysed=row.analysed_at is not None,
        rewritten_away=row.rewritten_away,
        ingested_at=row.ingested_at,
        could_not_analyse=(
            AnalysisOverrun.from_json(row.could_not_analyse) if row.could_not_analyse else None
        ),
    )
