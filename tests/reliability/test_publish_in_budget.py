"""Issue 10, "publish runs outside the analysis budget": what publishing reads of a revision's files
is computed in the analysis worker, under the budget.

Publishing classifies each change against the revision's two snapshots (config.json, generation
config, the tokenizer's id → token map, chat templates) and looks for consistency findings. Before,
that ran in the daemon's own process after the worker's analysis: a valid 33 MB tokenizer.json
(1.5 million entries, within its reader's bounds) was parsed again there, outside any budget
(379 MiB traced in the daemon's process for a 32 MiB file). Now the worker returns the classified changes and the findings
with the analysis (`tracker.advisories.service.judge`), and the daemon side of analysing that
revision stays under 4 times the file (95 MiB: the snapshots it loads and pickles for the
worker).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hostile import peak_of
from test_analysis_budget import _big_tokenizer
from workkit import commit_eos

from tracker.app import build
from tracker.ingest.snapshots import poll_all
from tracker.replica import Replica
from tracker.replica.repos import commit, init_repo
from tracker.settings import load_settings

pytestmark = pytest.mark.replica
MiB = 1024 * 1024


def test_the_daemon_side_of_analysing_a_revision_parses_none_of_its_files(
    tmp_path: Path,
) -> None:
    root = tmp_path / "hub"
    repo = init_repo(root, "acme/tokens")
    first = commit_eos(repo, 2)
    tokenizer = _big_tokenizer()
    second = commit(repo, {"tokenizer.json": tokenizer}, "a 33 MB tokenizer")
    (tmp_path / "watchlist.yaml").write_text("repos:\n  - id: acme/tokens\n")
    with Replica(root) as hub:
        settings = load_settings(
            state_dir=tmp_path / "state",
            watchlist=tmp_path / "watchlist.yaml",
            hf_endpoint=hub.url,
            analysis_memory_mib=4096,
            effects_cache_dir=tmp_path / "effects",
        )
        app = build(settings)
        try:
            pipeline = app.pipeline
            [watched] = pipeline.watchlist().repos
            [poll] = poll_all(app.store, [watched], pipeline.source_for)
            assert poll.new_revisions == (first, second)
            pipeline.worker.start()  # its start-up is not the revision's
            result, peak = peak_of(lambda: pipeline.analyse_repo(watched))
        finally:
            app.close()
    assert not isinstance(result, BaseException), repr(result)
    analysed, withdrawn, error, overran = result
    assert ([a.sha for a in analysed], withdrawn, error, overran) == ([first, second], (), None, ())
    # the tokenizer was read, in the worker: its vocabulary change is an advisory's
    assert analysed[1].changes > 0 and analysed[1].advisories
    assert peak < 4 * len(tokenizer), (peak // MiB, len(tokenizer) // MiB)
