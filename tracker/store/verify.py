"""Store-wide integrity check (`tracker verify`): every stored blob is re-hashed against its
address, and every stored file version against the tree of its revision.

- blobs: sha256(data) is the row's key and len(data) its size;
- file versions: a content version's blob is the bytes the revision's tree names (git blob id,
  or LFS sha256 and size: `tracker.ingest.integrity.content_mismatch`), a header version's blob is a
  header; a version's blob exists; a version's path is in its revision's tree;
- every recorded "could not read" against its tree entry: one an earlier release recorded from a
  transport fault (a not-found answer for a listed file, an answer over the cap for a file whose
  tree size is under it: `tracker.ingest.integrity.transport_fault`) is reported as suspect, in each
  revision that carries it.

Reads one blob at a time (memory: the largest blob, plus one tree); each blob's git id is computed
once however many revisions carry it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass

import sqlalchemy as sa
from sqlmodel import col

from tracker.ingest.integrity import content_mismatch, transport_fault
from tracker.shared.bounded import MAX_FILE_BYTES
from tracker.shared.domain import TreeEntry
from tracker.store.engine import transaction
from tracker.store.tables import BlobRow, RepoRow, RevisionFileRow, RevisionRow
from tracker.store.trees import load_tree
from tracker.store.values import FileKind


@dataclass(frozen=True)
class Problem:
    """One thing that does not match: `where` (a blob, or repo@sha:path) and `why`."""

    where: str
    why: str

    def line(self) -> str:
        return f"{self.where}: {self.why}"


@dataclass(frozen=True)
class VerifyReport:
    blobs: int
    file_versions: int
    revisions: int
    problems: tuple[Problem, ...]

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        head = (
            f"verified {self.blobs:,} blobs and {self.file_versions:,} file versions "
            f"of {self.revisions:,} revisions"
        )
        if self.ok:
            return f"{head}: all match"
        return f"{head}: {len(self.problems):,} do not match"


def _blob_problems(engine: sa.Engine) -> Iterator[tuple[str, Problem | None]]:
    with transaction(engine, "store") as s:
        keys = s.execute(sa.select(col(BlobRow.sha256)).order_by(col(BlobRow.sha256))).scalars()
        digests = list(keys)
    for digest in digests:
        with transaction(engine, "store") as s:
            row = s.execute(
                sa.select(col(BlobRow.size), col(BlobRow.data)).where(col(BlobRow.sha256) == digest)
            ).one()
        data = bytes(row[1])
        actual = hashlib.sha256(data).hexdigest()
        if actual != digest:
            yield digest, Problem(f"blob {digest[:12]}", f"content hashes to {actual[:12]}")
        elif len(data) != row[0]:
            yield digest, Problem(f"blob {digest[:12]}", f"{len(data)} bytes, recorded {row[0]}")
        else:
            yield digest, None


def verify_store(engine: sa.Engine, *, max_file_bytes: int = MAX_FILE_BYTES) -> VerifyReport:
    """Check every blob and every stored file version (see the module docstring);
    `max_file_bytes`: the cap a "could not read" is judged against (`Settings.max_file_bytes`)."""
    problems: list[Problem] = []
    bad_blobs: set[str] = set()
    blobs = 0
    for digest, problem in _blob_problems(engine):
        blobs += 1
        if problem is not None:
            problems.append(problem)
            bad_blobs.add(digest)
    versions = 0
    revisions = 0
    checked: dict[tuple[str, str, int, str | None], str | None] = {}
    with transaction(engine, "store") as s:
        revs = s.execute(
            sa.select(
                col(RevisionRow.id),
                col(RepoRow.repo_id),
                col(RevisionRow.sha),
                col(RevisionRow.tree_hash),
            )
            .join(RepoRow, col(RepoRow.id) == col(RevisionRow.repo_pk))
            .order_by(col(RepoRow.repo_id), col(RevisionRow.seq))
        ).all()
    for rev_pk, repo_id, sha, tree_hash in revs:
        revisions += 1
        with transaction(engine, "store") as s:
            tree = {e.path: e for e in load_tree(s, tree_hash)}
            rows = (
                s.execute(
                    sa.select(RevisionFileRow).where(col(RevisionFileRow.revision_pk) == rev_pk)
                )
                .scalars()
                .all()
            )
        for r in rows:
            versions += 1
            where = f"{repo_id}@{sha[:12]}:{r.path}"
            entry = tree.get(r.path)
            if entry is None:
                problems.append(Problem(where, "stored for a path its tree does not hold"))
                continue
            if r.kind == FileKind.UNREADABLE:
                fault = transport_fault(entry, r.reason or "", max_file_bytes)
                if fault is not None:
                    problems.append(
                        Problem(
                            where,
                            f"suspect 'could not read' ({r.reason}): recorded from {fault}, "
                            "a fault of the transport, not the file's content",
                        )
                    )
                continue
            if r.blob_sha256 is None:
                continue
            if r.blob_sha256 in bad_blobs:
                problems.append(Problem(where, f"its blob {r.blob_sha256[:12]} is damaged"))
                continue
            key = (r.blob_sha256, entry.blob_id, entry.size, entry.lfs_sha256)
            if r.kind == FileKind.CONTENT:
                if key not in checked:
                    checked[key] = _content_problem(engine, r.blob_sha256, entry)
                why = checked[key]
            else:
                if key not in checked:
                    checked[key] = _header_problem(engine, r.blob_sha256)
                why = checked[key]
            if why is not None:
                problems.append(Problem(where, why))
    return VerifyReport(blobs, versions, revisions, tuple(problems))


@dataclass(frozen=True)
class Suspect:
    """A recorded "could not read" an earlier release made from a fault of the transport
    (`fault` says which): what `tracker repair` reads again."""

    repo_id: str
    sha: str
    path: str
    entry: TreeEntry
    reason: str
    fault: str


def suspects(engine: sa.Engine, *, max_file_bytes: int = MAX_FILE_BYTES) -> list[Suspect]:
    """Every suspect "could not read" of a live revision, by repo and then ingestion order
    (`tracker.ingest.integrity.transport_fault`)."""
    out: list[Suspect] = []
    with transaction(engine, "store") as s:
        rows = s.execute(
            sa.select(
                col(RepoRow.repo_id),
                col(RevisionRow.sha),
                col(RevisionRow.tree_hash),
                col(RevisionFileRow.path),
                col(RevisionFileRow.reason),
            )
            .join(RevisionRow, col(RevisionRow.id) == col(RevisionFileRow.revision_pk))
            .join(RepoRow, col(RepoRow.id) == col(RevisionRow.repo_pk))
            .where(
                col(RevisionFileRow.kind) == FileKind.UNREADABLE.value,
                col(RevisionRow.rewritten_away) == sa.false(),
            )
            .order_by(col(RepoRow.repo_id), col(RevisionRow.seq), col(RevisionFileRow.path))
        ).all()
        trees: dict[str, dict[str, TreeEntry]] = {}
        for repo_id, sha, tree_hash, path, reason in rows:
            if tree_hash not in trees:
                trees[tree_hash] = {e.path: e for e in load_tree(s, tree_hash)}
            entry = trees[tree_hash].get(path)
            if entry is None:
                continue
            fault = transport_fault(entry, reason or "", max_file_bytes)
            if fault is not None:
                out.append(Suspect(repo_id, sha, path, entry, reason or "", fault))
    return out


def _blob(engine: sa.Engine, digest: str) -> bytes | None:
    with transaction(engine, "store") as s:
        data = s.execute(
            sa.select(col(BlobRow.data)).where(col(BlobRow.sha256) == digest)
        ).scalar_one_or_none()
    return None if data is None else bytes(data)


def _content_problem(engine: sa.Engine, digest: str, entry: TreeEntry) -> str | None:
    if entry.lfs_sha256:  # the blob's address is its sha256: no need to read it
        if digest != entry.lfs_sha256:
            return f"stored bytes {digest[:12]} are not the tree's LFS oid {entry.lfs_sha256[:12]}"
        return None
    data = _blob(engine, digest)
    if data is None:
        return f"its blob {digest[:12]} is missing"
    why = content_mismatch(entry, data)
    return None if why is None else f"stored bytes are not the tree's: {why}"


def _header_problem(engine: sa.Engine, digest: str) -> str | None:
    data = _blob(engine, digest)
    if data is None:
        return f"its blob {digest[:12]} is missing"
    try:
        obj = json.loads(data)
    except ValueError:
        return "its stored header is not JSON"
    return None if isinstance(obj, dict) else "its stored header is not a JSON object"


__all__ = ["Problem", "Suspect", "VerifyReport", "suspects", "verify_store"]
