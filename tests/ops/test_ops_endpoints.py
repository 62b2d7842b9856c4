"""Operations endpoints of the installed `tracker serve`, as a process on loopback: `/healthz`,
`/readyz` (200; 503 naming a store behind its migrations, or one that cannot be reached) and
`/metrics` (Prometheus text, parsed with prometheus_client's own parser), with exact values for
the demo's store and for a store with webhook deliveries and poll requests in it."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from alembic import command
from prometheus_client.parser import text_string_to_metric_families

from tracker.shared.domain import AdvisoryState, Artifact, RepoId, Severity
from tracker.store import RepoStatus, Store
from tracker.store.engine import _alembic_config, head_revision, writer
from tracker.store.webhooks import Attempt, Outcome, WebhookStore

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "webhooks"))
from hookkit import NOW, REPO, SHAS, change, publish

TRACKER = Path(sys.executable).with_name("tracker")
WATCHLIST = Path(__file__).resolve().parents[2] / "watchlist.yaml"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serving(env_extra: dict[str, str]) -> Iterator[httpx.Client]:
    """`tracker serve` as a process on a free loopback port; a client for it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACKER_", "HF_"))}
    env.update(env_extra)
    port = _free_port()
    proc = subprocess.Popen(
        [str(TRACKER), "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            deadline = time.monotonic() + 90
            while True:
                try:
                    if client.get("/healthz").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if proc.poll() is not None or time.monotonic() > deadline:
                    err = proc.stderr.read().decode() if proc.stderr else ""
                    pytest.fail(f"tracker serve did not start: {err[-2000:]}")
                time.sleep(0.1)
            yield client
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stderr:
            proc.stderr.close()


def scrape(client: httpx.Client) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of `/metrics`: (name, sorted labels) → value."""
    answer = client.get("/metrics")
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/plain")
    out = {}
    for family in text_string_to_metric_families(answer.text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def by_label(samples: dict[Any, float], name: str, label: str) -> dict[str, float]:
    return {dict(k[1])[label]: v for k, v in samples.items() if k[0] == name}


def test_metrics_of_the_demo_store(demo_run: Any) -> None:
    env = {
        "TRACKER_STATE_DIR": str(demo_run.root / "state"),
        "TRACKER_WATCHLIST": str(WATCHLIST),
    }
    reports = [*demo_run.first.repos, *demo_run.second.repos]
    repos = sorted({r.poll.repo_id for r in reports})
    # What the two demo cycles did, from their own reports (not from the store).
    polls = {rid: sum(1 for r in reports if r.poll.repo_id == rid) for rid in repos}
    failed = {
        rid: sum(1 for r in reports if r.poll.repo_id == rid and r.poll.status.value != "ok")
        for rid in repos
    }
    ingested = {
        rid: sum(r.poll.revisions_ingested for r in reports if r.poll.repo_id == rid)
        for rid in repos
    }
    # The advisories by severity and state, from the exported OSV records.
    expected: dict[tuple[str, str], int] = {}
    for path in sorted(demo_run.export_second.rglob("*.json")):
        record = json.loads(path.read_text())
        specific = record["database_specific"]
        state = (
            "withdrawn" if record.get("withdrawn") else "fixed" if specific.get("fixed") else "open"
        )
        key = (specific["severity"], state)
        expected[key] = expected.get(key, 0) + 1
    assert sum(expected.values()) == 50  # the demo's golden advisories

    with serving(env) as client:
        assert client.get("/healthz").json() == {"status": "ok"}
        ready = client.get("/readyz")
        assert ready.status_code == 200
        assert ready.json() == {"status": "ready", "store": "reachable", "schema": head_revision()}
        samples = scrape(client)

    assert samples[("tracker_store_up", ())] == 1
    assert by_label(samples, "tracker_polls_total", "repo") == polls
    assert set(polls.values()) == {2}
    assert by_label(samples, "tracker_poll_failures_total", "repo") == failed
    assert sum(failed.values()) == 0  # every demo poll ends ok
    assert by_label(samples, "tracker_revisions_ingested_total", "repo") == ingested
    assert by_label(samples, "tracker_revisions_pending_analysis", "repo") == dict.fromkeys(
        repos, 0
    )
    for rid in repos:
        count = samples[("tracker_ingest_seconds_count", (("repo", rid),))]
        inf = samples[("tracker_ingest_seconds_bucket", (("le", "+Inf"), ("repo", rid)))]
        assert count == inf == 2
        assert samples[("tracker_ingest_seconds_sum", (("repo", rid),))] > 0
        buckets = sorted(
            (float(dict(k[1])["le"]), v)
            for k, v in samples.items()
            if k[0] == "tracker_ingest_seconds_bucket" and dict(k[1])["repo"] == rid
        )
        assert [v for _, v in buckets] == sorted(v for _, v in buckets)  # cumulative
    advisories = {
        (dict(k[1])["severity"], dict(k[1])["state"]): v
        for k, v in samples.items()
        if k[0] == "tracker_advisories"
    }
    assert advisories == {
        (sev.value, st.value): expected.get((sev.value, st.value), 0)
        for sev in Severity
        for st in AdvisoryState
    }
    assert by_label(samples, "tracker_webhook_deliveries", "state") == {
        "pending": 0,
        "delivered": 0,
        "failed": 0,
        "cancelled": 0,
    }
    assert samples[("tracker_webhook_queue_depth", ())] == 0
    assert by_label(samples, "tracker_poll_requests", "state") == {"waiting": 0, "claimed": 0}


def _downgrade(engine: sa.Engine, revision: str) -> None:
    cfg = _alembic_config()
    with writer(engine).begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, revision)


def test_webhook_and_queue_metrics_and_readyz_on_a_store_behind(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'state' / 'tracker.db'}"
    store = Store.open(url)
    hooks = WebhookStore(store.engine)
    eos = change(Artifact.CONFIG, "eos_token_id", 2, 32000, "config.json")
    for n in range(3):
        hooks.add_subscription(
            url=f"http://127.0.0.1:9/{n}",
            repos=["*"],
            min_severity=Severity.LOW,
            kinds=[],
            secret="whsec_" + "QUJD" * 8,
            description="",
            now=NOW,
        )
    publish(store, SHAS[0], None, [])
    publish(store, SHAS[1], SHAS[0], [eos])  # one delivery per subscription
    claimed = hooks.claim_due(NOW + timedelta(seconds=1), lease=timedelta(seconds=30))
    assert len(claimed) == 3
    (d1, _), (d2, _), (d3, _) = claimed
    hooks.record_attempt(
        d1, Attempt(d1.id, 1, NOW, 5, 204, None, Outcome.DELIVERED), next_attempt_at=None, now=NOW
    )
    later = NOW + timedelta(minutes=5)
    hooks.record_attempt(
        d2,
        Attempt(d2.id, 1, NOW, 5, 500, "HTTP 500", Outcome.RETRY),
        next_attempt_at=later,
        now=NOW,
    )
    hooks.record_attempt(
        d3, Attempt(d3.id, 1, NOW, 5, 410, "HTTP 410", Outcome.GONE), next_attempt_at=None, now=NOW
    )
    for rid in ("acme/one", "acme/two", "acme/three"):
        hooks.request_poll(RepoId(rid), "hub-webhook", NOW)
    hooks.claim_poll_requests(datetime.now(UTC), lease=timedelta(minutes=15), limit=1)
    # Three polls of the repo as `tracker poll` records them: ok in 0.2 s, failing, ok in 1.5 s.
    store.record_poll(REPO, status=RepoStatus.OK, error=None, now=NOW, seconds=0.2)
    store.record_poll(REPO, status=RepoStatus.FAILING, error="HTTP 502", now=NOW, seconds=0.0)
    store.record_poll(REPO, status=RepoStatus.OK, error=None, now=NOW, seconds=1.5)
    store.close()

    env = {"TRACKER_STATE_DIR": str(tmp_path / "state"), "TRACKER_WATCHLIST": str(WATCHLIST)}
    with serving(env) as client:
        samples = scrape(client)
        assert by_label(samples, "tracker_webhook_deliveries", "state") == {
            "pending": 1,  # the 500, due again in 5 minutes
            "delivered": 1,
            "failed": 1,  # the 410
            "cancelled": 0,
        }
        assert by_label(samples, "tracker_webhook_attempts", "outcome") == {
            "delivered": 1,
            "retry": 1,
            "failed": 0,
            "gone": 1,
        }
        assert samples[("tracker_webhook_queue_depth", ())] == 1
        repo = (("repo", REPO),)
        assert samples[("tracker_polls_total", repo)] == 3
        assert samples[("tracker_poll_failures_total", repo)] == 1
        assert samples[("tracker_revisions_ingested_total", repo)] == 2
        assert samples[("tracker_ingest_seconds_sum", repo)] == pytest.approx(1.7)
        assert {
            dict(k[1])["le"]: v
            for k, v in samples.items()
            if k[0] == "tracker_ingest_seconds_bucket"
        } == {
            "0.05": 1,
            "0.1": 1,
            "0.25": 2,
            "0.5": 2,
            "1.0": 2,
            "2.5": 3,
            "5.0": 3,
            "10.0": 3,
            "30.0": 3,
            "60.0": 3,
            "120.0": 3,
            "300.0": 3,
            "+Inf": 3,
        }
        assert by_label(samples, "tracker_repo_state", "state") == {
            "new": 0,
            "ok": 1,
            "failing": 0,
            "gone": 0,
            "gated": 0,
        }
        assert by_label(samples, "tracker_poll_requests", "state") == {"waiting": 2, "claimed": 1}
        advisories = {k: v for k, v in samples.items() if k[0] == "tracker_advisories" and v}
        assert advisories == {("tracker_advisories", (("severity", "high"), ("state", "open"))): 1}
        # this process's own requests, counted once answered: the first scrape is in the second
        metrics_200 = ("tracker_http_requests_total", (("method", "GET"), ("route", "/metrics"), ("status", "200")))  # fmt: skip
        assert metrics_200 not in samples
        assert scrape(client)[metrics_200] == 1

        # The store is taken one migration back behind the server's back: not ready, and why.
        engine = sa.create_engine(url)
        _downgrade(engine, "0008")
        behind = client.get("/readyz")
        assert behind.status_code == 503
        assert behind.headers["content-type"] == "application/problem+json"
        problem = behind.json()
        assert problem["type"] == "urn:tracker:problem:not-ready"
        assert problem["status"] == 503 and problem["title"] == "Not ready"
        assert problem["instance"] == "/readyz"
        assert problem["schema"] == "0008" and problem["head"] == head_revision()
        assert problem["detail"].startswith(
            f"the store's schema is at migration 0008, behind {head_revision()}"
        )
        assert client.get("/healthz").status_code == 200  # the process is still up
        # `tracker migrate` migrates the store: ready again.
        done = subprocess.run(
            [str(TRACKER), "migrate"],
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert client.get("/readyz").status_code == 200
        engine.dispose()


@pytest.mark.postgres
def test_readyz_503_when_the_store_cannot_be_reached(pg_database: Any, tmp_path: Path) -> None:
    with pg_database("ops_ready") as url:
        Store.open(url).close()
        env = {
            "TRACKER_STATE_DIR": str(tmp_path / "state"),
            "TRACKER_WATCHLIST": str(WATCHLIST),
            "TRACKER_DATABASE_URL": url,
        }
        with serving(env) as client:
            assert client.get("/readyz").status_code == 200
            admin = sa.create_engine(
                sa.make_url(url).set(database="postgres"), isolation_level="AUTOCOMMIT"
            )
            name = sa.make_url(url).database
            with admin.connect() as conn:
                conn.execute(sa.text(f'DROP DATABASE "{name}" WITH (FORCE)'))
            admin.dispose()
            gone = client.get("/readyz")
            assert gone.status_code == 503
            assert gone.headers["content-type"] == "application/problem+json"
            assert gone.json()["detail"].startswith("the store cannot be reached: ")
            assert f'database "{name}" does not exist' in gone.json()["detail"]
            samples = scrape(client)
            assert samples[("tracker_store_up", ())] == 0
            assert client.get("/healthz").status_code == 200


def test_metrics_need_the_read_token_when_reads_do(tmp_path: Path) -> None:
    Store.open(f"sqlite:///{tmp_path / 'state' / 'tracker.db'}").close()
    env = {
        "TRACKER_STATE_DIR": str(tmp_path / "state"),
        "TRACKER_WATCHLIST": str(WATCHLIST),
        "TRACKER_API_READ_TOKEN": "ops-read-token-0123456789",
    }
    with serving(env) as client:
        refused = client.get("/metrics")
        assert refused.status_code == 401
        assert refused.headers["content-type"] == "application/problem+json"
        assert "tracker_store_up" not in refused.text
        auth = {"Authorization": "Bearer ops-read-token-0123456789"}
        assert client.get("/metrics", headers=auth).status_code == 200
        assert client.get("/healthz").status_code == 200  # probes need no token
        assert client.get("/readyz").status_code == 200
