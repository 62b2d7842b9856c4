"""A store miss inside a poll is a store problem on that repo, never "the repo is gone upstream".

Before `StoreNotFoundError`, the store raised the sources' RepoNotFoundError/RevisionNotFoundError,
and a poll that missed a row it expected (an inconsistent store) recorded the repo as GONE with a
`ref_deleted` event although upstream was fine. Run as users meet it: `tracker poll --once`.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

from storekit import tracker, tracker_env

from tracker.replica.repos import commit, init_repo
from tracker.shared.domain import RepoId
from tracker.store import Store

T0 = datetime(2025, 1, 1, tzinfo=UTC)
RID = RepoId("acme/tiny")


def test_a_store_miss_is_a_failing_repo_not_a_gone_one(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "git", RID)
    commit(repo, {"config.json": b'{"hidden_size": 8}'}, "one", date=T0)
    head = commit(repo, {"README.md": b"# tiny\n"}, "two", date=T0 + timedelta(hours=1))
    state = tmp_path / "state"
    env = tracker_env(state)
    assert tracker(env, "watch", "add", RID, "--git", str(repo)).returncode == 0
    first = tracker(env, "poll", "--once")
    assert first.returncode == 0, first.stderr

    # An inconsistent store: the revision the cursor names is gone (foreign keys off to do it).
    db = sqlite3.connect(state / "tracker.db")
    with db:
        db.execute("PRAGMA foreign_keys=OFF")
        db.execute("DELETE FROM revisions WHERE sha = ?", (head,))
    db.close()
    commit(repo, {"README.md": b"# tiny 3\n"}, "three", date=T0 + timedelta(hours=2))

    second = tracker(env, "poll", "--once")
    assert second.returncode == 1, second.stdout + second.stderr
    assert "Traceback" not in second.stderr
    listed = tracker(env, "watch", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    [row] = json.loads(listed.stdout)
    assert row["status"] == "failing"
    assert row["last_error"] == f"store: {RID}: revision {head} is not in the store"
    store = Store.open(f"sqlite:///{state / 'tracker.db'}")
    try:
        assert store.events(RID) == []  # no ref_deleted / repo_gone event
    finally:
        store.close()
