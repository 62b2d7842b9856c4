"""Compact tree storage: distinct entries stored once per repo, a tree is a JSON list of entry ids.

A revision that changes one small file of a 163-shard repo adds one entry row and one id list,
not 163 rows; identical trees (e.g. a revert) share one `trees` row.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.orm import Session
from sqlmodel import col

from tracker.shared.domain import TreeEntry
from tracker.shared.errors import StoreError
from tracker.store.engine import insert_ignore
from tracker.store.tables import TreeEntryRow, TreeRow


def entry_key(e: TreeEntry) -> str:
    obj = [e.path, e.blob_id, e.size, e.lfs_sha256, e.security]
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()


def load_tree(s: Session, tree_hash: str) -> tuple[TreeEntry, ...]:
    """The entries of tree `tree_hash`, in stored (path) order; StoreError if inconsistent."""
    tree = s.get(TreeRow, tree_hash)
    if tree is None:
        raise StoreError(f"store is inconsistent: tree {tree_hash} missing")
    ids = list(tree.entry_ids)
    by_id: dict[int, TreeEntryRow] = {}
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        for r in s.execute(
            sa.select(TreeEntryRow).where(col(TreeEntryRow.id).in_(chunk))
        ).scalars():
            if r.id is not None:
                by_id[r.id] = r
    if len(by_id) != len(set(ids)):
        raise StoreError(f"store is inconsistent: tree {tree_hash} has missing entries")
    return tuple(
        TreeEntry(
            path=r.path,
            blob_id=r.blob_id,
            size=r.size,
            lfs_sha256=r.lfs_sha256,
            security=r.security,
        )
        for r in (by_id[i] for i in ids)
    )


def put_tree(s: Session, repo_pk: int, tree: Sequence[TreeEntry]) -> str:
    """Store `tree` (deduplicating entries and whole trees) in session `s`; return its hash."""
    entries = sorted(tree, key=lambda e: e.path)
    keys = [entry_key(e) for e in entries]
    existing: dict[str, int] = {}
    for start in range(0, len(keys), 500):
        chunk = keys[start : start + 500]
        for key, pk in s.execute(
            sa.select(col(TreeEntryRow.entry_key), col(TreeEntryRow.id)).where(
                col(TreeEntryRow.repo_pk) == repo_pk, col(TreeEntryRow.entry_key).in_(chunk)
            )
        ):
            if pk is not None:
                existing[key] = pk
    ids: list[int] = []
    table = TreeEntryRow.__table__  # type: ignore[attr-defined]
    for e, key in zip(entries, keys, strict=True):
        if key not in existing:
            values = {
                "repo_pk": repo_pk,
                "entry_key": key,
                "path": e.path,
                "blob_id": e.blob_id,
                "size": e.size,
                "lfs_sha256": e.lfs_sha256,
                "security": dict(e.security) if e.security is not None else None,
            }
            # A concurrent writer may store the same entry: its row is ours too.
            insert_ignore(s, table, values, ["repo_pk", "entry_key"])
            found = s.execute(
                sa.select(col(TreeEntryRow.id)).where(
                    col(TreeEntryRow.repo_pk) == repo_pk, col(TreeEntryRow.entry_key) == key
                )
            ).scalar_one()
            if found is None:  # pragma: no cover - the id column is the primary key
                raise StoreError("tree entry row has no id")
            existing[key] = found
        ids.append(existing[key])
    tree_hash = hashlib.sha256(json.dumps(ids).encode()).hexdigest()
    trees = TreeRow.__table__  # type: ignore[attr-defined]
    insert_ignore(s, trees, {"tree_hash": tree_hash, "entry_ids": ids}, ["tree_hash"])
    return tree_hash
