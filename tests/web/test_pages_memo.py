"""Pages kept until the store changes (`tracker.web.mount` over `tracker.api.memo`), as a reader
meets them: the installed `tracker serve` (a process, with a read token) over a store polled
in-process from the Hub replica, which holds the demo's Mixtral history up to its 4th commit
(which removes `sliding_window`: x_TRACKER-2026-4, high, open).

What the server rendered and read is its own `/metrics`: `tracker_http_renders_total` (answers
made to keep, by route) and `tracker_store_statements_total` (SQL statements it ran on the store,
not counting the scrape's own). A page asked again after a no-change poll, and a conditional GET
of it, read the store zero times and render nothing; the 5th commit (a new revision and a new
advisory, x_TRACKER-2026-5), the 6th (which fixes x_TRACKER-2026-4), the repo going away
upstream (its state, `gone`) and a watchlist edit each show on the very next answer, to a
conditional GET with the old ETag too.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime, parsedate_to_datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from tracker.app import build
from tracker.replica import Replica
from tracker.replica.demo import DEMO_DIR, replay_repo
from tracker.replica.stgen import OidCache
from tracker.settings import load_settings

pytestmark = pytest.mark.replica

TRACKER = Path(sys.executable).with_name("tracker")
MIXTRAL = "mistralai/Mixtral-8x7B-v0.1"
TOKEN = "pages-memo-read-token-0123"
BEARER = {"Authorization": f"Bearer {TOKEN}"}
T1 = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)
SECOND = "cde5c62"  # the 2nd revision: the `?rev=` page
SLIDING = "x_TRACKER-2026-4"
PAGES = {
    "home": "/",
    "repo": f"/repos/{MIXTRAL}",
    "rev": f"/repos/{MIXTRAL}?rev={SECOND}",
    "advisory": f"/advisories/{SLIDING}",
}
ROUTES = {
    "home": "/",
    "repo": "/repos/{org}/{name}",
    "rev": "/repos/{org}/{name}",
    "advisory": "/advisories/{advisory_id}",
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Served:
    """`tracker serve` as a process; its pages, and the counters of its /metrics."""

    def __init__(self, client: httpx.Client) -> None:
        self.client = client

    def counters(self) -> tuple[dict[str, float], float]:
        """(renders by route, statements run on the store) as /metrics says now."""
        text = self.client.get("/metrics", headers=BEARER).text
        renders = {
            m.group(1): float(m.group(2))
            for m in re.finditer(
                r'^tracker_http_renders_total\{route="([^"]*)"\} (\S+)$', text, re.M
            )
        }
        found = re.search(r"^tracker_store_statements_total (\S+)$", text, re.M)
        assert found is not None, text[-2000:]
        return renders, float(found.group(1))

    def pages(self, **headers: str) -> dict[str, httpx.Response]:
        return {
            k: self.client.get(path, headers={**BEARER, **headers}) for k, path in PAGES.items()
        }

    def conditional(self, etags: dict[str, str]) -> dict[str, httpx.Response]:
        return {
            k: self.client.get(path, headers={**BEARER, "If-None-Match": etags[k]})
            for k, path in PAGES.items()
        }

    def since(self, dates: dict[str, str]) -> dict[str, httpx.Response]:
        return {
            k: self.client.get(path, headers={**BEARER, "If-Modified-Since": dates[k]})
            for k, path in PAGES.items()
        }


def _modified(answers: dict[str, httpx.Response]) -> dict[str, datetime]:
    return {k: parsedate_to_datetime(r.headers["last-modified"]) for k, r in answers.items()}


def _http_date(when: datetime) -> str:
    return format_datetime(when, usegmt=True)


def _ok(answers: dict[str, httpx.Response]) -> dict[str, httpx.Response]:
    assert {k: r.status_code for k, r in answers.items()} == dict.fromkeys(PAGES, 200)
    for r in answers.values():
        assert r.headers["etag"].startswith('"')
        assert (r.headers["cache-control"], r.headers["vary"]) == (
            "private, no-cache", "Authorization, Cookie, Accept-Encoding, Origin",
        )  # fmt: skip
    return answers


def _renders_of(renders: dict[str, float]) -> dict[str, float]:
    return {route: renders.get(route, 0.0) for route in set(ROUTES.values())}


def _kept_without_a_read(served: Served, first: dict[str, httpx.Response]) -> None:
    """Every page again, plainly and conditionally: the same bytes and ETags, 304s without a
    body, nothing rendered, no statement run on the store."""
    renders, statements = served.counters()
    again = _ok(served.pages())
    assert {k: r.content for k, r in again.items()} == {k: r.content for k, r in first.items()}
    assert {k: r.headers["etag"] for k, r in again.items()} == {
        k: r.headers["etag"] for k, r in first.items()
    }
    etags = {k: r.headers["etag"] for k, r in first.items()}
    not_modified = served.conditional(etags)
    assert {k: (r.status_code, r.content) for k, r in not_modified.items()} == dict.fromkeys(
        PAGES, (304, b"")
    )
    assert {k: r.headers["etag"] for k, r in not_modified.items()} == etags
    # If-Modified-Since: the page's own Last-Modified is a 304, a second before it the page
    dates = {k: r.headers["last-modified"] for k, r in first.items()}
    assert {k: (r.status_code, r.content) for k, r in served.since(dates).items()} == (
        dict.fromkeys(PAGES, (304, b""))
    )
    earlier = {k: _http_date(d - timedelta(seconds=1)) for k, d in _modified(first).items()}
    assert {k: (r.status_code, r.content) for k, r in served.since(earlier).items()} == {
        k: (200, r.content) for k, r in first.items()
    }
    renders_after, statements_after = served.counters()
    assert statements_after - statements == 0  # the store was not read
    assert _renders_of(renders_after) == _renders_of(renders)  # nothing rendered


def _changed(served: Served, before: dict[str, httpx.Response], which: set[str]) -> dict[str, Any]:
    """The pages asked with the ETags of `before`: those in `which` answer 200 with new bytes and
    a new ETag (the first conditional GET after a change), the others 304. Asked with the
    `Last-Modified` of `before`: the advisory page is a 304 unless in `which` (its record's
    `modified`), the others answer 200 with a later `Last-Modified` (the store or the watchlist
    moved since), never a 304 for bytes that changed."""
    time.sleep(1.0)  # the state before the change was first seen at least a second ago
    etags = {k: r.headers["etag"] for k, r in before.items()}
    answers = served.conditional(etags)
    assert {k: r.status_code for k, r in answers.items()} == {
        k: 200 if k in which else 304 for k in PAGES
    }
    for k in which:
        assert answers[k].content != before[k].content, k
        assert answers[k].headers["etag"] != etags[k], k
    dated = served.since({k: r.headers["last-modified"] for k, r in before.items()})
    moved = {k for k in PAGES if k in which or k != "advisory"}
    assert {k: r.status_code for k, r in dated.items()} == {
        k: 200 if k in moved else 304 for k in PAGES
    }
    later = _modified({k: dated[k] for k in moved})
    assert all(later[k] > _modified(before)[k] for k in moved), (later, _modified(before))
    for k in moved:  # the same page as the first answer after the change (or as before)
        assert dated[k].content == (answers[k] if k in which else before[k]).content, k
    return {k: dated[k] if k in moved else before[k] for k in PAGES}


def test_pages_are_kept_until_the_store_or_the_watchlist_changes(tmp_path: Path) -> None:
    hub = tmp_path / "hub"
    cache = OidCache(DEMO_DIR / "lfs-oids.tsv")
    cache.path = None  # never write the checked-in cache
    mixtral = replay_repo(hub, MIXTRAL, DEMO_DIR / "repos" / MIXTRAL.replace("/", "__"), cache)
    for _ in range(4):
        next(mixtral)
    watchlist = tmp_path / "watchlist.yaml"
    watchlist.write_text(f"repos:\n  - id: {MIXTRAL}\n")
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACKER_", "HF_"))}
    env.update(
        TRACKER_STATE_DIR=str(tmp_path / "state"),
        TRACKER_WATCHLIST=str(watchlist),
        TRACKER_HUB_PUBLIC_URL="https://huggingface.co",
        TRACKER_API_READ_TOKEN=TOKEN,
    )
    now = [T1]
    with Replica(hub) as replica:
        settings = load_settings(
            state_dir=tmp_path / "state",
            watchlist=watchlist,
            hf_endpoint=replica.url,
            hub_public_url="https://huggingface.co",
        )
        app = build(settings, clock=lambda: now[0])
        server: subprocess.Popen[bytes] | None = None

        def poll() -> None:
            now[0] += timedelta(hours=1)
            app.pipeline.run_cycle()

        try:
            app.pipeline.run_cycle()
            server = subprocess.Popen(
                [str(TRACKER), "serve", "--port", str(port)],
                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
                deadline = time.monotonic() + 120
                while True:
                    try:
                        if client.get("/healthz").status_code == 200:
                            break
                    except httpx.HTTPError:
                        pass
                    assert time.monotonic() < deadline and server.poll() is None
                    time.sleep(0.1)
                served = Served(client)
                renders, _ = served.counters()
                first = _ok(served.pages())
                made, _ = served.counters()
                assert {r: made.get(r, 0) - renders.get(r, 0) for r in set(ROUTES.values())} == {
                    "/": 1, "/repos/{org}/{name}": 2, "/advisories/{advisory_id}": 1,
                }  # fmt: skip
                assert f'href="/advisories/{SLIDING}"' in first["repo"].text
                assert "x_TRACKER-2026-5" not in first["home"].text

                # a kept page is never served to a request that may not read
                for headers in ({}, {"Authorization": "Bearer wrong-token-0123456789"}):
                    for path in PAGES.values():
                        denied = client.get(path, headers=headers)
                        assert denied.status_code == 401, path
                        assert '<form method="post" action="/session"' in denied.text
                client.cookies.set("tracker_read", "wrong-token-0123456789")
                assert client.get(PAGES["repo"]).status_code == 401
                client.cookies.set("tracker_read", TOKEN)  # the browser's way in: the cookie
                by_cookie = client.get(PAGES["repo"])
                assert (by_cookie.status_code, by_cookie.content) == (200, first["repo"].content)
                client.cookies.clear()

                # -- no-change polls: kept, nothing read ---------------------------------------
                poll()
                poll()
                _kept_without_a_read(served, first)

                # -- the 5th commit: a new revision and a new advisory ------------------------
                fifth = next(mixtral)
                poll()
                second = _changed(served, first, {"home", "repo", "rev", "advisory"})
                assert "x_TRACKER-2026-5" in second["home"].text
                assert fifth[:7] in second["repo"].text and fifth[:7] in second["rev"].text
                assert "fixed" not in _state(second["advisory"].text)
                poll()
                _kept_without_a_read(served, second)

                # -- the 6th commit fixes x_TRACKER-2026-4 ------------------------------------
                sixth = next(mixtral)
                poll()
                third = _changed(served, second, {"home", "repo", "rev", "advisory"})
                assert _state(third["advisory"].text) == "fixed"
                assert sixth in third["advisory"].text
                poll()
                _kept_without_a_read(served, third)

                # -- the repo is gone upstream: its state shows at once (migration 0014) ------
                (hub / MIXTRAL).rename(tmp_path / "gone")
                poll()
                fourth = _changed(served, third, {"home", "repo", "rev"})
                for k in ("home", "repo", "rev"):
                    assert "state-gone" in fourth[k].text and "state-gone" not in third[k].text

                # -- a watchlist edit: the home page names the new repo at once ---------------
                watchlist.write_text(f"repos:\n  - id: {MIXTRAL}\n  - id: acme/not-polled-yet\n")
                fifth_ = _changed(served, fourth, {"home"})
                assert 'data-repo="acme/not-polled-yet"' in fifth_["home"].text
                assert 'data-repo="acme/not-polled-yet"' not in fourth["home"].text
                _kept_without_a_read(served, fifth_)
        finally:
            if server is not None:
                server.send_signal(signal.SIGTERM)
                server.wait(30)
            app.close()


def _state(html: str) -> str:
    """The advisory page's state badge."""
    found = re.search(r'class="badge state-(\w+)" id="state"', html)
    assert found is not None
    return found.group(1)
