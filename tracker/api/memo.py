"""Rendered answers kept until the store changes: the read routes that render from many rows (the
advisory list, the feeds) answer a repeated request with the bytes they made last time, as long
as the store's generation (`tracker.store.generation`) is the one they were made at.

Keyed by the route and its full query (cursor included); bounded (least recently used out). The
bytes are the same ones a fresh render would make, so ETags, 304s and `Cache-Control` are
unchanged. Access checks run before (route dependencies), so a kept answer is never served to a
request that may not read.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, TypeVar, cast

from fastapi import Request

from tracker.store.generation import StoreGeneration

SIZE = 256
T = TypeVar("T")


class Memo:
    """At most `size` rendered answers (immutable values: bytes, tuples of them), each with the
    generation it was made at."""

    def __init__(self, generation: StoreGeneration, size: int = SIZE) -> None:
        self.generation = generation
        self.size = size
        self._items: OrderedDict[Hashable, tuple[str, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def get_or_make(self, key: Hashable, make: Callable[[], T]) -> T:
        """The bytes kept for `key` if the store has not changed since, else `make()`'s (kept).
        The generation is read before `make` runs: a change during it is seen next time."""
        now = self.generation.current()
        with self._lock:
            kept = self._items.get(key)
            if kept is not None and kept[0] == now:
                self._items.move_to_end(key)
                return cast(T, kept[1])
        body = make()
        with self._lock:
            self._items[key] = (now, body)
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)
        return body


def memo_of(request: Request) -> Memo:
    """The app's Memo (made on first use, over the App's store)."""
    state = request.app.state
    memo: Memo | None = getattr(state, "memo", None)
    if memo is None:
        memo = Memo(StoreGeneration(state.app.store.engine))
        state.memo = memo
    return memo


def request_key(request: Request) -> tuple[str, str]:
    """The route's path and its query, as the key of its answer."""
    return (request.url.path, str(request.query_params))
