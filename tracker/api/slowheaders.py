"""`tracker serve`'s HTTP protocol: uvicorn's httptools or h11 protocol (`TRACKER_HTTP_PARSER`) with
a deadline on request headers (on top of `tracker.api.wire`'s problem documents for requests it
cannot parse).

uvicorn times out idle kept-alive connections, but not a client that sends a request's header
slowly (a byte at a time, never ending it): 1,200 such connections were held for 60 s (issue 26,
item 7). Here a request's header must be complete within `header_timeout_s` of the connection
being made, or of the first byte of a later request on a kept-alive connection; past it the
connection is closed. Nothing changes once the header is in (the app's own limits bound bodies).
"""

from __future__ import annotations

import asyncio
from typing import Any, Literal

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from tracker.api.wire import ProblemH11Protocol, ProblemHttpToolsProtocol


class _HeaderDeadline:
    """The deadline's timer, for a uvicorn protocol (which has `loop` and `transport`)."""

    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport
    header_timeout_s: float
    _header_timer: asyncio.TimerHandle | None = None

    def _arm(self) -> None:
        if self._header_timer is None:
            self._header_timer = self.loop.call_later(self.header_timeout_s, self._too_slow)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _too_slow(self) -> None:
        self._header_timer = None
        if not self.transport.is_closing():
            self.transport.close()


def header_deadline_protocol(
    header_timeout_s: float, parser: Literal["httptools", "h11"] = "httptools"
) -> type[HttpToolsProtocol] | type[H11Protocol]:
    """The protocol class for `uvicorn.Config(http=...)` under `header_timeout_s`, on `parser`.
    The header is in at httptools' `on_headers_complete`; h11 has no such callback, so there it
    is in once h11 has read the `Request` (the peer's state leaves IDLE), looked at after each
    read."""
    if parser == "h11":

        class H11HeaderDeadlineProtocol(_HeaderDeadline, ProblemH11Protocol):
            def connection_made(self, transport: Any) -> None:
                super().connection_made(transport)
                self._arm()

            def data_received(self, data: bytes) -> None:
                if self.cycle is None or self.cycle.response_complete:  # between requests
                    self._arm()
                super().data_received(data)
                if self.conn.their_state is not h11.IDLE:
                    self._disarm()

            def connection_lost(self, exc: Exception | None) -> None:
                self._disarm()
                super().connection_lost(exc)

        H11HeaderDeadlineProtocol.header_timeout_s = header_timeout_s
        return H11HeaderDeadlineProtocol

    class HeaderDeadlineProtocol(_HeaderDeadline, ProblemHttpToolsProtocol):
        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._arm()

        def data_received(self, data: bytes) -> None:
            if self.cycle is None or self.cycle.response_complete:  # between requests
                self._arm()
            super().data_received(data)

        def on_headers_complete(self) -> None:
            self._disarm()
            super().on_headers_complete()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

    HeaderDeadlineProtocol.header_timeout_s = header_timeout_s
    return HeaderDeadlineProtocol


__all__ = ["header_deadline_protocol"]
