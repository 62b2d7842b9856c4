"""Concurrent publishers of the same revision (threads, separate stores, one SQLite file) publish once."""

from __future__ import annotations

import threading
from pathlib import Path

import sqlalchemy as sa
from advkit import HUB, MIXTRAL, MIXTRAL_SHAS, NOW, ch, commit, ingest

from tracker.advisories.service import publish
from tracker.shared.domain import Artifact as A
from tracker.shared.domain import ChangeKind as K
from tracker.store import Store
from tracker.store.advisories import AdvisoryStore
from tracker.store.engine import create_engine

M = MIXTRAL_SHAS
CHANGES = (
    ch(A.CONFIG, K.CHANGED, "model_type", "mistral", "mixtral"),
    ch(A.GENERATION_CONFIG, K.CHANGED, "temperature", 0.6, 0.7, file="generation_config.json"),
)


def _engine(path: Path) -> sa.Engine:
    """The store's own engine (WAL, busy timeout, writers take the write lock first)."""
    return create_engine(f"sqlite:///{path}")


def test_racing_publishers_allocate_once(tmp_path: Path) -> None:
    path = tmp_path / "race.db"
    setup = Store.open(f"sqlite:///{path}")
    ingest(setup.engine, MIXTRAL, commit(M[0]), None)
    ingest(setup.engine, MIXTRAL, commit(M[1], M[0]), M[0])
    setup.close()
    n = 6
    barrier = threading.Barrier(n)
    results: list[list[str]] = []
    errors: list[BaseException] = []

    def worker() -> None:
        store = AdvisoryStore(_engine(path))
        try:
            barrier.wait()
            advs = publish(
                store,
                repo_id=MIXTRAL,
                commit=commit(M[1], M[0]),
                previous=M[0],
                changes=CHANGES,
                estimate_before=None,
                estimate_after=None,
                repo_url=f"{HUB}/{MIXTRAL}",
                overrides=None,
                prefix="TRACKER",
                now=NOW,
            )
            results.append([a.id for a in advs])
        except BaseException as exc:  # surfaced below
            errors.append(exc)
        finally:
            store.engine.dispose()

    threads = [threading.Thread(target=worker) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    assert results == [["x_TRACKER-2026-1", "x_TRACKER-2026-2"]] * n
    check = AdvisoryStore(_engine(path))
    assert check.counts()["advisories"] == 2
    assert check.counts()["advisory_revisions"] == 1
    check.engine.dispose()
