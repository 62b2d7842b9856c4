"""What operations read from the store: readiness (reachable, schema at head) and the counts that
`/metrics` exposes, each a few indexed or grouped queries in one read transaction.

The numbers are the store's, not a process's: `tracker poll` (the daemon) writes them as it works
and `tracker serve` reads them at scrape time, so they agree whichever process is asked, and
survive restarts. The ingest histogram is kept per repo in `ingestion_state` (`observe`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlmodel import col

from tracker.store.advisories.tables import AdvisoryRow
from tracker.store.engine import current_revision, head_revision, transaction
from tracker.store.tables import IngestionStateRow, RepoRow, RevisionRow
from tracker.store.webhooks.tables import DeliveryAttemptRow, DeliveryRow, PollRequestRow
from tracker.store.workers import (
    LEASE_CHURN,
    LeaseCounterRow,
    RateBudgetRow,
    RepoScheduleRow,
    WorkerRow,
    window_start,
)

INGEST_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
"""Upper bounds (seconds) of the ingest histogram's buckets; `+Inf` is the poll count."""


def _bound(le: float) -> str:
    return repr(float(le))


def observe(buckets_json: str, seconds: float) -> str:
    """The histogram `buckets_json` (cumulative counts by upper bound) with `seconds` added."""
    counts: dict[str, int] = json.loads(buckets_json or "{}")
    for le in INGEST_BUCKETS:
        if seconds <= le:
            counts[_bound(le)] = counts.get(_bound(le), 0) + 1
    return json.dumps(counts, sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class RepoCounts:
    """One repo's operations counters."""

    repo_id: str
    state: str
    polls: int
    poll_failures: int
    consecutive_failures: int
    revisions: int
    pending_analysis: int
    ingest_sum: float
    ingest_buckets: tuple[tuple[float, int], ...]  # (upper bound, cumulative count), +Inf last
    could_not_analyse: int = 0  # pending revisions recorded as over the analysis budget
    last_success: datetime | None = None  # the last poll that ended ok


@dataclass(frozen=True)
class OpsCounts:
    """Everything `/metrics` reads from the store, read in one transaction."""

    repos: tuple[RepoCounts, ...]
    advisories: Mapping[tuple[str, str], int]  # (severity, state) → count
    deliveries: Mapping[str, int]  # delivery state → count
    attempts: Mapping[str, int]  # attempt outcome → count
    poll_requests: Mapping[str, int] = field(default_factory=dict)  # waiting / claimed → count
    workers: Mapping[str, int] = field(default_factory=dict)  # alive / no_heartbeat → count
    leases: Mapping[str, int] = field(default_factory=dict)  # held / expired → count
    lease_churn: Mapping[str, int] = field(default_factory=dict)  # taken_over / lost → count
    # bucket → (requests used in the current window, quota)
    rate_budget: Mapping[str, tuple[int, int]] = field(default_factory=dict)


def _buckets(raw: str, polls: int) -> tuple[tuple[float, int], ...]:
    counts: dict[str, int] = json.loads(raw or "{}")
    out = [(le, int(counts.get(_bound(le), 0))) for le in INGEST_BUCKETS]
    return (*out, (math.inf, polls))


class OpsReader:
    """Reads readiness and counts from the store's engine."""

    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine

    def schema(self) -> tuple[str | None, str]:
        """(the store's migration revision, the head this code expects); raises on a store
        that cannot be reached (SQLAlchemy's error)."""
        return current_revision(self.engine), head_revision()

    def counts(self, now: datetime, *, worker_lease_s: float = 120.0) -> OpsCounts:
        """Every count `/metrics` exposes at `now` (StoreError when the store fails). A poll
        request is claimed while a daemon's lease on it runs, waiting otherwise; a worker is
        alive while its last heartbeat is under `worker_lease_s` old; a repo's lease is held
        while it runs, expired once it has run out unreleased (its worker died)."""
        with transaction(self.engine, "read operations counts") as s:
            if s.get_bind().dialect.name == "postgresql":
                s.execute(sa.text("SET LOCAL statement_timeout = 5000"))
            revs = (
                sa.select(
                    col(RevisionRow.repo_pk),
                    sa.func.count().label("n"),
                    sa.func.count()
                    .filter(
                        col(RevisionRow.analysed_at).is_(None),
                        col(RevisionRow.rewritten_away).is_(False),
                    )
                    .label("pending"),
                    sa.func.count()
                    .filter(
                        col(RevisionRow.analysed_at).is_(None),
                        col(RevisionRow.rewritten_away).is_(False),
                        col(RevisionRow.could_not_analyse).is_not(None),
                    )
                    .label("overrun"),
                )
                .group_by(col(RevisionRow.repo_pk))
                .subquery()
            )
            st = IngestionStateRow
            rows = s.execute(
                sa.select(
                    col(RepoRow.repo_id),
                    col(st.state),
                    col(st.polls),
                    col(st.poll_failures),
                    col(st.consecutive_failures),
                    col(st.ingest_seconds_sum),
                    col(st.ingest_seconds_buckets),
                    sa.func.coalesce(revs.c.n, 0),
                    sa.func.coalesce(revs.c.pending, 0),
                    sa.func.coalesce(revs.c.overrun, 0),
                    col(st.last_success_at),
                )
                .join(st, col(st.repo_pk) == col(RepoRow.id))
                .outerjoin(revs, revs.c.repo_pk == col(RepoRow.id))
                .order_by(col(RepoRow.repo_id))
            ).all()
            repos = tuple(
                RepoCounts(
                    repo_id=r[0],
                    state=r[1],
                    polls=int(r[2]),
                    poll_failures=int(r[3]),
                    consecutive_failures=int(r[4]),
                    revisions=int(r[7]),
                    pending_analysis=int(r[8]),
                    could_not_analyse=int(r[9]),
                    ingest_sum=float(r[5]),
                    ingest_buckets=_buckets(r[6], int(r[2])),
                    last_success=r[10],
                )
                for r in rows
            )
            adv = s.execute(
                sa.select(
                    col(AdvisoryRow.severity), col(AdvisoryRow.state), sa.func.count()
                ).group_by(col(AdvisoryRow.severity), col(AdvisoryRow.state))
            ).all()
            dels = s.execute(
                sa.select(col(DeliveryRow.state), sa.func.count()).group_by(col(DeliveryRow.state))
            ).all()
            atts = s.execute(
                sa.select(col(DeliveryAttemptRow.outcome), sa.func.count()).group_by(
                    col(DeliveryAttemptRow.outcome)
                )
            ).all()
            claimed = sa.and_(
                col(PollRequestRow.claimed_until).is_not(None),
                col(PollRequestRow.claimed_until) > now,
            )
            reqs = s.execute(
                sa.select(
                    sa.func.count().filter(sa.not_(claimed)), sa.func.count().filter(claimed)
                ).select_from(PollRequestRow)
            ).one()
            alive_since = now - timedelta(seconds=worker_lease_s)
            live = col(WorkerRow.heartbeat) >= alive_since
            wk = s.execute(
                sa.select(sa.func.count().filter(live), sa.func.count().filter(sa.not_(live)))
            ).one()
            leased = col(RepoScheduleRow.lease_owner).is_not(None)
            running = col(RepoScheduleRow.lease_expires) > now
            ls = s.execute(
                sa.select(
                    sa.func.count().filter(leased, running),
                    sa.func.count().filter(leased, sa.not_(running)),
                ).select_from(RepoScheduleRow)
            ).one()
            churn = dict.fromkeys(LEASE_CHURN, 0)
            for name, value in s.execute(
                sa.select(col(LeaseCounterRow.name), col(LeaseCounterRow.value))
            ).all():
                churn[str(name)] = int(value)
            budget = {  # a window that has ended reads as unused
                r.bucket: (r.used if r.window_start == window_start(now, r.window_s) else 0,
                           r.quota)
                for r in s.scalars(sa.select(RateBudgetRow)).all()
            }  # fmt: skip
        return OpsCounts(
            repos=repos,
            advisories={(sev, state): int(n) for sev, state, n in adv},
            deliveries={state: int(n) for state, n in dels},
            attempts={outcome: int(n) for outcome, n in atts},
            poll_requests={"waiting": int(reqs[0]), "claimed": int(reqs[1])},
            workers={"alive": int(wk[0]), "no_heartbeat": int(wk[1])},
            leases={"held": int(ls[0]), "expired": int(ls[1])},
            lease_churn=churn,
            rate_budget=budget,
        )
