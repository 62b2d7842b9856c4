"""Content-addressed blob storage in the database: sha256 → bytes, identical content stored once."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

import sqlalchemy as sa
from sqlalchemy.orm import Session
from sqlmodel import col

from tracker.shared.errors import StoreError
from tracker.store.engine import insert_ignore
from tracker.store.tables import BlobRow


def sha256_hex(data: bytes) -> str:
    """The lowercase hex sha256 of `data` (the blob's address)."""
    return hashlib.sha256(data).hexdigest()


def put_blob(session: Session, data: bytes) -> str:
    """Store `data` once (no-op when already present) and return its sha256, inside `session`."""
    digest = sha256_hex(data)
    table = BlobRow.__table__  # type: ignore[attr-defined]
    insert_ignore(session, table, {"sha256": digest, "size": len(data), "data": data}, ["sha256"])
    return digest


def get_blobs(session: Session, digests: Iterable[str]) -> dict[str, bytes]:
    """Bytes of every blob in `digests`; StoreError when one is missing or corrupt."""
    wanted = sorted(set(digests))
    found: dict[str, bytes] = {}
    for start in range(0, len(wanted), 500):
        chunk = wanted[start : start + 500]
        rows = session.execute(
            sa.select(col(BlobRow.sha256), col(BlobRow.data)).where(col(BlobRow.sha256).in_(chunk))
        ).all()
        for digest, data in rows:
            found[digest] = bytes(data)
    missing = [d for d in wanted if d not in found]
    if missing:
        raise StoreError(f"store is inconsistent: blobs missing: {', '.join(missing[:5])}")
    for digest, data in found.items():
        if sha256_hex(data) != digest:
            raise StoreError(f"store is inconsistent: blob {digest} does not match its content")
    return found
