"""Preflight: will a revision's remote code import, what will it take to fetch and hold, what will
LoRA adapt (issue 15).

Pure parts: `imports` (what the remote code imports, by AST), `symbols` (a wheel's symbol table,
by AST), `compat` (imports against tables), `capacity` (bytes, cards, download), `lora` (target
resolution from the config), `census_lora` with `codetree` (the same for remote-code families:
module names from the checkpoint's tensor names, Linear classes from the code's AST), `report` (`run_preflight` → `Preflight`), `delta` (changes between two revisions'
answers). I/O: `wheels` (pip download into the state cache; tables cached as JSON).
`preflight_snapshot` runs it on a stored revision.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from tracker.estimate import EstimateSettings
from tracker.preflight.report import Preflight, ShardCache, run_preflight
from tracker.preflight.settings import PreflightSettings
from tracker.preflight.symbols import SymbolTable
from tracker.shared.domain import Snapshot
from tracker.shared.errors import PackageIndexError

TableSource = Callable[[str], SymbolTable]
"""A version → its symbol table (`SymbolTables.get`); raises PackageIndexError when it cannot."""


def tables_for(
    versions: tuple[str, ...], source: TableSource | None
) -> dict[str, SymbolTable | str]:
    """The tables of `versions`, or per version why there is none."""
    out: dict[str, SymbolTable | str] = {}
    for v in versions:
        if source is None:
            out[v] = "no symbol tables in this run"
            continue
        try:
            out[v] = source(v)
        except PackageIndexError as exc:
            out[v] = str(exc)
    return out


def preflight_snapshot(
    snapshot: Snapshot,
    settings: PreflightSettings,
    source: TableSource | None,
    estimate_settings: EstimateSettings | None = None,
    shard_cache: ShardCache | None = None,
) -> Preflight:
    """The preflight of a stored revision (`shard_cache`: see `report.ShardCache`)."""
    tables: Mapping[str, SymbolTable | str] = tables_for(settings.transformers, source)
    return run_preflight(
        files=snapshot.files,
        headers=snapshot.headers,
        tree=snapshot.tree,
        tables=tables,
        settings=settings,
        estimate_settings=estimate_settings,
        shard_cache=shard_cache,
    )


__all__ = [
    "Preflight",
    "PreflightSettings",
    "ShardCache",
    "TableSource",
    "preflight_snapshot",
    "run_preflight",
    "tables_for",
]
