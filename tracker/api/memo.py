"""Rendered answers kept until the store changes: the read routes that render from many rows (the
advisory list, the feeds, the diff) and the pages (`tracker.web.mount`) keep the whole answer they
made (`tracker.api.caching.Kept`: body, ETag, the headers of its 200 and 304 forms) and serve it
again as long as the store's generation (`tracker.store.generation`) and the watchlist file are
the ones it was made at.

Keyed by the request: scheme, `Host`, root path, path and the raw query (cursor, `?rev=`
included), so anything an answer is built from (absolute links, the next page's `Link`) is in
its key; bounded by entries and by bytes (`api_memo_bytes`, least recently used out; an answer
over an eighth of it is not kept); one render per key at a time (the others wait for it).

The generation moves only when what these answers are made from is committed (advisories;
revisions, their files, analysis and estimates; the ref's cursor; a repo's poll outcome): a
no-change poll keeps them. The bytes are the ones a fresh render makes, so ETags, 304s and
`Cache-Control` are unchanged.

`MemoHits`, an ASGI middleware in front of the routes, answers a `GET` whose kept answer is still
current without entering FastAPI's routing, validation or thread pool: for a request something
is kept for (no other request reads anything here; a store that cannot be read leaves the
answer to the route, a 503 problem), it checks the generation (SQLite: one `PRAGMA
data_version` on the event loop, microseconds, and the domain counters when it moved;
PostgreSQL: the current snapshot, a query run in the thread pool), then the read token exactly
as the route does (the kept answer's own rule, `Kept.access`: the API's
`tracker.api.auth.read_allowed`, or the pages' `tracker.web.access.allowed`, which also takes the
cookie; a request that may not read goes on to the route, which answers the 401), then
`If-None-Match`. Everything else (a miss, a stale answer, another method) goes on to the route,
which renders and keeps its answer.
"""

from __future__ import annotations

import os
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar, cast

import anyio.to_thread
from fastapi import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from tracker.api.auth import read_allowed
from tracker.api.caching import Kept
from tracker.store.generation import StoreGeneration

SIZE = 256
MAX_BYTES = 64 * 1024 * 1024
T = TypeVar("T")
Files = tuple[int, int, int] | None
Stamp = tuple[str, Files, int]


@dataclass(frozen=True)
class Seen:
    """When this server first saw the store and watchlist as a kept answer was made from them:
    the whole `second` (UTC) it read them in, which the pages send as `Last-Modified`, and
    whether that second is `shared` with the state seen before it (two states seen within one
    second: `If-Modified-Since` naming that second cannot tell them apart, so it is not a 304).
    `serial` counts the states seen, so a watchlist put back as it was is a new state."""

    read: tuple[str, Files]
    second: datetime
    shared: bool
    serial: int

    @property
    def stamp(self) -> Stamp:
        return (*self.read, self.serial)


def _size(value: Any) -> int:
    """The bytes a kept value holds (a `Kept` answer's body and headers, or bytes)."""
    if isinstance(value, Kept):
        forms = [value.identity] + ([value.gzip] if value.gzip is not None else [])
        return sum(
            len(f.body) + sum(len(k) + len(v) for k, v in f.ok_headers + f.not_modified_headers)
            for f in forms
        )
    if isinstance(value, bytes):
        return len(value)
    return 0


class Memo:
    """At most `size` rendered answers and at most `max_bytes` bytes of them (least recently
    used out; an answer over an eighth of `max_bytes` is never kept), each with the stamp it was
    made at: the store's generation and the watchlist file's (mtime, size, inode), since feeds
    classify fit moves by the watchlist's overrides, numbered in the order this memo saw them
    (`Seen`: the second each was first seen in is the pages' `Last-Modified`, `made_at`).

    Single flight: while one request renders a key, the others asking for it wait for that
    render instead of each making their own (after a change, N concurrent requests make one
    render, not N)."""

    def __init__(
        self,
        generation: StoreGeneration,
        size: int = SIZE,
        watchlist: Path | None = None,
        max_bytes: int = MAX_BYTES,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.generation = generation
        self.clock = clock
        self.size = size
        self.max_bytes = max_bytes
        self.watchlist = watchlist
        self.renders = 0  # how many times `make` ran
        self.renders_by: Counter[str] = Counter()  # ... by the label `get_or_make` was given
        self._bytes = 0
        self._items: OrderedDict[Hashable, tuple[Stamp, Any, int]] = OrderedDict()
        self._lock = threading.Lock()
        self._flights: dict[Hashable, tuple[threading.Lock, list[int]]] = {}
        self._seen: Seen | None = None
        self._making = threading.local()

    @property
    def blocking(self) -> bool:
        """Whether `stamp()` waits on the network (PostgreSQL): then not on the event loop."""
        return not self.generation.local

    @property
    def kept_bytes(self) -> int:
        return self._bytes

    def stamp(self) -> Stamp:
        """What the kept answers depend on, now."""
        return self.observe().stamp

    def observe(self) -> Seen:
        """The store's generation and the watchlist file now, with when this memo first saw
        them so: the clock is read before them, and a state unlike the one seen last is a new
        `Seen` whose second is never before the last one's (`shared` when equal)."""
        started = self.clock()
        files: Files = None
        if self.watchlist is not None:
            try:
                st = os.stat(self.watchlist)
                files = (st.st_mtime_ns, st.st_size, st.st_ino)
            except OSError:
                files = None
        read = (self.generation.current(), files)
        with self._lock:
            last = self._seen
            if last is not None and last.read == read:
                return last
            second = datetime.fromtimestamp(int(started), UTC)
            shared = last is not None and second <= last.second
            if last is not None and shared:
                second = last.second
            seen = Seen(read, second, shared, last.serial + 1 if last is not None else 0)
            self._seen = seen
            return seen

    def made_at(self) -> Seen | None:
        """The `Seen` the answer this thread is making now (`get_or_make`'s `make`) is made
        from; None outside a `make`."""
        seen: Seen | None = getattr(self._making, "seen", None)
        return seen

    def holds(self, key: Hashable) -> bool:
        """Whether anything is kept for `key` (current or not)."""
        return key in self._items

    def peek(self, key: Hashable, now: Stamp) -> Any | None:
        """The value kept for `key` if it was made at `now`, else None."""
        with self._lock:
            kept = self._items.get(key)
            if kept is None or kept[0] != now:
                return None
            self._items.move_to_end(key)
            return kept[1]

    def _put(self, key: Hashable, now: Stamp, value: Any) -> None:
        size = _size(value)
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._bytes -= old[2]
            if size > self.max_bytes // 8:
                return  # a huge answer is rendered each time rather than pinned here
            self._items[key] = (now, value, size)
            self._bytes += size
            while len(self._items) > self.size or self._bytes > self.max_bytes:
                _, (_, _, gone) = self._items.popitem(last=False)
                self._bytes -= gone

    def get_or_make(self, key: Hashable, make: Callable[[], T], label: str = "") -> T:
        """The value kept for `key` if nothing changed since, else `make()`'s (kept). The stamp
        is read before `make` runs: a change during it is seen next time. One `make` per key at
        a time: a request that finds one running waits for it and takes its value if still
        current. An exception from `make` keeps nothing and reaches the caller. Each `make`
        that returns is counted in `renders` and under `label` in `renders_by`."""
        kept = self.peek(key, self.stamp())
        if kept is not None:
            return cast(T, kept)
        with self._lock:
            flight = self._flights.get(key)
            if flight is None:
                flight = self._flights[key] = (threading.Lock(), [0])
            flight[1][0] += 1
        try:
            with flight[0]:
                seen = self.observe()
                now = seen.stamp
                kept = self.peek(key, now)
                if kept is not None:
                    return cast(T, kept)
                self._making.seen = seen
                try:
                    value = make()
                finally:
                    self._making.seen = None
                with self._lock:
                    self.renders += 1
                    self.renders_by[label] += 1
                self._put(key, now, value)
                return value
        finally:
            with self._lock:
                flight[1][0] -= 1
                if flight[1][0] == 0:
                    del self._flights[key]


def memo_of(request: Request) -> Memo:
    """The app's Memo (made on first use, over the App's store and watchlist)."""
    state = request.app.state
    memo: Memo | None = getattr(state, "memo", None)
    if memo is None:
        app = state.app
        memo = Memo(
            StoreGeneration(app.store.engine),
            watchlist=Path(app.settings.watchlist),
            max_bytes=app.settings.api_memo_bytes,
        )
        state.memo = memo
    return memo


def key_of(scope: Scope) -> tuple[Any, ...]:
    """The key of a request's answer: scheme, Host (or the server address), root path, path and
    the raw query string."""
    host = next((v for k, v in scope.get("headers") or () if k == b"host"), None)
    return (
        scope.get("scheme"),
        host if host is not None else scope.get("server"),
        scope.get("root_path", ""),
        scope["path"],
        scope.get("query_string", b""),
    )


def request_key(request: Request) -> tuple[Any, ...]:
    """`key_of` the request."""
    return key_of(request.scope)


def route_label(request: Request) -> str:
    """The path template of the route answering `request` (the metrics' `route` label)."""
    return str(getattr(request.scope.get("route"), "path", None) or request.url.path)


def kept_response(request: Request, render: Callable[[], Kept]) -> Response:
    """The answer kept for `request` (`key_of`) while current, else `render()`'s, kept; with
    `If-None-Match` honoured."""
    memo = memo_of(request)
    return memo.get_or_make(request_key(request), render, route_label(request)).response(request)


class MemoHits:
    """ASGI middleware: serve a kept, current answer to a `GET` that may read (module docstring)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "GET":
            app = scope.get("app")
            memo: Memo | None = getattr(getattr(app, "state", None), "memo", None)
            key = key_of(scope)
            if memo is not None and memo.holds(key):  # else nothing is read: /healthz stays free
                try:
                    stamp = memo.stamp
                    now = await anyio.to_thread.run_sync(stamp) if memo.blocking else stamp()
                except Exception:  # the store cannot say: the route answers (a 503 problem)
                    now = None
                kept = memo.peek(key, now) if now is not None else None
                if isinstance(kept, Kept):
                    request = Request(scope)
                    if (kept.access or read_allowed)(request):
                        h = request.headers
                        status, headers, body = kept.answer(
                            h.get("if-none-match"),
                            h.get("accept-encoding"),
                            h.get("if-modified-since"),
                        )
                        if kept.route is not None:
                            scope["route"] = kept.route  # the metrics label the hit with it
                        await send(
                            {"type": "http.response.start", "status": status, "headers": headers}
                        )
                        await send({"type": "http.response.body", "body": body})
                        return
        await self.app(scope, receive, send)


__all__ = [
    "Memo",
    "MemoHits",
    "Seen",
    "kept_response",
    "key_of",
    "memo_of",
    "request_key",
    "route_label",
]
