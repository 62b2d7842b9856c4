"""Push mode's two halves without the HTTP API: the replica sends the Hub's webhook when a ref
moves, and the poll-request queue coalesces hints (a replayed hook costs at most one poll)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hookkit import REPO, SHAS, Receiver, ingest
from huggingface_hub import WebhookPayload

from tracker.replica import Replica
from tracker.replica.repos import commit, init_repo
from tracker.replica.webhooks import HubWebhook
from tracker.shared.domain import RepoId, Severity
from tracker.store import Store
from tracker.store.advisories import AdvisoryStore
from tracker.store.webhooks import WebhookStore

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
LEASE = timedelta(minutes=15)


def test_the_replica_sends_the_hubs_webhook_on_a_new_commit(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "hub", "acme/tiny")
    first = commit(repo, {"config.json": b"{}"}, "one")
    with Receiver(reply=lambda n, r: (200, {})) as rx:
        hooks = [HubWebhook(rx.url, "hub-secret")]
        with Replica(tmp_path / "hub", webhooks=hooks) as hub:
            time.sleep(0.3)
            assert rx.received == []  # refs that were there at start are no event
            second = commit(repo, {"config.json": b'{"a": 1}'}, "two")
            [got] = rx.wait_for(1, timeout=10)
            new = init_repo(tmp_path / "hub", "acme/new")
            created = commit(new, {"config.json": b"{}"}, "init")
            rx.wait_for(2, timeout=10)
        sent = hub.webhooks_sent  # complete once the replica stopped
    assert got.headers["x-webhook-secret"] == "hub-secret"
    body = got.json()
    assert body["event"] == {"action": "update", "scope": "repo.content"}
    assert body["updatedRefs"] == [{"ref": "refs/heads/main", "oldSha": first, "newSha": second}]
    assert body["repo"]["headSha"] == second
    # The real client's model reads it (as a Space's WebhooksServer would).
    parsed = WebhookPayload.model_validate(body)
    assert (parsed.event.scope, parsed.repo.name, parsed.repo.type) == (
        "repo.content",
        "acme/tiny",
        "model",
    )
    created_body = json.loads(rx.received[1].body)
    assert created_body["repo"]["name"] == "acme/new"
    assert created_body["updatedRefs"] == [
        {"ref": "refs/heads/main", "oldSha": None, "newSha": created}
    ]
    assert [(s.repo, s.status) for s in sent] == [("acme/tiny", 200), ("acme/new", 200)]


def test_poll_requests_coalesce_and_one_asked_mid_poll_runs_once_more(tmp_path: Path) -> None:
    store = Store.open(f"sqlite:///{tmp_path / 'q.db'}")
    q = WebhookStore(store.engine)
    a, b = RepoId("acme/a"), RepoId("acme/b")
    assert q.request_poll(a, "hub-webhook", T0) is True
    for i in range(5):  # replays of the same hook while it waits: still one poll
        assert q.request_poll(a, "hub-webhook", T0 + timedelta(seconds=i)) is False
    assert q.request_poll(b, "manual", T0) is True
    claimed = q.claim_poll_requests(T0, lease=LEASE)
    assert [(r.repo_id, r.reason) for r in claimed] == [(b, "manual"), (a, "hub-webhook")]
    assert q.claim_poll_requests(T0, lease=LEASE) == []  # claimed: no second worker takes them
    # A hint during a's poll (a commit may have landed after the poll read the refs): one more.
    assert q.request_poll(a, "hub-webhook", T0 + timedelta(seconds=9)) is True
    assert q.request_poll(a, "hub-webhook", T0 + timedelta(seconds=9)) is True
    for r in claimed:
        q.finish_poll_request(r)
    [again] = q.claim_poll_requests(T0, lease=LEASE)
    assert again.repo_id == a
    q.finish_poll_request(again)
    assert q.pending_poll_requests() == []
    # A worker that died with a claim: the request is taken again once the lease ran out.
    q.request_poll(b, "manual", T0)
    [lost] = q.claim_poll_requests(T0, lease=LEASE)
    assert q.claim_poll_requests(T0 + LEASE - timedelta(seconds=1), lease=LEASE) == []
    [retaken] = q.claim_poll_requests(T0 + LEASE, lease=LEASE)
    assert retaken.repo_id == lost.repo_id == b
    store.close()


def test_concurrent_claims_take_each_request_once(tmp_path: Path) -> None:
    store = Store.open(f"sqlite:///{tmp_path / 'q.db'}")
    q = WebhookStore(store.engine)
    for i in range(20):
        q.request_poll(RepoId(f"acme/r{i}"), "hub-webhook", T0)
    taken: list[str] = []
    lock = threading.Lock()

    def worker() -> None:
        for _ in range(10):
            got = q.claim_poll_requests(T0, lease=LEASE, limit=3)
            with lock:
                taken.extend(r.repo_id for r in got)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(taken) == sorted(f"acme/r{i}" for i in range(20))
    store.close()


@pytest.mark.postgres
def test_concurrent_delivery_claims_skip_locked_rows_on_postgresql(
    pg_database: Callable[[str], AbstractContextManager[str]],
) -> None:
    with pg_database("claims") as url:
        store = Store.open(url)
        q = WebhookStore(store.engine)
        sub = q.add_subscription(
            url="http://127.0.0.1:9/x", repos=["*"], min_severity=Severity.LOW, kinds=[],
            secret="whsec_" + "QUJD" * 8, description="", now=T0,
        )  # fmt: skip
        ingest(store, SHAS[0], None)
        for i, sha in enumerate(SHAS[1:]):
            ingest(store, sha, SHAS[i])
        with AdvisoryStore(store.engine).transaction() as tx:
            for sha in SHAS:
                tx.outbox.enqueue(sub.id, REPO, sha, "revision.advisories", "{}", T0)
        for i in range(12):
            q.request_poll(RepoId(f"acme/r{i}"), "hub-webhook", T0)
        deliveries: list[int] = []
        polls: list[str] = []
        lock = threading.Lock()

        def worker() -> None:
            for _ in range(6):
                d = q.claim_due(T0, lease=LEASE, limit=1)
                p = q.claim_poll_requests(T0, lease=LEASE, limit=2)
                with lock:
                    deliveries.extend(x.id for x, _ in d)
                    polls.extend(r.repo_id for r in p)

        threads = [threading.Thread(target=worker) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        store.close()
    assert sorted(deliveries) == sorted(set(deliveries)) and len(deliveries) == len(SHAS)
    assert sorted(polls) == sorted(f"acme/r{i}" for i in range(12))
