"""Atomic, race-free schema set-up (issue 10, item 3), as users meet it: `tracker` processes.

Before: SQLite ran the migrations' DDL outside any transaction (the driver only wraps DML), so a
kill during the first open of a new store left some tables and no version, and every later
command failed with "table repos already exists"; two first opens at once raced the same way, on
PostgreSQL too (`alembic_version`). Now a first open migrates in one transaction (SQLite
`BEGIN IMMEDIATE`, a PostgreSQL advisory lock). Long forms (every statement, ≥50 random kills,
seeds printed): `make soak`.
"""

from __future__ import annotations

import os
import random

import pytest
from conftest import Faults

from bench.storefaults import (
    first_open_statements,
    first_opens_trial,
    kill_trial,
    open_window,
    statement_kill_trial,
)

BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_kill_after_any_statement_of_the_first_open_leaves_no_schema_or_all_of_it(
    backend: str, faults: Faults
) -> None:
    total = first_open_statements(backend, faults.workdir, faults.hub, faults.watchlist)
    # Across the window (the soak kills after every statement) and on both sides of the commit.
    points = sorted({1, total // 2, total})
    results = [
        statement_kill_trial(backend, k, workdir=faults.workdir, hub=faults.hub,
                             watchlist=faults.watchlist)
        for k in points
    ]  # fmt: skip
    assert [r for r in results if not r.ok] == []
    states = {r.schema_after_kill for r in results}
    assert states == {"none", "full"}, states  # killed before and after the commit


@pytest.mark.parametrize("backend", BACKENDS)
def test_concurrent_first_opens_serialise(backend: str, faults: Faults) -> None:
    result = first_opens_trial(
        backend, 4, workdir=faults.workdir, hub=faults.hub, watchlist=faults.watchlist
    )
    assert result.ok, result


def test_a_kill_at_a_random_time_then_a_rerun_equals_a_clean_run(faults: Faults) -> None:
    backend = "sqlite"  # and PostgreSQL in the soak
    seed = int(os.environ.get("TRACKER_FAULT_SEED") or random.SystemRandom().randrange(10**9))
    window = open_window(backend, faults.workdir, faults.hub, faults.watchlist)
    mode = "open" if seed % 2 == 0 else "poll"  # the soak runs ≥ 50, half of each
    result = kill_trial(
        seed, backend, mode, workdir=faults.workdir, hub=faults.hub, watchlist=faults.watchlist,
        reference=faults.reference, window_s=window, poll_s=faults.clean_s,
    )  # fmt: skip
    assert result.ok, f"TRACKER_FAULT_SEED={seed}: {result}"
