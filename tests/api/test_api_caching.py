"""Conditional GET (`tracker.api.caching`): a strong ETag over the exact bytes, If-None-Match by
weak comparison (lists, `*`, `W/`), 304 without a body, Cache-Control by what is served; through
the OSV route `/v1/vulns/ID` of the real app, and the helper's contract directly."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from apikit import ADVISORY, NOW, READ, REPO, B, app_with_advisory
from fastapi import FastAPI, Request
from fastapi.responses import Response
from fastapi.testclient import TestClient

from tracker.advisories.service import withdraw_rewritten
from tracker.api import create_app
from tracker.api.caching import IMMUTABLE, cached_response, etag_of, none_match
from tracker.app import App


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[TestClient, App]]:
    """The app over one advisory, read by a client that accepts no coding (the identity bytes
    and their tag; the gzip form: tests/web/test_pages_gzip.py)."""
    app = app_with_advisory(tmp_path / "state")
    identity = {"Accept-Encoding": "identity"}
    with TestClient(create_app(app), raise_server_exceptions=False, headers=identity) as client:
        yield client, app
    app.close()


def test_the_etag_is_the_sha256_of_the_exact_bytes() -> None:
    digest = base64.urlsafe_b64encode(hashlib.sha256(b"hello").digest()).decode().rstrip("=")
    assert etag_of(b"hello") == f'"{digest}"'
    assert etag_of(b"hello") == '"LPJNul-wow4m6DsqxbninhsWHlwfp0JecwQzYpOLmCQ"'
    assert etag_of(b"hello ") != etag_of(b"hello")


@pytest.mark.parametrize(
    ("header", "matches"),
    [
        (None, False),
        ('"abc"', True),
        ('W/"abc"', True),  # weak comparison, RFC 9110 §13.1.2
        ('"x", "abc"', True),
        ('"x","y"', False),
        ("*", True),
        ("  *  ", True),
        ('"abcd"', False),
        ("abc", False),  # not a quoted tag
        ("", False),
    ],
)
def test_if_none_match_uses_the_weak_comparison(header: str | None, matches: bool) -> None:
    assert none_match(header, '"abc"') is matches


def test_an_advisory_revalidates_and_answers_304_without_a_body(
    served: tuple[TestClient, App],
) -> None:
    client, _ = served
    first = client.get(f"/v1/vulns/{ADVISORY}")
    assert first.status_code == 200
    etag = first.headers["etag"]
    assert etag == etag_of(first.content)
    assert first.headers["cache-control"] == "public, no-cache"
    again = client.get(f"/v1/vulns/{ADVISORY}", headers={"If-None-Match": etag})
    assert (again.status_code, again.content) == (304, b"")
    assert (again.headers["etag"], again.headers["cache-control"]) == (etag, "public, no-cache")
    listed = client.get(f"/v1/vulns/{ADVISORY}", headers={"If-None-Match": f'"zz", W/{etag}'})
    assert listed.status_code == 304
    star = client.get(f"/v1/vulns/{ADVISORY}", headers={"If-None-Match": "*"})
    assert star.status_code == 304
    stale = client.get(f"/v1/vulns/{ADVISORY}", headers={"If-None-Match": '"stale"'})
    assert (stale.status_code, stale.content) == (200, first.content)


def test_the_etag_follows_a_modification(served: tuple[TestClient, App]) -> None:
    client, app = served
    before = client.get(f"/v1/vulns/{ADVISORY}")
    withdrawn = withdraw_rewritten(app.advisories, REPO, [B], NOW + timedelta(hours=1))
    assert [a.id for a in withdrawn] == [ADVISORY]
    after = client.get(f"/v1/vulns/{ADVISORY}", headers={"If-None-Match": before.headers["etag"]})
    assert after.status_code == 200
    assert after.json()["withdrawn"] == "2026-11-30T10:30:00Z"
    assert after.headers["etag"] == etag_of(after.content) != before.headers["etag"]


def test_cache_control_is_private_when_reads_need_a_token(tmp_path: Path) -> None:
    app = app_with_advisory(tmp_path / "state", api_read_token=READ)
    try:
        with TestClient(create_app(app)) as client:
            r = client.get(f"/v1/vulns/{ADVISORY}", headers={"Authorization": f"Bearer {READ}"})
            assert r.status_code == 200
            assert (r.headers["cache-control"], r.headers["vary"]) == (
                "private, no-cache",
                # Accept-Encoding: the record has a gzip form; Origin: CORS (an Origin adds
                # Access-Control-*)
                "Authorization, Accept-Encoding, Origin",
            )
    finally:
        app.close()


def test_the_helper_keeps_extra_headers_on_the_304() -> None:
    api = FastAPI()
    api.state.app = None

    @api.get("/blob")
    def blob(request: Request) -> Response:
        return cached_response(
            request, b"\x00bytes", "application/octet-stream", IMMUTABLE, headers={"X-A": "1"}
        )

    with TestClient(api) as client:
        r = client.get("/blob")
        assert (r.content, r.headers["cache-control"], r.headers["x-a"]) == (
            b"\x00bytes",
            "public, max-age=31536000, immutable",
            "1",
        )
        again = client.get("/blob", headers={"If-None-Match": r.headers["etag"]})
        assert (again.status_code, again.headers["x-a"], again.content) == (304, "1", b"")
