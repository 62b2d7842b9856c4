"""Work shared by every `tracker poll` worker on one database: the repo schedule with its leases,
the worker registry, and the rate budget per Hub endpoint bucket.

- `repo_schedule`: one row per watched repo: when it is next due, which worker holds it (lease
  owner, the claim's own job id, until when), its consecutive failures, last error and last
  poll. A worker claims due rows in a writing transaction (`FOR UPDATE SKIP LOCKED` on
  PostgreSQL, so concurrent workers take different rows; SQLite's one write lock), stamping each
  with a fresh job id and a lease; its heartbeat renews the leases of the jobs it is running,
  by job id, and nothing else. A worker that dies leaves its rows to be claimed again once their
  leases expire.
- `workers`: id, host, pid, started, last heartbeat (for `tracker status`).
- `rate_budget`: per bucket (`api`, `resolvers`, `pages`) the current fixed window, the requests
  taken in it, and a time before which nothing may be sent (a `429` or `RateLimit … r=0`).
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlmodel import Field, col

from tracker.shared.domain import RepoId
from tracker.store.base import StoreModel, UtcDateTime
from tracker.store.engine import insert_ignore, transaction
from tracker.store.tables import IngestionStateRow, RepoRow


class RepoScheduleRow(StoreModel, table=True):
    __tablename__ = "repo_schedule"

    repo_id: str = Field(sa_column=sa.Column(sa.String(200), primary_key=True))
    next_due: datetime = Field(sa_column=sa.Column(UtcDateTime, nullable=False, index=True))
    lease_owner: str | None = Field(default=None, sa_column=sa.Column(sa.String(200)))
    lease_job: str | None = Field(default=None, sa_column=sa.Column(sa.String(32)))
    lease_since: datetime | None = Field(default=None, sa_column=sa.Column(UtcDateTime))
    lease_expires: datetime | None = Field(default=None, sa_column=sa.Column(UtcDateTime))
    requested_at: datetime | None = Field(default=None, sa_column=sa.Column(UtcDateTime))
    consecutive_failures: int = Field(
        default=0, sa_column=sa.Column(sa.Integer, nullable=False, server_default="0")
    )
    last_error: str | None = Field(default=None, sa_column=sa.Column(sa.Text))
    last_poll: datetime | None = Field(default=None, sa_column=sa.Column(UtcDateTime))


class WorkerRow(StoreModel, table=True):
    __tablename__ = "workers"

    id: str = Field(sa_column=sa.Column(sa.String(200), primary_key=True))
    host: str = Field(sa_column=sa.Column(sa.String(255), nullable=False))
    pid: int = Field(sa_column=sa.Column(sa.Integer, nullable=False))
    started: datetime = Field(sa_column=sa.Column(UtcDateTime, nullable=False))
    heartbeat: datetime = Field(sa_column=sa.Column(UtcDateTime, nullable=False))


class RateBudgetRow(StoreModel, table=True):
    __tablename__ = "rate_budget"

    bucket: str = Field(sa_column=sa.Column(sa.String(32), primary_key=True))
    window_start: datetime = Field(sa_column=sa.Column(UtcDateTime, nullable=False))
    used: int = Field(sa_column=sa.Column(sa.Integer, nullable=False))
    quota: int = Field(sa_column=sa.Column(sa.Integer, nullable=False))
    window_s: float = Field(sa_column=sa.Column(sa.Float, nullable=False))
    blocked_until: datetime | None = Field(default=None, sa_column=sa.Column(UtcDateTime))


class LeaseCounterRow(StoreModel, table=True):
    """Lease churn since the store was made (migration 0018), one row per kind: `taken_over`
    (a worker claimed a repo whose holder's lease had expired) and `lost` (a worker finished a
    poll and found its lease taken: it had expired under it). Counters: they only grow."""

    __tablename__ = "lease_counters"

    name: str = Field(sa_column=sa.Column(sa.String(32), primary_key=True))
    value: int = Field(sa_column=sa.Column(sa.BigInteger, nullable=False))


LEASE_CHURN = ("taken_over", "lost")
WORKER_TABLES = ("repo_schedule", "workers", "rate_budget", "lease_counters")


def count_churn(s: Any, name: str, n: int = 1) -> None:
    """Add `n` to lease counter `name` (one of LEASE_CHURN), in the caller's transaction."""
    table = LeaseCounterRow.__table__  # type: ignore[attr-defined]
    insert_ignore(s, table, {"name": name, "value": 0}, ["name"])
    s.execute(sa.update(table).where(table.c.name == name).values(value=table.c.value + n))


@dataclass(frozen=True)
class Claim:
    """One repo claimed by one worker: `job` is this claim's own id (its lease is renewed by it)."""

    repo_id: RepoId
    job: str
    since: datetime
    taken_from: str | None  # the worker whose expired lease this claim took over, if any
    requested: bool = False  # a poll was asked for (a Hub webhook, a manual trigger)


@dataclass(frozen=True)
class ScheduledRepo:
    """A repo's row in the schedule, with its last ingested revision (for `tracker status`)."""

    repo_id: RepoId
    next_due: datetime
    lease_owner: str | None
    lease_expires: datetime | None
    consecutive_failures: int
    last_error: str | None
    last_poll: datetime | None
    last_revision: str | None


@dataclass(frozen=True)
class Worker:
    id: str
    host: str
    pid: int
    started: datetime
    heartbeat: datetime


@dataclass(frozen=True)
class BudgetWindow:
    """A bucket's budget: the window it is in, requests taken in it, the quota."""

    bucket: str
    window_start: datetime
    window_s: float
    used: int
    quota: int
    blocked_until: datetime | None


def window_start(now: datetime, window_s: float) -> datetime:
    """The start of the fixed window `now` is in (windows are aligned on the Unix epoch)."""
    ts = now.timestamp()
    return datetime.fromtimestamp(math.floor(ts / window_s) * window_s, tz=now.tzinfo)


def paced_allowance(quota: int, window_s: float, elapsed: float, burst: int) -> int:
    """How many requests a window may have taken `elapsed` seconds in: `burst` at once, then
    the rest spread evenly over the window, never more than `quota`."""
    return min(quota, burst + math.floor(quota * elapsed / window_s))


class WorkStore:
    """The schedule, the worker registry and the rate budget (see the module docstring)."""

    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine

    # -- workers ----------------------------------------------------------------------------

    def register(self, worker_id: str, host: str, pid: int, now: datetime) -> None:
        with transaction(self.engine, "register worker", write=True) as s:
            s.add(WorkerRow(id=worker_id, host=host, pid=pid, started=now, heartbeat=now))

    def heartbeat(self, worker_id: str, jobs: list[str], now: datetime, lease: timedelta) -> int:
        """Record this worker alive and renew the leases of its running `jobs` (by job id);
        returns how many leases were renewed. A worker row gone (another worker found it dead)
        is written again."""
        s_ = RepoScheduleRow
        with transaction(self.engine, "heartbeat", write=True) as s:
            row = s.get(WorkerRow, worker_id)
            if row is None:
                return -1
            row.heartbeat = now
            s.add(row)
            if not jobs:
                return 0
            done = s.execute(
                sa.update(s_)
                .where(col(s_.lease_job).in_(jobs), col(s_.lease_owner) == worker_id)
                .values(lease_expires=now + lease)
            )
            return int(getattr(done, "rowcount", 0) or 0)

    def unregister(self, worker_id: str) -> int:
        """Release every lease `worker_id` holds and forget the worker; returns the leases."""
        s_ = RepoScheduleRow
        with transaction(self.engine, "unregister worker", write=True) as s:
            done = s.execute(
                sa.update(s_)
                .where(col(s_.lease_owner) == worker_id)
                .values(lease_owner=None, lease_job=None, lease_since=None, lease_expires=None)
            )
            s.execute(sa.delete(WorkerRow).where(col(WorkerRow.id) == worker_id))
            return int(getattr(done, "rowcount", 0) or 0)

    def unregister_all(self) -> None:
        """Release every lease and forget every worker (SQLite: the one daemon starting, with
        the store's worker lock held, knows no other can be alive)."""
        s_ = RepoScheduleRow
        with transaction(self.engine, "reset workers", write=True) as s:
            s.execute(
                sa.update(s_)
                .where(col(s_.lease_owner).is_not(None))
                .values(lease_owner=None, lease_job=None, lease_since=None, lease_expires=None)
            )
            s.execute(sa.delete(WorkerRow))

    def forget_dead_workers(self, before: datetime) -> int:
        """Remove workers whose last heartbeat is older than `before` (their leases expired)."""
        with transaction(self.engine, "forget workers", write=True) as s:
            done = s.execute(sa.delete(WorkerRow).where(col(WorkerRow.heartbeat) < before))
            return int(getattr(done, "rowcount", 0) or 0)

    def workers(self) -> list[Worker]:
        with transaction(self.engine, "list workers") as s:
            rows = s.scalars(sa.select(WorkerRow).order_by(col(WorkerRow.started))).all()
            return [Worker(r.id, r.host, r.pid, r.started, r.heartbeat) for r in rows]

    # -- the schedule -----------------------------------------------------------------------

    def sync(
        self,
        intervals: Mapping[RepoId, float],
        now: datetime,
        *,
        changed: list[RepoId],
        prune: bool | list[RepoId],
    ) -> tuple[int, int]:
        """Make the schedule follow a watchlist (`intervals`: repo → poll interval): every repo
        listed has a row: a new one is due `now`, one the store has polled before (its row was
        removed by a worker whose watchlist did not list it) is due at that last poll plus its
        interval, so re-adding never makes a repo due early; `changed` ones (new settings) are
        due `now`. `prune`: True removes the unleased rows of every repo not listed, a list the
        unleased rows of those repos. Returns (added, removed)."""
        table = RepoScheduleRow.__table__  # type: ignore[attr-defined]
        s_ = RepoScheduleRow
        added = removed = 0
        with transaction(self.engine, "sync schedule", write=True) as s:
            have = set(s.scalars(sa.select(col(s_.repo_id))).all())
            new = sorted(rid for rid in intervals if rid not in have)
            polled: dict[str, datetime] = {}
            for i in range(0, len(new), 500):
                q = (
                    sa.select(col(RepoRow.repo_id), col(IngestionStateRow.last_poll_at))
                    .join(IngestionStateRow, col(IngestionStateRow.repo_pk) == col(RepoRow.id))
                    .where(
                        col(RepoRow.repo_id).in_(new[i : i + 500]),
                        col(IngestionStateRow.last_poll_at).is_not(None),
                    )
                )
                polled.update({rid: at for rid, at in s.execute(q).all()})
            for rid in new:
                last = polled.get(rid)
                due = now
                if last is not None:
                    due = max(now, last + timedelta(seconds=intervals[RepoId(rid)]))
                values = {"repo_id": rid, "next_due": due, "last_poll": last}
                added += insert_ignore(s, table, values, None)
            if changed:
                s.execute(
                    sa.update(s_)
                    .where(col(s_.repo_id).in_(list(changed)), col(s_.next_due) > now)
                    .values(next_due=now)
                )
            if prune:
                gone = sorted(have - set(intervals)) if prune is True else sorted(prune)
                for i in range(0, len(gone), 500):
                    done = s.execute(
                        sa.delete(s_).where(
                            col(s_.repo_id).in_(gone[i : i + 500]), col(s_.lease_owner).is_(None)
                        )
                    )
                    removed += int(getattr(done, "rowcount", 0) or 0)
        return added, removed

    def make_due(self, repo_id: RepoId, now: datetime) -> None:
        """A poll is asked for (a Hub webhook, a manual trigger): the repo is due now, and a poll
        running at this moment is followed by one more."""
        table = RepoScheduleRow.__table__  # type: ignore[attr-defined]
        s_ = RepoScheduleRow
        with transaction(self.engine, "make due", write=True) as s:
            values = {"repo_id": repo_id, "next_due": now, "requested_at": now}
            if insert_ignore(s, table, values, ["repo_id"]):
                return
            least = sa.func.min if s.get_bind().dialect.name == "sqlite" else sa.func.least
            s.execute(
                sa.update(s_)
                .where(col(s_.repo_id) == repo_id)
                .values(requested_at=now, next_due=least(col(s_.next_due), now))
            )

    def _due(
        self, now: datetime, only: list[RepoId] | None, skip: list[RepoId] | None = None
    ) -> sa.Select[Any]:
        s_ = RepoScheduleRow
        q = sa.select(s_).where(
            col(s_.next_due) <= now,
            sa.or_(col(s_.lease_expires).is_(None), col(s_.lease_expires) <= now),
        )
        if only is not None:
            q = q.where(col(s_.repo_id).in_(only))
        if skip:
            q = q.where(col(s_.repo_id).not_in(skip))
        return q.order_by(col(s_.next_due), col(s_.repo_id))

    def claim(
        self,
        worker_id: str,
        now: datetime,
        *,
        lease: timedelta,
        limit: int,
        only: list[RepoId] | None = None,
        skip: list[RepoId] | None = None,
    ) -> list[Claim]:
        """Take up to `limit` due repos for `worker_id` until `now + lease`, most overdue first;
        a repo whose holder's lease expired is taken over."""
        if limit <= 0:
            return []
        q = self._due(now, only, skip).limit(limit)
        with transaction(self.engine, "probe schedule") as s:  # the common case: nothing due
            if s.execute(sa.select(sa.literal(1)).select_from(q.subquery())).first() is None:
                return []
        out: list[Claim] = []
        with transaction(self.engine, "claim repos", write=True) as s:
            taken = 0
            for row in s.scalars(q.with_for_update(skip_locked=True)).all():
                job = uuid.uuid4().hex
                asked = row.requested_at is not None and row.requested_at <= now
                out.append(Claim(RepoId(row.repo_id), job, now, row.lease_owner, asked))
                taken += row.lease_owner is not None  # its holder's lease had expired
                row.lease_owner, row.lease_job = worker_id, job
                row.lease_since, row.lease_expires = now, now + lease
                s.add(row)
            if taken:
                count_churn(s, "taken_over", taken)
        return out

    def finish(
        self,
        claim: Claim,
        now: datetime,
        *,
        next_due: datetime,
        ok: bool,
        error: str | None,
    ) -> bool:
        """The claimed poll ran: record it, schedule the next one and release the lease. A poll
        asked for while it ran makes the repo due again at once. False when the lease was lost
        (it expired and another worker holds the repo now): nothing is written."""
        with transaction(self.engine, "finish poll", write=True) as s:
            row = s.scalars(
                sa.select(RepoScheduleRow)
                .where(col(RepoScheduleRow.repo_id) == claim.repo_id)
                .with_for_update()
            ).first()
            if row is None or row.lease_job != claim.job:
                count_churn(s, "lost")
                return False
            row.last_poll = now
            row.consecutive_failures = 0 if ok else row.consecutive_failures + 1
            row.last_error = None if ok else error
            asked_since = row.requested_at is not None and row.requested_at > claim.since
            row.next_due = now if asked_since else next_due
            if not asked_since:
                row.requested_at = None
            row.lease_owner = row.lease_job = None
            row.lease_since = row.lease_expires = None
            s.add(row)
            return True

    def release(self, claims: list[Claim]) -> None:
        """Hand back claims never started (the worker is stopping): due as before, no lease."""
        if not claims:
            return
        s_ = RepoScheduleRow
        with transaction(self.engine, "release claims", write=True) as s:
            s.execute(
                sa.update(s_)
                .where(col(s_.lease_job).in_([c.job for c in claims]))
                .values(lease_owner=None, lease_job=None, lease_since=None, lease_expires=None)
            )

    def failures(self, repo_id: RepoId) -> int:
        with transaction(self.engine, "read schedule") as s:
            row = s.get(RepoScheduleRow, repo_id)
            return row.consecutive_failures if row is not None else 0

    def schedule(self) -> list[ScheduledRepo]:
        """Every scheduled repo, by repo id, with its last ingested revision."""
        s_ = RepoScheduleRow
        q = (
            sa.select(s_, col(IngestionStateRow.cursor_sha))
            .outerjoin(RepoRow, col(RepoRow.repo_id) == col(s_.repo_id))
            .outerjoin(IngestionStateRow, col(IngestionStateRow.repo_pk) == col(RepoRow.id))
            .order_by(col(s_.repo_id))
        )
        with transaction(self.engine, "read schedule") as s:
            return [
                ScheduledRepo(
                    RepoId(r.repo_id),
                    r.next_due,
                    r.lease_owner,
                    r.lease_expires,
                    r.consecutive_failures,
                    r.last_error,
                    r.last_poll,
                    cursor,
                )
                for r, cursor in s.execute(q).all()
            ]

    # -- the rate budget --------------------------------------------------------------------

    def take(
        self, bucket: str, now: datetime, *, quota: int, window_s: float, burst: int, edge_s: float
    ) -> float:
        """Take one request from `bucket`'s budget: 0.0 when taken, else the seconds to wait
        before asking again (nothing taken). The window is fixed (epoch-aligned, `window_s`);
        within it requests are paced (`paced_allowance`), none in its last `edge_s` seconds (a
        request taken then could arrive in the next window), none before a server's block ends."""
        table = RateBudgetRow.__table__  # type: ignore[attr-defined]
        start = window_start(now, window_s)
        elapsed = (now - start).total_seconds()
        with transaction(self.engine, "rate budget", write=True) as s:
            insert_ignore(
                s,
                table,
                {"bucket": bucket, "window_start": start, "used": 0, "quota": quota,
                 "window_s": window_s},
                ["bucket"],
            )  # fmt: skip
            row = s.scalars(
                sa.select(RateBudgetRow)
                .where(col(RateBudgetRow.bucket) == bucket)
                .with_for_update()
            ).one()
            if row.window_start != start:
                row.window_start, row.used = start, 0
            row.quota, row.window_s = quota, window_s
            if row.blocked_until is not None and row.blocked_until > now:
                s.add(row)
                return (row.blocked_until - now).total_seconds()
            until_next = window_s - elapsed
            if until_next <= edge_s:
                s.add(row)
                return until_next
            allowed = paced_allowance(quota, window_s, elapsed, burst)
            if row.used >= allowed:
                s.add(row)
                if row.used >= quota:
                    return until_next
                # the next permit: burst + floor(quota * t / window) > used
                at = (row.used - burst + 1) * window_s / quota
                return max(at - elapsed, 0.001)
            row.used += 1
            s.add(row)
            return 0.0

    def block(self, bucket: str, until: datetime, *, quota: int, window_s: float) -> None:
        """Nothing may be sent to `bucket` before `until` (a 429, or the server's `r=0`)."""
        table = RateBudgetRow.__table__  # type: ignore[attr-defined]
        with transaction(self.engine, "rate block", write=True) as s:
            insert_ignore(
                s,
                table,
                {"bucket": bucket, "window_start": window_start(until, window_s), "used": 0,
                 "quota": quota, "window_s": window_s},
                ["bucket"],
            )  # fmt: skip
            row = s.get(RateBudgetRow, bucket, with_for_update=True)
            assert row is not None
            if row.blocked_until is None or row.blocked_until < until:
                row.blocked_until = until
                s.add(row)

    def budget(self, now: datetime) -> list[BudgetWindow]:
        """Every bucket's budget as of `now` (a window that has ended reads as unused)."""
        with transaction(self.engine, "read budget") as s:
            rows = s.scalars(sa.select(RateBudgetRow).order_by(col(RateBudgetRow.bucket))).all()
            out = []
            for r in rows:
                start = window_start(now, r.window_s)
                used = r.used if r.window_start == start else 0
                out.append(
                    BudgetWindow(r.bucket, start, r.window_s, used, r.quota, r.blocked_until)
                )
            return out


__all__ = [
    "LEASE_CHURN",
    "WORKER_TABLES",
    "BudgetWindow",
    "Claim",
    "LeaseCounterRow",
    "RateBudgetRow",
    "RepoScheduleRow",
    "ScheduledRepo",
    "WorkStore",
    "Worker",
    "WorkerRow",
    "count_churn",
    "paced_allowance",
    "window_start",
]
