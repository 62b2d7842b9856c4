"""Issue 10, item 7: deadlines on Hub calls, through the real client and the fault proxy.

Before: a `429` with `Retry-After: 3600` made the client sleep an hour inside a poll (the
huggingface_hub backoff of its paginated listings honours any Retry-After), and a server
trickling one byte every 0.3 s held one request for 41 s despite a 5 s timeout (each read gets
its byte in time). Now the long wait ends the call at once with a DeadlineError that carries the
wait (the poll records the repo failing and the daemon polls it again that much later), and a
stalled body is cut after one timeout window.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from types import SimpleNamespace

import pytest
from helpers_replica import make_llama

from tracker.ingest.snapshots import poll_repo
from tracker.replica import Replica
from tracker.replica.faultproxy import Fault, FaultProxy, Mode
from tracker.shared.domain import RepoId, Sha
from tracker.shared.errors import DeadlineError, TransientSourceError
from tracker.sources.hub import HubSource, _retry_after
from tracker.store import RepoStatus, Store
from tracker.watchlist import WatchedRepo

pytestmark = pytest.mark.replica
RID = RepoId("acme/llama")


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Replica, dict[str, object]]]:
    root = tmp_path_factory.mktemp("hub")
    info = make_llama(root)
    with Replica(root) as replica:
        yield replica, info


@pytest.fixture
def proxy(hub: tuple[Replica, dict[str, object]]) -> Iterator[FaultProxy]:
    with FaultProxy(hub[0].url, seed=3) as p:
        yield p


def _source(proxy: FaultProxy, sleeps: list[float], **kw: float) -> HubSource:
    return HubSource(proxy.url, timeout_s=kw.pop("timeout_s", 10), retry_attempts=3,
                     retry_base_s=0.01, sleep=sleeps.append, **kw)  # type: ignore[arg-type]  # fmt: skip


@pytest.mark.parametrize("where", ["/refs", "/tree/"])
def test_a_long_retry_after_is_not_slept_through(
    proxy: FaultProxy, hub: tuple[Replica, dict[str, object]], where: str
) -> None:
    proxy.add(Fault(Mode.RATE_LIMIT, path=where, retry_after=3600))
    sleeps: list[float] = []
    src = _source(proxy, sleeps, retry_after_cap_s=60)
    started = time.monotonic()
    with pytest.raises(DeadlineError, match="asks to retry after 3600 s, over the cap of 60 s"):
        if where == "/refs":
            src.resolve_ref(RID, "main")
        else:
            src.list_tree(RID, Sha(str(hub[1]["first"])))
    assert time.monotonic() - started < 5
    assert sleeps == []
    assert [r.status for r in proxy.records] == [429]  # not retried either


def test_a_short_retry_after_is_honoured(proxy: FaultProxy) -> None:
    proxy.add(Fault(Mode.RATE_LIMIT, path="/refs", retry_after=7, times=1))
    sleeps: list[float] = []
    assert len(_source(proxy, sleeps).resolve_ref(RID, "main")) == 40
    assert sleeps == [7.0]


def test_a_trickling_body_is_cut_after_one_window(
    proxy: FaultProxy, hub: tuple[Replica, dict[str, object]]
) -> None:
    proxy.add(Fault(Mode.TRICKLE, path="config.json", chunk=1, interval_s=0.3))
    sleeps: list[float] = []
    src = _source(proxy, sleeps, timeout_s=1)
    started = time.monotonic()
    with pytest.raises(TransientSourceError, match=r"body stalled \(\d bytes in 1\.\d s\)"):
        src.read_file(RID, Sha(str(hub[1]["first"])), "config.json", 1_000_000)
    assert time.monotonic() - started < 3 * 1.5 + 1  # three attempts, one window each
    assert len(sleeps) == 2


def test_a_poll_rate_limited_for_an_hour_records_when_to_come_back(
    proxy: FaultProxy, tmp_path: Path
) -> None:
    store = Store.open(f"sqlite:///{tmp_path / 'tracker.db'}")
    proxy.add(Fault(Mode.RATE_LIMIT, path="/api/", retry_after=3600))
    try:
        report = poll_repo(store, _source(proxy, []), WatchedRepo(RID))
        assert (report.status, report.retry_after) == (RepoStatus.FAILING, 3600.0)
        assert (
            report.error is not None and "not waited for, the repo is rescheduled" in report.error
        )
        proxy.clear()
        again = poll_repo(store, _source(proxy, []), WatchedRepo(RID))
        assert (again.status, again.retry_after, len(again.new_revisions)) == (
            RepoStatus.OK, None, 2,
        )  # fmt: skip
    finally:
        store.close()


def _http_date(seconds_from_now: float) -> str:
    return format_datetime(datetime.now(UTC) + timedelta(seconds=seconds_from_now), usegmt=True)


def test_retry_after_as_an_http_date_is_seconds_from_now() -> None:
    # Before: only digits were read; an HTTP-date (RFC 9110 allows either) was ignored.
    now = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)

    def wait(value: str) -> float | None:
        return _retry_after(SimpleNamespace(headers={"Retry-After": value}), lambda: now)

    assert wait("Sun, 01 Mar 2026 13:00:00 GMT") == 3600.0
    assert wait("Sun, 01 Mar 2026 12:00:07 -0000") == 7.0
    assert wait("Sun, 01 Mar 2026 14:00:00 +0100") == 3600.0
    assert wait("Sun, 01 Mar 2026 11:00:00 GMT") is None  # a date past: the own backoff
    assert wait("120") == 120.0
    assert wait("tomorrow") is None
    assert wait("Sun, 31 Feb 2026 12:00:00 GMT") is None


def test_a_long_retry_after_http_date_is_not_slept_through_and_reschedules_the_poll(
    proxy: FaultProxy, tmp_path: Path
) -> None:
    proxy.add(Fault(Mode.RATE_LIMIT, path="/refs", retry_after=_http_date(3600)))
    sleeps: list[float] = []
    with pytest.raises(DeadlineError, match=r"asks to retry after 3[56]\d\d s, over the cap of 60"):
        _source(proxy, sleeps, retry_after_cap_s=60).resolve_ref(RID, "main")
    assert sleeps == []
    proxy.clear()
    store = Store.open(f"sqlite:///{tmp_path / 'tracker.db'}")
    proxy.add(Fault(Mode.RATE_LIMIT, path="/api/", retry_after=_http_date(3600)))
    try:
        report = poll_repo(store, _source(proxy, []), WatchedRepo(RID))
        assert report.status is RepoStatus.FAILING
        assert report.retry_after is not None and 3590 <= report.retry_after <= 3600
        assert report.error is not None and "the repo is rescheduled" in report.error
    finally:
        store.close()


def test_a_short_retry_after_http_date_is_honoured(proxy: FaultProxy) -> None:
    proxy.add(Fault(Mode.RATE_LIMIT, path="/refs", retry_after=_http_date(7), times=1))
    sleeps: list[float] = []
    assert len(_source(proxy, sleeps).resolve_ref(RID, "main")) == 40
    (slept,) = sleeps
    assert 5 <= slept <= 7
