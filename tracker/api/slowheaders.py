"""`tracker serve`'s HTTP protocol: uvicorn's httptools protocol with a deadline on request headers
(on top of `tracker.api.wire`'s problem documents for requests it cannot parse).

uvicorn times out idle kept-alive connections, but not a client that sends a request's header
slowly (a byte at a time, never ending it): 1,200 such connections were held for 60 s (issue 26,
item 7). Here a request's header must be complete within `header_timeout_s` of the connection
being made, or of the first byte of a later request on a kept-alive connection; past it the
connection is closed. Nothing changes once the header is in (the app's own limits bound bodies).
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from tracker.api.wire import ProblemHttpToolsProtocol


def header_deadline_protocol(header_timeout_s: float) -> type[HttpToolsProtocol]:
    """The protocol class for `uvicorn.Config(http=...)` under `header_timeout_s`."""

    class HeaderDeadlineProtocol(ProblemHttpToolsProtocol):
        _header_timer: asyncio.TimerHandle | None = None

        def _arm(self) -> None:
            if self._header_timer is None:
                self._header_timer = self.loop.call_later(header_timeout_s, self._too_slow)

        def _disarm(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _too_slow(self) -> None:
            self._header_timer = None
            if not self.transport.is_closing():
                self.transport.close()

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

    return HeaderDeadlineProtocol


__all__ = ["header_deadline_protocol"]
