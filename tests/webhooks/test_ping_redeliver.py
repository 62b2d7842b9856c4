"""A test event and redelivery (issue 27, webhooks: "no ping/test event and no way to redeliver"),
as GitHub's and Stripe's dashboards offer them: `tracker subscribe ping ID` and `tracker subscribe
redeliver WEBHOOK_ID` (the installed executable, as a process) and their API routes, each request
verified on a real receiver on loopback by the independent `standardwebhooks` package."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from hookkit import REPO, SHAS, Received, Receiver, change, publish
from standardwebhooks import Webhook

from tracker.api import create_app
from tracker.app import build
from tracker.settings import load_settings
from tracker.shared.domain import Artifact, RepoId, Sha
from tracker.store.webhooks import WebhookStore
from tracker.webhooks.deliver import Deliverer

TRACKER = Path(sys.executable).with_name("tracker")
EOS = change(Artifact.CONFIG, "eos_token_id", 2, 32000, "config.json")
TEMP = change(Artifact.GENERATION_CONFIG, "temperature", 0.7, 0.6, "generation_config.json")
WRITE = "write-token-ping-redeliver-0123"


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(TRACKER), "subscribe", *args], env=env, capture_output=True, text=True, timeout=120
    )


def _verified(secret: str, r: Received) -> Any:
    return Webhook(secret).verify(r.body, r.headers)


def test_ping_and_redeliver_through_the_cli_and_the_api(tmp_path: Path) -> None:
    state = tmp_path / "state"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACKER_", "HF_"))}
    env.update(
        TRACKER_STATE_DIR=str(state),
        TRACKER_WEBHOOK_ALLOW_NETWORKS="127.0.0.0/8",
        TRACKER_WEBHOOK_TIMEOUT_S="5",
    )
    answers = [500]  # what the receiver answers, in turn (then 204)

    def reply(n: int, _: Received) -> tuple[int, dict[str, str]]:
        return (answers.pop(0) if answers else 204), {}

    settings = load_settings(
        state_dir=state, webhook_allow_networks="127.0.0.0/8", webhook_max_attempts=1,
        webhook_timeout_s=5.0, api_write_token=WRITE,
    )  # fmt: skip
    app = build(settings)
    try:
        with Receiver(reply=reply) as rx:
            added = _run(env, "add", rx.url, "--repo", "mistralai/*", "--json")
            assert added.returncode == 0, added.stderr
            sub = json.loads(added.stdout)
            secret = sub["secret"]
            publish(app.store, SHAS[0], None, [])
            [adv] = publish(app.store, SHAS[1], SHAS[0], [EOS])
            # the one delivery fails for good (a 500 at its only attempt)
            deliverer = Deliverer(WebhookStore(app.store.engine), settings, app.clock)
            assert deliverer.run_once() == 1
            deliverer.close()
            [first] = rx.wait_for(1)
            logged = json.loads(_run(env, "log", str(sub["id"]), "--json").stdout)
            assert [(d["webhook_id"], d["state"], len(d["attempts"])) for d in logged] == [
                (first.id, "failed", 1)
            ]

            # -- ping ---------------------------------------------------------------------
            pinged = _run(env, "ping", str(sub["id"]))
            assert pinged.returncode == 0, pinged.stderr
            ping = rx.wait_for(2)[1]
            payload = _verified(secret, ping)
            assert payload["type"] == "webhook.ping"
            assert payload["data"] == {
                "subscription": sub["id"], "repos": ["mistralai/*"], "min_severity": "low",
                "kinds": [], "note": "a test event: no advisory changed",
            }  # fmt: skip
            assert ping.id.startswith("msg_") and ping.id != first.id
            assert pinged.stdout == f"ping {ping.id} to {rx.url}: HTTP 204\n"
            answers.append(503)
            refused = _run(env, "ping", str(sub["id"]))
            assert refused.returncode == 1
            assert refused.stdout.endswith(f"to {rx.url}: HTTP 503\n"), refused.stdout
            rx.wait_for(3)
            # a ping is not a delivery: the log is unchanged
            assert json.loads(_run(env, "log", str(sub["id"]), "--json").stdout) == logged
            missing = _run(env, "ping", "99")
            assert (missing.returncode, missing.stderr.strip()) == (3, "error: no subscription 99")

            # -- redeliver ----------------------------------------------------------------
            again = _run(env, "redeliver", first.id)
            assert again.returncode == 0, again.stderr
            redelivered = rx.wait_for(4)[3]
            assert (redelivered.id, redelivered.body) == (first.id, first.body)
            assert _verified(secret, redelivered)["data"]["advisories"][0]["id"] == adv.id
            assert (
                again.stdout == f"delivery {first.id} sent again (attempt 2): HTTP 204; delivered\n"
            )
            [d] = json.loads(_run(env, "log", str(sub["id"]), "--json").stdout)
            assert (d["state"], [(a["n"], a["status"], a["outcome"]) for a in d["attempts"]]) == (
                "delivered", [(1, 500, "failed"), (2, 204, "delivered")],
            )  # fmt: skip
            unknown = _run(env, "redeliver", "msg_nosuchdelivery")
            assert (unknown.returncode, unknown.stderr.strip()) == (
                3, "error: no delivery msg_nosuchdelivery",
            )  # fmt: skip

            # -- the API ------------------------------------------------------------------
            auth = {"Authorization": f"Bearer {WRITE}"}
            with TestClient(create_app(app)) as client:
                r = client.post(f"/v1/subscriptions/{sub['id']}/ping", headers=auth)
                assert r.status_code == 200, r.text
                api_ping = rx.wait_for(5)[4]
                assert r.json() == {
                    "webhook_id": api_ping.id, "subscription": sub["id"], "url": rx.url,
                    "status": 204, "error": None, "delivered": True,
                }  # fmt: skip
                assert _verified(secret, api_ping)["type"] == "webhook.ping"
                path = f"/v1/subscriptions/{sub['id']}/deliveries/{first.id}/redeliver"
                r = client.post(path, headers=auth)
                assert r.status_code == 200, r.text
                api_again = rx.wait_for(6)[5]
                assert (api_again.id, api_again.body) == (first.id, first.body)
                _verified(secret, api_again)
                body = r.json()
                assert (body["webhook_id"], body["state"], len(body["attempts"])) == (
                    first.id, "delivered", 3,
                )  # fmt: skip
                assert client.post(path).status_code == 401
                other = client.post(
                    f"/v1/subscriptions/{sub['id'] + 1}/deliveries/{first.id}/redeliver",
                    headers=auth,
                )
                assert other.status_code == 404
                assert other.json()["detail"] == f"no delivery {first.id} of subscription 2"
                assert client.post("/v1/subscriptions/7/ping", headers=auth).status_code == 404
            time.sleep(0.2)
            assert len(rx.received) == 6  # nothing else was sent
    finally:
        app.close()


def test_an_event_while_disabled_is_delivered_after_subscribe_enable_in_sequence(
    tmp_path: Path,
) -> None:
    """A receiver's 410 disables its subscription; the event that happens then is held, not
    dropped; `tracker subscribe enable` (the installed executable) releases it, and the next
    delivery pass sends it, verified."""
    state = tmp_path / "state"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACKER_", "HF_"))}
    env.update(TRACKER_STATE_DIR=str(state), TRACKER_WEBHOOK_ALLOW_NETWORKS="127.0.0.0/8")
    answers = [410]

    def reply(n: int, _: Received) -> tuple[int, dict[str, str]]:
        return (answers.pop(0) if answers else 204), {}

    settings = load_settings(
        state_dir=state, webhook_allow_networks="127.0.0.0/8", webhook_timeout_s=5.0
    )
    app = build(settings)
    try:
        with Receiver(reply=reply) as rx:
            bad = _run(env, "add", rx.url, "--event", "advisory.deleted")
            assert (bad.returncode, bad.stderr) == (
                2, "error: event type 'advisory.deleted' is not one of revision.advisories, "
                "advisory.withdrawn, advisory.reopened, advisory.restored\n",
            )  # fmt: skip
            added = _run(env, "add", rx.url, "--event", "revision.advisories", "--json")
            assert added.returncode == 0, added.stderr
            sub = json.loads(added.stdout)
            assert sub["events"] == ["revision.advisories"]
            deliverer = Deliverer(WebhookStore(app.store.engine), settings, app.clock)
            publish(app.store, SHAS[0], None, [])
            [eos] = publish(app.store, SHAS[1], SHAS[0], [EOS])
            assert deliverer.run_once() == 1  # answered 410: disabled
            listed = json.loads(_run(env, "list", "--json").stdout)
            assert [s["enabled"] for s in listed] == [False]
            # while it is disabled: a new revision with an advisory
            fix = change(Artifact.CONFIG, "eos_token_id", 32000, 2, "config.json")
            publish(app.store, SHAS[2], SHAS[1], [fix])
            assert deliverer.run_once() == 0
            time.sleep(0.2)
            assert len(rx.received) == 1
            enabled = _run(env, "enable", str(sub["id"]))
            assert (enabled.returncode, enabled.stdout) == (
                0,
                f"enabled subscription {sub['id']}\n",
            )
            assert deliverer.run_once() == 1
            deliverer.close()
            held = rx.wait_for(2)[1]
            payload = _verified(sub["secret"], held)
            assert (payload["data"]["commit"], payload["data"]["previous"]) == (SHAS[2], SHAS[1])
            # the revert fixes the advisory the 410'd delivery carried
            assert (payload["data"]["advisories"], [a["id"] for a in payload["data"]["fixed"]]) == (
                [], [eos.id],
            )  # fmt: skip
            log = json.loads(_run(env, "log", str(sub["id"]), "--json").stdout)
            assert [(d["commit"], d["state"]) for d in log] == [
                (SHAS[2], "delivered"), (SHAS[1], "failed"),
            ]  # fmt: skip
            # the repo's events are numbered for the receiver: 1, then 2; another repo's start
            # at 1 (real commit ids of Qwen/Qwen-72B's config.json history, shared corpus)
            first = _verified(sub["secret"], rx.received[0])
            assert (first["data"]["sequence"], payload["data"]["sequence"]) == (1, 2)
            other = RepoId("Qwen/Qwen-72B")
            qwen = Sha("3334bfe3d6d9d445cbe54185cd6aaef7e1e3c068")
            qwen2 = Sha("46228648f2385edaa89e8f1dcb9ec502db18aeb4")
            publish(app.store, qwen, None, [], repo=other)
            publish(app.store, SHAS[3], SHAS[2], [TEMP])
            publish(app.store, qwen2, qwen, [EOS], repo=other)
            deliverer = Deliverer(WebhookStore(app.store.engine), settings, app.clock)
            while deliverer.run_once():
                pass
            deliverer.close()
            numbered = [_verified(sub["secret"], r)["data"] for r in rx.wait_for(4)[2:]]
            assert sorted((d["repo"], d["sequence"]) for d in numbered) == [
                (str(other), 1), (REPO, 3),
            ]  # fmt: skip
    finally:
        app.close()
