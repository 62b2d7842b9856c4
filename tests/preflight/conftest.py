"""Preflight fixtures: the symbol tables of three real transformers versions, from the repo's cache.

`symbol_cache` is `state/cache/preflight` of this checkout (git-ignored): the first `make test` on
a fresh clone fetches the three wheels with pip from the package index and builds their tables
(about 10 s a version on a loaded machine); later runs find both cached and fetch or build nothing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tracker.preflight.wheels import SymbolTables

REPO_ROOT = Path(__file__).resolve().parents[2]
CACHE = REPO_ROOT / "state" / "cache" / "preflight"
VERSIONS = ("4.57.1", "5.1.0", "5.24.0")


@pytest.fixture(scope="session")
def symbol_cache() -> Path:
    tables = SymbolTables(CACHE)
    for v in VERSIONS:
        tables.get(v)
    print(
        f"\npreflight cache {CACHE}: {tables.fetched} wheels fetched, {tables.built} tables built"
    )
    return CACHE
