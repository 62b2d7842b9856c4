"""WebhookStore (subscriptions, outbox, delivery log, poll requests) and OutboxTx (the outbox inside
the advisory publish transaction). Rows never leave this module: reads return the values of
`tracker.store.webhooks.values`.

Claiming is the one step that hands work to a worker: in a writing transaction, due rows are
selected (`FOR UPDATE SKIP LOCKED` on PostgreSQL, so concurrent workers take different rows; the
write lock on SQLite) and stamped with `claimed_until`; a worker that dies leaves its rows to be
claimed again once that time has passed.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Collection, Sequence
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session
from sqlmodel import col

from tracker.shared.domain import Artifact, RepoId, Severity, Sha
from tracker.shared.errors import ConfigError, StoreNotFoundError
from tracker.store.engine import insert_ignore, transaction
from tracker.store.tables import RepoRow
from tracker.store.webhooks.tables import (
    PUBLICATION_ONLY,
    DeliveryAttemptRow,
    DeliveryRow,
    PollRequestRow,
    SubscriptionRow,
)
from tracker.store.webhooks.values import (
    Attempt,
    Delivery,
    DeliveryState,
    Outcome,
    PollRequest,
    Secret,
    Subscription,
)
from tracker.webhooks.events import EVENT as PUBLICATION_EVENT
from tracker.webhooks.events import with_sequence


def _dump(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _secrets_json(items: Sequence[Secret]) -> str:
    return _dump(
        [
            {"secret": s.secret, "expires": s.expires.isoformat() if s.expires else None}
            for s in items
        ]
    )


def _subscription(row: SubscriptionRow) -> Subscription:
    assert row.id is not None
    return Subscription(
        id=row.id,
        url=row.url,
        repos=tuple(json.loads(row.repos)),
        min_severity=Severity(row.min_severity),
        kinds=tuple(Artifact(k) for k in json.loads(row.kinds)),
        secrets=tuple(
            Secret(s["secret"], datetime.fromisoformat(s["expires"]) if s["expires"] else None)
            for s in json.loads(row.secrets)
        ),
        description=row.description,
        enabled=row.enabled,
        disabled_reason=row.disabled_reason,
        created_at=row.created_at,
        updated_at=row.updated_at,
        events=tuple(json.loads(row.events or "[]")),
        team=row.team,
    )


def _delivery(row: DeliveryRow, repo_id: str) -> Delivery:
    assert row.id is not None
    return Delivery(
        id=row.id,
        msg_id=row.msg_id,
        subscription_id=row.subscription_id,
        repo_id=RepoId(repo_id),
        sha=Sha(row.sha),
        event=row.event,
        body=row.body,
        state=DeliveryState(row.state),
        attempts=row.attempts,
        next_attempt_at=row.next_attempt_at,
        created_at=row.created_at,
        finished_at=row.finished_at,
        last_status=row.last_status,
        last_error=row.last_error,
    )


def new_msg_id() -> str:
    """A fresh Standard Webhooks message id (`msg_` + 26 random base32 characters)."""
    import base64

    return "msg_" + base64.b32encode(secrets.token_bytes(16)).decode().rstrip("=").lower()


_ENABLED = (
    sa.select(col(SubscriptionRow.id))
    .where(col(SubscriptionRow.enabled).is_(True))
    .scalar_subquery()
)
"""The ids of the enabled subscriptions (a disabled one's deliveries are held)."""


class OutboxTx:
    """The outbox inside another store transaction (the advisory publish one): the enabled
    subscriptions, and `enqueue` of one delivery per (subscription, revision)."""

    def __init__(self, session: Session, repo_pk: Callable[[RepoId], int]) -> None:
        self._s = session
        self._repo_pk = repo_pk

    def subscriptions(self) -> list[Subscription]:
        """Every subscription, by id: a disabled one's deliveries are queued too and held until
        it is enabled again (`WebhookStore.set_enabled`)."""
        rows = self._s.scalars(sa.select(SubscriptionRow).order_by(col(SubscriptionRow.id))).all()
        return [_subscription(r) for r in rows]

    def enqueue(
        self, subscription_id: int, repo_id: RepoId, sha: Sha, event: str, body: str, now: datetime
    ) -> bool:
        """Queue `body` for `subscription_id`, due now. A publication (`revision.advisories`)
        is queued once per revision: False when it already was (the publish ran before); any
        other event is queued each time (its transaction changes the advisories' state once).
        The body gets its `data.sequence`: one more than the deliveries of this repo queued for
        this subscription before it (`tracker.webhooks.events.with_sequence`)."""
        repo_pk = self._repo_pk(repo_id)
        before = self._s.scalar(
            sa.select(sa.func.count())
            .select_from(DeliveryRow)
            .where(
                col(DeliveryRow.subscription_id) == subscription_id,
                col(DeliveryRow.repo_pk) == repo_pk,
            )
        )
        values = {
            "msg_id": new_msg_id(),
            "subscription_id": subscription_id,
            "repo_pk": repo_pk,
            "sha": sha,
            "event": event,
            "body": with_sequence(body, int(before or 0) + 1),
            "state": DeliveryState.PENDING.value,
            "attempts": 0,
            "next_attempt_at": now,
            "created_at": now,
        }
        table = DeliveryRow.__table__  # type: ignore[attr-defined]
        if event != PUBLICATION_EVENT:
            self._s.execute(sa.insert(table).values(**values))
            return True
        return insert_ignore(
            self._s,
            table,
            values,
            ["subscription_id", "repo_pk", "sha"],
            where=sa.text(PUBLICATION_ONLY),
        )


class WebhookStore:
    """Subscriptions, the delivery outbox and log, and the poll-request queue."""

    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine

    # -- subscriptions ----------------------------------------------------------------------

    def add_subscription(
        self,
        *,
        url: str,
        repos: Sequence[str],
        min_severity: Severity,
        kinds: Sequence[Artifact],
        secret: str,
        description: str,
        now: datetime,
        events: Sequence[str] = (),
        team: str | None = None,
    ) -> Subscription:
        row = SubscriptionRow(
            events=_dump(list(events)),
            team=team,
            url=url,
            repos=_dump(list(repos)),
            min_severity=min_severity.value,
            kinds=_dump([k.value for k in kinds]),
            secrets=_secrets_json([Secret(secret)]),
            description=description,
            enabled=True,
            created_at=now,
            updated_at=now,
        )
        with transaction(self.engine, "add subscription", write=True) as s:
            s.add(row)
            s.flush()
            return _subscription(row)

    def subscriptions(self) -> list[Subscription]:
        """Every subscription, by id."""
        with transaction(self.engine, "list subscriptions") as s:
            rows = s.scalars(sa.select(SubscriptionRow).order_by(col(SubscriptionRow.id))).all()
            return [_subscription(r) for r in rows]

    def subscription(self, subscription_id: int) -> Subscription:
        """The subscription; StoreNotFoundError when there is none with that id."""
        with transaction(self.engine, "read subscription") as s:
            return _subscription(self._sub_row(s, subscription_id))

    @staticmethod
    def _sub_row(s: Session, subscription_id: int) -> SubscriptionRow:
        row = s.get(SubscriptionRow, subscription_id)
        if row is None:
            raise StoreNotFoundError(f"no subscription {subscription_id}")
        return row

    def remove_subscription(self, subscription_id: int) -> None:
        """Delete the subscription with its deliveries and their log; StoreNotFoundError if none."""
        with transaction(self.engine, "remove subscription", write=True) as s:
            self._sub_row(s, subscription_id)
            ids = sa.select(col(DeliveryRow.id)).where(
                col(DeliveryRow.subscription_id) == subscription_id
            )
            s.execute(
                sa.delete(DeliveryAttemptRow).where(col(DeliveryAttemptRow.delivery_id).in_(ids))
            )
            s.execute(
                sa.delete(DeliveryRow).where(col(DeliveryRow.subscription_id) == subscription_id)
            )
            s.execute(sa.delete(SubscriptionRow).where(col(SubscriptionRow.id) == subscription_id))

    def rotate_secret(
        self, subscription_id: int, new_secret: str, *, retire_at: datetime, now: datetime
    ) -> Subscription:
        """Make `new_secret` the current secret; the ones in use until now sign deliveries too
        until `retire_at` (the receiver's switch-over window), then are dropped."""
        with transaction(self.engine, "rotate secret", write=True) as s:
            row = self._sub_row(s, subscription_id)
            old = _subscription(row)
            kept = [
                Secret(x.secret, min(x.expires, retire_at) if x.expires else retire_at)
                for x in old.secrets
                if x.expires is None or x.expires > now
            ]
            row.secrets = _secrets_json([Secret(new_secret), *kept])
            row.updated_at = now
            s.add(row)
            s.flush()
            return _subscription(row)

    def set_enabled(
        self, subscription_id: int, enabled: bool, reason: str | None, now: datetime
    ) -> Subscription:
        """Enable or disable a subscription. A disabled one's pending deliveries, and those of
        the events that happen while it is disabled, are held (never claimed); enabling it makes
        them due at once, oldest first."""
        with transaction(self.engine, "enable subscription", write=True) as s:
            row = self._disable(s, subscription_id, reason, now) if not enabled else None
            if row is None:
                row = self._sub_row(s, subscription_id)
                row.enabled, row.disabled_reason, row.updated_at = True, None, now
                s.add(row)
                s.execute(
                    sa.update(DeliveryRow)
                    .where(
                        col(DeliveryRow.subscription_id) == subscription_id,
                        col(DeliveryRow.state) == DeliveryState.PENDING.value,
                    )
                    .values(next_attempt_at=now, claimed_until=None)
                )
                s.flush()
            return _subscription(row)

    def _disable(
        self, s: Session, subscription_id: int, reason: str | None, now: datetime
    ) -> SubscriptionRow:
        row = self._sub_row(s, subscription_id)
        row.enabled, row.disabled_reason, row.updated_at = False, reason, now
        s.add(row)
        s.flush()
        return row

    def _any(self, q: sa.Select[Any, Any] | sa.Select[Any]) -> bool:
        """Whether `q` finds a row, in a read transaction."""
        probe = sa.select(sa.literal(1)).select_from(q.limit(1).subquery())
        with transaction(self.engine, "probe queue") as s:
            return s.execute(probe).first() is not None

    # -- the outbox -------------------------------------------------------------------------

    def claim_due(
        self,
        now: datetime,
        *,
        lease: timedelta,
        limit: int = 16,
        exclude: Collection[int] = (),
        one_per_subscription: bool = False,
    ) -> list[tuple[Delivery, Subscription]]:
        """Take up to `limit` due deliveries for this worker until `now + lease`, oldest first,
        with their subscriptions, none of a subscription in `exclude`; `one_per_subscription`:
        only the oldest due one of each subscription that has no delivery under a live claim (so
        each subscription's deliveries go one at a time, in order, across workers). Deliveries
        of a disabled subscription are held: not claimed."""
        d = DeliveryRow
        is_due = sa.and_(
            col(d.state) == DeliveryState.PENDING.value,
            col(d.next_attempt_at) <= now,
            sa.or_(col(d.claimed_until).is_(None), col(d.claimed_until) <= now),
            col(d.subscription_id).in_(_ENABLED),
        )
        if exclude:
            is_due = sa.and_(is_due, col(d.subscription_id).not_in(sorted(exclude)))
        due = (
            sa.select(d, col(RepoRow.repo_id))
            .join(RepoRow, col(RepoRow.id) == col(d.repo_pk))
            .where(is_due)
            .order_by(col(d.id))
            .limit(limit)
        )
        if one_per_subscription:
            # nor of a subscription with a delivery under a live claim (any worker's)
            in_flight = sa.select(col(d.subscription_id)).where(
                col(d.state) == DeliveryState.PENDING.value, col(d.claimed_until) > now
            )
            oldest = (
                sa.select(sa.func.min(col(d.id)))
                .where(is_due, col(d.subscription_id).not_in(in_flight.scalar_subquery()))
                .group_by(col(d.subscription_id))
            )
            due = due.where(col(d.id).in_(oldest.scalar_subquery()))
        out: list[tuple[Delivery, Subscription]] = []
        if not self._any(due):  # the common case, without taking the write lock
            return out
        with transaction(self.engine, "claim deliveries", write=True) as s:
            rows = s.execute(due.with_for_update(skip_locked=True, of=d)).all()
            subs: dict[int, SubscriptionRow] = {}
            for row, repo_id in rows:
                sub = subs.get(row.subscription_id) or s.get(SubscriptionRow, row.subscription_id)
                assert sub is not None  # a foreign key
                subs[row.subscription_id] = sub
                if sub.enabled:  # else disabled meanwhile: held
                    row.claimed_until = now + lease
                    out.append((_delivery(row, repo_id), _subscription(sub)))
                    s.add(row)
        return out

    def record_attempt(
        self,
        delivery: Delivery,
        attempt: Attempt,
        *,
        next_attempt_at: datetime | None,
        now: datetime,
    ) -> None:
        """Log `attempt` and move its delivery on: delivered, due again at `next_attempt_at`
        (RETRY), failed for good, or (GONE) failed with its subscription disabled. A delivery
        removed meanwhile (its subscription was) is left alone."""
        with transaction(self.engine, "record delivery attempt", write=True) as s:
            row = s.get(DeliveryRow, delivery.id)
            if row is None or row.state != DeliveryState.PENDING.value:
                return
            s.add(
                DeliveryAttemptRow(
                    delivery_id=delivery.id,
                    n=attempt.n,
                    started_at=attempt.started_at,
                    duration_ms=attempt.duration_ms,
                    status=attempt.status,
                    error=attempt.error,
                    outcome=attempt.outcome.value,
                )
            )
            row.attempts = attempt.n
            row.last_status, row.last_error = attempt.status, attempt.error
            row.claimed_until = None
            match attempt.outcome:
                case Outcome.DELIVERED:
                    row.state, row.finished_at = DeliveryState.DELIVERED.value, now
                case Outcome.RETRY:
                    assert next_attempt_at is not None
                    row.next_attempt_at = next_attempt_at
                case Outcome.FAILED | Outcome.GONE:
                    row.state, row.finished_at = DeliveryState.FAILED.value, now
            s.add(row)
            s.flush()
            if attempt.outcome is Outcome.GONE:
                reason = f"the receiver answered 410 Gone to {delivery.msg_id} at {now.isoformat()}"
                self._disable(s, delivery.subscription_id, reason, now)

    def redeliver(
        self, msg_id: str, now: datetime, lease: timedelta, *, subscription_id: int | None = None
    ) -> tuple[Delivery, Subscription]:
        """Send the past delivery whose `webhook-id` is `msg_id` again (delivered, failed or
        cancelled): pending and due `now`, with the same `webhook-id` and body (a receiver that
        has it already deduplicates on the id, as Standard Webhooks asks), its attempts
        continuing its log, and one attempt more than the retries it had left; claimed by the caller until `now + lease` (it sends the
        attempt at once; no worker takes it meanwhile). StoreNotFoundError when there is no such
        delivery (of `subscription_id`, when given), ConfigError when it is still pending (it goes out by itself) or its
        subscription is disabled (`enable` first)."""
        with transaction(self.engine, "redeliver", write=True) as s:
            row = s.scalar(sa.select(DeliveryRow).where(col(DeliveryRow.msg_id) == msg_id))
            if row is None or subscription_id not in (None, row.subscription_id):
                where = f" of subscription {subscription_id}" if subscription_id else ""
                raise StoreNotFoundError(f"no delivery {msg_id}{where}")
            sub = s.get(SubscriptionRow, row.subscription_id)
            if sub is None or not sub.enabled:
                raise ConfigError(
                    f"delivery {msg_id}: subscription {row.subscription_id} is disabled; "
                    "enable it first"
                )
            if row.state == DeliveryState.PENDING.value:
                raise ConfigError(f"delivery {msg_id} is still pending: it goes out by itself")
            row.state, row.finished_at = DeliveryState.PENDING.value, None
            row.next_attempt_at, row.claimed_until = now, now + lease
            s.add(row)
            s.flush()
            repo_id = s.scalar(
                sa.select(col(RepoRow.repo_id)).where(col(RepoRow.id) == row.repo_pk)
            )
            return _delivery(row, str(repo_id)), _subscription(sub)

    def release(self, delivery: Delivery) -> None:
        """Give a claimed delivery back unattempted (the worker is stopping)."""
        with transaction(self.engine, "release delivery", write=True) as s:
            s.execute(
                sa.update(DeliveryRow)
                .where(col(DeliveryRow.id) == delivery.id)
                .values(claimed_until=None)
            )

    def next_due(self, *, exclude: Collection[int] = ()) -> datetime | None:
        """When the earliest pending delivery (of a subscription not in `exclude`) is due
        (None: nothing pending)."""
        q = sa.select(sa.func.min(col(DeliveryRow.next_attempt_at))).where(
            col(DeliveryRow.state) == DeliveryState.PENDING.value,
            col(DeliveryRow.subscription_id).in_(_ENABLED),
        )
        if exclude:
            q = q.where(col(DeliveryRow.subscription_id).not_in(sorted(exclude)))
        with transaction(self.engine, "next delivery") as s:
            return s.scalar(q)

    def deliveries(
        self, *, subscription_id: int | None = None, limit: int | None = None
    ) -> list[Delivery]:
        """Deliveries (of one subscription), newest first."""
        q = (
            sa.select(DeliveryRow, col(RepoRow.repo_id))
            .join(RepoRow, col(RepoRow.id) == col(DeliveryRow.repo_pk))
            .order_by(col(DeliveryRow.id).desc())
        )
        if subscription_id is not None:
            q = q.where(col(DeliveryRow.subscription_id) == subscription_id)
        if limit is not None:
            q = q.limit(limit)
        with transaction(self.engine, "list deliveries") as s:
            return [_delivery(row, rid) for row, rid in s.execute(q).all()]

    def attempts(self, delivery_ids: Sequence[int]) -> dict[int, list[Attempt]]:
        """The log of each delivery, oldest attempt first."""
        out: dict[int, list[Attempt]] = {i: [] for i in delivery_ids}
        if not delivery_ids:
            return out
        a = DeliveryAttemptRow
        q = (
            sa.select(a)
            .where(col(a.delivery_id).in_(list(delivery_ids)))
            .order_by(col(a.delivery_id), col(a.n))
        )
        with transaction(self.engine, "list attempts") as s:
            for row in s.scalars(q).all():
                out[row.delivery_id].append(
                    Attempt(
                        row.delivery_id,
                        row.n,
                        row.started_at,
                        row.duration_ms,
                        row.status,
                        row.error,
                        Outcome(row.outcome),
                    )
                )
        return out

    def queue_depth(self) -> int:
        """Deliveries not yet delivered, failed or cancelled."""
        with transaction(self.engine, "count deliveries") as s:
            return int(
                s.scalar(
                    sa.select(sa.func.count())
                    .select_from(DeliveryRow)
                    .where(col(DeliveryRow.state) == DeliveryState.PENDING.value)
                )
                or 0
            )

    # -- poll requests ----------------------------------------------------------------------

    def request_poll(self, repo_id: RepoId, reason: str, now: datetime) -> bool:
        """Ask for a poll of `repo_id` now. False when one was already waiting (the two are one
        poll); asked while its poll runs, it makes one more poll after it."""
        table = PollRequestRow.__table__  # type: ignore[attr-defined]
        with transaction(self.engine, "request poll", write=True) as s:
            if insert_ignore(
                s,
                table,
                {"repo_id": repo_id, "reason": reason, "requested_at": now, "requests": 1},
                ["repo_id"],
            ):
                return True
            row = s.get(PollRequestRow, repo_id, with_for_update=True)
            if row is None:  # pragma: no cover - finished between the two statements
                s.add(PollRequestRow(repo_id=repo_id, reason=reason, requested_at=now, requests=1))
                return True
            waiting = row.claimed_until is None
            row.requests += 1
            row.reason, row.requested_at = reason, now
            s.add(row)
            return not waiting

    def claim_poll_requests(
        self, now: datetime, *, lease: timedelta, limit: int = 32
    ) -> list[PollRequest]:
        """Take the waiting poll requests (and those whose worker's lease ran out), oldest first."""
        p = PollRequestRow
        q = (
            sa.select(p)
            .where(sa.or_(col(p.claimed_until).is_(None), col(p.claimed_until) <= now))
            .order_by(col(p.requested_at))
            .limit(limit)
        )
        out: list[PollRequest] = []
        if not self._any(q):  # the common case, without taking the write lock
            return out
        with transaction(self.engine, "claim poll requests", write=True) as s:
            for row in s.scalars(q.with_for_update(skip_locked=True)).all():
                row.claimed_until = now + lease
                s.add(row)
                out.append(
                    PollRequest(RepoId(row.repo_id), row.reason, row.requested_at, row.requests)
                )
        return out

    def finish_poll_request(self, request: PollRequest) -> None:
        """The claimed poll ran: forget the request, unless it was asked again meanwhile (then it
        waits for one more poll)."""
        p = PollRequestRow
        with transaction(self.engine, "finish poll request", write=True) as s:
            gone = s.execute(
                sa.delete(p).where(
                    col(p.repo_id) == request.repo_id, col(p.requests) == request.token
                )
            )
            if not getattr(gone, "rowcount", 0):
                s.execute(
                    sa.update(p).where(col(p.repo_id) == request.repo_id).values(claimed_until=None)
                )

    def pending_poll_requests(self) -> list[RepoId]:
        """Repos with a poll asked for and not yet done (waiting or running)."""
        with transaction(self.engine, "list poll requests") as s:
            return [RepoId(r) for r in s.scalars(sa.select(col(PollRequestRow.repo_id))).all()]
