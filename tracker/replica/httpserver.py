"""The loopback HTTP server the Hub replica and the fault proxy run on.

`LoopbackServer`: a threaded HTTP/1.1 server that keeps track of its client sockets, so stopping it
closes every open connection (a keep-alive client must not hold a test or the demo open), and that
stays quiet about clients going away. `BackgroundServer`: start/stop in a daemon thread, a context
manager and the `url` of the running server, for the classes that own one.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Generic, Self, TypeVar

Owner = TypeVar("Owner")


class LoopbackServer(ThreadingHTTPServer, Generic[Owner]):
    """A threaded server whose handlers reach their `owner` (the Replica or FaultProxy)."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(
        self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], owner: Owner
    ) -> None:
        self.owner = owner
        self.open_sockets: set[socket.socket] = set()
        self.sockets_lock = threading.Lock()
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self.sockets_lock:
            self.open_sockets.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self.sockets_lock:
            self.open_sockets.discard(request)
        super().shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that went away is not an error of ours; handlers answer their own errors

    def close_all(self) -> None:
        """Stop serving, close the listening socket and every open client connection."""
        self.shutdown()
        with self.sockets_lock:
            open_sockets = list(self.open_sockets)
        for sock in open_sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        self.server_close()


class BackgroundServer:
    """Serves `handler` on http://host:port (0: a free port) from a daemon thread.

    Subclasses set `handler` and `name` (the thread's name prefix) and may override `_stopping_now`
    (called before the server shuts down). Idempotent `start()`/`stop()`; a context manager.
    """

    handler: type[BaseHTTPRequestHandler]
    name = "http-server"
    not_running = "the server is not running"

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self._server: LoopbackServer[Self] | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> Self:
        """Bind and serve in a background thread; returns self."""
        if self._server is not None:
            return self
        server = LoopbackServer((self.host, self.port), self.handler, self)
        self.port = server.server_address[1]
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.05},
            daemon=True,
            name=f"{self.name}-{self.port}",
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close every connection (waits up to 5 s for the serving thread)."""
        server, self._server = self._server, None
        if server is None:
            return
        self._stopping_now()
        server.close_all()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _stopping_now(self) -> None:
        """Hook: called when stop() begins, before the server shuts down."""

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """`http://host:port` of the running server (no trailing slash)."""
        if self._server is None:
            raise RuntimeError(self.not_running)
        return f"http://{self.host}:{self.port}"
