"""Issue 26, item 2: hostile webhook receivers against the installed `tracker` as a process.

Five hostile receivers (`bench.webhook_receiver.Hostile`): a 500 and a 200 each with a 10 GiB
body streamed endlessly, an answer trickled one byte every 0.5 s, a receiver that accepts and
never answers, and a 302 to a loopback receiver; next to them one well-behaved subscription.
Before: the poller read the 10 GiB body whole (OOM), the trickle hung `poll --once` and the
daemon's one delivery thread, so every subscription stalled, and the daemon ignored SIGTERM.
Now, with `TRACKER_WEBHOOK_TIMEOUT_S=2`: the process's peak RSS (VmHWM, watched every 50 ms; the
process is killed at once past the bound) stays under 300 MB; a delivery to the good receiver
published while every hostile attempt is in flight arrives within the attempt deadline + 1 s;
each hostile attempt is recorded with its one-line reason; SIGTERM ends the daemon, attempts in
flight abandoned, within 5 s; and `poll --once` ends after one deadline per hostile receiver.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from hookkit import NOW, SHAS, Receiver, change, publish

from bench.webhook_receiver import Hostile
from tracker.replica.repos import commit, init_repo
from tracker.settings import load_settings
from tracker.shared.domain import Artifact
from tracker.store import Store
from tracker.store.webhooks import Attempt, DeliveryState, WebhookStore
from tracker.webhooks import subscriptions as subs

TRACKER = Path(sys.executable).with_name("tracker")
EOS = change(Artifact.CONFIG, "eos_token_id", 2, 32000, "config.json")
TEMP = change(Artifact.GENERATION_CONFIG, "temperature", 0.7, 0.6, "generation_config.json")
DEADLINE_S = 2.0
RSS_BOUND = 300 * 1024 * 1024
CUT = "x" * 199 + "…"  # the first 200 characters of the body, as the error line shows them
REASONS = {
    "endless-500": (500, f"HTTP 500: {CUT} (answer body read to 4096 bytes: over 4096 bytes)"),
    "trickle": (None, "no answer within 2 s (waiting for the answer's status and headers)"),
    "silent": (None, "no answer within 2 s (waiting for the answer's status and headers)"),
}


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACKER_", "HF_"))}
    env.update(
        TRACKER_STATE_DIR=str(tmp_path / "state"),
        TRACKER_WATCHLIST=str(tmp_path / "watchlist.yaml"),
        TRACKER_WEBHOOK_ALLOW_NETWORKS="127.0.0.0/8",
        TRACKER_WEBHOOK_TIMEOUT_S=str(DEADLINE_S),
        TRACKER_WEBHOOK_RETRY_BASE_S="0.5",
        TRACKER_QUEUE_CHECK_S="0.1",
        TRACKER_LOG_LEVEL="INFO",
        HF_HOME=str(tmp_path / "hf-home"),
        HF_HUB_DISABLE_TELEMETRY="1",
    )
    return env


def _until(what: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not what():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


class Memory:
    """Watches a process's peak RSS (VmHWM in /proc/PID/status) every 50 ms; past `RSS_BOUND` it
    kills the process at once (the test then fails), so a regression cannot take the host down."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak = 0
        self.killed = False
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._watch, daemon=True)
        self._t.start()

    def _read(self) -> int | None:
        try:
            text = Path(f"/proc/{self.pid}/status").read_text()
        except OSError:
            return None
        for line in text.splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
        return None  # a zombie has no memory lines

    def _watch(self) -> None:
        while not self._stop.wait(0.05):
            hwm = self._read()
            if hwm is None:
                continue
            self.peak = max(self.peak, hwm)
            if hwm > RSS_BOUND and not self.killed:
                self.killed = True
                os.kill(self.pid, signal.SIGKILL)

    def stop(self) -> int:
        hwm = self._read()  # the last reading, while the process is still there
        if hwm is not None:
            self.peak = max(self.peak, hwm)
        self._stop.set()
        self._t.join()
        return self.peak


@dataclass
class World:
    store: Store
    hooks: WebhookStore
    good: Receiver
    hostile: dict[str, Hostile]
    sub: dict[str, int]  # receiver name → subscription id

    def attempts(self, name: str) -> list[Attempt]:
        ds = self.hooks.deliveries(subscription_id=self.sub[name])
        got = self.hooks.attempts([d.id for d in ds])
        return [a for d in reversed(ds) for a in got[d.id]]


@contextmanager
def _world(tmp_path: Path) -> Iterator[World]:
    git = init_repo(tmp_path / "git", "acme/local")
    commit(git, {"config.json": b"{}"}, "init")
    (tmp_path / "watchlist.yaml").write_text(
        f"repos:\n  - id: acme/local\n    git: {git}\n    poll_interval: 1h\n"
    )
    settings = load_settings(webhook_allow_networks="127.0.0.0/8")
    with ExitStack() as stack:
        good = stack.enter_context(Receiver())
        hostile = {
            kind: stack.enter_context(Hostile(kind, location=good.url))
            for kind in ("endless-500", "endless-200", "trickle", "silent", "redirect")
        }
        store = Store.open(f"sqlite:///{tmp_path / 'state' / 'tracker.db'}")
        stack.callback(store.close)
        hooks = WebhookStore(store.engine)
        sub = {}
        for name, url in [("good", good.url), *((k, h.url) for k, h in hostile.items())]:
            s, _ = subs.add(
                hooks, settings, url=url, repos=["mistralai/*"], min_severity="low", kinds=[],
                secret=None, description=name, now=NOW,
            )  # fmt: skip
            sub[name] = s.id
        publish(store, SHAS[0], None, [])
        publish(store, SHAS[1], SHAS[0], [EOS])  # one delivery per subscription
        yield World(store, hooks, good, hostile, sub)


def _check_recorded(world: World) -> None:
    """Every hostile receiver's attempts are recorded with their one-line reason."""
    for kind, (status, error) in REASONS.items():
        tried = world.attempts(kind)
        assert tried, kind
        assert {(a.status, a.error, a.outcome.value) for a in tried} == {(status, error, "retry")}
    ok = world.attempts("endless-200")  # a 2xx is an acknowledgement: its body is never read
    assert ok and {(a.status, a.error, a.outcome.value) for a in ok} == {(200, None, "delivered")}
    port = world.good.url.split(":")[2].split("/")[0]
    redirects = world.attempts("redirect")
    assert redirects
    assert {(a.status, a.error) for a in redirects} == {
        (
            302,
            f"HTTP 302 (redirects are not followed; location: http://127.0.0.1:{port}/hook)",
        )
    }


def test_hostile_receivers_cost_the_daemon_one_slot_each(tmp_path: Path) -> None:
    env = _env(tmp_path)
    with _world(tmp_path) as world:
        log_path = tmp_path / "daemon.log"
        with log_path.open("w") as log_file:
            daemon = subprocess.Popen(
                [str(TRACKER), "poll"], env=env, stdout=log_file, stderr=subprocess.STDOUT
            )
        memory = Memory(daemon.pid)
        try:
            world.good.wait_for(1, timeout=60)
            # Every hostile receiver got its attempt; the trickle and the silent one hold theirs.
            hostile = world.hostile
            _until(lambda: all(h.connections for h in hostile.values()))
            _until(lambda: hostile["trickle"].open == 1 and hostile["silent"].open == 1)
            published = time.monotonic()
            publish(world.store, SHAS[2], SHAS[1], [TEMP])
            [_, second] = world.good.wait_for(2, timeout=30)
            late = second.at - published
            assert late < DEADLINE_S + 1.0, f"the good receiver waited {late:.2f} s"
            # Every hostile attempt of the first revision is recorded, some retried already.
            _until(lambda: all(len(world.attempts(k)) >= 2 for k in REASONS), timeout=60)
            # The daemon's own poll is over (SIGTERM would let it finish its revision first).
            _until(lambda: '"event": "revision.analysed"' in log_path.read_text(), 60)
            _until(lambda: hostile["trickle"].open == 1 and hostile["silent"].open == 1)
            stopping = time.monotonic()
            daemon.send_signal(signal.SIGTERM)
            rc = daemon.wait(timeout=30)
            stopped_in = time.monotonic() - stopping
        finally:
            if daemon.poll() is None:
                daemon.kill()
                daemon.wait()
            peak = memory.stop()
        output = log_path.read_text()
        events = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
        assert not memory.killed, f"peak RSS {peak / 2**20:.0f} MiB (killed)"
        assert peak < RSS_BOUND, f"peak RSS {peak / 2**20:.0f} MiB"
        assert rc == 0, output[-3000:]
        assert stopped_in < 5.0, f"SIGTERM took {stopped_in:.2f} s"
        assert "Traceback" not in output
        assert events[-1]["event"] == "poll.stopped"
        _check_recorded(world)
        # The attempts in flight at SIGTERM were abandoned, not recorded: their deliveries wait.
        abandoned = {e["subscription"] for e in events if e["event"] == "webhook.abandoned"}
        assert {world.sub["trickle"], world.sub["silent"]} <= abandoned
        for kind in ("trickle", "silent"):
            pending = world.hooks.deliveries(subscription_id=world.sub[kind])
            assert {d.state for d in pending} == {DeliveryState.PENDING}
        # The good receiver got each revision once; the 302 to it was not followed.
        assert [r.json()["data"]["commit"] for r in world.good.received] == [SHAS[1], SHAS[2]]
        big = world.hostile["endless-500"]
        assert 0 < big.sent < 64 * 2**20  # the stream stopped soon after the 4 kB were read
        print(
            f"good receiver {late:.2f} s after publication; SIGTERM {stopped_in:.2f} s; "
            f"peak RSS {peak / 2**20:.0f} MiB"
        )


def test_poll_once_ends_after_one_deadline_per_hostile_receiver(tmp_path: Path) -> None:
    env = _env(tmp_path)
    with _world(tmp_path) as world:
        publish(world.store, SHAS[2], SHAS[1], [TEMP])  # two deliveries per subscription
        t0 = time.monotonic()
        with subprocess.Popen(
            [str(TRACKER), "poll", "--once"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        ) as once:
            memory = Memory(once.pid)
            try:
                _out, err = once.communicate(timeout=120)
            finally:
                if once.poll() is None:
                    once.kill()
                peak = memory.stop()
        took = time.monotonic() - t0
        assert not memory.killed and peak < RSS_BOUND, f"peak RSS {peak / 2**20:.0f} MiB"
        assert once.returncode == 0, err
        assert took < 60.0, f"poll --once took {took:.1f} s"  # it ends (the trickle's: never)
        assert len(world.good.wait_for(2, timeout=1)) == 2
        assert len(world.attempts("endless-200")) == 2
        for kind in (*REASONS, "redirect"):  # after a failed attempt the next waits for a run
            assert len(world.attempts(kind)) == 1, kind
        _check_recorded(world)
        # Subscriptions ran at once: the two that held their attempt to the deadline started
        # within one deadline of each other (in turn, the second would start after the first).
        [trickle], [silent] = world.attempts("trickle"), world.attempts("silent")
        apart = abs((trickle.started_at - silent.started_at).total_seconds())
        assert apart < DEADLINE_S, f"the hostile attempts started {apart:.2f} s apart"
        assert trickle.duration_ms >= DEADLINE_S * 1000 and silent.duration_ms >= DEADLINE_S * 1000
        print(f"poll --once {took:.1f} s; peak RSS {peak / 2**20:.0f} MiB")


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY"):
        monkeypatch.delenv(name, raising=False)
