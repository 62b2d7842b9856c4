"""Fixtures of the store's fault tests: the demo hub of `bench.storefaults` and a clean run of it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tracker.replica import Replica


@dataclass(frozen=True)
class Faults:
    """Two demo repos served by a replica, their watchlist, and a clean SQLite run's snapshot."""

    workdir: Path
    hub: Replica
    watchlist: Path
    reference: dict[str, Any]
    clean_s: float


@pytest.fixture(scope="session")
def faults(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Faults]:
    from bench.storefaults import SHORT_REPOS, demo_hub, reference_run

    workdir = tmp_path_factory.mktemp("store-faults")
    with demo_hub(workdir, SHORT_REPOS) as (hub, watchlist):
        reference, seconds = reference_run("sqlite", workdir, hub, watchlist)
        yield Faults(workdir, hub, watchlist, reference, seconds)
