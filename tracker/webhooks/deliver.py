"""The delivery worker: sends due outbox rows, signed, and records every attempt.

Each pass claims the due deliveries (`WebhookStore.claim_due`), POSTs each body to its
subscription's URL with the Standard Webhooks headers (`tracker.webhooks.signing`), and records
the attempt: a 2xx delivers; `410 Gone` fails the delivery and disables the subscription (its
other pending deliveries are cancelled); anything else (another status, a timeout, a refused or
unreachable target) is retried after an exponential backoff with jitter, or after the receiver's
`Retry-After` when that is later, until `webhook_max_attempts`. Redirects are not followed (a
redirect could lead past the SSRF guard): a 3xx is a failed attempt.

Delivery is at least once: the attempt is recorded after the receiver answers, so a worker that
dies between the two (or an answer lost on the way) sends the same `webhook-id` and body again.
Receivers deduplicate on `webhook-id`; an attempt whose 2xx was recorded is never sent again.
"""

from __future__ import annotations

import email.utils
import random
import time
from collections.abc import Callable
from datetime import datetime, timedelta

import httpx
import structlog

from tracker.domain import Clock
from tracker.settings import Settings
from tracker.store.webhooks import Attempt, Delivery, Outcome, Subscription, WebhookStore
from tracker.webhooks.signing import headers
from tracker.webhooks.ssrf import Target, TargetRefused, parse_networks, resolve

log = structlog.get_logger(__name__)

USER_AGENT = "tracker-webhooks/0.1"
MAX_RETRY_AFTER_S = 86_400.0
"""A receiver's Retry-After is honoured up to one day."""
_ERROR_BODY = 200


def retry_delay(
    attempt: int, *, base_s: float, max_s: float, rng: Callable[[], float] = random.random
) -> float:
    """Seconds before the attempt after failed attempt number `attempt` (1-based): the exponential
    step `base_s * 2**(attempt-1)` capped at `max_s`, with equal jitter (a uniform draw from the
    upper half of the step), so receivers that failed together are not retried together."""
    step = min(max_s, base_s * 2.0 ** min(attempt - 1, 60))
    return step / 2 + rng() * step / 2


def parse_retry_after(value: str | None, now: datetime) -> float | None:
    """Seconds a `Retry-After` header asks to wait (delta-seconds or an HTTP date), or None."""
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return min(float(value), MAX_RETRY_AFTER_S)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    return min(max(0.0, (when - now).total_seconds()), MAX_RETRY_AFTER_S)


def _pinned(target: Target, url: str) -> tuple[str, dict[str, str], dict[str, str]]:
    """The URL with the checked address as its host, the Host header and (https) the SNI name."""
    pinned = str(httpx.URL(url).copy_with(host=str(target.address)))
    default = 443 if target.scheme == "https" else 80
    host_header = target.host if target.port == default else f"{target.host}:{target.port}"
    ext = {"sni_hostname": target.host} if target.scheme == "https" else {}
    return pinned, {"host": host_header}, ext


class Deliverer:
    """Sends due deliveries; `run_once` is one pass (the daemon calls it whenever work may be due)."""

    def __init__(
        self,
        store: WebhookStore,
        settings: Settings,
        clock: Clock,
        *,
        client: httpx.Client | None = None,
        rng: Callable[[], float] = random.random,
    ) -> None:
        self.store = store
        self.settings = settings
        self.clock = clock
        self.allow = parse_networks(settings.webhook_allow_networks)
        self.client = client or httpx.Client(
            timeout=settings.webhook_timeout_s, follow_redirects=False, trust_env=False
        )
        self.rng = rng
        # A claim outlives an attempt (a connect and a read, each up to the timeout); a worker that
        # died mid-attempt leaves its delivery to be claimed again after it.
        self.lease = timedelta(seconds=settings.webhook_timeout_s * 2 + 2)

    def close(self) -> None:
        self.client.close()

    def run_once(self, *, limit: int = 16) -> int:
        """Attempt every due delivery (up to `limit`); returns how many were attempted."""
        claimed = self.store.claim_due(self.clock(), lease=self.lease, limit=limit)
        for delivery, sub in claimed:
            self.attempt(delivery, sub)
        return len(claimed)

    def seconds_until_due(self) -> float | None:
        """Seconds until the earliest pending delivery is due (0 if one is), None if none is."""
        due = self.store.next_due()
        if due is None:
            return None
        return max(0.0, (due - self.clock()).total_seconds())

    def attempt(self, delivery: Delivery, sub: Subscription) -> Attempt:
        """One HTTP attempt of `delivery`, recorded; returns the attempt."""
        n = delivery.attempts + 1
        started = self.clock()
        t0 = time.monotonic()
        status: int | None = None
        error: str | None = None
        retry_after: float | None = None
        body = delivery.body.encode()
        try:
            target = resolve(sub.url, self.allow)
            url, host, ext = _pinned(target, sub.url)
            signed = headers(
                delivery.msg_id, int(started.timestamp()), body, sub.signing_secrets(started)
            )
            response = self.client.post(
                url,
                content=body,
                headers={
                    **host,
                    **signed,
                    "content-type": "application/json",
                    "user-agent": USER_AGENT,
                },
                extensions=ext,
            )
            status = response.status_code
            if not 200 <= status < 300:
                text = response.text[:_ERROR_BODY].strip()
                error = f"HTTP {status}" + (f": {text}" if text else "")
                retry_after = parse_retry_after(response.headers.get("retry-after"), self.clock())
        except TargetRefused as exc:
            error = f"refused: {exc}"
        except (httpx.HTTPError, OSError) as exc:
            error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        duration_ms = int((time.monotonic() - t0) * 1000)
        answered = self.clock()  # waits (backoff, Retry-After) count from the answer
        next_at: datetime | None = None
        if status is not None and 200 <= status < 300:
            outcome = Outcome.DELIVERED
        elif status == 410:
            outcome = Outcome.GONE
        elif n >= self.settings.webhook_max_attempts:
            outcome = Outcome.FAILED
        else:
            outcome = Outcome.RETRY
            wait = retry_delay(
                n,
                base_s=self.settings.webhook_retry_base_s,
                max_s=self.settings.webhook_retry_max_s,
                rng=self.rng,
            )
            wait = max(wait, retry_after or 0.0)
            next_at = answered + timedelta(seconds=wait)
        attempt = Attempt(delivery.id, n, started, duration_ms, status, error, outcome)
        self.store.record_attempt(delivery, attempt, next_attempt_at=next_at, now=answered)
        log_at = log.info if outcome is Outcome.DELIVERED else log.warning
        log_at(
            f"webhook.{outcome.value}",
            subscription=sub.id,
            webhook_id=delivery.msg_id,
            repo=delivery.repo_id,
            sha=delivery.sha,
            attempt=n,
            status=status,
            error=error,
            next_attempt_at=next_at.isoformat() if next_at else None,
        )
        return attempt
