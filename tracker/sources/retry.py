"""The one retry policy of the source edge: retry TransientSourceError only, honouring Retry-After.

Never retries not-found, access-denied or bad-response errors, nor a DeadlineError (a call that ran
past its deadline, stalled, or was asked to wait longer than the cap: the poll gives up on the
repo and comes back later instead of holding a worker). Waits are exponential (0.5 s, 1 s,
2 s, ... capped at `max_wait_s`) unless the error carries a `retry_after`, which wins (capped).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt

from tracker.shared.errors import DeadlineError, TransientSourceError

T = TypeVar("T")


def _wait(base_s: float, max_wait_s: float) -> Callable[[RetryCallState], float]:
    def wait(state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome is not None else None
        if isinstance(exc, TransientSourceError) and exc.retry_after is not None:
            return float(min(max(exc.retry_after, 0.0), max_wait_s))
        return float(min(base_s * 2 ** (state.attempt_number - 1), max_wait_s))

    return wait


def _retried(exc: BaseException) -> bool:
    return isinstance(exc, TransientSourceError) and not isinstance(exc, DeadlineError)


def call_with_retry(
    fn: Callable[[], T],
    *,
    attempts: int,
    base_s: float = 0.5,
    max_wait_s: float = 30.0,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """Call `fn` up to `attempts` times while it raises TransientSourceError; re-raise the last.

    Other exceptions propagate at once.
    """
    retrying = Retrying(
        retry=retry_if_exception(_retried),
        stop=stop_after_attempt(max(1, attempts)),
        wait=_wait(base_s, max_wait_s),
        sleep=sleep,
        reraise=True,
    )
    return retrying(fn)
