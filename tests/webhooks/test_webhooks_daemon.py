"""The delivery worker inside `tracker poll` (the daemon) as a process: a delivery survives SIGKILL
mid-retry and goes out after the restart with the same webhook-id; an acknowledgement lost to a
kill is the one case a receiver sees an id again (at least once, as the README says); once an
acknowledgement is recorded the id is never sent again. And `tracker subscribe` as a process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from hookkit import SHAS, Receiver, change, publish
from standardwebhooks import Webhook

from tracker.replica.repos import commit, init_repo
from tracker.shared.domain import Artifact
from tracker.store import Store
from tracker.store.webhooks import DeliveryState, WebhookStore

TRACKER = Path(sys.executable).with_name("tracker")
EOS = change(Artifact.CONFIG, "eos_token_id", 2, 32000, "config.json")


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACKER_", "HF_"))}
    env.update(
        TRACKER_STATE_DIR=str(tmp_path / "state"),
        TRACKER_WATCHLIST=str(tmp_path / "watchlist.yaml"),
        TRACKER_WEBHOOK_ALLOW_NETWORKS="127.0.0.0/8",
        TRACKER_LOG_LEVEL="INFO",
        HF_HOME=str(tmp_path / "hf-home"),
        HF_HUB_DISABLE_TELEMETRY="1",
        **extra,
    )
    return env


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(TRACKER), *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )


def _until(what: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not what():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_delivery_survives_sigkill_mid_retry_and_a_lost_ack(tmp_path: Path) -> None:
    # The daemon watches a small local git repo (its poll is not what is tested here); the
    # revision to deliver is published into its store beforehand, as the pipeline does.
    git = init_repo(tmp_path / "git", "acme/local")
    commit(git, {"config.json": b"{}"}, "init")
    (tmp_path / "watchlist.yaml").write_text(
        f"repos:\n  - id: acme/local\n    git: {git}\n    poll_interval: 1h\n"
    )
    env = _env(
        tmp_path,
        TRACKER_WEBHOOK_RETRY_BASE_S="2",
        TRACKER_WEBHOOK_TIMEOUT_S="0.5",  # a claim outlives an attempt by 2 x 0.5 + 2 s
        TRACKER_QUEUE_CHECK_S="0.1",
    )
    # 1st request: 500 (retried later); 2nd: held 4 s, its 204 lost to a kill; 3rd: 204.
    answers = [(500, {}), (204, {}, 4.0), (204, {})]
    with Receiver(reply=lambda n, r: answers[min(n, 2)]) as rx:
        added = _run(env, "subscribe", "add", rx.url, "--repo", "mistralai/*", "--json")
        assert added.returncode == 0, added.stderr
        sub = json.loads(added.stdout)
        secret = sub["secret"]
        assert sub["id"] == 1 and secret.startswith("whsec_")
        store = Store.open(f"sqlite:///{tmp_path / 'state' / 'tracker.db'}")
        hooks = WebhookStore(store.engine)
        publish(store, SHAS[0], None, [])
        [adv] = publish(store, SHAS[1], SHAS[0], [EOS])

        def attempts() -> int:
            return hooks.deliveries()[0].attempts

        def daemon() -> subprocess.Popen[str]:
            return subprocess.Popen(
                [str(TRACKER), "poll"],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                text=True,
            )

        first = daemon()
        try:
            rx.wait_for(1)
            _until(lambda: attempts() == 1)  # the 500 is recorded: a retry is scheduled
        finally:
            first.send_signal(signal.SIGKILL)
            first.wait(timeout=30)
        [d] = hooks.deliveries()
        assert (d.state, d.last_status) == (DeliveryState.PENDING, 500), d.last_error

        second = daemon()  # sends the retry; killed while the receiver holds its answer
        try:
            rx.wait_for(2)
        finally:
            second.send_signal(signal.SIGKILL)
            second.wait(timeout=30)
        assert attempts() == 1  # the acknowledgement never reached the store

        third = daemon()
        try:
            _until(lambda: hooks.deliveries()[0].state is DeliveryState.DELIVERED)
            time.sleep(1.5)  # a delivered id is not sent again
        finally:
            third.send_signal(signal.SIGTERM)
            assert third.wait(timeout=30) == 0
        log = _run(env, "subscribe", "log", "1", "--json")
    got = rx.received
    assert len(got) == 3
    assert len({r.id for r in got}) == 1 and len({r.body for r in got}) == 1
    for r in got:
        payload = Webhook(secret).verify(r.body, r.headers)
        assert [a["id"] for a in payload["data"]["advisories"]] == [adv.id]
    assert got[1].at - got[0].at >= 1.0  # the retry waited for its backoff (base 2 s, jitter)
    assert log.returncode == 0, log.stderr
    [entry] = json.loads(log.stdout)
    assert entry["webhook_id"] == got[0].id and entry["state"] == "delivered"
    assert [(a["n"], a["status"], a["outcome"]) for a in entry["attempts"]] == [
        (1, 500, "retry"),
        (2, 204, "delivered"),
    ]
    store.close()


def test_subscribe_cli_exit_codes_and_output(tmp_path: Path) -> None:
    env = _env(tmp_path)
    refused = _run(
        {**env, "TRACKER_WEBHOOK_ALLOW_NETWORKS": ""}, "subscribe", "add", "http://127.0.0.1/x"
    )
    assert refused.returncode == 2
    assert refused.stderr == (
        "error: webhook URL refused: 127.0.0.1 is a loopback address; allow its network in "
        "TRACKER_WEBHOOK_ALLOW_NETWORKS to deliver there\n"
    )
    azure = _run(env, "subscribe", "add", "http://168.63.129.16/machine?comp=goalstate")
    assert azure.returncode == 2
    assert azure.stderr == (
        "error: webhook URL refused: 168.63.129.16 is a cloud platform (Azure WireServer) "
        "address; allow its network in TRACKER_WEBHOOK_ALLOW_NETWORKS to deliver there\n"
    )  # refused although TRACKER_WEBHOOK_ALLOW_NETWORKS allows loopback
    added = _run(
        env, "subscribe", "add", "http://127.0.0.1:9/x", "--kind", "chat_template",
        "--min-severity", "high", "--description", "on-call",
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    assert added.stdout.startswith("subscription 1: http://127.0.0.1:9/x\nsecret (shown once")
    secret = added.stdout.split()[-1]
    listed = _run(env, "subscribe", "list", "--json")
    assert listed.returncode == 0
    [row] = json.loads(listed.stdout)
    assert row["kinds"] == ["chat_template"] and row["min_severity"] == "high"
    assert row["repos"] == ["*"] and row["enabled"] is True
    assert secret not in listed.stdout
    assert _run(env, "subscribe", "remove", "1").returncode == 0
    again = _run(env, "subscribe", "remove", "1")
    assert (again.returncode, again.stderr) == (3, "error: no subscription 1\n")


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY"):
        monkeypatch.delenv(name, raising=False)
