"""One daemon on SQLite, as operators meet it (the installed `tracker` as processes): a second
daemon on the same store exits 6 with one line; SIGTERM during a 40-revision ingest stops between
two revisions (those stored are complete, the rest ingested by the next run, exit 0), hands every
lease back and unregisters the worker; SIGHUP after a watchlist edit polls the
new repo at once and drops the removed one; `tracker status --json` says all of it."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
from workkit import Daemon, commit_eos, config, env_for, run, status, until

from tracker.replica import Replica
from tracker.replica.repos import init_repo
from tracker.shared.domain import RepoId
from tracker.store import Store
from tracker.store.workers import WorkStore

pytestmark = pytest.mark.replica


REVISIONS = 40


def test_one_sqlite_worker_sigterm_mid_ingest_then_sighup_after_a_watchlist_edit(
    tmp_path: Path,
) -> None:
    root = tmp_path / "hub"
    a = init_repo(root, "acme/a")
    heads_a = [commit_eos(a, 2 + i) for i in range(REVISIONS)]
    b = init_repo(root, "acme/b")
    head_b = commit_eos(b, 2)
    watchlist = tmp_path / "watchlist.yaml"
    watchlist.write_text("repos:\n  - id: acme/a\n    poll_interval: 1h\n")
    db = tmp_path / "state" / "tracker.db"
    # 50 ms per answer (the Hub's round trip): the ingest of 40 revisions lasts seconds
    with Replica(root, latency_s=0.05) as hub:
        env = env_for(tmp_path, hub.url, TRACKER_WATCHLIST_SYNC_S="3600")
        first = Daemon(env)
        try:
            until(lambda: first.of("revision.stored", repo="acme/a"))
            # Mid-ingest: a second daemon on the same SQLite store refuses to start.
            second = run(env, "poll")
            pid = first.proc.pid
            assert (second.returncode, second.stdout) == (6, "")
            assert second.stderr == (
                f"error: another `tracker poll` daemon (pid {pid}) works on the SQLite store "
                f"{db}; SQLite takes one worker: stop that one, or point every worker at one "
                "PostgreSQL database (TRACKER_DATABASE_URL)\n"
            )
            first.proc.send_signal(signal.SIGTERM)  # still ingesting acme/a
            assert first.wait() == 0
        finally:
            if first.proc.poll() is None:
                first.kill()
        names = first.names()
        assert names[-1] == "poll.stopped" and "poll.stopping" in names
        # SIGTERM stopped acme/a between two revisions: the ones stored are the oldest, complete
        # (each with its file versions: `tracker history` reads them), none analysed yet (the
        # analysis comes after the ingest and did not start), the rest left for the next run.
        stored = [e["sha"] for _, e in first.of("revision.stored")]
        k = len(stored)
        assert 1 <= k < REVISIONS and stored == heads_a[:k]
        assert first.of("revision.analysed") == []
        [(_, polled)] = first.of("repo.polled", repo="acme/a")
        assert (polled["status"], polled["revisions"], polled["stopped"], polled["left"]) == (
            "ok", k, True, REVISIONS - k,
        )  # fmt: skip
        assert len(first.of("poll.interrupted", repo="acme/a")) == 1
        [(_, stopped)] = first.of("poll.stopped")
        assert (stopped["handed_back"], stopped["released"]) == (0, 0)
        done = Store.open(f"sqlite:///{db}")
        try:
            for i, sha in enumerate(stored):
                fv = done.file_versions(RepoId("acme/a"), sha)["config.json"]
                data = fv.data if fv.data is not None else done.read_blob(fv.blob_sha256 or "")
                assert data == config(2 + i)
        finally:
            done.close()
        history = run(env, "history", "acme/a", "--json")
        assert history.returncode == 0, history.stderr
        assert [(r["sha"], r["analysed"]) for r in json.loads(history.stdout)["revisions"]] == [
            (sha, False) for sha in heads_a[:k]
        ]

        st = status(env)
        [row] = st["repos"]
        assert st["workers"] == []  # unregistered on the way out
        assert row["repo"] == "acme/a" and row["last_revision"] == heads_a[k - 1]
        assert (row["lease_owner"], row["consecutive_failures"], row["last_error"]) == (
            None, 0, None,
        )  # fmt: skip
        assert row["next_due"] == row["last_poll"]  # the rest is due at once

        # Restarted (the lock went with the process): acme/a is due, and the new daemon ingests
        # the revisions left, then analyses all of them, each once.
        again = Daemon(env)
        store = Store.open(f"sqlite:///{db}")
        try:
            until(lambda: again.of("poll.started"))
            until(lambda: WorkStore(store.engine).workers())
            until(lambda: again.of("repo.polled", repo="acme/a"), timeout=120)
            until(lambda: not store.pending_analysis(RepoId("acme/a")), timeout=120)
            # the poll is over once its lease is released (a leased repo is never pruned)
            until(lambda: [r.lease_owner for r in WorkStore(store.engine).schedule()] == [None])
            # The watchlist now lists acme/b instead; SIGHUP makes the daemon read it at once.
            watchlist.write_text("repos:\n  - id: acme/b\n    poll_interval: 1h\n")
            again.proc.send_signal(signal.SIGHUP)
            until(lambda: again.of("repo.polled", repo="acme/b"), timeout=30)
            [worker] = status(env)["workers"]
            assert again.stop() == 0
        finally:
            store.close()
            if again.proc.poll() is None:
                again.kill()
    assert [e["sha"] for _, e in again.of("revision.stored", repo="acme/a")] == heads_a[k:]
    assert [e["sha"] for _, e in again.of("revision.analysed", repo="acme/a")] == heads_a
    [(_, polled_a)] = again.of("repo.polled", repo="acme/a")
    assert (polled_a["revisions"], polled_a["status"]) == (REVISIONS - k, "ok")
    assert "stopped" not in polled_a
    assert again.of("watchlist.reload", signal="SIGHUP")
    assert again.of("watchlist.repo_removed", repo="acme/a")
    [(_, polled)] = again.of("repo.polled", repo="acme/b")
    assert (polled["revisions"], polled["status"], polled["job"]) == (1, "ok", "poll")
    assert worker["host"] and worker["pid"] == again.proc.pid and worker["alive"] is True
    assert worker["id"].startswith(f"{worker['host']}:{again.proc.pid}:")
    st = status(env)
    assert [r["repo"] for r in st["repos"]] == ["acme/b"]  # acme/a left the schedule
    assert st["repos"][0]["last_revision"] == head_b
    assert st["workers"] == [] and st["rate_budget"] == []  # a replica: no budget by default
