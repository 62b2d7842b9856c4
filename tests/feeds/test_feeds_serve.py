"""The feeds as a reader meets them: a real `tracker serve` process on loopback, read over HTTP by
feedparser, while the store behind it is polled twice from the Hub replica.

The replica holds the demo's Mixtral history (tracker/demo_data) up to its 4th commit, which
removes `sliding_window` (a high advisory), and acme/fit-moves up to the commit that doubles the
layers (feedkit). The first poll publishes; the second poll comes after the rest of both
histories has landed: Mixtral's later commits fix the sliding_window advisory, and acme's third
commit brings the card fits back. The clock of each poll is pinned, so every `updated` is exact.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import feedparser
import httpx
import pytest
from feedkit import FIT_REPO, check_json_feed, fit_step

from tracker.app import build
from tracker.replica import Replica
from tracker.replica.demo import DEMO_DIR, replay_repo
from tracker.replica.stgen import OidCache
from tracker.settings import load_settings

pytestmark = pytest.mark.replica

TRACKER = Path(sys.executable).with_name("tracker")
MIXTRAL = "mistralai/Mixtral-8x7B-v0.1"
TAG = "tag:tracker.local,2026:"
T1 = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)
T2 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
FIRST_TITLES = [
    "HIGH: acme/fit-moves: LoRA r=16 no longer fits L4 24 GB at batch 1 (now: 2 cards at batch 1 "
    "(31 + 25 layers)) (and 1 more)",
    "HIGH: acme/fit-moves: estimate: parameters 1.72B → 3.13B; 2 card setups no longer fit; "
    "`q_proj` now resolves to 56 modules in the full-attention layers (was 28); and 7 more",
    "HIGH: acme/fit-moves: config: num_hidden_layers changed: 28 → 56",
    "HIGH: mistralai/Mixtral-8x7B-v0.1: config: sliding_window removed (was 4096)",
    "LOW: mistralai/Mixtral-8x7B-v0.1: config: output_router_logits changed: true → false",
    # issue 25: the same revision moves what LoRA's all-linear adapts (the fused experts, the
    # routers): high
    "HIGH: mistralai/Mixtral-8x7B-v0.1: estimate: what it takes to fetch and hold is now known: "
    "2.00 bytes/parameter: 4-bit weights would take 4.0× less; weights 93.41 GB; and 4 more",
    "HIGH: mistralai/Mixtral-8x7B-v0.1: config changed (6 changes: model_type, attention_dropout, "
    "output_router_logits, and 3 more)",
]
SECOND_TITLES = [
    # issue 24: a 32768 window with 32768 positions is no window (checked with transformers)
    "LOW: mistralai/Mixtral-8x7B-v0.1: config: sliding_window changed: 32768 → null",
    "HIGH: mistralai/Mixtral-8x7B-v0.1: config: sliding_window changed: 4096 → 32768",
    "LOW: mistralai/Mixtral-8x7B-v0.1: config: sliding_window added: null [fixed]",
    FIRST_TITLES[1] + " [fixed]",
    FIRST_TITLES[2] + " [fixed]",
    FIRST_TITLES[3] + " [fixed]",
    "LOW: acme/fit-moves: LoRA r=16 now fits L4 24 GB at batch 1 (and 1 more)",
    # unchanged for a reader (only their versions lists grew): they keep their place and time
    FIRST_TITLES[0],
    FIRST_TITLES[4],
    FIRST_TITLES[5],
    FIRST_TITLES[6],
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _until(what: Callable[[], Any], timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (got := what()):
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)
    return got


def _up(url: str) -> bool:
    try:
        return httpx.get(f"{url}/openapi.json", timeout=5).status_code == 200
    except httpx.HTTPError:
        return False


def _read(url: str, **kw: Any) -> feedparser.FeedParserDict:
    parsed = feedparser.parse(url, **kw)
    assert parsed.bozo == 0, parsed.get("bozo_exception")
    return parsed


def _titles(parsed: feedparser.FeedParserDict) -> list[str]:
    return [e.title for e in parsed.entries]


def test_feeds_from_tracker_serve_read_by_feedparser_across_two_polls(tmp_path: Path) -> None:
    hub = tmp_path / "hub"
    cache = OidCache(DEMO_DIR / "lfs-oids.tsv")
    cache.path = None  # never write the checked-in cache
    mixtral = replay_repo(hub, MIXTRAL, DEMO_DIR / "repos" / MIXTRAL.replace("/", "__"), cache)
    for _ in range(4):
        next(mixtral)
    fit_shas = [fit_step(hub, 0), fit_step(hub, 1)]
    (tmp_path / "watchlist.yaml").write_text(f"repos:\n  - id: {MIXTRAL}\n  - id: {FIT_REPO}\n")
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACKER_", "HF_"))}
    env.update(
        TRACKER_STATE_DIR=str(tmp_path / "state"),
        TRACKER_WATCHLIST=str(tmp_path / "watchlist.yaml"),
    )
    now = [T1]
    with Replica(hub) as replica:
        settings = load_settings(
            state_dir=tmp_path / "state",
            watchlist=tmp_path / "watchlist.yaml",
            hf_endpoint=replica.url,
            hub_public_url="https://huggingface.co",
        )
        app = build(settings, clock=lambda: now[0])
        server: subprocess.Popen[bytes] | None = None
        try:
            # the server starts while the first poll runs (both over the store `build` made)
            server = subprocess.Popen(
                [str(TRACKER), "serve", "--port", str(port)],
                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
            app.pipeline.run_cycle()
            _until(lambda: _up(base), 120)

            # -- after the first poll ------------------------------------------------------
            atom = f"{base}/v1/feeds/advisories.atom"
            first = _read(atom)
            assert first.status == 200
            assert first.headers["content-type"] == "application/atom+xml"
            assert first.headers["cache-control"] == "public, no-cache"
            assert _titles(first) == FIRST_TITLES
            assert [e.id for e in first.entries] == [
                f"{TAG}fit/{FIT_REPO}/{fit_shas[1]}",
                *(f"{TAG}advisory/x_TRACKER-2026-{n}" for n in (6, 5, 4, 3, 2, 1)),
            ]
            assert {e.updated for e in first.entries} == {"2026-12-01T08:00:00+00:00"}
            assert first.feed.updated == "2026-12-01T08:00:00+00:00"
            # content is HTML a reader renders: each advisory's "What changed" table a table
            assert {e.content[0].type for e in first.entries} == {"text/html"}
            advisories = [e for e in first.entries if "/advisory/" in e.id]
            assert all("<table>" in e.content[0].value for e in advisories)
            assert not any("|---|" in e.content[0].value for e in first.entries)
            # a conditional GET with the feed's ETag: 304, nothing to parse
            again = feedparser.parse(atom, etag=first.etag)
            assert (again.status, again.entries) == (304, [])
            # the same entries as JSON Feed 1.1, in the same order
            doc = httpx.get(f"{base}/v1/feeds/advisories.json", timeout=30)
            assert doc.headers["content-type"] == "application/feed+json"
            check_json_feed(doc.json())
            assert [i["id"] for i in doc.json()["items"]] == [e.id for e in first.entries]
            # per repo, and at a severity floor (any case)
            fit_feed = _read(f"{base}/v1/repos/{FIT_REPO}/feed.atom")
            assert _titles(fit_feed) == FIRST_TITLES[:3]
            fit_json = httpx.get(f"{base}/v1/repos/{FIT_REPO}/feed.json", timeout=30).json()
            check_json_feed(fit_json)
            assert [i["title"] for i in fit_json["items"]] == FIRST_TITLES[:3]
            high = _read(f"{atom}?min_severity=HIGH")
            assert _titles(high) == [t for t in FIRST_TITLES if t.startswith("HIGH")]
            bad = httpx.get(f"{atom}?min_severity=urgent", timeout=30)
            assert (bad.status_code, bad.headers["content-type"]) == (
                400,
                "application/problem+json",
            )
            assert bad.json()["detail"] == (
                "min_severity: 'urgent' must be one of critical, high, moderate, low"
            )
            gone = httpx.get(f"{base}/v1/repos/acme/nowhere/feed.json", timeout=30)
            assert (gone.status_code, gone.json()["detail"]) == (
                404, "no repo 'acme/nowhere' in the store",
            )  # fmt: skip
            limited = _read(f"{atom}?limit=2")
            assert [e.id for e in limited.entries] == [e.id for e in first.entries[:2]]

            # -- the rest of both histories lands; the second poll, an hour later -----------
            for _ in mixtral:
                pass
            fit_shas.append(fit_step(hub, 2))
            now[0] = T2
            app.pipeline.run_cycle()
            second = _read(atom, etag=first.etag)
            assert second.status == 200  # the feed changed: its old ETag no longer matches
            assert _titles(second) == SECOND_TITLES
            ids = [e.id for e in second.entries]
            assert set(ids) >= {e.id for e in first.entries}  # every id kept
            assert len(ids) == len(set(ids)) == 11
            # the sliding_window advisory: fixed by the later commits, the same entry, updated
            [before] = [e for e in first.entries if e.id.endswith("/x_TRACKER-2026-4")]
            [after] = [e for e in second.entries if e.id == before.id]
            assert (before.updated, after.updated) == (
                "2026-12-01T08:00:00+00:00", "2026-12-01T09:00:00+00:00",
            )  # fmt: skip
            assert after.published == before.published == "2026-12-01T08:00:00+00:00"
            assert after.title == before.title + " [fixed]"
            assert second.feed.updated == "2026-12-01T09:00:00+00:00"
            # the versions lists of the advisories still open grew, but nothing a reader sees of
            # them changed: their entries keep `updated` (their OSV records' `modified` moved)
            assert [e.updated for e in second.entries] == ["2026-12-01T09:00:00+00:00"] * 7 + [
                "2026-12-01T08:00:00+00:00"
            ] * 4
            still_open = [e.id.rsplit("/", 1)[1] for e in second.entries[-3:]]
            osv = [httpx.get(f"{base}/v1/vulns/{i}", timeout=30).json() for i in still_open]
            assert {r["modified"] for r in osv} == {"2026-12-01T09:00:00Z"}
            # a second read of the unchanged store: the same bytes, so the same ETag (304)
            assert feedparser.parse(atom, etag=second.etag).status == 304
        finally:
            if server is not None:
                server.send_signal(signal.SIGTERM)
                server.wait(timeout=30)
            app.close()


def test_a_gated_feed_read_by_feedparser_with_the_token_as_basic_password(tmp_path: Path) -> None:
    """With TRACKER_API_READ_TOKEN set, a feed reader that cannot send a bearer header reads the
    feeds with the token as its HTTP Basic password: in the subscription URL
    (`http://feed:TOKEN@host/…`, sent up front), or, by a client that answers challenges
    (urllib's HTTPBasicAuthHandler), once the 401 challenges for Basic. The token is never in the
    server's output."""
    token = "feed-read-token-0123456789"
    hub = tmp_path / "hub"
    fit_shas = [fit_step(hub, 0), fit_step(hub, 1)]
    (tmp_path / "watchlist.yaml").write_text(f"repos:\n  - id: {FIT_REPO}\n")
    port = _free_port()
    host = f"127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACKER_", "HF_"))}
    env.update(
        TRACKER_STATE_DIR=str(tmp_path / "state"),
        TRACKER_WATCHLIST=str(tmp_path / "watchlist.yaml"),
        TRACKER_API_READ_TOKEN=token,
    )
    log = tmp_path / "serve.log"
    with Replica(hub) as replica:
        settings = load_settings(
            state_dir=tmp_path / "state",
            watchlist=tmp_path / "watchlist.yaml",
            hf_endpoint=replica.url,
            hub_public_url="https://huggingface.co",
        )
        app = build(settings, clock=lambda: T1)
        try:
            app.pipeline.run_cycle()
        finally:
            app.close()
    with log.open("w") as out:
        server = subprocess.Popen(
            [str(TRACKER), "serve", "--port", str(port)], env=env, stdout=out, stderr=out
        )
    try:
        _until(lambda: _up(f"http://feed:{token}@{host}"), 120)
        atom = f"/v1/repos/{FIT_REPO}/feed.atom"
        refused = feedparser.parse(f"http://{host}{atom}")
        assert (refused.status, refused.entries) == (401, [])
        wrong = feedparser.parse(f"http://feed:{token}x@{host}{atom}")
        assert (wrong.status, wrong.entries) == (401, [])

        read = _read(f"http://feed:{token}@{host}{atom}")
        assert read.status == 200
        assert read.headers["cache-control"] == "private, no-cache"
        assert _titles(read) == FIRST_TITLES[:3]
        assert read.entries[0].id == f"{TAG}fit/{FIT_REPO}/{fit_shas[1]}"
        again = feedparser.parse(f"http://feed:{token}@{host}{atom}", etag=read.etag)
        assert (again.status, again.entries) == (304, [])

        # a client that answers challenges (feedparser itself only sends the URL's credentials)
        assert refused.headers["www-authenticate"].startswith('Basic realm="tracker"')
        passwords = urllib.request.HTTPPasswordMgrWithDefaultRealm()
        passwords.add_password(None, f"http://{host}/", "reader", token)
        opener = urllib.request.build_opener(urllib.request.HTTPBasicAuthHandler(passwords))
        with opener.open(f"http://{host}/v1/feeds/advisories.atom", timeout=30) as answer:
            challenged = feedparser.parse(answer.read())
        assert challenged.bozo == 0
        assert [e.id for e in challenged.entries] == [e.id for e in read.entries]
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
    assert token not in log.read_text()
    # uvicorn's access records are JSON on a non-terminal stderr (issue 26), with their fields
    access = [json.loads(line) for line in log.read_text().splitlines()]
    assert {
        (a.get("method"), a.get("status")) for a in access
        if a.get("path") == "/v1/repos/acme/fit-moves/feed.atom"
    } >= {("GET", 401), ("GET", 200)}  # fmt: skip
