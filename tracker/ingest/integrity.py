"""Integrity of fetched bytes: every file is checked against what the revision's tree says it is
before it is stored (issue 10, item 1).

- A small file (a plain git blob) must hash to the tree's git blob id: `sha1("blob <n>\\0" + data)`
  (or sha256 for a SHA-256 git repo, whose ids are 64 hex digits).
- A file stored with Git LFS and read whole must hash to the tree's LFS oid (sha256 of the content).
- A safetensors header read by Range is checked against the pointer: the total size the server
  declares (`Content-Range: bytes a-b/TOTAL`, `X-Linked-Size`) must be the tree's size, the
  whole-object oid it declares (`X-Linked-Etag`) must be the tree's LFS oid, and the header's
  tensors must cover the data section of a file of that size exactly (from 0, without gaps or
  overlaps, to its end: `tracker.sources.safetensors._covers`). The header's own bytes cannot be
  hashed against the oid without downloading the weights, which tracker never does: damage that
  keeps every size (a dtype swapped for one of the same width, F16 for BF16) is not detected. A header that cannot be parsed is read once more:
  different bytes the second time mean the first read was damaged in transit (transient), the
  same bytes mean the file itself is broken (recorded as unreadable).

A mismatch is an `IntegrityError` (a TransientSourceError): the read is retried, and if it keeps
failing the revision is neither stored nor analysed this poll; the next poll tries again. So is
any other answer that disagrees with the tree: more bytes than its size (a lying
`Content-Length`, a long body, a gzip body that expands), or "not found" for a file it lists.
"Could not read" is only recorded for bytes that match the tree and cannot be parsed, or for a
file over the cap by the tree's own size; `transport_fault` names a "could not read" that
releases before issue 26 recorded from a transport fault instead.
Pure (hashlib only); `tracker verify` re-checks what the store holds with the same functions.
"""

from __future__ import annotations

import hashlib

from tracker.shared.artifacts import Fetch, fetch_mode
from tracker.shared.domain import TreeEntry
from tracker.shared.errors import IntegrityError


def git_blob_id(data: bytes, *, sha256: bool = False) -> str:
    """The git object id of a blob holding `data` (SHA-1, or SHA-256 for `sha256` repos)."""
    head = b"blob %d\0" % len(data)
    if sha256:
        return hashlib.sha256(head + data).hexdigest()
    return hashlib.sha1(head + data, usedforsecurity=False).hexdigest()


def content_mismatch(entry: TreeEntry, data: bytes) -> str | None:
    """Why `data` is not the content `entry` names (None when it is).

    LFS files are checked against their sha256 oid and real size; plain blobs against their git
    blob id (whose hash covers the length too).
    """
    if entry.lfs_sha256:
        if len(data) != entry.size:
            return f"got {len(data):,} bytes, the tree says {entry.size:,}"
        digest = hashlib.sha256(data).hexdigest()
        if digest != entry.lfs_sha256:
            return f"sha256 {digest[:12]} is not the tree's LFS oid {entry.lfs_sha256[:12]}"
        return None
    blob = git_blob_id(data, sha256=len(entry.blob_id) == 64)
    if blob != entry.blob_id:
        size = "" if len(data) == entry.size else f"{len(data):,} bytes, the tree says "
        size += f"{entry.size:,}; " if size else ""
        return f"{size}git blob id {blob[:12]} is not the tree's {entry.blob_id[:12]}"
    return None


def check_content(entry: TreeEntry, data: bytes, what: str) -> bytes:
    """`data` when it is the content `entry` names; IntegrityError otherwise."""
    why = content_mismatch(entry, data)
    if why is not None:
        raise IntegrityError(f"{what}: integrity check failed: {why}")
    return data


def check_object(entry: TreeEntry, what: str, *, total_size: int | None, oid: str | None) -> None:
    """A ranged read's object is the one `entry` names: the total size and the whole-object oid
    the server declares (either may be unknown: None) equal the tree's size and LFS oid."""
    if total_size is not None and total_size != entry.size:
        raise IntegrityError(
            f"{what}: integrity check failed: the server's object is {total_size:,} bytes, "
            f"the tree says {entry.size:,}"
        )
    expected = entry.lfs_sha256 or entry.blob_id
    if oid is not None and oid != expected:
        raise IntegrityError(
            f"{what}: integrity check failed: the server's object is {oid[:12]}, "
            f"the tree says {expected[:12]}"
        )


def transport_fault(entry: TreeEntry, reason: str, max_file_bytes: int) -> str | None:
    """Why a recorded "could not read" `reason` for `entry` was a fault of the transport, not a
    property of the file (None when it may be the file's own).

    Releases before issue 26 recorded a file whose read raised as "<ExceptionName>: <message>":
    an `EntryNotFoundError` for a file the tree lists, and an `OversizedArtifactError` for a
    whole file whose tree size is under `max_file_bytes` (the answer, not the file, was too
    long), are the transport's. A file over the cap by the tree's own size ("N bytes, over the
    cap of C bytes") and a header that read the same way twice are the file's.
    """
    if reason.startswith("EntryNotFoundError:"):
        return f"a not-found answer for a file its tree lists ({entry.size:,} bytes)"
    if (
        reason.startswith("OversizedArtifactError:")
        and fetch_mode(entry.path) is Fetch.CONTENT
        and entry.size <= max_file_bytes
    ):
        return (
            f"an answer over the cap for a file its tree says is {entry.size:,} bytes, "
            f"under the cap of {max_file_bytes:,}"
        )
    return None


__all__ = [
    "check_content",
    "check_object",
    "content_mismatch",
    "git_blob_id",
    "transport_fault",
]
