"""`Last-Modified` of kept answers made from the store's state (`tracker.api.memo.Seen`): the
second this memo first saw each state of the store and the watchlist, never before the last
one's; a second two states share is answered in full to `If-Modified-Since` naming it."""

from __future__ import annotations

from datetime import UTC, datetime
from email.utils import format_datetime
from pathlib import Path
from types import SimpleNamespace

from starlette.requests import Request

from tracker.api.caching import keep
from tracker.api.memo import Memo
from tracker.store.generation import StoreGeneration

T = 1_796_000_000.0  # 2026-11-29 (any whole second)


class Generations(StoreGeneration):
    """A store generation set by the test (`value`), read without a store."""

    def __init__(self) -> None:
        self.value = "advisories=1,revisions=1"

    @property
    def local(self) -> bool:
        return True

    def current(self) -> str:
        return self.value


def _at(t: float) -> datetime:
    return datetime.fromtimestamp(t, UTC)


def _http(t: float) -> str:
    return format_datetime(_at(t), usegmt=True)


def test_each_state_is_dated_by_the_second_it_was_first_seen(tmp_path: Path) -> None:
    gen = Generations()
    watchlist = tmp_path / "watchlist.yaml"
    watchlist.write_text("repos: []\n")
    clock = [T + 0.25]
    memo = Memo(gen, watchlist=watchlist, clock=lambda: clock[0])
    first = memo.observe()
    assert (first.second, first.shared, first.serial) == (_at(T), False, 0)
    clock[0] = T + 5.5  # the same state later: the same Seen (its first second)
    assert memo.observe() is first
    gen.value = "advisories=2,revisions=1"
    second = memo.observe()
    assert (second.second, second.shared, second.serial) == (_at(T + 5), False, 1)
    clock[0] = T + 5.75  # another change within that second: it shares it
    gen.value = "advisories=3,revisions=1"
    third = memo.observe()
    assert (third.second, third.shared, third.serial) == (_at(T + 5), True, 2)
    clock[0] = T + 4.0  # the clock stepped back: still never before the last state's second
    watchlist.write_text("repos:\n  - id: acme/x\n")
    fourth = memo.observe()
    assert (fourth.second, fourth.shared, fourth.serial) == (_at(T + 5), True, 3)
    # a state seen again after another is a new state (its kept answers are made again)
    assert len({s.stamp for s in (first, second, third, fourth)}) == 4


def test_a_made_answer_carries_the_state_it_was_made_from(tmp_path: Path) -> None:
    gen = Generations()
    clock = [T + 0.5]
    memo = Memo(gen, clock=lambda: clock[0])
    seen: list[object] = []
    memo.get_or_make("k", lambda: seen.append(memo.made_at()) or b"x")
    assert seen == [memo.observe()]
    assert memo.made_at() is None  # outside a make


def _request() -> Request:
    app = SimpleNamespace(state=SimpleNamespace())  # no App: reads need no token
    return Request({"type": "http", "method": "GET", "path": "/", "headers": [], "app": app})


def test_if_modified_since_is_a_304_unless_the_second_is_shared() -> None:
    body = b"<p>page</p>"
    alone = keep(_request(), body, "text/html", "public, no-cache", last_modified=_at(T + 5))
    shared = keep(
        _request(), body, "text/html", "public, no-cache",
        last_modified=_at(T + 5), modified_shared=True,
    )  # fmt: skip
    assert dict((k.decode(), v.decode()) for k, v in alone.ok_headers)["last-modified"] == (
        _http(T + 5)
    )
    cases = {T + 4: 200, T + 5: 304, T + 6: 304}
    assert {t: alone.answer(None, None, _http(t))[0] for t in cases} == cases
    assert {t: shared.answer(None, None, _http(t))[0] for t in cases} == {
        T + 4: 200, T + 5: 200, T + 6: 304,
    }  # fmt: skip
    # If-None-Match decides when both are sent; a malformed date is ignored
    assert alone.answer('"other"', None, _http(T + 6))[0] == 200
    assert alone.answer(None, None, "yesterday")[0] == 200
