"""One bounded HTTP exchange with a webhook receiver: a POST whose whole attempt (connect, TLS,
the request, the answer's headers and as much of its body as is read) ends by one deadline, and
whose answer body is streamed and read to at most `ANSWER_CAP` bytes, so a receiver that answers
slowly, never, or with an endless body costs one attempt's time and a few kB, never more.

A 2xx is an acknowledgement: its body is not read at all. Any other answer's body is read (for the
attempt's error line) to at most `ANSWER_CAP` bytes, raw (`accept-encoding: identity` is sent, and
a compressed body is not decompressed), within the same deadline; a body cut by the deadline keeps
what arrived. The exchange runs on an event loop of its own (`asyncio.run`), where the deadline
and the stop cancel it at any await, wherever it is blocked; the sync client's timeouts are per
socket operation, so a receiver trickling one byte within every timeout was never stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import anyio
import certifi
import httpx

ANSWER_CAP = 4096
"""Bytes of a receiver's answer body read at most (the rest is never read)."""
STOP_CHECK_S = 0.05
"""How often an exchange in flight looks at the stop event."""


class ExchangeStopped(Exception):
    """The worker is stopping: the exchange was abandoned, its outcome unknown."""


class DeadlineExceeded(Exception):
    """The attempt's deadline passed; the message says while waiting for what, in one line."""


@dataclass(frozen=True)
class Answer:
    """What a receiver answered: its status, headers, and (not 2xx) the first bytes of its body;
    `cut`: the body went on past `ANSWER_CAP` bytes or past the deadline."""

    status: int
    headers: Mapping[str, str]
    body: bytes
    cut: str | None = None


def ssl_context() -> ssl.SSLContext:
    """The context every exchange verifies TLS with (certifi's roots; made once per worker)."""
    return ssl.create_default_context(cafile=certifi.where())


def warm_up(tls: ssl.SSLContext) -> None:
    """Import what a first exchange would (the async HTTP core, the event loop's backend: some
    0.3 s), so that a worker's first attempt does not spend its deadline on imports."""

    async def make_client() -> None:
        async with httpx.AsyncClient(verify=tls, trust_env=False):
            await anyio.sleep(0)

    asyncio.run(make_client())


def post(
    url: str,
    body: bytes,
    headers: Mapping[str, str],
    *,
    deadline_s: float,
    tls: ssl.SSLContext,
    extensions: Mapping[str, Any] | None = None,
    stop: threading.Event | None = None,
) -> Answer:
    """POST `body` to `url` and return the answer, all within `deadline_s` seconds.

    Raises DeadlineExceeded when the answer's status line and headers are not in by the deadline
    (a body cut by it is returned, `cut` set), ExchangeStopped when `stop` is set meanwhile, and
    httpx.HTTPError / OSError for a refused connection, a TLS failure or a broken answer. Redirects
    are not followed."""
    return asyncio.run(_guarded(url, body, headers, deadline_s, tls, extensions or {}, stop))


async def _guarded(
    url: str,
    body: bytes,
    headers: Mapping[str, str],
    deadline_s: float,
    tls: ssl.SSLContext,
    extensions: Mapping[str, Any],
    stop: threading.Event | None,
) -> Answer:
    task = asyncio.ensure_future(_exchange(url, body, headers, deadline_s, tls, extensions))
    while not task.done():
        await asyncio.wait({task}, timeout=STOP_CHECK_S)
        if stop is not None and stop.is_set() and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):  # its outcome is moot
                await task
            raise ExchangeStopped("the worker is stopping")
    return task.result()


async def _exchange(
    url: str,
    body: bytes,
    headers: Mapping[str, str],
    deadline_s: float,
    tls: ssl.SSLContext,
    extensions: Mapping[str, Any],
) -> Answer:
    waiting = ["the connection"]

    async def trace(event: str, info: Mapping[str, Any]) -> None:
        if event.endswith("send_request_headers.started"):
            waiting[0] = "the request to be sent"
        elif event.endswith("receive_response_headers.started"):
            waiting[0] = "the answer's status and headers"

    status: int | None = None
    answer_headers: dict[str, str] = {}
    got = bytearray()
    # httpx's own timeouts (per socket operation) are left past the deadline: the deadline rules.
    timeout = httpx.Timeout(deadline_s + 1.0)
    try:
        async with (
            asyncio.timeout(deadline_s),
            httpx.AsyncClient(
                verify=tls, follow_redirects=False, trust_env=False, timeout=timeout
            ) as client,
            client.stream(
                "POST",
                url,
                content=body,
                headers={**headers, "accept-encoding": "identity"},
                extensions={**extensions, "trace": trace},
            ) as response,
        ):
            status = response.status_code
            answer_headers = dict(response.headers)
            if 200 <= status < 300:
                return Answer(status, answer_headers, b"")
            async for chunk in response.aiter_raw():
                got += chunk[: ANSWER_CAP - len(got)]
                if len(got) >= ANSWER_CAP:
                    return Answer(status, answer_headers, bytes(got), f"over {ANSWER_CAP} bytes")
    except TimeoutError:
        if status is None:
            raise DeadlineExceeded(
                f"no answer within {deadline_s:g} s (waiting for {waiting[0]})"
            ) from None
        return Answer(status, answer_headers, bytes(got), f"at the {deadline_s:g} s deadline")
    return Answer(status, answer_headers, bytes(got))
