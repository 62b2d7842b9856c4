"""Managing subscriptions, shared by `tracker subscribe` and the API: checked input, the one-time
secret, rotation, and the JSON views (a secret is shown once, when it is made, never listed)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from tracker.settings import Settings
from tracker.shared.domain import Artifact, Clock, Severity
from tracker.shared.errors import ConfigError
from tracker.store.webhooks import Attempt, Delivery, Subscription, WebhookStore, new_msg_id
from tracker.webhooks.deliver import Deliverer
from tracker.webhooks.events import EVENT_TYPES, Filter, ping_body
from tracker.webhooks.signing import new_secret, secret_key
from tracker.webhooks.ssrf import TargetRefused, parse_networks, resolve

DEFAULT_GRACE = timedelta(hours=24)
"""How long a rotated-out secret still signs deliveries (receivers switch over meanwhile)."""


def _severity(value: str) -> Severity:
    try:
        return Severity(value.lower())
    except ValueError:
        names = ", ".join(s.value for s in Severity)
        raise ConfigError(f"min severity {value!r} is not one of {names}") from None


def _kinds(values: Sequence[str]) -> tuple[Artifact, ...]:
    out = []
    for v in values:
        try:
            out.append(Artifact(v))
        except ValueError:
            names = ", ".join(a.value for a in Artifact)
            raise ConfigError(f"change kind {v!r} is not one of {names}") from None
    return tuple(dict.fromkeys(out))


def _events(values: Sequence[str]) -> tuple[str, ...]:
    for v in values:
        if v not in EVENT_TYPES:
            raise ConfigError(f"event type {v!r} is not one of {', '.join(EVENT_TYPES)}")
    return tuple(dict.fromkeys(values))


def _secret(value: str | None) -> str:
    if value is None:
        return new_secret()
    try:
        secret_key(value)
    except ValueError as exc:
        raise ConfigError(f"secret: {exc}") from None
    return value


def check_target(url: str, settings: Settings) -> None:
    """ConfigError when the SSRF guard refuses `url` (see `tracker.webhooks.ssrf`)."""
    try:
        resolve(url, parse_networks(settings.webhook_allow_networks))
    except TargetRefused as exc:
        raise ConfigError(f"webhook URL refused: {exc}") from None


def add(
    store: WebhookStore,
    settings: Settings,
    *,
    url: str,
    repos: Sequence[str],
    min_severity: str,
    kinds: Sequence[str],
    secret: str | None,
    description: str,
    now: datetime,
    events: Sequence[str] = (),
    team: str | None = None,
    teams: Sequence[str] = (),
) -> tuple[Subscription, str]:
    """Check and add a subscription; returns it with its secret (made here unless given).
    `team`: only the advisories that affect this watchlist team (one of `teams`, the
    watchlist's team names)."""
    globs = tuple(dict.fromkeys(g.strip() for g in repos if g.strip())) or ("*",)
    if any(len(g) > 200 for g in globs):
        raise ConfigError("a repo glob is at most 200 characters")
    severity = _severity(min_severity)
    kind_list = _kinds(kinds)
    event_list = _events(events)
    if team is not None and team not in teams:
        known = ", ".join(teams) or "none"
        raise ConfigError(f"no team {team!r} in the watchlist (teams: {known})")
    check_target(url, settings)
    chosen = _secret(secret)
    sub = store.add_subscription(
        url=url,
        repos=globs,
        min_severity=severity,
        kinds=kind_list,
        secret=chosen,
        description=description,
        now=now,
        events=event_list,
        team=team,
    )
    return sub, chosen


def rotate(
    store: WebhookStore,
    subscription_id: int,
    *,
    secret: str | None,
    grace: timedelta,
    now: datetime,
) -> tuple[Subscription, str]:
    """A new current secret; the old ones keep signing (next to it) for `grace`."""
    chosen = _secret(secret)
    return store.rotate_secret(subscription_id, chosen, retire_at=now + grace, now=now), chosen


def _iso(when: datetime | None) -> str | None:
    return when.isoformat() if when is not None else None


def subscription_json(sub: Subscription, *, secret: str | None = None) -> dict[str, Any]:
    """A subscription as JSON; `secret` only in the answer that made it."""
    out: dict[str, Any] = {
        "id": sub.id,
        "url": sub.url,
        "repos": list(sub.repos),
        "min_severity": sub.min_severity.value,
        "kinds": [k.value for k in sub.kinds],
        "events": list(sub.events),
        "team": sub.team,
        "description": sub.description,
        "enabled": sub.enabled,
        "disabled_reason": sub.disabled_reason,
        "secrets_in_use": len(sub.secrets),
        "created_at": _iso(sub.created_at),
        "updated_at": _iso(sub.updated_at),
    }
    if secret is not None:
        out["secret"] = secret
    return out


def attempt_json(a: Attempt) -> dict[str, Any]:
    return {
        "n": a.n,
        "at": _iso(a.started_at),
        "duration_ms": a.duration_ms,
        "status": a.status,
        "error": a.error,
        "outcome": a.outcome.value,
    }


def delivery_json(d: Delivery, attempts: Sequence[Attempt]) -> dict[str, Any]:
    """One delivery of the log with its attempts (the body is not repeated)."""
    return {
        "webhook_id": d.msg_id,
        "subscription": d.subscription_id,
        "repo": d.repo_id,
        "commit": d.sha,
        "event": d.event,
        "state": d.state.value,
        "attempts": [attempt_json(a) for a in attempts],
        "next_attempt_at": _iso(d.next_attempt_at) if d.state.value == "pending" else None,
        "created_at": _iso(d.created_at),
        "finished_at": _iso(d.finished_at),
        "last_status": d.last_status,
        "last_error": d.last_error,
    }


def redeliver(
    store: WebhookStore,
    settings: Settings,
    clock: Clock,
    webhook_id: str,
    *,
    subscription_id: int | None = None,
) -> dict[str, Any]:
    """Send a past delivery again at once (`WebhookStore.redeliver`: the same `webhook-id` and
    body, signed anew), one attempt recorded in its log; a failed attempt is retried by the
    daemon as any other. The delivery as `delivery_json` after the attempt. StoreNotFoundError
    for an unknown webhook-id, ConfigError for one that cannot be sent again now."""
    deliverer = Deliverer(store, settings, clock)
    try:
        delivery, sub = store.redeliver(
            webhook_id, clock(), deliverer.lease, subscription_id=subscription_id
        )
        deliverer.attempt(delivery, sub)
    finally:
        deliverer.close()
    (after,) = [d for d in store.deliveries(subscription_id=sub.id) if d.msg_id == webhook_id]
    return delivery_json(after, store.attempts([after.id])[after.id])


def ping(
    store: WebhookStore, settings: Settings, clock: Clock, subscription_id: int
) -> dict[str, Any]:
    """Send a `webhook.ping` to the subscription now (enabled or not: a receiver can be tested
    before `enable`), signed like a delivery with a fresh `webhook-id`; nothing is queued or
    recorded. StoreNotFoundError for an unknown subscription."""
    sub = store.subscription(subscription_id)
    at = clock()
    f = Filter(sub.repos, sub.min_severity, tuple(k.value for k in sub.kinds), sub.events, sub.team)
    msg_id = new_msg_id()
    deliverer = Deliverer(store, settings, clock)
    try:
        status, error = deliverer.ping(sub, msg_id, ping_body(sub.id, f, at))
    finally:
        deliverer.close()
    return {
        "webhook_id": msg_id,
        "subscription": sub.id,
        "url": sub.url,
        "status": status,
        "error": error,
        "delivered": status is not None and 200 <= status < 300,
    }


def log_json(store: WebhookStore, subscription_id: int, limit: int) -> list[dict[str, Any]]:
    """The delivery log of a subscription, newest delivery first (StoreNotFoundError if none)."""
    store.subscription(subscription_id)
    deliveries = store.deliveries(subscription_id=subscription_id, limit=limit)
    attempts = store.attempts([d.id for d in deliveries])
    return [delivery_json(d, attempts[d.id]) for d in deliveries]
