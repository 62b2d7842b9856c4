"""One daemon on SQLite, as operators meet it (the installed `tracker` as processes): a second
daemon on the same store exits 6 with one line; SIGTERM during an ingest finishes the repo under
way, hands every lease back and unregisters the worker; SIGHUP after a watchlist edit polls the
new repo at once and drops the removed one; `tracker status --json` says all of it."""

from __future__ import annotations

import signal
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from workkit import Daemon, commit_eos, env_for, run, status, until

from tracker.replica import Replica
from tracker.replica.repos import init_repo
from tracker.store import Store
from tracker.store.workers import WorkStore

pytestmark = pytest.mark.replica


def test_one_sqlite_worker_sigterm_mid_ingest_then_sighup_after_a_watchlist_edit(
    tmp_path: Path,
) -> None:
    root = tmp_path / "hub"
    a = init_repo(root, "acme/a")
    heads_a = [commit_eos(a, 2 + i) for i in range(8)]
    b = init_repo(root, "acme/b")
    head_b = commit_eos(b, 2)
    watchlist = tmp_path / "watchlist.yaml"
    watchlist.write_text("repos:\n  - id: acme/a\n    poll_interval: 1h\n")
    db = tmp_path / "state" / "tracker.db"
    with Replica(root) as hub:
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
        # The repo under way finished: all eight revisions stored and analysed, once each.
        assert [e["sha"] for _, e in first.of("revision.stored")] == heads_a
        assert [e["sha"] for _, e in first.of("revision.analysed")] == heads_a
        [(_, stopped)] = first.of("poll.stopped")
        assert (stopped["handed_back"], stopped["released"]) == (0, 0)

        st = status(env)
        [row] = st["repos"]
        assert st["workers"] == []  # unregistered on the way out
        assert row["repo"] == "acme/a" and row["last_revision"] == heads_a[-1]
        assert (row["lease_owner"], row["consecutive_failures"], row["last_error"]) == (
            None, 0, None,
        )  # fmt: skip
        wait = datetime.fromisoformat(row["next_due"]) - datetime.fromisoformat(row["last_poll"])
        assert timedelta(hours=1) <= wait <= timedelta(hours=1.1)  # the interval plus jitter

        # Restarted (the lock went with the process): acme/a is not due for an hour. The
        # watchlist now lists acme/b instead; SIGHUP makes the daemon read it at once.
        again = Daemon(env)
        store = Store.open(f"sqlite:///{db}")
        try:
            until(lambda: again.of("poll.started"))
            until(lambda: WorkStore(store.engine).workers())
            watchlist.write_text("repos:\n  - id: acme/b\n    poll_interval: 1h\n")
            again.proc.send_signal(signal.SIGHUP)
            until(lambda: again.of("repo.polled", repo="acme/b"), timeout=30)
            [worker] = status(env)["workers"]
            assert again.stop() == 0
        finally:
            store.close()
            if again.proc.poll() is None:
                again.kill()
    assert again.of("watchlist.reload", signal="SIGHUP")
    assert again.of("watchlist.repo_removed", repo="acme/a")
    assert not again.of("repo.polled", repo="acme/a")
    [(_, polled)] = again.of("repo.polled", repo="acme/b")
    assert (polled["revisions"], polled["status"], polled["job"]) == (1, "ok", "poll")
    assert worker["host"] and worker["pid"] == again.proc.pid and worker["alive"] is True
    assert worker["id"].startswith(f"{worker['host']}:{again.proc.pid}:")
    st = status(env)
    assert [r["repo"] for r in st["repos"]] == ["acme/b"]  # acme/a left the schedule
    assert st["repos"][0]["last_revision"] == head_b
    assert st["workers"] == [] and st["rate_budget"] == []  # a replica: no budget by default
