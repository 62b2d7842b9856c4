"""Concurrent `tracker poll --once` processes on one store never crash (issue 10, item 4).

Before: two processes on one store, one exited 6 with an IntegrityError (SQLite and PostgreSQL):
check-then-insert of repos, revisions, tree entries and analysis rows, and SQLite read
transactions that could not upgrade to writes. Now every row two processes can both write is an
idempotent upsert, and SQLite writers take the write lock first. Each trial starts from an empty
store (the first opens race too); every process must exit 0 and the store must equal a clean
run's (made on SQLite: the PostgreSQL trial also checks the two backends agree). Short form: 2
processes on SQLite, 3 on PostgreSQL; long form, 20 trials each of 2 and 3 processes on both
backends: `make soak`.
"""

from __future__ import annotations

import os
import random

import pytest
from conftest import Faults

from bench.storefaults import concurrent_trial


@pytest.mark.parametrize(
    ("backend", "processes"),
    [
        ("sqlite", 2),
        pytest.param("postgres", 3, marks=pytest.mark.postgres),
    ],
)
def test_concurrent_polls_never_crash_and_store_what_one_would(
    backend: str, processes: int, faults: Faults
) -> None:
    seed = int(os.environ.get("TRACKER_FAULT_SEED") or random.SystemRandom().randrange(10**9))
    result = concurrent_trial(
        seed, backend, processes, workdir=faults.workdir, hub=faults.hub,
        watchlist=faults.watchlist, reference=faults.reference,
    )  # fmt: skip
    assert result.ok, f"TRACKER_FAULT_SEED={seed}: {result}"
