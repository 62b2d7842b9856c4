"""Executable (pickle-based) artifact diffs by tree identity, with the Hub's security scan; never read."""

from __future__ import annotations

from collections.abc import Mapping

from tracker.diff._common import path_change
from tracker.shared.artifacts import is_pickle
from tracker.shared.domain import Artifact, Change, ChangeKind, JSONValue, Snapshot, TreeEntry

_ART = Artifact.EXECUTABLE


def scan_status(security: Mapping[str, JSONValue] | None) -> str:
    """A short scan status from the Hub's `securityFileStatus`-style mapping ("unscanned" when absent).

    The Hub's tree listing with `expand=True` gives per-file `securityFileStatus`
    (`status`, `pickleImportScan.highestSafetyLevel`, `avScan`); see HUB-PROTOCOL.md.
    """
    if not security:
        return "unscanned"
    parts = []
    status = security.get("status")
    if isinstance(status, str):
        parts.append(status)
    pickle = security.get("pickleImportScan")
    if isinstance(pickle, dict) and isinstance(pickle.get("highestSafetyLevel"), str):
        parts.append(f"pickle imports {pickle['highestSafetyLevel']}")
    av = security.get("avScan")
    if isinstance(av, dict) and isinstance(av.get("virusFound"), bool) and av["virusFound"]:
        parts.append("virus found")
    return ", ".join(parts) if parts else "scanned (no status)"


def _state(e: TreeEntry) -> dict[str, JSONValue]:
    return {"identity": e.identity, "size": e.size, "scan": scan_status(e.security)}


def diff_executable(before: Snapshot | None, after: Snapshot) -> list[Change]:
    """Pickle-based files added, removed, with new content, or with a changed scan status (key = path)."""
    if before is None:
        return []
    old = {e.path: e for e in before.tree if is_pickle(e.path)}
    new = {e.path: e for e in after.tree if is_pickle(e.path)}
    out: list[Change] = []
    for path in sorted(old.keys() | new.keys()):
        a, b = old.get(path), new.get(path)
        if b is not None and a is None:
            summary = f"pickle file {path} added ({b.size} bytes; scan: {scan_status(b.security)})"
            out.append(path_change(_ART, ChangeKind.ADDED, path, None, _state(b), summary))
        elif a is not None and b is None:
            summary = f"pickle file {path} removed"
            out.append(path_change(_ART, ChangeKind.REMOVED, path, _state(a), None, summary))
        elif a is not None and b is not None:
            scan_a, scan_b = scan_status(a.security), scan_status(b.security)
            if a.identity != b.identity:
                summary = f"pickle file {path} has new content ({a.size} → {b.size} bytes; scan: {scan_b})"
            elif scan_a != scan_b:
                summary = f"pickle file {path} scan status changed: {scan_a} → {scan_b}"
            else:
                continue
            out.append(path_change(_ART, ChangeKind.CHANGED, path, _state(a), _state(b), summary))
    return out
