"""The delivery worker: sends due outbox rows, signed, and records every attempt.

Each pass claims due deliveries (`WebhookStore.claim_due`: the oldest due one of each
subscription that has no attempt in flight, up to `webhook_concurrency` subscriptions at once),
POSTs each body to its subscription's URL with the Standard Webhooks headers
(`tracker.webhooks.signing`) on a pool of that many threads, and records the attempt: a 2xx
delivers; `410 Gone` fails the delivery and disables the subscription (its other deliveries
are held until it is enabled again); anything else (another status, the attempt's deadline, a refused or
unreachable target) is retried after an exponential backoff with jitter, or after the receiver's
`Retry-After` when that is later, until `webhook_max_attempts`. Redirects are not followed (a
redirect could lead past the SSRF guard): a 3xx is a failed attempt. Each attempt is bounded
(`tracker.webhooks.exchange`): `webhook_timeout_s` for all of it, at most `ANSWER_CAP` bytes of the
answer read; so a hostile receiver costs its own subscription one slot for one deadline per
attempt, and nobody else anything.

Delivery is at least once: the attempt is recorded after the receiver answers, so a worker that
dies between the two (or an answer lost on the way) sends the same `webhook-id` and body again.
Receivers deduplicate on `webhook-id`; an attempt whose 2xx was recorded is never sent again. An
attempt abandoned because the worker is stopping is not recorded: its delivery is handed back,
due again at once.
"""

from __future__ import annotations

import email.utils
import random
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime, timedelta

import httpx
import structlog

from tracker.settings import Settings
from tracker.shared.domain import Clock
from tracker.store.outage import first_line, unreachable
from tracker.store.webhooks import Attempt, Delivery, Outcome, Subscription, WebhookStore
from tracker.webhooks.exchange import (
    Answer,
    DeadlineExceeded,
    ExchangeStopped,
    post,
    ssl_context,
    warm_up,
)
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


def _one_line(text: str, limit: int) -> str:
    """`text` as one printable line of at most `limit` characters (an ellipsis marks a cut)."""
    flat = " ".join("".join(c if c.isprintable() else " " for c in text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def error_line(answer: Answer) -> str:
    """The attempt's one-line error for an answer that is not a 2xx: the status, and the first
    characters of the body (or, for a 3xx, where it pointed: redirects are not followed)."""
    out = f"HTTP {answer.status}"
    if 300 <= answer.status < 400:
        where = _one_line(answer.headers.get("location", ""), _ERROR_BODY)
        return out + f" (redirects are not followed{'; location: ' + where if where else ''})"
    text = _one_line(answer.body.decode("utf-8", "replace"), _ERROR_BODY)
    if text:
        out += f": {text}"
    if answer.cut:
        out += f" (answer body read to {len(answer.body)} bytes: {answer.cut})"
    return out


class Deliverer:
    """Sends due deliveries, each subscription's one at a time and up to `webhook_concurrency`
    subscriptions at once, so a slow or hostile receiver holds one slot, never another
    subscription's deliveries. `start_due` starts a pass without waiting (the daemon), `run_once`
    runs one and waits for it (`poll --once`, tests); `stop` set abandons attempts in flight."""

    def __init__(
        self,
        store: WebhookStore,
        settings: Settings,
        clock: Clock,
        *,
        rng: Callable[[], float] = random.random,
        stop: threading.Event | None = None,
    ) -> None:
        self.store = store
        self.settings = settings
        self.clock = clock
        self.allow = parse_networks(settings.webhook_allow_networks)
        self.tls = ssl_context()
        self._warm = threading.Lock()
        self._warmed = False
        self.rng = rng
        self.stop = stop
        self.slots = settings.webhook_concurrency
        self.pool = ThreadPoolExecutor(self.slots, "webhook")
        self._lock = threading.Lock()
        self._busy: set[int] = set()  # subscriptions with an attempt in flight
        self.failing: set[int] = set()  # subscriptions whose last attempt here failed
        # A claim outlives an attempt (its deadline) and the record of it; a worker that died
        # mid-attempt leaves its delivery to be claimed again after it.
        self.lease = timedelta(seconds=settings.webhook_timeout_s * 2 + 2)

    def close(self) -> None:
        """Wait for the attempts in flight (abandoned at once once `stop` is set)."""
        self.pool.shutdown(wait=True)

    def start_due(
        self,
        *,
        limit: int | None = None,
        skip_failing: bool = False,
        on_done: Callable[[], None] | None = None,
    ) -> list[Future[Attempt | None]]:
        """Claim the oldest due delivery of each subscription without an attempt in flight (up
        to the free slots, and `limit`; `skip_failing`: not of a subscription whose last attempt
        here failed) and start their attempts; `on_done` is called as each ends."""
        with self._lock:
            busy = set(self._busy)
        free = self.slots - len(busy) if limit is None else min(limit, self.slots - len(busy))
        if free <= 0:
            return []
        exclude = busy | self.failing if skip_failing else busy
        claimed = self.store.claim_due(
            self.clock(), lease=self.lease, limit=free, exclude=exclude, one_per_subscription=True
        )
        futures = []
        for delivery, sub in claimed:
            with self._lock:
                self._busy.add(sub.id)
            future = self.pool.submit(self._attempt_in_slot, delivery, sub)
            if on_done is not None:
                future.add_done_callback(lambda _f: on_done())
            futures.append(future)
        return futures

    def run_once(self, *, limit: int = 16, skip_failing: bool = False) -> int:
        """One pass, waited for (see `start_due`); returns how many deliveries were attempted."""
        futures = self.start_due(limit=limit, skip_failing=skip_failing)
        for future in futures:
            future.result()
        return len(futures)

    def seconds_until_due(self) -> float | None:
        """Seconds until the earliest pending delivery of a subscription without an attempt in
        flight is due (0 if one is), None if none is or no slot is free (an attempt that ends
        calls `start_due`'s `on_done`)."""
        with self._lock:
            busy = set(self._busy)
        if len(busy) >= self.slots:
            return None
        due = self.store.next_due(exclude=busy)
        if due is None:
            return None
        return max(0.0, (due - self.clock()).total_seconds())

    def _attempt_in_slot(self, delivery: Delivery, sub: Subscription) -> Attempt | None:
        try:
            return self.attempt(delivery, sub)
        except Exception as exc:
            if unreachable(exc):  # one line: the daemon logs the outage itself
                log.error(
                    "webhooks.store_unreachable",
                    subscription=sub.id,
                    webhook_id=delivery.msg_id,
                    error=first_line(exc),
                )
            else:
                log.exception("webhooks.crashed", subscription=sub.id, webhook_id=delivery.msg_id)
            raise
        finally:
            with self._lock:
                self._busy.discard(sub.id)

    def exchange(
        self, msg_id: str, text: str, sub: Subscription, started: datetime
    ) -> tuple[int | None, str | None, float | None]:
        """POST `text` signed as message `msg_id` at `started` to `sub`'s URL, bounded
        (`tracker.webhooks.exchange`): (status or None, the attempt's one-line error or None,
        the seconds a `Retry-After` asks). ExchangeStopped when the stop abandoned it."""
        self._warm_up()
        status: int | None = None
        error: str | None = None
        retry_after: float | None = None
        body = text.encode()
        try:
            target = resolve(sub.url, self.allow)
            url, host, ext = _pinned(target, sub.url)
            signed = headers(msg_id, int(started.timestamp()), body, sub.signing_secrets(started))
            answer = post(
                url,
                body,
                {**host, **signed, "content-type": "application/json", "user-agent": USER_AGENT},
                deadline_s=self.settings.webhook_timeout_s,
                tls=self.tls,
                extensions=ext,
                stop=self.stop,
            )
            status = answer.status
            if not 200 <= status < 300:
                error = error_line(answer)
                retry_after = parse_retry_after(answer.headers.get("retry-after"), self.clock())
        except TargetRefused as exc:
            error = f"refused: {exc}"
        except DeadlineExceeded as exc:
            error = str(exc)
        except (httpx.HTTPError, OSError) as exc:
            error = _one_line(
                f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__, 300
            )
        return status, error, retry_after

    def _warm_up(self) -> None:
        with self._warm:  # once, before the first attempt's deadline starts
            if not self._warmed:
                warm_up(self.tls)
                self._warmed = True

    def ping(self, sub: Subscription, msg_id: str, text: str) -> tuple[int | None, str | None]:
        """Send a ping (`tracker.webhooks.events.ping_body`) to `sub` now, signed like every
        delivery, once, outside the outbox: (status, error). Nothing is recorded."""
        status, error, _ = self.exchange(msg_id, text, sub, self.clock())
        log.info("webhook.ping", subscription=sub.id, webhook_id=msg_id, status=status, error=error)
        return status, error

    def attempt(self, delivery: Delivery, sub: Subscription) -> Attempt | None:
        """One HTTP attempt of `delivery`, bounded (`tracker.webhooks.exchange`) and recorded;
        returns the attempt, or None when the stop abandoned it (the delivery is handed back
        unattempted, due again at once for the next run)."""
        self._warm_up()  # not counted in the attempt's duration
        n = delivery.attempts + 1
        started = self.clock()
        t0 = time.monotonic()
        try:
            status, error, retry_after = self.exchange(delivery.msg_id, delivery.body, sub, started)
        except ExchangeStopped:
            self.store.release(delivery)
            log.info("webhook.abandoned", subscription=sub.id, webhook_id=delivery.msg_id)
            return None
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
        with self._lock:
            if outcome is Outcome.DELIVERED:
                self.failing.discard(sub.id)
            else:
                self.failing.add(sub.id)
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
            duration_ms=duration_ms,
            next_attempt_at=next_at.isoformat() if next_at else None,
        )
        return attempt
