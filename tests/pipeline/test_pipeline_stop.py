"""The daemon's graceful stop inside one repo (`Pipeline.run_cycle(stop=...)`): the stop is asked
before every revision, ingested or analysed; once it says True the cycle ends between two
revisions, the revisions stored are complete, the rest are left for the next cycle, and nothing is
done twice."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tracker.app import build
from tracker.replica import Replica
from tracker.replica.repos import commit, init_repo
from tracker.settings import load_settings
from tracker.shared.domain import RepoId

pytestmark = pytest.mark.replica


def _asks(true_after: int) -> tuple[list[int], Callable[[], bool]]:
    asked = [0]

    def stop() -> bool:
        asked[0] += 1
        return asked[0] > true_after

    return asked, stop


def test_a_stop_ends_the_cycle_between_revisions_and_the_next_cycle_goes_on(
    tmp_path: Path,
) -> None:
    repo = init_repo(tmp_path / "hub", "acme/m")
    config = {"model_type": "llama", "vocab_size": 32000, "hidden_size": 64, "eos_token_id": 2}
    shas = []
    for eos in range(2, 7):
        config["eos_token_id"] = eos
        shas.append(commit(repo, {"config.json": json.dumps(config).encode()}, f"eos {eos}"))
    watchlist = tmp_path / "watchlist.yaml"
    watchlist.write_text("repos:\n  - id: acme/m\n")
    rid = RepoId("acme/m")
    with Replica(tmp_path / "hub") as hub:
        settings = load_settings(
            state_dir=tmp_path / "state", watchlist=watchlist, hf_endpoint=hub.url
        )
        app = build(settings)
        try:
            # 1. Stop after two revisions stored: the third is never fetched, none analysed.
            asked, stop = _asks(2)
            [cycle] = app.pipeline.run_cycle(stop=stop).repos
            assert (cycle.stopped, cycle.poll.stopped, cycle.clean) == (True, True, True)
            assert cycle.poll.new_revisions == tuple(shas[:2]) and cycle.analysed == ()
            assert asked == [4]  # before revisions 1, 2, 3; then before the first analysis
            assert app.store.repo_state(rid).cursor == shas[1]
            assert app.store.pending_analysis(rid) == shas[:2]
            for sha in shas[:2]:  # complete: every stored revision has its files
                assert set(app.store.file_versions(rid, sha)) == {"config.json"}

            # 2. The rest is ingested; the stop comes after two analyses.
            asked, stop = _asks(3 + 2)
            [cycle] = app.pipeline.run_cycle(stop=stop).repos
            assert (cycle.stopped, cycle.poll.stopped) == (True, False)
            assert cycle.poll.new_revisions == tuple(shas[2:])
            assert [a.sha for a in cycle.analysed] == shas[:2]
            assert app.store.pending_analysis(rid) == shas[2:]

            # 3. No stop: the three left are analysed, each once, in order.
            [cycle] = app.pipeline.run_cycle().repos
            assert (cycle.stopped, cycle.poll.revisions_ingested) == (False, 0)
            assert [a.sha for a in cycle.analysed] == shas[2:]
            assert app.store.pending_analysis(rid) == []
            assert [r.sha for r in app.store.revisions(rid)] == shas
        finally:
            app.close()
