"""A webhook receiver on loopback for the tests and the bench: records every request it gets and
answers as told (a real HTTP server, `http.server` in a thread)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Received:
    """One request the receiver got: when (monotonic), its headers (lower-case) and body."""

    at: float
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def id(self) -> str:
        return self.headers["webhook-id"]

    def json(self) -> Any:
        return json.loads(self.body)


Reply = tuple[int, dict[str, str]] | tuple[int, dict[str, str], float]


@dataclass
class Receiver:
    """A webhook receiver on 127.0.0.1: records every request, answers with `reply(n, request)`
    (n counts from 0) -- by default 204; a third item holds that answer back so many seconds."""

    reply: Callable[[int, Received], Reply] = lambda n, r: (204, {})
    received: list[Received] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _cond: threading.Condition = field(default_factory=threading.Condition)

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/hook"

    def __enter__(self) -> Receiver:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                got = Received(
                    time.monotonic(),
                    self.path,
                    {k.lower(): v for k, v in self.headers.items()},
                    body,
                )
                with owner._cond:
                    n = len(owner.received)
                    owner.received.append(got)
                    owner._cond.notify_all()
                status, headers, *delay = owner.reply(n, got)
                if delay:
                    time.sleep(delay[0])
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()

    def wait_for(self, n: int, timeout: float = 30.0) -> list[Received]:
        """The first `n` requests, waiting up to `timeout` seconds for them."""
        with self._cond:
            self._cond.wait_for(lambda: len(self.received) >= n, timeout=timeout)
            assert len(self.received) >= n, f"got {len(self.received)} of {n} requests"
            return list(self.received[:n])
