"""Export advisories in the OSV data-source layout: `<id>.json` per advisory plus `modified_id.csv`.

Byte-for-byte deterministic for the same advisories: sorted keys, 2-space indent, UTF-8, trailing
newline; `modified_id.csv` lists `<modified>,<id>` newest first (ties by id, numerically), as OSV.dev's
REST data sources expect.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path

from tracker.shared.domain import Advisory, JSONValue
from tracker.shared.errors import AdvisoryError


def _natural(advisory_id: str) -> tuple[str, int]:
    """Sort key putting `x_P-2026-2` before `x_P-2026-10`."""
    head, _, tail = advisory_id.rpartition("-")
    return (head, int(tail)) if tail.isdigit() else (advisory_id, -1)


def record_bytes(record: Mapping[str, JSONValue]) -> bytes:
    """The exported bytes of one record: sorted keys, 2-space indent, UTF-8, trailing newline."""
    return (json.dumps(record, sort_keys=True, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def _write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def export(advisories: Iterable[Advisory], directory: Path) -> list[Path]:
    """Write every advisory to `directory` (created if missing) and return the written paths.

    Files are replaced atomically; other files in `directory` are left alone. Raises
    AdvisoryError for an id that is not a safe file name.
    """
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise AdvisoryError(f"cannot export to {directory}: {exc.strerror or exc}") from exc
    advs = sorted(advisories, key=lambda a: a.id)
    rows: list[tuple[str, str]] = []
    written: list[Path] = []
    for adv in advs:
        if "/" in adv.id or adv.id.startswith(".") or "\\" in adv.id:
            raise AdvisoryError(f"advisory id {adv.id!r} is not a safe file name")
        path = directory / f"{adv.id}.json"
        _write(path, record_bytes(adv.record))
        written.append(path)
        rows.append((str(adv.record["modified"]), adv.id))
    rows.sort(key=lambda r: _natural(r[1]))
    rows.sort(key=lambda r: r[0], reverse=True)
    index = directory / "modified_id.csv"
    _write(index, "".join(f"{m},{i}\n" for m, i in rows).encode("utf-8"))
    written.append(index)
    return written
