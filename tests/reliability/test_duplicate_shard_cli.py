"""Issue 10, item 10, through the installed `tracker` against the Hub replica: a shard whose
tensor names all sit in an earlier shard too.

Before the fix the manifest was built from each name's first copy, so such a shard was not in it:
a commit rewriting only that shard's bytes diffed as `0 changes`, and a rewrite of the first shard
counted "1 of 1 shard files". The safetensors files are small synthesised stand-ins (zero-filled
data, tracker's own header format): no published repo in the corpus duplicates a tensor name.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from helpers_replica import safetensors_bytes
from reliakit import tracker

from tracker.replica import Replica
from tracker.replica.repos import commit, init_repo

pytestmark = pytest.mark.replica
T0 = datetime(2025, 4, 1, tzinfo=UTC)
RID = "acme/dup"
S1 = "model-00001-of-00002.safetensors"
S2 = "model-00002-of-00002.safetensors"


@pytest.fixture(scope="module")
def dup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Replica, list[str]]]:
    tmp = tmp_path_factory.mktemp("dup")
    repo = init_repo(tmp / "hub", RID)
    shard1 = safetensors_bytes({"a": ("F32", [2]), "shared": ("F32", [4])})
    shard2 = safetensors_bytes({"shared": ("F32", [4])})
    index = {"metadata": {"total_size": 40}, "weight_map": {"a": S1, "shared": S2}}
    # Same header, new bytes: the data section is no longer zero-filled.
    shard2_new = shard2[:-16] + bytes(range(1, 17))
    shard1_new = shard1[:-24] + bytes(range(1, 25))
    shas = [
        commit(repo, {S1: shard1, S2: shard2, "model.safetensors.index.json":
                      json.dumps(index).encode()}, "upload", date=T0),
        commit(repo, {S2: shard2_new}, "rewrite shard 2", date=T0 + timedelta(hours=1)),
        commit(repo, {S1: shard1_new}, "rewrite shard 1", date=T0 + timedelta(hours=2)),
    ]  # fmt: skip
    (tmp / "watchlist.yaml").write_text(f"repos:\n  - id: {RID}\n")
    with Replica(tmp / "hub") as hub:
        yield tmp, hub, shas


def test_a_rewrite_of_a_shard_holding_only_duplicated_names_is_reported(
    dup: tuple[Path, Replica, list[str]],
) -> None:
    tmp, hub, shas = dup
    state = tmp / "state"
    poll = tracker(state, hub.url, "poll", "--once", "--json")
    assert poll.returncode == 0, poll.stderr[-2000:]
    (report,) = json.loads(poll.stdout)
    assert [a["sha"] for a in report["analysed"]] == shas, (report, poll.stderr[-3000:])

    def changes(a: str, b: str) -> list[tuple[str, str, str, object]]:
        out = tracker(state, hub.url, "diff", RID, a, b, "--json")
        assert out.returncode == 0, out.stderr
        return [
            (c["file"], c["key"], c["summary"], c["after"])
            for c in out.json()["changes"]
            if c["artifact"] == "weights"
        ]

    assert changes(shas[0], shas[1]) == [(S2, "content", "1 of 2 shard files have new content", 1)]
    assert changes(shas[1], shas[2]) == [(S1, "content", "1 of 2 shard files have new content", 1)]
    text = tracker(state, hub.url, "diff", RID, shas[0], shas[1])
    assert text.returncode == 0, text.stderr
    assert "0 changes" not in text.stdout
    assert S2 in text.stdout
