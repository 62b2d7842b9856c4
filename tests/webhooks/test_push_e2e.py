"""Push mode end to end, every part a real process or server: a commit lands in a replica repo,
the replica sends the Hub's webhook to `tracker serve`, which queues a poll; the polling daemon
(`tracker poll`, poll interval 1 h: no interval poll after its start) polls the repo through the
real huggingface_hub client and publishes; the advisory is delivered, signed, to a receiver on
loopback subscribed through the API, the API answers it and it is in the repo's Atom feed
(parsed with feedparser). Also: a hook with a wrong or no secret is
refused, a replayed one polls nothing more, an unwatched repo is ignored, writes need the token."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import feedparser
import httpx
import pytest
from hookkit import Receiver
from standardwebhooks import Webhook

from tracker.replica import Replica
from tracker.replica.demo import DEMO_DIR
from tracker.replica.repos import commit, init_repo
from tracker.replica.webhooks import HubWebhook, payload

pytestmark = pytest.mark.replica

TRACKER = Path(sys.executable).with_name("tracker")
REPO = "mistralai/Mixtral-8x7B-v0.1"
# Its real config.json history (the demo data, from ../shared/corpus): 04 drops sliding_window 4096.
DEMO = DEMO_DIR / "repos" / "mistralai__Mixtral-8x7B-v0.1"
HUB_SECRET = "hub-webhook-secret-0001"
TOKEN = "write-token-0123456789abcdef"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _until(what: Callable[[], Any], timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (got := what()):
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)
    return got


class Log:
    """The daemon's JSON log lines (structlog writes JSON when not on a terminal)."""

    def __init__(self, stream: Any) -> None:
        self.events: list[dict[str, Any]] = []
        self._t = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._t.start()

    def _read(self, stream: Any) -> None:
        for line in stream:
            if line.startswith("{"):
                self.events.append(json.loads(line))

    def join(self) -> None:
        """Wait for the end of the stream (the process exited)."""
        self._t.join(timeout=30)

    def analysed(self) -> list[str]:
        return [e["sha"] for e in list(self.events) if e["event"] == "revision.analysed"]

    def polls(self, job: str) -> list[dict[str, Any]]:
        return [e for e in list(self.events) if e["event"] == "repo.polled" and e["job"] == job]


def test_commit_to_advisory_in_the_api_and_delivered_by_push(tmp_path: Path) -> None:
    root = tmp_path / "hub"
    repo = init_repo(root, REPO)
    first = commit(repo, {"config.json": (DEMO / "03_c56a1625_config.json").read_bytes()}, "one")
    (tmp_path / "watchlist.yaml").write_text(f"repos:\n  - id: {REPO}\n    poll_interval: 1h\n")
    port = _free_port()
    api = f"http://127.0.0.1:{port}"
    hook_url = f"{api}/v1/hooks/huggingface"
    auth = {"Authorization": f"Bearer {TOKEN}"}
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACKER_", "HF_"))}
    procs: list[subprocess.Popen[str]] = []
    log: Log | None = None
    with (
        Receiver() as rx,
        Replica(root, webhooks=[HubWebhook(hook_url, HUB_SECRET)]) as hub,
        httpx.Client(base_url=api, timeout=30) as client,
    ):
        env.update(
            TRACKER_STATE_DIR=str(tmp_path / "state"),
            TRACKER_WATCHLIST=str(tmp_path / "watchlist.yaml"),
            TRACKER_HF_ENDPOINT=hub.url,
            TRACKER_HUB_WEBHOOK_SECRET=HUB_SECRET,
            TRACKER_API_WRITE_TOKEN=TOKEN,
            TRACKER_WEBHOOK_ALLOW_NETWORKS="127.0.0.0/8",
            TRACKER_QUEUE_CHECK_S="0.1",
            TRACKER_LOG_LEVEL="INFO",
            HF_HOME=str(tmp_path / "hf-home"),
            HF_HUB_DISABLE_TELEMETRY="1",
            HF_HUB_DISABLE_XET="1",
        )
        try:
            serve = subprocess.Popen(
                [str(TRACKER), "serve", "--port", str(port)],
                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True,
            )  # fmt: skip
            procs.append(serve)
            _until(lambda: _up(client), 120)
            sub = {"url": rx.url, "repos": ["mistralai/*"], "min_severity": "low"}
            assert client.post("/v1/subscriptions", json=sub).status_code == 401  # no token
            created = client.post("/v1/subscriptions", json=sub, headers=auth)
            assert created.status_code == 201, created.text
            secret = created.json()["secret"]
            daemon = subprocess.Popen(
                [str(TRACKER), "poll"],
                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            )  # fmt: skip
            procs.append(daemon)
            log = Log(daemon.stderr)
            _until(lambda: log.analysed())  # the one interval poll: at the daemon's start

            # The Hub's webhook is checked: no secret, a wrong one, an unwatched repo.
            moved = payload(REPO, {}, {"refs/heads/main": first}, base_url=hub.url, hook_id="x")
            assert client.post("/v1/hooks/huggingface", json=moved).status_code == 401
            wrong = {"X-Webhook-Secret": "not-the-secret"}
            assert (
                client.post("/v1/hooks/huggingface", json=moved, headers=wrong).status_code == 403
            )
            good = {"X-Webhook-Secret": HUB_SECRET}
            other = payload("acme/unwatched", {}, {"refs/heads/main": first}, base_url=hub.url,
                            hook_id="x")  # fmt: skip
            ignored = client.post("/v1/hooks/huggingface", json=other, headers=good)
            assert (ignored.status_code, ignored.json()["queued"]) == (200, False)
            replay = client.post("/v1/hooks/huggingface", json=moved, headers=good)
            assert replay.json() == {
                "repo": REPO,
                "queued": False,
                "detail": f"ignored: {first} is already ingested and analysed",
            }

            # The push: a commit lands; nothing but the replica's webhook tells tracker.
            sha = commit(repo, {"config.json": (DEMO / "04_2e54f233_config.json").read_bytes()},
                         "Update config.json")  # fmt: skip
            [got] = rx.wait_for(1, timeout=60)
            delivered = Webhook(secret).verify(got.body, got.headers)
            assert delivered["data"]["commit"] == sha
            [adv] = delivered["data"]["advisories"]
            assert adv["database_specific"]["severity"] == "high"
            # ... and through the API: the OSV query by commit answers it
            found = client.post("/v1/query", json={"commit": sha})
            assert [v["id"] for v in found.json()["vulns"]] == [adv["id"]]
            # ... and it is in the repo's feed, read as a feed reader does
            feed = feedparser.parse(client.get(f"/v1/repos/{REPO}/feed.atom").content)
            assert feed.bozo is False
            [entry] = [e for e in feed.entries if e.id.endswith(f"/{adv['id']}")]
            assert entry.id == f"tag:tracker.local,2026:advisory/{adv['id']}"
            assert entry.link.endswith(f"/advisories/{adv['id']}")
            requested = log.polls("requested")
            assert [e["revisions"] for e in requested] == [1]
            # The replica's own hook, replayed: the commit is ingested, nothing is polled.
            [sent] = [s for s in hub.webhooks_sent if s.repo == REPO]
            assert sent.status == 202
            again = payload(REPO, {"refs/heads/main": first}, {"refs/heads/main": sha},
                            base_url=hub.url, hook_id="x")  # fmt: skip
            for _ in range(3):
                r = client.post("/v1/hooks/huggingface", json=again, headers=good)
                assert r.json()["queued"] is False
            time.sleep(0.5)
            assert len(log.polls("requested")) == 1 and len(log.polls("poll")) == 1
            assert len(rx.received) == 1
        finally:
            for p in reversed(procs):
                p.send_signal(signal.SIGTERM)
            for p in procs:
                p.wait(timeout=60)
            if log is not None:
                log.join()
            for p in procs:
                if p.stderr is not None:
                    p.stderr.close()
    assert procs[1].returncode == 0


def _up(client: httpx.Client) -> bool:
    try:
        return client.get("/openapi.json").status_code == 200
    except httpx.HTTPError:
        return False
