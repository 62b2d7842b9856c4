"""Test helpers of the diff tests: build Snapshots from bytes and replay real corpus histories."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path

from tracker.shared.domain import RepoId, SafetensorsHeader, Sha, Snapshot, TreeEntry

DATA = Path(__file__).parent / "data"
HISTORIES = DATA / "histories"


def make_snapshot(
    files: Mapping[str, bytes],
    *,
    sha: str = "0" * 40,
    extra_tree: Mapping[str, str] | None = None,
    headers: Mapping[str, SafetensorsHeader] | None = None,
    unreadable: Mapping[str, str] | None = None,
    security: Mapping[str, Mapping[str, object]] | None = None,
) -> Snapshot:
    """A Snapshot whose tree lists `files` (blob id = sha1 of the bytes) plus `extra_tree` (path → identity)."""
    entries = {
        p: TreeEntry(p, hashlib.sha1(b).hexdigest(), len(b), security=(security or {}).get(p))
        for p, b in files.items()
    }
    for p, ident in (extra_tree or {}).items():
        entries[p] = TreeEntry(p, ident, 1000, security=(security or {}).get(p))
    for p in unreadable or {}:
        entries.setdefault(p, TreeEntry(p, "f" * 40, 10))
    return Snapshot(
        RepoId("org/model"),
        Sha(sha),
        tuple(entries[p] for p in sorted(entries)),
        dict(files),
        dict(headers or {}),
        dict(unreadable or {}),
    )


def history(name: str) -> list[tuple[str, str, dict[str, bytes]]]:
    """Replay `histories/<name>/HISTORY.tsv`: (commit sha, subject, files at that commit), oldest first.

    Each row is one version of one file; the repo state accumulates the latest version of each file
    (rows are ordered by commit date; rows of one commit are merged into one revision).
    """
    rows = []
    for line in (HISTORIES / name / "HISTORY.tsv").read_text().splitlines():
        nn, sha, date, _author, subject, path = line.split("\t")
        base = path.rsplit("/", 1)[-1]
        found = HISTORIES / name / f"{nn}_{sha[:8]}_{base}"
        if found.exists():
            rows.append((datetime.fromisoformat(date), sha, subject, base, found.read_bytes()))
    rows.sort(key=lambda r: r[0])
    state: dict[str, bytes] = {}
    out: list[tuple[str, str, dict[str, bytes]]] = []
    for _date, sha, subject, base, data in rows:
        state[base] = data
        if out and out[-1][0] == sha:
            out[-1] = (sha, subject, dict(state))
        else:
            out.append((sha, subject, dict(state)))
    return out


def version(name: str, prefix: str) -> bytes:
    """The bytes of the one history file of `name` whose name starts with `prefix` (e.g. `02_c4f8e0dd`)."""
    (match,) = sorted((HISTORIES / name).glob(f"{prefix}*"))
    return match.read_bytes()
