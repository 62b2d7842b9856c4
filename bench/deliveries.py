"""Webhook deliveries next to hostile receivers (`make bench`, `python -m bench.run deliveries`).

The installed `tracker poll` daemon (SQLite store, `TRACKER_WEBHOOK_TIMEOUT_S=2`) delivers to one
well-behaved receiver alone, then to the same receiver beside five hostile ones
(`bench.webhook_receiver.Hostile`: a 500 and a 200 each streaming a 10 GiB body, an answer
trickled one byte every 0.5 s, a receiver that never answers, a 302 to a loopback receiver).
Revisions are published into the store one at a time (the pipeline's publish and outbox, from
this process) while every hostile attempt is in flight; for each, the time from the commit of
its publication to the good receiver's request is the delivery latency. The daemon's peak RSS is
its VmHWM (/proc, sampled every 50 ms; killed past 1 GiB so a regression cannot take the host
down); the stop is SIGTERM to exit.
"""

from __future__ import annotations

import hashlib
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path

from bench.webhook_receiver import Hostile, Receiver
from tracker.advisories import service
from tracker.replica.repos import commit, init_repo
from tracker.settings import load_settings
from tracker.shared.domain import (
    Artifact,
    Change,
    ChangeKind,
    Commit,
    RepoId,
    Sha,
)
from tracker.store import Store
from tracker.store.advisories import AdvisoryStore
from tracker.store.webhooks import WebhookStore
from tracker.webhooks import subscriptions as subs

TRACKER = Path(sys.executable).with_name("tracker")
REPO = RepoId("acme/bench-deliveries")
HOSTILE = ("endless-500", "endless-200", "trickle", "silent", "redirect")
DEADLINE_S = 2.0
KILL_AT = 1024 * 2**20
NOW = datetime(2026, 11, 30, 9, 30, tzinfo=UTC)


def _sha(i: int) -> Sha:
    return Sha(hashlib.sha1(f"bench-deliveries-{i}".encode()).hexdigest())


def _publish(store: Store, i: int) -> None:
    """Revision i (after i - 1) with one config change: one delivery per subscription."""
    sha, previous = _sha(i), (_sha(i - 1) if i else None)
    c = Commit(sha, (previous,) if previous else (), NOW, "Update", "Update", ("bench",))
    store.ensure_repo(REPO, source_kind="hub", url=None, ref="main")
    store.store_revision(REPO, c, [], {}, previous=previous)
    changes = (
        [Change(Artifact.CONFIG, ChangeKind.CHANGED, "config.json", "eos_token_id", i, i + 1,
                f"eos_token_id: {i} → {i + 1}", "")]
        if i else []
    )  # fmt: skip
    service.publish(
        AdvisoryStore(store.engine), repo_id=REPO, commit=c, previous=previous, changes=changes,
        estimate_before=None, estimate_after=None, repo_url=f"https://huggingface.co/{REPO}",
        overrides=None, prefix="TRACKER", now=NOW,
    )  # fmt: skip


class _Peak:
    """The peak RSS (VmHWM) of a process, sampled every 50 ms."""

    def __init__(self, pid: int) -> None:
        self.pid, self.peak, self.killed = pid, 0, False
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._watch, daemon=True)
        self._t.start()

    def _read(self) -> int | None:
        try:
            for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
        except OSError:
            pass
        return None

    def _watch(self) -> None:
        while not self._stop.wait(0.05):
            hwm = self._read()
            if hwm is not None:
                self.peak = max(self.peak, hwm)
                if hwm > KILL_AT and not self.killed:
                    self.killed = True
                    os.kill(self.pid, signal.SIGKILL)

    def stop(self) -> int:
        hwm = self._read()
        self.peak = max(self.peak, hwm or 0)
        self._stop.set()
        self._t.join()
        return self.peak


def _until(what: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not what():
        if time.monotonic() > deadline:
            raise RuntimeError("timed out")
        time.sleep(0.02)


def trial(hostile: bool, revisions: int = 6, gap_s: float = 1.0) -> dict[str, float]:
    """One daemon run (see the module docstring): latencies (s) of the good receiver's deliveries
    published while it ran, the daemon's peak RSS (MiB), the SIGTERM stop (s)."""
    with tempfile.TemporaryDirectory(prefix="tracker-deliveries-") as tmp, ExitStack() as stack:
        root = Path(tmp)
        git = init_repo(root / "git", "acme/local")
        commit(git, {"config.json": b"{}"}, "init")
        (root / "watchlist.yaml").write_text(
            f"repos:\n  - id: acme/local\n    git: {git}\n    poll_interval: 1h\n"
        )
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACKER_", "HF_"))}
        for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY"):
            env.pop(name, None)
        env.update(
            TRACKER_STATE_DIR=str(root / "state"), TRACKER_WATCHLIST=str(root / "watchlist.yaml"),
            TRACKER_WEBHOOK_ALLOW_NETWORKS="127.0.0.0/8", TRACKER_WEBHOOK_TIMEOUT_S=str(DEADLINE_S),
            TRACKER_WEBHOOK_RETRY_BASE_S="0.5", TRACKER_QUEUE_CHECK_S="0.1",
            TRACKER_LOG_LEVEL="WARNING", HF_HOME=str(root / "hf-home"),
        )  # fmt: skip
        settings = load_settings(webhook_allow_networks="127.0.0.0/8")
        good = stack.enter_context(Receiver())
        bad = (
            {k: stack.enter_context(Hostile(k, location=good.url)) for k in HOSTILE}
            if hostile
            else {}
        )
        store = Store.open(f"sqlite:///{root / 'state' / 'tracker.db'}")
        stack.callback(store.close)
        hooks = WebhookStore(store.engine)
        for name, url in [("good", good.url), *((k, h.url) for k, h in bad.items())]:
            subs.add(hooks, settings, url=url, repos=["acme/*"], min_severity="low", kinds=[],
                     secret=None, description=name, now=NOW)  # fmt: skip
        _publish(store, 0)
        _publish(store, 1)
        daemon = subprocess.Popen([str(TRACKER), "poll"], env=env, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)  # fmt: skip
        peak = _Peak(daemon.pid)
        try:
            good.wait_for(1, timeout=120)
            if bad:  # every hostile receiver holds or has had its attempt
                _until(lambda: all(h.connections for h in bad.values()), 60)
                _until(lambda: bad["trickle"].open == 1 and bad["silent"].open == 1, 60)
            late = []
            for i in range(2, 2 + revisions):
                at = time.monotonic()
                _publish(store, i)
                got = good.wait_for(i, timeout=60)
                late.append(got[-1].at - at)
                time.sleep(gap_s)
            stopping = time.monotonic()
            daemon.send_signal(signal.SIGTERM)
            rc = daemon.wait(timeout=60)
            stop_s = time.monotonic() - stopping
        finally:
            if daemon.poll() is None:
                daemon.kill()
                daemon.wait()
            rss = peak.stop()
        if peak.killed or rc != 0:
            raise RuntimeError(
                f"daemon exit {rc}, killed={peak.killed}, peak {rss / 2**20:.0f} MiB"
            )
        streamed = sum(h.sent for k, h in bad.items() if k.startswith("endless"))
        return {
            "median": statistics.median(late),
            "max": max(late),
            "n": float(len(late)),
            "rss": rss / 2**20,
            "stop": stop_s,
            "streamed": streamed / 2**20,
        }


def run() -> str:
    rows = []
    for hostile in (False, True):
        r = trial(hostile)
        who = "the good one beside 5 hostile" if hostile else "the good one alone"
        rows.append(
            f"| {who} | {r['n']:.0f} | {r['median'] * 1000:.0f} ms | {r['max'] * 1000:.0f} ms "
            f"| {r['rss']:.0f} MiB | {r['stop']:.2f} s | {r['streamed']:.1f} MiB |"
        )
    return "\n".join(
        [
            "## Webhook deliveries beside hostile receivers (`make bench`, "
            "`python -m bench.run deliveries`)",
            "",
            (__doc__ or "").split("\n\n", 1)[1].strip().replace("\n", " "),
            "",
            "| receivers | deliveries timed | good latency median | good latency max "
            "| daemon peak RSS | SIGTERM to exit | the 10 GiB streams got out (socket buffers included) |",
            "|---|---:|---:|---:|---:|---:|---:|",
            *rows,
        ]
    )


if __name__ == "__main__":
    print(run())
