"""Lineage links: which base model each watched derivative names, and how far tracker compared it.

`lineage_links` (migration 0019_lineage28): one row per (derivative repo, base repo id). The base
need not be watched (`base_id` is a plain id, no foreign key). `relation` is what the derivative
says it is (`quantized`, `finetune`, `adapter`, `merge`; None: not said), `via` where the link was
read (`card`, `gguf`, or `card+gguf`). `base_sha` is the last base revision whose change the
derivative was compared with, and `base_values` the base's effective values there (JSON: the
`tracker.diff.lineage` unit of its own files), so that the next base revision is compared with
what the base just left. `base_error` says why the base could not be read (not found, gated, a
transport fault: never a property of the base), kept until it is read again.
"""

from __future__ import annotations

import json
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlmodel import Field, Session, col, select

from tracker.shared.domain import JSONValue, RepoId, Sha
from tracker.store.base import StoreModel, UtcDateTime
from tracker.store.engine import transaction, upsert
from tracker.store.tables import RepoRow, repo_fk


class LineageLinkRow(StoreModel, table=True):
    __tablename__ = "lineage_links"
    __table_args__ = (sa.UniqueConstraint("repo_pk", "base_id", name="uq_lineage_links_base"),)

    id: int | None = Field(default=None, sa_column=sa.Column(sa.Integer, primary_key=True))
    repo_pk: int = Field(sa_column=repo_fk(index=True))
    base_id: str = Field(sa_column=sa.Column(sa.String(200), nullable=False, index=True))
    relation: str | None = Field(default=None, sa_column=sa.Column(sa.String(32), nullable=True))
    via: str = Field(sa_column=sa.Column(sa.String(16), nullable=False))
    read_at: str = Field(sa_column=sa.Column(sa.String(40), nullable=False))
    base_sha: str | None = Field(default=None, sa_column=sa.Column(sa.String(40), nullable=True))
    base_values: str | None = Field(default=None, sa_column=sa.Column(sa.Text, nullable=True))
    base_error: str | None = Field(default=None, sa_column=sa.Column(sa.Text, nullable=True))
    updated_at: datetime = Field(sa_column=sa.Column(UtcDateTime, nullable=False))


LINEAGE_TABLES: tuple[str, ...] = ("lineage_links",)


@dataclass(frozen=True)
class Link:
    """A derivative → base link as stored (`read_at`: the derivative revision it was read at)."""

    repo_id: RepoId
    base_id: RepoId
    relation: str | None
    via: str
    read_at: Sha
    base_sha: Sha | None = None
    base_values: dict[str, JSONValue] | None = None
    base_error: str | None = None


def _link(repo_id: str, row: LineageLinkRow) -> Link:
    return Link(
        RepoId(repo_id),
        RepoId(row.base_id),
        row.relation,
        row.via,
        Sha(row.read_at),
        Sha(row.base_sha) if row.base_sha else None,
        json.loads(row.base_values) if row.base_values is not None else None,
        row.base_error,
    )


class LineageStore:
    """Lineage links over the store's engine."""

    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine

    def _session(self, *, write: bool = False) -> AbstractContextManager[Session]:
        return transaction(self.engine, "lineage store", write=write)

    def set_links(
        self,
        repo_id: RepoId,
        links: list[tuple[RepoId, str | None, str]],
        read_at: Sha,
        now: datetime,
    ) -> None:
        """The derivative's links as its revision `read_at` names them ((base, relation, via)):
        new ones are added unchecked, kept ones keep how far they were compared, and links the
        revision no longer names are dropped."""
        with self._session(write=True) as s:
            pk = s.execute(
                sa.select(col(RepoRow.id)).where(col(RepoRow.repo_id) == repo_id)
            ).scalar_one()
            table = LineageLinkRow.__table__  # type: ignore[attr-defined]
            for base, relation, via in links:
                upsert(
                    s,
                    table,
                    {
                        "repo_pk": pk,
                        "base_id": base,
                        "relation": relation,
                        "via": via,
                        "read_at": read_at,
                        "updated_at": now,
                    },
                    ["repo_pk", "base_id"],
                    ["relation", "via", "read_at", "updated_at"],
                )
            keep = [b for b, _, _ in links]
            s.execute(sa.delete(table).where(table.c.repo_pk == pk, table.c.base_id.notin_(keep)))

    def compared(
        self,
        repo_id: RepoId,
        base_id: RepoId,
        base_sha: Sha | None,
        values: dict[str, JSONValue] | None,
        error: str | None,
        now: datetime,
    ) -> None:
        """Record how far the derivative was compared with its base: up to `base_sha`, whose
        values are `values`; or, with `error`, why the base could not be read (what was compared
        before is kept)."""
        with self._session(write=True) as s:
            pk = s.execute(
                sa.select(col(RepoRow.id)).where(col(RepoRow.repo_id) == repo_id)
            ).scalar_one()
            row = s.exec(
                select(LineageLinkRow).where(
                    col(LineageLinkRow.repo_pk) == pk, col(LineageLinkRow.base_id) == base_id
                )
            ).one()
            if error is None:
                row.base_sha = base_sha
                row.base_values = json.dumps(values, sort_keys=True)
            row.base_error = error
            row.updated_at = now
            s.add(row)

    def links(self, repo_id: RepoId | None = None) -> list[Link]:
        """Every link (of `repo_id` when given), by derivative then base."""
        with self._session() as s:
            names = {
                int(pk): str(name)
                for pk, name in s.execute(sa.select(col(RepoRow.id), col(RepoRow.repo_id))).all()
            }
            rows = s.exec(select(LineageLinkRow)).all()
            out = [_link(names[r.repo_pk], r) for r in rows if r.repo_pk in names]
            if repo_id is not None:
                out = [link for link in out if link.repo_id == repo_id]
            return sorted(out, key=lambda link: (link.repo_id, link.base_id))

    def derivatives_of(self, base_id: RepoId) -> list[Link]:
        """The links that name `base_id` as their base."""
        return [link for link in self.links() if link.base_id == base_id]


__all__ = ["LINEAGE_TABLES", "LineageLinkRow", "LineageStore", "Link"]
