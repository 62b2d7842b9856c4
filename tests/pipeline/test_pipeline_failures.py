"""A revision whose analysis fails stops only its repo: visible, pending, and analysed once fixed."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tracker.app import build
from tracker.diff import diff_snapshots
from tracker.pipeline import Stages
from tracker.replica import Replica
from tracker.replica.repos import commit, init_repo
from tracker.settings import load_settings
from tracker.shared.domain import Change, Snapshot
from tracker.store import RepoStatus

DATA = Path(__file__).resolve().parents[1] / "data" / "configs"


def _repo(root: Path, repo_id: str) -> None:
    repo = init_repo(root, repo_id)
    config = json.loads((DATA / "Qwen__Qwen3-0.6B.json").read_text())
    day = datetime(2025, 5, 1, tzinfo=UTC)
    commit(repo, {"config.json": json.dumps(config).encode()}, "upload", date=day)
    config["max_position_embeddings"] = 65536
    commit(repo, {"config.json": json.dumps(config).encode()}, "longer", date=day.replace(day=2))


@pytest.mark.replica
def test_analysis_failure_of_one_repo_is_recorded_and_retried(tmp_path: Path) -> None:
    _repo(tmp_path / "hub", "acme/good")
    _repo(tmp_path / "hub", "acme/bad")
    watchlist = tmp_path / "watchlist.yaml"
    watchlist.write_text("repos:\n  - id: acme/bad\n  - id: acme/good\n")
    broken = True

    def diff(before: Snapshot | None, after: Snapshot) -> Sequence[Change]:
        """The real differ, which explodes on acme/bad's second revision while `broken`."""
        if broken and after.repo_id == "acme/bad" and before is not None:
            raise RuntimeError("differ exploded")
        return diff_snapshots(before, after)

    with Replica(tmp_path / "hub") as hub:
        settings = load_settings(
            state_dir=tmp_path / "state", watchlist=watchlist, hf_endpoint=hub.url
        )
        app = build(settings, stages=Stages(diff=diff))
        try:
            report = app.pipeline.run_cycle()
            bad, good = report.repos
            assert bad.error is not None and "differ exploded" in bad.error
            assert len(bad.analysed) == 1  # the first revision; the second stays pending
            assert good.error is None and len(good.analysed) == 2 and good.advisories
            state = app.store.repo_state(bad.poll.repo_id)
            assert state.status is RepoStatus.FAILING
            assert state.last_error is not None and "differ exploded" in state.last_error
            assert len(app.store.pending_analysis(bad.poll.repo_id)) == 1

            broken = False
            again = app.pipeline.run_cycle()
            bad2, good2 = again.repos
            assert bad2.error is None and len(bad2.analysed) == 1 and bad2.advisories
            assert good2.analysed == () and good2.advisories == ()
            assert app.store.pending_analysis(bad.poll.repo_id) == []
            assert app.store.repo_state(bad.poll.repo_id).status is RepoStatus.OK
        finally:
            app.close()
