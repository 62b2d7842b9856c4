"""A fault-injecting HTTP proxy for tests and soaks: put it in front of the Hub replica (or any
HTTP endpoint) and it forwards every request, breaking the answers a rule selects.

    with Replica(root) as hub, FaultProxy(hub.url, seed=7) as proxy:
        proxy.add(Fault(Mode.CORRUPT, path=r"/resolve/", times=3))
        ... point TRACKER_HF_ENDPOINT (or HF_ENDPOINT) at proxy.url ...
        proxy.clear()      # the fault stops; answers are the upstream's again

The client's `Host` header is forwarded, so the replica's LFS redirects point back at the proxy
and CDN downloads are proxied (and breakable) too. Modes, each what a broken network, proxy or
server really does:

- `SHORT_BODY`: the real `Content-Length`, fewer bytes, then the connection closes (truncation
  the client can see).
- `LYING_LENGTH`: a consistent lie: the body is cut and `Content-Length` says the cut length
  (only a check against the tree's blob id can tell).
- `CORRUPT`: same length and status, a run of 1-16 bytes overwritten with random bytes.
- `MALFORMED_JSON`: the body cut in half with a matching `Content-Length` (unparseable JSON).
- `RESET`: the connection is reset (RST) before any answer.
- `STATUS`: a canned `status` (default 503) without asking upstream: a 5xx burst.
- `RATE_LIMIT`: `429` with `Retry-After: retry_after`.
- `TRICKLE`: the real answer, body sent `chunk` bytes every `interval_s` seconds.
- `REWRITE`: the body replaced by `rewrite(body)` with a matching `Content-Length` (a middlebox
  or cache that serves other bytes than the server's: damage that stays well-formed).
- `LONG_LENGTH`: the true body under a `Content-Length` of `size` bytes, then the connection
  closes (a length that lies upwards: a client that trusts it refuses a correct file).
- `HUGE_BODY`: a body of `size` bytes (the true bytes, then filler) with a matching
  `Content-Length`, streamed (never built in memory); the connection closes when the client stops.
- `GZIP_BOMB`: `Content-Encoding: gzip` and a gzip stream of `size` zero bytes (~1,000:1), with
  the compressed `Content-Length`: small on the wire, past any cap once decoded.

`STATUS` answers carry `headers` besides their `Content-Type`: a 404 with
`X-Error-Code: EntryNotFound` is the Hub's "file not found", which its CDN answers for a file
the tree lists for a moment after a push.

Selection is by a regex searched in the request target (path and query, raw or percent-decoded:
a CDN download names its file in `path=`), method, a count
(`times`, None for until cleared), a probability drawn from one seeded RNG (repeatable runs), and
`every` (break only the Nth, 2Nth, ... answer the rule would otherwise select: deterministic).
"""

from __future__ import annotations

import contextlib
import functools
import gzip
import http.client
import random
import re
import socket
import struct
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from http.server import BaseHTTPRequestHandler
from typing import Any, Self
from urllib.parse import unquote, urlsplit

from tracker.replica.httpserver import BackgroundServer, LoopbackServer

_HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailers",
        "transfer-encoding",
        "upgrade",
        "content-length",
    }
)
_MAX_REQUEST_BODY = 16 * 1024 * 1024


class Mode(StrEnum):
    """How a selected answer is broken (see the module docstring)."""

    SHORT_BODY = "short_body"
    LYING_LENGTH = "lying_length"
    CORRUPT = "corrupt"
    MALFORMED_JSON = "malformed_json"
    RESET = "reset"
    STATUS = "status"
    RATE_LIMIT = "rate_limit"
    TRICKLE = "trickle"
    REWRITE = "rewrite"
    LONG_LENGTH = "long_length"
    HUGE_BODY = "huge_body"
    GZIP_BOMB = "gzip_bomb"


@dataclass
class Fault:
    """One rule: break answers to requests matching `path` (a regex searched in the target, path
    and query) and `method` with `mode`.

    `times`: how many answers to break (None: every one until `clear`); `probability`: the chance
    a matching request is broken (drawn from the proxy's seeded RNG; a request not drawn does not
    use up `times`); `only_status`: break only upstream answers with one of these statuses (e.g.
    {200, 206} so that redirects pass); `status`/`retry_after` for STATUS and RATE_LIMIT, and
    `headers` sent with a STATUS answer; `chunk` and `interval_s` for TRICKLE; `rewrite` for
    REWRITE; `size` (bytes) for LONG_LENGTH, HUGE_BODY and GZIP_BOMB; `every`: break only every
    Nth request the rule selects (counted before `probability` and `times` apply).
    """

    mode: Mode
    path: str = ""
    method: str | None = None
    times: int | None = None
    probability: float = 1.0
    only_status: frozenset[int] | None = None
    status: int = 503
    retry_after: int | str = 3600  # delay-seconds, or a string sent as is (an HTTP-date)
    chunk: int = 1
    interval_s: float = 0.3
    rewrite: Callable[[bytes], bytes] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    size: int = 100_000_000
    every: int | None = None
    _regex: re.Pattern[str] = field(init=False, repr=False)
    _seen: int = field(default=0, init=False, repr=False)

    def __post_init__(self) -> None:
        self._regex = re.compile(self.path)

    def matches(self, method: str, target: str) -> bool:
        """True for `method` and a request target (path and query, raw) this rule selects."""
        if self.method is not None and self.method.upper() != method:
            return False
        return bool(self._regex.search(target) or self._regex.search(unquote(target)))


@dataclass(frozen=True)
class ProxyRecord:
    """One request the proxy answered: method, raw path, the status sent (0: none, reset or cut),
    the fault mode applied (None: passed through unchanged)."""

    method: str
    path: str
    status: int
    fault: Mode | None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "tracker-fault-proxy/1"
    timeout = 60
    disable_nagle_algorithm = True
    server: LoopbackServer[FaultProxy]

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._proxy()

    def do_HEAD(self) -> None:
        self._proxy()

    def do_POST(self) -> None:
        self._proxy()

    def _proxy(self) -> None:
        proxy = self.server.owner
        raw_path = urlsplit(self.path).path
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(min(length, _MAX_REQUEST_BODY)) if length else b""
        fault = proxy._pick(self.command, self.path, None)
        if fault is not None and fault.mode is Mode.RESET:
            proxy._record(self.command, raw_path, 0, fault.mode)
            self._reset()
            return
        if fault is not None and fault.mode in (Mode.STATUS, Mode.RATE_LIMIT):
            status = 429 if fault.mode is Mode.RATE_LIMIT else fault.status
            canned = {"Content-Type": "application/json", **fault.headers}
            if fault.mode is Mode.RATE_LIMIT:
                canned["Retry-After"] = str(fault.retry_after)
            payload = b'{"error":"injected by the fault proxy"}'
            proxy._record(self.command, raw_path, status, fault.mode)
            self._answer(status, canned, payload)
            return
        try:
            status, reason, headers, data = proxy._forward(
                self.command, self.path, self.headers, body
            )
        except OSError as exc:
            proxy._record(self.command, raw_path, 502, None)
            self._answer(502, {"Content-Type": "text/plain"}, f"upstream: {exc}".encode())
            return
        if fault is None:
            fault = proxy._pick(self.command, self.path, status)
        if fault is None or self.command == "HEAD":
            proxy._record(self.command, raw_path, status, None)
            self._answer(status, headers, data, reason)
            return
        proxy._record(self.command, raw_path, status, fault.mode)
        self._broken(fault, status, reason, headers, data)

    def _broken(
        self, fault: Fault, status: int, reason: str, headers: list[tuple[str, str]], data: bytes
    ) -> None:
        proxy = self.server.owner
        mode = fault.mode
        if mode is Mode.SHORT_BODY:
            cut = proxy._cut(len(data))
            self._answer(status, headers, data[:cut], reason, declared=len(data))
            self.close_connection = True
        elif mode is Mode.LYING_LENGTH:
            self._answer(status, headers, data[: proxy._cut(len(data))], reason)
        elif mode is Mode.CORRUPT:
            self._answer(status, headers, proxy._corrupt(data), reason)
        elif mode is Mode.MALFORMED_JSON:
            self._answer(status, headers, data[: len(data) // 2], reason)
        elif mode is Mode.REWRITE:
            assert fault.rewrite is not None, "a REWRITE fault needs its rewrite function"
            self._answer(status, headers, fault.rewrite(data), reason)
        elif mode is Mode.TRICKLE:
            self._answer(status, headers, data, reason, trickle=(fault.chunk, fault.interval_s))
        elif mode is Mode.LONG_LENGTH:
            self._answer(status, headers, data, reason, declared=max(fault.size, len(data) + 1))
            self.close_connection = True
        elif mode is Mode.HUGE_BODY:
            self._huge(status, reason, headers, data, max(fault.size, len(data)))
        elif mode is Mode.GZIP_BOMB:
            bomb = [(k, v) for k, v in headers if k.lower() != "content-encoding"]
            bomb.append(("Content-Encoding", "gzip"))
            self._answer(status, bomb, _gzip_zeros(fault.size), reason)
        else:  # pragma: no cover - RESET/STATUS/RATE_LIMIT are answered before forwarding
            raise AssertionError(mode)

    def _answer(
        self,
        status: int,
        headers: dict[str, str] | list[tuple[str, str]],
        data: bytes,
        reason: str | None = None,
        *,
        declared: int | None = None,
        trickle: tuple[int, float] | None = None,
    ) -> None:
        items = headers.items() if isinstance(headers, dict) else headers
        self.send_response_only(status, reason)
        for name, value in items:
            if name.lower() not in _HOP_BY_HOP:
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(data) if declared is None else declared))
        self.end_headers()
        if self.command == "HEAD":
            return
        try:
            if trickle is None:
                self.wfile.write(data)
                return
            step, interval = trickle
            for i in range(0, len(data), max(1, step)):
                self.wfile.write(data[i : i + step])
                self.wfile.flush()
                if self.server.owner._stopping.wait(interval):
                    break
        except OSError:
            self.close_connection = True

    def _huge(
        self, status: int, reason: str, headers: list[tuple[str, str]], data: bytes, size: int
    ) -> None:
        """`data`, then filler up to `size` bytes, streamed under a matching Content-Length."""
        self.send_response_only(status, reason)
        for name, value in headers:
            if name.lower() not in _HOP_BY_HOP:
                self.send_header(name, value)
        self.send_header("Content-Length", str(size))
        self.end_headers()
        self.close_connection = True
        filler = b"\n" * (1 << 20)
        try:
            self.wfile.write(data)
            left = size - len(data)
            while left > 0:
                self.wfile.write(filler[: min(left, len(filler))])
                left -= len(filler)
        except OSError:
            pass

    def _reset(self) -> None:
        """Close the client socket with RST (SO_LINGER 0), never answering."""
        with contextlib.suppress(OSError):
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.close()


class FaultProxy(BackgroundServer):
    """A fault-injecting proxy to `upstream` on http://host:port (0: a free port); see the module
    docstring. Thread-safe; a context manager (or `.start()` / `.stop()`)."""

    handler = _Handler
    name = "fault-proxy"
    not_running = "the fault proxy is not running"

    def __init__(
        self, upstream: str, *, seed: int = 0, host: str = "127.0.0.1", port: int = 0
    ) -> None:
        parts = urlsplit(upstream)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"upstream must be an http:// URL, got {upstream!r}")
        self.upstream_host = parts.hostname
        self.upstream_port = parts.port or 80
        super().__init__(host, port)
        self.seed = seed
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._faults: list[Fault] = []
        self._records: list[ProxyRecord] = []
        self._stopping = threading.Event()

    def start(self) -> Self:
        self._stopping.clear()
        return super().start()

    def _stopping_now(self) -> None:
        self._stopping.set()  # trickling answers stop waiting

    # -- faults -----------------------------------------------------------------------------

    def add(self, fault: Fault) -> None:
        """Start breaking answers with `fault` (rules are tried in the order added)."""
        with self._lock:
            self._faults.append(fault)

    def clear(self) -> None:
        """Stop every fault: from now on answers pass through unchanged."""
        with self._lock:
            self._faults.clear()

    @property
    def records(self) -> list[ProxyRecord]:
        """Every request answered so far, oldest first."""
        with self._lock:
            return list(self._records)

    def applied(self) -> Counter[Mode]:
        """How many answers each mode broke so far."""
        with self._lock:
            return Counter(r.fault for r in self._records if r.fault is not None)

    # -- internals --------------------------------------------------------------------------

    def _pick(self, method: str, path: str, status: int | None) -> Fault | None:
        """The fault to apply: before forwarding (`status` None) only the modes that never ask
        upstream; after, the others, filtered by `only_status`."""
        early = (Mode.RESET, Mode.STATUS, Mode.RATE_LIMIT)
        with self._lock:
            for fault in self._faults:
                if (fault.mode in early) != (status is None):
                    continue
                if status is not None and fault.only_status and status not in fault.only_status:
                    continue
                if not fault.matches(method, path):
                    continue
                if fault.every is not None:
                    fault._seen += 1
                    if fault._seen % fault.every:
                        continue
                if fault.probability < 1.0 and self._rng.random() >= fault.probability:
                    continue
                if fault.times is not None:
                    fault.times -= 1
                    if fault.times <= 0:
                        self._faults.remove(fault)
                return fault
        return None

    def _record(self, method: str, path: str, status: int, mode: Mode | None) -> None:
        with self._lock:
            self._records.append(ProxyRecord(method, path, status, mode))

    def _cut(self, n: int) -> int:
        with self._lock:
            return self._rng.randrange(0, n) if n > 0 else 0

    def _corrupt(self, data: bytes) -> bytes:
        if not data:
            return data
        with self._lock:
            width = self._rng.randint(1, min(16, len(data)))
            start = self._rng.randrange(0, len(data) - width + 1)
            noise = bytes(self._rng.randrange(256) for _ in range(width))
        if noise == data[start : start + width]:  # vanishingly rare, but never a silent no-op
            noise = bytes(b ^ 0xFF for b in noise)
        return data[:start] + noise + data[start + width :]

    def _forward(
        self, method: str, target: str, headers: Any, body: bytes
    ) -> tuple[int, str, list[tuple[str, str]], bytes]:
        conn = http.client.HTTPConnection(self.upstream_host, self.upstream_port, timeout=60)
        try:
            out = {k: v for k, v in headers.items() if k.lower() not in _HOP_BY_HOP}
            out["Connection"] = "close"
            if body:
                out["Content-Length"] = str(len(body))
            conn.request(method, target, body=body or None, headers=out)
            resp = conn.getresponse()
            data = resp.read()
            return resp.status, resp.reason, list(resp.getheaders()), data
        finally:
            conn.close()


@functools.cache
def _gzip_zeros(size: int) -> bytes:
    """A gzip stream that decodes to `size` zero bytes (built once per size)."""
    return gzip.compress(bytes(size), compresslevel=9, mtime=0)


__all__ = ["Fault", "FaultProxy", "Mode", "ProxyRecord"]
