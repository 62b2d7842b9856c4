"""The Hub replica's HTTP layer: a threaded HTTP/1.1 server with request recording and fault injection.

`Replica(root)` serves the git repositories under `root` the way huggingface.co serves model repos,
so the unmodified `huggingface_hub` client (HfApi(endpoint=hub.url) or HF_ENDPOINT) works against it.
"""

from __future__ import annotations

import math
import os
import re
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, Self
from urllib.parse import parse_qs, unquote, urlsplit

from tracker.replica.gitread import GitReadError, GitRepo
from tracker.replica.httpserver import BackgroundServer, LoopbackServer
from tracker.replica.responses import HubError, Request, Response
from tracker.replica.routes import Routes
from tracker.replica.webhooks import HubWebhook, RefWatcher, Sent

_MAX_BODY = 16 * 1024 * 1024
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_IDLE_TIMEOUT_S = 60


@dataclass(frozen=True)
class RequestRecord:
    """One request the replica answered: raw path and query (percent-encoded), status, the body
    length it sent (0 for HEAD), the `Range` header (None when absent) and when it arrived (Unix
    time: rate windows are counted on it)."""

    method: str
    path: str
    query: str
    status: int
    bytes_sent: int
    range: str | None
    at: float = 0.0


BUCKETS = ("api", "resolvers", "pages")


def rate_bucket(path: str) -> str:
    """The Hub's rate-limit bucket of a request path: `api` (/api/…), `resolvers` (file URLs,
    /resolve/), `pages` (the rest); hub-docs rate-limits.md."""
    if path.startswith("/api/"):
        return "api"
    if "/resolve/" in path:
        return "resolvers"
    return "pages"


@dataclass(frozen=True)
class _Limit:
    """Where one request left its bucket: its quota, what remains, seconds to the reset."""

    bucket: str
    quota: int
    window_s: int
    used: int  # requests of the window so far, this one included
    reset_s: int

    @property
    def over(self) -> bool:
        return self.used > self.quota

    def headers(self) -> dict[str, str]:
        """The Hub's headers (HUB-PROTOCOL.md §10), sent on every answer of a limited bucket."""
        return {
            "RateLimit": f'"{self.bucket}";r={max(0, self.quota - self.used)};t={self.reset_s}',
            "RateLimit-Policy": f'"fixed window";"{self.bucket}";q={self.quota};w={self.window_s}',
        }


@dataclass
class _Fault:
    pattern: re.Pattern[str]
    status: int
    body: bytes
    headers: dict[str, str]
    times: int
    method: str | None
    delay_s: float
    disconnect: bool

    def matches(self, method: str, path: str) -> bool:
        if self.method is not None and self.method.upper() != method:
            return False
        return bool(self.pattern.search(path) or self.pattern.search(unquote(path)))


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "tracker-hub-replica/1"
    timeout = _IDLE_TIMEOUT_S
    disable_nagle_algorithm = True  # headers and body go out in separate writes
    server: LoopbackServer[Replica]

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._serve()

    def do_HEAD(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def _serve(self) -> None:
        replica = self.server.owner
        arrived = time.time()
        split = urlsplit(self.path)
        raw_path, raw_query = split.path, split.query
        range_header = self.headers.get("Range")
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if not 0 <= length <= _MAX_BODY:
            status = 413 if length > _MAX_BODY else 400
            replica._record(self.command, raw_path, raw_query, status, 0, range_header, arrived)
            self.close_connection = True
            self._send(HubError(status, "Bad or oversized request body").response())
            return
        body = self.rfile.read(length) if length else b""
        if replica.latency_s > 0:  # the Hub's round trip; handler threads wait side by side
            time.sleep(replica.latency_s)
        fault = replica._take_fault(self.command, raw_path)
        limit = replica._count(raw_path, arrived) if fault is None else None
        if limit is not None and limit.over:
            response = HubError(
                429,
                f"You have reached your '{limit.bucket}' rate limit ({limit.quota} requests per "
                f"{limit.window_s} s window); retry after {limit.reset_s} seconds",
                headers=limit.headers(),
            ).response()
            replica._record(
                self.command, raw_path, raw_query, 429, response.content_length, range_header,
                arrived,
            )  # fmt: skip
            self._send(response)
            return
        if fault is not None:
            if fault.delay_s:
                time.sleep(fault.delay_s)
            if fault.disconnect:
                self.close_connection = True
                replica._record(self.command, raw_path, raw_query, 0, 0, range_header, arrived)
                return
            headers = dict(fault.headers)
            response = Response(fault.status, headers, fault.body)
            if any(k.lower() == "content-length" for k in headers):
                self.close_connection = True
            sent = 0 if self.command == "HEAD" else len(fault.body)
            replica._record(
                self.command, raw_path, raw_query, fault.status, sent, range_header, arrived
            )
            self._send(response)
            return
        host = self.headers.get("Host") or f"{replica.host}:{replica.port}"
        request = Request(
            method=self.command,
            path=raw_path,
            query=parse_qs(raw_query, keep_blank_values=True),
            headers={k.lower(): v for k, v in self.headers.items()},
            body=body,
            base_url=f"http://{host}",
        )
        try:
            response = replica._routes.handle(request)
        except (
            Exception
        ) as exc:  # the HTTP edge: a bug or a broken repo is a 500, not a dropped socket
            response = HubError(500, f"replica error: {type(exc).__name__}: {exc}").response()
        if limit is not None:
            response.headers.update(limit.headers())
        # Recorded before the first byte goes out, so a client that got its answer sees the record.
        sent = 0 if self.command == "HEAD" else response.content_length
        replica._record(
            self.command, raw_path, raw_query, response.status, sent, range_header, arrived
        )
        self._send(response)

    def _send(self, response: Response) -> int:
        """Write `response`; return the body bytes written (HEAD writes none)."""
        self.send_response(response.status)
        headers = dict(response.headers)
        if not any(k.lower() == "content-length" for k in headers):
            headers["Content-Length"] = str(response.content_length)
        for name, value in headers.items():
            # No header injection through file names or revisions; latin-1 is all HTTP/1.1 carries.
            safe = _CONTROL.sub(" ", value).encode("latin-1", "replace").decode("latin-1")
            self.send_header(name, safe)
        self.end_headers()
        sent = 0
        if self.command == "HEAD":
            return 0
        try:
            chunks = [response.body] if isinstance(response.body, bytes) else response.body
            for chunk in chunks:
                self.wfile.write(chunk)
                sent += len(chunk)
        except (OSError, GitReadError):
            self.close_connection = True
        return sent


class Replica(BackgroundServer):
    """A Hub replica over the git repositories under `root`, served on http://host:port (0 = free port).

    Use as a context manager (or `.start()` / `.stop()`). Thread-safe: `requests` is a snapshot list
    of RequestRecord in arrival order; faults are consumed in injection order. `latency_s`: every
    answer waits that long first (a model of the real Hub's round trip; settable while serving).
    `rate_limits` (bucket → requests per `rate_window_s`): the Hub's rate limits and their
    headers (`set_rate_limits`).
    """

    handler = _Handler
    name = "hub-replica"
    not_running = "the replica is not running; use `with Replica(root) as hub:`"

    def __init__(
        self,
        root: Path,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        webhooks: Sequence[HubWebhook] = (),
        latency_s: float = 0.0,
        rate_limits: Mapping[str, int] | None = None,
        rate_window_s: int = 300,
    ) -> None:
        super().__init__(host, port)
        self.latency_s = latency_s
        self._quotas: dict[str, int] = {}
        self._window_s = 300
        self._used: dict[tuple[str, int], int] = {}
        self.root = Path(root)
        self.webhooks = tuple(webhooks)
        self._watcher: RefWatcher | None = None
        self._sent_before: list[Sent] = []
        self._lock = threading.Lock()
        self._records: list[RequestRecord] = []
        self._faults: list[_Fault] = []
        self._repos: dict[Path, GitRepo] = {}
        self._routes = Routes(self.root, self._repo_for, os.urandom(32))
        self.set_rate_limits(rate_limits or {}, rate_window_s)

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> Self:
        """Serve in the background; with `webhooks`, also watch the repos' refs and send the Hub's
        `repo.content` webhook for every change (`tracker.replica.webhooks`)."""
        super().start()
        if self.webhooks and self._watcher is None:
            self._watcher = RefWatcher(self.root, self.webhooks, base_url=self.url)
            self._watcher.start()
        return self

    def _stopping_now(self) -> None:
        watcher, self._watcher = self._watcher, None
        if watcher is not None:
            watcher.stop()
            self._sent_before += watcher.sent

    @property
    def webhooks_sent(self) -> list[Sent]:
        """Every webhook sent so far (empty without `webhooks`)."""
        return self._sent_before + (self._watcher.sent if self._watcher is not None else [])

    def serve_forever(self) -> None:
        """Serve in the calling thread until interrupted (the CLI's `replica serve`)."""
        self.start()
        try:
            while self._thread is not None and self._thread.is_alive():
                self._thread.join(timeout=0.5)
        finally:
            self.stop()

    # -- recording and faults ---------------------------------------------------------------

    @property
    def requests(self) -> list[RequestRecord]:
        """A copy of every request answered so far, oldest first."""
        with self._lock:
            return list(self._records)

    def reset_requests(self) -> None:
        """Forget the recorded requests."""
        with self._lock:
            self._records.clear()

    def inject_fault(
        self,
        path_regex: str,
        status: int = 500,
        body: bytes = b"",
        headers: dict[str, str] | None = None,
        times: int = 1,
        method: str | None = None,
        *,
        delay_s: float = 0.0,
        disconnect: bool = False,
    ) -> None:
        """Answer the next `times` requests whose path matches `path_regex` with a canned response.

        The regex is searched in the raw path and in its percent-decoded form (not the query).
        `method` limits it to one HTTP method. `headers` may set Content-Length larger than `body`
        to simulate truncation (the connection is then closed). `delay_s` sleeps before answering;
        `disconnect` closes the connection without any response.
        """
        if times < 1:
            raise ValueError("times must be >= 1")
        fault = _Fault(
            re.compile(path_regex),
            status,
            body,
            dict(headers or {}),
            times,
            method,
            delay_s,
            disconnect,
        )
        with self._lock:
            self._faults.append(fault)

    def set_rate_limits(self, quotas: Mapping[str, int], window_s: int = 300) -> None:
        """Limit the buckets of `quotas` to that many requests per fixed window of `window_s`
        seconds (windows start at multiples of it in Unix time; the Hub's are 5 minutes). Every
        answer of a limited bucket carries `RateLimit: "<bucket>";r=<remaining>;t=<seconds to
        the reset>` and `RateLimit-Policy: "fixed window";"<bucket>";q=<quota>;w=<window>`; a
        request over the quota is answered 429 with the same headers (the Hub sends no
        `Retry-After`). Requests of every client count (one account). Empty: no limits."""
        unknown = set(quotas) - set(BUCKETS)
        if unknown or any(q < 1 for q in quotas.values()) or window_s < 1:
            raise ValueError(f"rate limits: buckets {BUCKETS}, quotas and window >= 1")
        with self._lock:
            self._quotas, self._window_s = dict(quotas), int(window_s)
            self._used.clear()

    def _count(self, path: str, at: float) -> _Limit | None:
        """Count a request in its bucket's window (None: the bucket is not limited)."""
        bucket = rate_bucket(path)
        with self._lock:
            quota = self._quotas.get(bucket)
            if quota is None:
                return None
            window = self._window_s
            n = math.floor(at / window)
            key = (bucket, n)
            used = self._used[key] = self._used.get(key, 0) + 1
            for old in [k for k in self._used if k[1] < n - 1]:
                del self._used[old]
        reset = max(1, math.ceil((n + 1) * window - at))
        return _Limit(bucket, quota, window, used, reset)

    def _take_fault(self, method: str, path: str) -> _Fault | None:
        with self._lock:
            for fault in self._faults:
                if fault.matches(method, path):
                    fault.times -= 1
                    if fault.times <= 0:
                        self._faults.remove(fault)
                    return fault
        return None

    def _record(
        self,
        method: str,
        path: str,
        query: str,
        status: int,
        sent: int,
        range_: str | None,
        at: float,
    ) -> None:
        with self._lock:
            self._records.append(RequestRecord(method, path, query, status, sent, range_, at))

    def _repo_for(self, path: Path) -> GitRepo:
        with self._lock:
            repo = self._repos.get(path)
            if repo is None:
                repo = self._repos[path] = GitRepo(path)
            return repo
