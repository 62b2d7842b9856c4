"""The revision diff store: diffs per revision pair and estimates per revision, replaced on re-save;
rows belong to stored revisions."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tracker.estimate import estimate
from tracker.shared.domain import Artifact, Change, ChangeKind, Commit, Diff, RepoId, Sha
from tracker.shared.errors import StoreNotFoundError
from tracker.store import Store
from tracker.store.analysis import AnalysisStore, StoredEstimate

CONFIGS = Path(__file__).parents[1] / "data" / "configs"
SMALL = estimate(json.loads((CONFIGS / "Qwen__Qwen3-0.6B.json").read_text()))
LARGE = estimate(json.loads((CONFIGS / "Qwen__Qwen3-1.7B.json").read_text()))
REPO = RepoId("acme/x")
A, B = Sha("a" * 40), Sha("b" * 40)
NOW = datetime(2026, 11, 30, tzinfo=UTC)


def _change(after: int) -> Change:
    return Change(Artifact.CONFIG, ChangeKind.CHANGED, "config.json", "hidden_size", 1, after,
                  f"hidden_size changed: 1 → {after}", "detail")  # fmt: skip


def _ingest(store: Store) -> None:
    store.ensure_repo(REPO, source_kind="hub", url=None, ref="main")
    store.store_revision(REPO, Commit(A, (), NOW, "a", "a", ()), [], {}, previous=None)
    store.store_revision(REPO, Commit(B, (A,), NOW, "b", "b", ()), [], {}, previous=A)


def test_round_trip_and_replace(tmp_path: Path) -> None:
    store = Store.open(f"sqlite:///{tmp_path / 't.db'}")
    try:
        _ingest(store)
        analysis = AnalysisStore(store.engine)
        assert analysis.diff(REPO, A, B) is None and analysis.estimate(REPO, B) is None
        first = Diff(REPO, None, A, ())
        analysis.save(first, StoredEstimate(REPO, A, None, "no config.json at this revision"), NOW)
        diff = Diff(REPO, A, B, (_change(2),))
        analysis.save(diff, StoredEstimate(REPO, B, SMALL, None), NOW)
        assert analysis.diff(REPO, None, A) == first
        assert analysis.diff(REPO, A, B) == diff
        assert analysis.estimate(REPO, A) == StoredEstimate(
            REPO, A, None, "no config.json at this revision"
        )
        again = Diff(REPO, A, B, (_change(3),))  # re-analysis replaces, never duplicates
        analysis.save(again, StoredEstimate(REPO, B, LARGE, None), NOW)
        assert analysis.diffs_of(REPO) == [first, again]
        stored = analysis.estimate(REPO, B)
        assert stored is not None and stored.estimate == LARGE
    finally:
        store.close()


def test_rows_belong_to_stored_revisions(tmp_path: Path) -> None:
    store = Store.open(f"sqlite:///{tmp_path / 't.db'}")
    try:
        analysis = AnalysisStore(store.engine)
        with pytest.raises(StoreNotFoundError, match="acme/x is not in the store"):
            analysis.save(Diff(REPO, None, A, ()), StoredEstimate(REPO, A, None, "x"), NOW)
        store.ensure_repo(REPO, source_kind="hub", url=None, ref="main")
        store.store_revision(REPO, Commit(A, (), NOW, "a", "a", ()), [], {}, previous=None)
        with pytest.raises(StoreNotFoundError, match=f"revision {B} is not in the store"):
            analysis.save(Diff(REPO, A, B, ()), StoredEstimate(REPO, B, None, "x"), NOW)
        assert analysis.diffs_of(REPO) == [] and analysis.estimate(REPO, B) is None
    finally:
        store.close()
