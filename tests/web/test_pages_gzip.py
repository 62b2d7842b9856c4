"""Compressed answers (issue 27, "gzip-compressed when asked, with ETags still valid"; issue 30,
"compression cached with the bytes it compresses"), as clients meet them: the installed `tracker
serve` over a copy of the demo's store, read over HTTP by httpx with the raw bytes on the wire
(decompressed here, compared with the identity answer byte for byte), and a page in Chromium.

What the server compressed is its own `/metrics`: `tracker_http_compressions_total` (bodies it
gzipped: `tagged` with an answer that has an ETag, `passing` on the way out) and `tracker_http_renders_total`.
"""

from __future__ import annotations

import gzip
import os
import re
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from email.utils import format_datetime, parsedate_to_datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from pagekit import visit
from starlette.applications import Starlette
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from tracker.api.encoding import Compress, accepts_gzip

TRACKER = Path(sys.executable).with_name("tracker")
ROOT = Path(__file__).resolve().parents[2]
LLAMA = "/repos/meta-llama/Llama-2-7b-hf"
ADVISORY = "/advisories/x_TRACKER-2026-1"
KEPT = {  # answers the memo keeps: their gzip form is made once with them
    "home": "/",
    "repo": LLAMA,
    "rev": f"{LLAMA}?rev=HEAD~1",
    "advisory": ADVISORY,
    "index": "/advisories",
    "atom": "/v1/feeds/advisories.atom",
    "json feed": "/v1/feeds/advisories.json",
    "advisories": "/v1/advisories?limit=50",
}
TAGGED = {  # answers with an ETag made at each request (their gzip form with them)
    "osv": "/v1/vulns/x_TRACKER-2026-1",
    "revisions": "/v1/repos/meta-llama/Llama-2-7b-hf/revisions",
}
PASSING = {
    "openapi": "/openapi.json",
    "stylesheet": "/static/style.css",
}  # compressed on the way out
IDENTITY = {"Accept-Encoding": "identity"}
GZIP = {"Accept-Encoding": "gzip, deflate"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def served(demo_run: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    """`tracker serve` over a copy of the demo's store; an httpx client that never decodes."""
    state = tmp_path_factory.mktemp("gzip") / "state"
    state.mkdir()
    src = sqlite3.connect(demo_run.root / "state" / "tracker.db")
    dst = sqlite3.connect(state / "tracker.db")
    try:
        src.backup(dst)
    finally:
        src.close()
        dst.close()
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACKER_", "HF_"))}
    env.update(TRACKER_STATE_DIR=str(state), TRACKER_WATCHLIST=str(ROOT / "watchlist.yaml"))
    log = state.parent / "serve.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [str(TRACKER), "serve", "--port", str(port)], env=env, stdout=out, stderr=out
        )
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
            deadline = time.monotonic() + 120
            while True:
                try:
                    client.get("/healthz")
                    break
                except httpx.TransportError:
                    assert time.monotonic() < deadline and proc.poll() is None, log.read_text()
                    time.sleep(0.1)
            yield client
    finally:
        proc.terminate()
        proc.wait(20)


def _raw(client: httpx.Client, path: str, **headers: str) -> tuple[httpx.Response, bytes]:
    """The answer and its body exactly as sent (no decoding)."""
    with client.stream("GET", path, headers=headers) as r:
        return r, b"".join(r.iter_raw())


def _counters(client: httpx.Client) -> tuple[dict[str, float], float]:
    """(bodies gzipped by kind, answers rendered in all) as /metrics says now."""
    text = client.get("/metrics", headers=IDENTITY).text
    gzipped = {
        m.group(1): float(m.group(2))
        for m in re.finditer(
            r'^tracker_http_compressions_total\{kind="([^"]*)"\} (\S+)$', text, re.M
        )
    }
    renders = sum(
        float(m.group(1))
        for m in re.finditer(r"^tracker_http_renders_total\{[^}]*\} (\S+)$", text, re.M)
    )
    return gzipped, renders


def _varies(r: httpx.Response) -> list[str]:
    return [v.strip().lower() for v in r.headers.get("vary", "").split(",")]


def test_answers_are_gzipped_when_asked_and_decompress_to_the_identity_bytes(
    served: httpx.Client,
) -> None:
    for what, path in {**KEPT, **TAGGED, **PASSING}.items():
        plain, plain_body = _raw(served, path, **IDENTITY)
        coded, coded_body = _raw(served, path, **GZIP)
        assert (plain.status_code, coded.status_code) == (200, 200), what
        assert "content-encoding" not in plain.headers, what
        assert coded.headers["content-encoding"] == "gzip", what
        assert gzip.decompress(coded_body) == plain_body, what
        assert int(coded.headers["content-length"]) == len(coded_body), what
        assert int(plain.headers["content-length"]) == len(plain_body), what
        assert len(coded_body) < len(plain_body) / 2, (what, len(coded_body), len(plain_body))
        assert "accept-encoding" in _varies(plain) and "accept-encoding" in _varies(coded), what
        assert coded.headers["content-type"] == plain.headers["content-type"], what
        if what not in PASSING:
            tag = plain.headers["etag"]
            assert re.fullmatch(r'"[A-Za-z0-9_-]{43}"', tag), (what, tag)
            assert coded.headers["etag"] == tag[:-1] + '-gzip"', what
            # the same bytes to every client that asks: deterministic gzip
            assert _raw(served, path, **GZIP)[1] == coded_body, what
        else:
            assert "etag" not in plain.headers and "etag" not in coded.headers, what
    # the Llama page of the issue (204 kB then, 22.5 kB gzipped)
    plain, plain_body = _raw(served, LLAMA, **IDENTITY)
    coded, coded_body = _raw(served, LLAMA, **GZIP)
    assert len(plain_body) > 100_000 and len(coded_body) < len(plain_body) / 5


def test_gzip_refused_small_answers_and_head(served: httpx.Client) -> None:
    plain, body = _raw(served, LLAMA, **IDENTITY)
    for refusal in ("gzip;q=0", "gzip;q=0, br", "*;q=0", "br", "identity, gzip;q=0.000"):
        r, raw = _raw(served, LLAMA, **{"Accept-Encoding": refusal})
        assert ("content-encoding" not in r.headers, raw) == (True, body), refusal
        assert r.headers["etag"] == plain.headers["etag"], refusal
    for accepted in ("GZIP", "br;q=1, gzip;q=0.5", "*", "x-gzip", "identity;q=1, *;q=0.1"):
        r, raw = _raw(served, LLAMA, **{"Accept-Encoding": accepted})
        assert (r.headers.get("content-encoding"), gzip.decompress(raw)) == ("gzip", body)
    # small answers are sent as they are, whatever is accepted (a 404 problem, /healthz)
    for path in ("/v1/vulns/x_TRACKER-2026-999999", "/healthz"):
        r, raw = _raw(served, path, **GZIP)
        assert "content-encoding" not in r.headers and len(raw) < 1024, path
        assert "accept-encoding" not in _varies(r), path
    # HEAD says what the GET would send
    head = served.head(LLAMA, headers=GZIP)
    coded, coded_body = _raw(served, LLAMA, **GZIP)
    assert (head.status_code, head.content) == (200, b"")
    assert head.headers["content-encoding"] == "gzip"
    assert head.headers["content-length"] == str(len(coded_body))
    assert head.headers["etag"] == coded.headers["etag"]


def _either_tag_is_a_304(served: httpx.Client, what: str, path: str) -> None:
    plain, _ = _raw(served, path, **IDENTITY)
    coded, coded_body = _raw(served, path, **GZIP)
    tags = (plain.headers["etag"], coded.headers["etag"])
    assert tags[1] == tags[0][:-1] + '-gzip"'
    for accept in (IDENTITY, GZIP):
        for tag in tags:
            for sent in (tag, f"W/{tag}", f'"other", {tag}'):
                r, raw = _raw(served, path, **accept, **{"If-None-Match": sent})
                assert (r.status_code, raw) == (304, b""), (what, accept, sent)
                assert r.headers["etag"] == tag, (what, accept, sent)
                assert "accept-encoding" in _varies(r), what
                assert "content-encoding" not in r.headers, what
        r, raw = _raw(served, path, **accept, **{"If-None-Match": '"other-gzip"'})
        assert r.status_code == 200, what
    again = _raw(served, path, **GZIP)
    assert (again[0].headers["etag"], again[1]) == (tags[1], coded_body), what


def test_either_etag_is_a_304_and_a_repeated_answer_is_not_compressed_again(
    served: httpx.Client,
) -> None:
    for path in KEPT.values():
        _raw(served, path, **GZIP)  # made and kept (with its gzip form) if it was not yet
    before = _counters(served)
    for what, path in KEPT.items():
        _either_tag_is_a_304(served, what, path)
    # every answer above came from what was kept: nothing rendered, nothing gzipped again
    assert _counters(served) == before
    for what, path in TAGGED.items():
        _either_tag_is_a_304(served, what, path)


def test_an_advisory_page_says_when_it_last_changed(served: httpx.Client) -> None:
    record = served.get("/v1/vulns/x_TRACKER-2026-1").json()
    page, body = _raw(served, ADVISORY, **GZIP)
    modified = parsedate_to_datetime(page.headers["last-modified"])
    assert modified.isoformat().replace("+00:00", "Z") == record["modified"].replace(".000", "")
    for since, status in (
        (page.headers["last-modified"], 304),
        ("Mon, 01 Jan 2024 00:00:00 GMT", 200),
    ):
        r, raw = _raw(served, ADVISORY, **GZIP, **{"If-Modified-Since": since})
        assert r.status_code == status, since
        assert raw == (b"" if status == 304 else body)
    # If-None-Match decides when both are sent (RFC 9110 §13.2.2)
    later = format_datetime(modified.replace(year=modified.year + 1), usegmt=True)
    r, _ = _raw(served, ADVISORY, **GZIP, **{"If-Modified-Since": later, "If-None-Match": '"x"'})
    assert r.status_code == 200


def test_the_middleware_leaves_binary_streamed_and_tagged_answers_alone() -> None:
    """`Compress` over a small app: what it must never touch."""
    text = ("{" + '"k": "value", ' * 200 + '"end": 1}').encode()

    async def png(_: Any) -> Response:
        return Response(b"\x89PNG" + bytes(4000), media_type="image/png")

    async def octets(_: Any) -> Response:
        return Response(bytes(range(256)) * 20, media_type="application/octet-stream")

    async def tagged(_: Any) -> Response:
        return Response(text, media_type="application/json", headers={"ETag": '"t"'})

    async def streamed(_: Any) -> StreamingResponse:
        async def chunks() -> Any:
            yield text
            yield text

        return StreamingResponse(chunks(), media_type="application/json")

    async def plain(_: Any) -> Response:
        return Response(text, media_type="application/json")

    routes = [Route(f"/{f.__name__}", f) for f in (png, octets, tagged, streamed, plain)]
    client = TestClient(Compress(Starlette(routes=routes)))
    for name in ("png", "octets", "tagged", "streamed"):
        r = client.get(f"/{name}", headers=GZIP)
        assert "content-encoding" not in r.headers, name
    ok = client.get("/plain", headers=GZIP)
    assert (ok.headers["content-encoding"], ok.content) == ("gzip", text)  # decoded by httpx
    assert accepts_gzip("gzip;q=0") is False and accepts_gzip("deflate, *") is True


def test_a_page_loads_compressed_in_chromium(browser: Any, served_demo: Any) -> None:
    """Chromium asks for gzip: the Llama page arrives compressed (its encoded size well under the
    decoded one) and renders; a reload revalidates it (a 304 to its gzip ETag: a few hundred
    bytes of headers cross the wire, the kept body is shown again)."""
    timing = (
        "const n = performance.getEntriesByType('navigation')[0];"
        "return [n.type, n.contentEncoding, n.transferSize, n.encodedBodySize,"
        " n.decodedBodySize, document.querySelector('h1').textContent];"
    )
    # the session's browser may hold the page from another test: a first load crosses the wire
    browser.execute_cdp_cmd("Network.clearBrowserCache", {})
    assert visit(browser, served_demo.url + LLAMA) == []
    kind, coding, transfer, encoded, decoded, heading = browser.execute_script(timing)
    assert (kind, coding, heading) == ("navigate", "gzip", "meta-llama/Llama-2-7b-hf")
    assert decoded > 100_000 and encoded < decoded / 5 and transfer > encoded
    sheet = browser.execute_script(
        "const r = performance.getEntriesByType('resource')"
        ".find(e => e.name.endsWith('/static/style.css'));"
        "return [r.contentEncoding, r.encodedBodySize < r.decodedBodySize];"
    )
    assert sheet == ["gzip", True]
    browser.refresh()
    again = browser.execute_script(timing)
    assert again[:2] == ["reload", "gzip"] and again[3:] == [encoded, decoded, heading], again
    assert again[2] < 1024, again  # headers only: the 304
