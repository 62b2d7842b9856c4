"""Frozen values of the push side's store: subscriptions, deliveries, attempts, poll requests."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from tracker.shared.domain import Artifact, RepoId, Severity, Sha


class DeliveryState(StrEnum):
    """Where an outbox row is."""

    PENDING = "pending"  # due at `next_attempt_at` (or claimed by a worker until `claimed_until`)
    DELIVERED = "delivered"  # a 2xx was recorded
    FAILED = "failed"  # every attempt failed (or the receiver answered 410 Gone)
    CANCELLED = "cancelled"  # its subscription was disabled before it went out


class Outcome(StrEnum):
    """What one attempt did to its delivery."""

    DELIVERED = "delivered"  # 2xx
    RETRY = "retry"  # failed; another attempt is scheduled
    FAILED = "failed"  # failed and no attempt is left
    GONE = "gone"  # 410: the subscription is disabled


@dataclass(frozen=True)
class Secret:
    """A `whsec_` signing secret; `expires` None while current, set when a rotation retires it."""

    secret: str
    expires: datetime | None = None


@dataclass(frozen=True)
class Subscription:
    """A webhook subscription: where, which repos (globs), from which severity, which change kinds
    (advisory groups; empty: all), which event types (empty: all), its secrets (newest first) and whether it is enabled."""

    id: int
    url: str
    repos: tuple[str, ...]
    min_severity: Severity
    kinds: tuple[Artifact, ...]
    secrets: tuple[Secret, ...]
    description: str
    enabled: bool
    disabled_reason: str | None
    created_at: datetime
    updated_at: datetime
    events: tuple[str, ...] = ()  # the event types it receives; empty: all
    team: str | None = None  # only the advisories that affect this watchlist team; None: any

    def signing_secrets(self, now: datetime) -> tuple[str, ...]:
        """The secrets a delivery at `now` is signed with: the current one and any retired one
        whose grace period has not ended."""
        return tuple(s.secret for s in self.secrets if s.expires is None or s.expires > now)


@dataclass(frozen=True)
class Delivery:
    """One outbox row: a revision's event for one subscription."""

    id: int
    msg_id: str
    subscription_id: int
    repo_id: RepoId
    sha: Sha
    event: str
    body: str
    state: DeliveryState
    attempts: int
    next_attempt_at: datetime
    created_at: datetime
    finished_at: datetime | None
    last_status: int | None
    last_error: str | None


@dataclass(frozen=True)
class Attempt:
    """One HTTP attempt of a delivery (the delivery log)."""

    delivery_id: int
    n: int
    started_at: datetime
    duration_ms: int
    status: int | None
    error: str | None
    outcome: Outcome


@dataclass(frozen=True)
class PollRequest:
    """A claimed request to poll a repo now; `token` tells `finish` whether it was asked again."""

    repo_id: RepoId
    reason: str
    requested_at: datetime
    token: int
