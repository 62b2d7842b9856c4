"""The Prometheus alerting rules next to the systemd units (prometheus/tracker-alerts.yml, issue
26): `promtool check rules` accepts them (Debian's prometheus package; installed when missing, as
tests/test_systemd_units.py installs systemd), `promtool test rules` fires each tested alert at the
time it should and not before, and every tracker metric the rules read is on `/metrics` with
the values the store and the watchlist say (live and dead workers, leases held and run out, the
rate budget used and its quota, each repo's poll interval)."""

from __future__ import annotations

import re
import shutil
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from tracker.api import create_app
from tracker.app import build
from tracker.settings import load_settings
from tracker.shared.domain import RepoId
from tracker.store.workers import WorkStore

RULES = Path(__file__).resolve().parents[1] / "prometheus"


def _promtool() -> str:
    found = shutil.which("promtool")
    if found is None:  # Debian's prometheus package provides it
        subprocess.run(["apt-get", "install", "-y", "-q", "prometheus"], check=True,
                       capture_output=True, timeout=900)  # fmt: skip
        found = shutil.which("promtool")
    assert found is not None
    return found


def test_promtool_checks_the_rules() -> None:
    done = subprocess.run([_promtool(), "check", "rules", str(RULES / "tracker-alerts.yml")],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 8 rules found" in done.stdout


def test_promtool_unit_tests_of_the_rules_pass() -> None:
    done = subprocess.run([_promtool(), "test", "rules", "tracker-alerts.test.yml"],
                          cwd=RULES, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_every_metric_the_rules_read_is_served(tmp_path: Path) -> None:
    watchlist = tmp_path / "watchlist.yaml"
    watchlist.write_text(
        "repos:\n  - id: acme/a\n    poll_interval: 10m\n  - id: acme/b\n    poll_interval: 1h\n"
    )
    settings = load_settings(state_dir=tmp_path / "state", watchlist=watchlist)
    now = datetime.now(UTC)
    app = build(settings, clock=lambda: now)
    try:
        work = WorkStore(app.store.engine)
        work.register("w-live", "h", 1, now)
        work.register("w-dead", "h", 2, now - timedelta(seconds=3 * settings.worker_lease_s))
        lease = timedelta(seconds=settings.worker_lease_s)
        work.sync({RepoId("acme/a"): 600.0, RepoId("acme/b"): 3600.0}, now - 2 * lease,
                  changed=[], prune=True)  # fmt: skip
        [dead] = work.claim("w-dead", now - 2 * lease, lease=lease, limit=1)  # ran out
        [live] = work.claim("w-live", now, lease=lease, limit=1, skip=[dead.repo_id])
        assert {dead.repo_id, live.repo_id} == {"acme/a", "acme/b"}
        with TestClient(create_app(app)) as client:
            text = client.get("/metrics").text
    finally:
        app.close()
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
    }
    served = {name for name, _ in samples} | set(re.findall(r"^# TYPE (\S+)", text, re.M))
    used = set(re.findall(r"\b(tracker_[a-z_]+)", (RULES / "tracker-alerts.yml").read_text()))
    assert used and used <= served, sorted(used - served)
    assert samples[("tracker_workers", (("state", "alive"),))] == 1
    assert samples[("tracker_workers", (("state", "no_heartbeat"),))] == 1
    assert samples[("tracker_leases", (("state", "held"),))] == 1
    assert samples[("tracker_leases", (("state", "expired"),))] == 1
    assert {
        dict(k[1])["repo"]: v for k, v in samples.items()
        if k[0] == "tracker_repo_poll_interval_seconds"
    } == {"acme/a": 600.0, "acme/b": 3600.0}  # fmt: skip


def test_lease_churn_is_counted_in_the_store_and_served(tmp_path: Path) -> None:
    """`tracker_lease_churn_total` (the TrackerLeaseChurn alert): a worker's lease runs out, a
    second worker takes the repo over (taken_over 1), the first finishes its poll and finds its
    lease gone (lost 1); a takeover of a repo nobody held and a finish in time count nothing.
    The counts live in the store (migration 0018): `tracker serve` is not the workers' process."""
    settings = load_settings(state_dir=tmp_path / "state", watchlist=tmp_path / "w.yaml")
    (tmp_path / "w.yaml").write_text("repos:\n  - id: acme/a\n  - id: acme/b\n")
    now = datetime.now(UTC)
    app = build(settings, clock=lambda: now)
    try:
        work = WorkStore(app.store.engine)
        lease = timedelta(seconds=settings.worker_lease_s)
        work.sync({RepoId("acme/a"): 600.0, RepoId("acme/b"): 600.0}, now - 3 * lease,
                  changed=[], prune=True)  # fmt: skip
        first = work.claim("w-1", now - 2 * lease, lease=lease, limit=2)
        assert [c.taken_from for c in first] == [None, None]
        done = work.finish(first[1], now - 2 * lease, next_due=now - lease, ok=True, error=None)
        assert done  # in time: nothing lost
        taken = work.claim("w-2", now, lease=lease, limit=2)
        assert sorted((c.repo_id, c.taken_from) for c in taken) == [
            ("acme/a", "w-1"), ("acme/b", None),
        ]  # fmt: skip
        late = work.finish(first[0], now, next_due=now + lease, ok=True, error=None)
        assert late is False
        with TestClient(create_app(app)) as client:
            text = client.get("/metrics").text
    finally:
        app.close()
    churn = {
        s.labels["kind"]: s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if s.name == "tracker_lease_churn_total"
    }
    assert churn == {"taken_over": 1.0, "lost": 1.0}
