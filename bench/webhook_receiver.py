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


HOSTILE_KINDS = ("endless-500", "endless-200", "trickle", "silent", "redirect")
ENDLESS_BYTES = 10 * 1024**3
"""What an `endless-*` receiver announces and streams (10 GiB), generated as it goes."""


@dataclass
class Hostile:
    """A hostile webhook receiver on 127.0.0.1 (a raw socket server, one thread per connection).

    `kind`: `endless-500` / `endless-200` answer that status with a 10 GiB body of `x`, streamed
    from one 64 KiB buffer until the client hangs up; `trickle` sends its answer one byte every
    `trickle_s` (it never completes); `silent` reads the request and never answers; `redirect`
    answers `302` to `location` (e.g. a loopback receiver). `connections` counts accepted
    connections, `open` those not yet closed, `sent` the bytes written."""

    kind: str
    location: str = ""
    trickle_s: float = 0.5
    connections: int = 0
    open: int = 0
    sent: int = 0
    _sock: Any = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        host, port = self._sock.getsockname()[:2]
        return f"http://{host}:{port}/hook"

    def __enter__(self) -> Hostile:
        import socket

        assert self.kind in HOSTILE_KINDS, self.kind
        self._sock = socket.create_server(("127.0.0.1", 0))
        self._sock.settimeout(0.1)
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._sock.close()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self._lock:
                self.connections += 1
                self.open += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _read_request(self, conn: Any) -> None:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                return
            data += chunk
        head, _, rest = data.partition(b"\r\n\r\n")
        length = next(
            (int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
             if line.lower().startswith(b"content-length:")),
            0,
        )  # fmt: skip
        while len(rest) < length and (chunk := conn.recv(65536)):
            rest += chunk

    def _send(self, conn: Any, data: bytes) -> None:
        conn.sendall(data)
        with self._lock:
            self.sent += len(data)

    def _serve(self, conn: Any) -> None:
        try:
            conn.settimeout(60)
            self._read_request(conn)
            if self.kind.startswith("endless-"):
                status = self.kind.removeprefix("endless-")
                self._send(
                    conn,
                    f"HTTP/1.1 {status} Hostile\r\nContent-Length: {ENDLESS_BYTES}\r\n\r\n".encode(),
                )
                chunk, left = b"x" * 65536, ENDLESS_BYTES
                while left > 0 and not self._stop.is_set():
                    self._send(conn, chunk[:left])
                    left -= len(chunk)
            elif self.kind == "trickle":
                answer = b"HTTP/1.1 200 OK\r\n" + b"X-Trickle: " + b"a" * 10**6
                for i in range(len(answer)):
                    if self._stop.wait(self.trickle_s if i else 0):
                        break
                    self._send(conn, answer[i : i + 1])
            elif self.kind == "silent":
                while not self._stop.is_set() and conn.recv(1):
                    pass
            else:
                self._send(
                    conn,
                    f"HTTP/1.1 302 Found\r\nLocation: {self.location}\r\nContent-Length: 0\r\n\r\n"
                    .encode(),
                )  # fmt: skip
        except OSError:
            pass  # the client hung up (the point, for most kinds)
        finally:
            conn.close()
            with self._lock:
                self.open -= 1
