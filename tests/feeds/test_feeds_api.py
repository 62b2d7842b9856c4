"""The feed routes in process: OpenAPI names their media types, the query is checked (a bad
`min_severity` or `limit` is a 400 problem document), the read token is honoured, and conditional
GET answers 304. The routes' content over a polled history is tests/feeds/test_feeds_serve.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import feedparser
import pytest
from fastapi.testclient import TestClient
from feedkit import check_json_feed

from tracker.api import create_app
from tracker.app import build
from tracker.settings import load_settings

READ = "feeds-read-token-0123456789"
ROUTES = (
    "/v1/feeds/advisories.atom",
    "/v1/feeds/advisories.json",
    "/v1/repos/{org}/{name}/feed.atom",
    "/v1/repos/{org}/{name}/feed.json",
)


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    app = build(load_settings(state_dir=tmp_path / "state"))
    with TestClient(create_app(app), raise_server_exceptions=False) as c:
        yield c
    app.close()


@pytest.fixture
def gated(tmp_path: Path) -> Iterator[TestClient]:
    app = build(load_settings(state_dir=tmp_path / "state", api_read_token=READ))
    with TestClient(create_app(app), raise_server_exceptions=False) as c:
        yield c
    app.close()


def test_openapi_documents_the_feeds_with_their_media_types(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    for route in ROUTES:
        op = paths[route]["get"]
        media = "application/atom+xml" if route.endswith(".atom") else "application/feed+json"
        assert list(op["responses"]["200"]["content"]) == [media], route
        params = {p["name"]: p for p in op["parameters"]}
        assert params["limit"]["schema"]["maximum"] == 500
        assert params["limit"]["schema"]["minimum"] == 1
        assert "min_severity" in params
        assert op["responses"]["400"]["content"]["application/problem+json"]
    json_schema = paths[ROUTES[1]]["get"]["responses"]["200"]["content"]["application/feed+json"]
    assert json_schema["schema"] == {"$ref": "#/components/schemas/JsonFeed"}


def test_an_empty_store_serves_valid_empty_feeds(client: TestClient) -> None:
    atom = client.get(ROUTES[0])
    assert atom.status_code == 200
    parsed = feedparser.parse(atom.content)
    assert (parsed.bozo, parsed.entries, parsed.feed.updated) == (
        0,
        [],
        "1970-01-01T00:00:00+00:00",
    )
    doc = client.get(ROUTES[1]).json()
    check_json_feed(doc)
    assert doc["items"] == []
    assert doc["feed_url"] == "http://testserver/v1/feeds/advisories.json"


@pytest.mark.parametrize(
    ("query", "detail"),
    [
        ("min_severity=urgent", "min_severity: 'urgent' must be one of critical, high, moderate, low"),
        ("limit=0", "query.limit: Input should be greater than or equal to 1"),
        ("limit=501", "query.limit: Input should be less than or equal to 500"),
        ("limit=ten", "query.limit: Input should be a valid integer, unable to parse string as an integer"),
    ],
)  # fmt: skip
def test_a_bad_query_is_a_400_problem(client: TestClient, query: str, detail: str) -> None:
    for route in (ROUTES[0], "/v1/repos/acme/x/feed.json"):
        r = client.get(f"{route}?{query}")
        assert (r.status_code, r.headers["content-type"]) == (400, "application/problem+json")
        assert r.json()["detail"] == detail


def test_an_unknown_repo_is_a_404_problem(client: TestClient) -> None:
    r = client.get("/v1/repos/acme/nowhere/feed.atom")
    assert (r.status_code, r.json()["type"], r.json()["detail"]) == (
        404,
        "urn:tracker:problem:not-found",
        "no repo 'acme/nowhere' in the store",
    )


def test_conditional_get(client: TestClient) -> None:
    first = client.get(ROUTES[0])
    etag = first.headers["etag"]
    assert first.headers["cache-control"] == "public, no-cache"
    again = client.get(ROUTES[0], headers={"If-None-Match": etag})
    assert (again.status_code, again.content, again.headers["etag"]) == (304, b"", etag)
    other = client.get(ROUTES[0], headers={"If-None-Match": '"something-else"'})
    assert other.status_code == 200 and other.content == first.content


def test_the_read_token_is_honoured(gated: TestClient) -> None:
    for route in (ROUTES[0], ROUTES[1], "/v1/repos/acme/x/feed.atom"):
        r = gated.get(route)
        assert r.status_code == 401
        assert r.headers["www-authenticate"] == (
            'Basic realm="tracker", charset="UTF-8", Bearer realm="tracker"'
        )
        assert READ not in r.text
    ok = gated.get(ROUTES[0], headers={"Authorization": f"Bearer {READ}"})
    assert ok.status_code == 200
    assert ok.headers["cache-control"] == "private, no-cache"
    assert ok.headers["vary"] == "Authorization, Origin"
    wrong = gated.get(ROUTES[1], headers={"Authorization": "Bearer not-the-token-0000000000"})
    assert wrong.status_code == 401


def test_feed_links_follow_the_public_url_not_the_host_header(tmp_path: Path) -> None:
    app = build(
        load_settings(state_dir=tmp_path / "state", public_url="https://tracker.example.org/t/")
    )
    with TestClient(create_app(app)) as c:
        atom = c.get("/v1/feeds/advisories.atom", headers={"Host": "evil.example"})
        json_feed = c.get("/v1/feeds/advisories.json", headers={"Host": "evil.example"})
    app.close()
    assert atom.status_code == json_feed.status_code == 200
    assert "evil.example" not in atom.text and "evil.example" not in json_feed.text
    parsed = feedparser.parse(atom.content)
    assert parsed.feed.links[0].href == "https://tracker.example.org/t/v1/feeds/advisories.atom"
    assert json_feed.json()["feed_url"] == "https://tracker.example.org/t/v1/feeds/advisories.json"


def test_ids_use_the_public_urls_host_so_two_deployments_never_collide(tmp_path: Path) -> None:
    """Both deployments number their advisories from 1: with `TRACKER_PUBLIC_URL` set, feed and
    entry ids carry its host (RFC 4151 authority), so one reader subscribed to both keeps two
    entries; without it they keep the `tracker.local` authority. Entry content is HTML."""
    from tests.api.apikit import ADVISORY, app_with_advisory

    ids: dict[str, list[str]] = {}
    for name, public in (
        ("a", "https://tracker-a.example.org:8443/t/"),
        ("b", "https://Tracker-B.example.org"),
        ("none", None),
    ):
        app = app_with_advisory(tmp_path / name, public_url=public)
        with TestClient(create_app(app)) as c:
            parsed = feedparser.parse(c.get("/v1/feeds/advisories.atom").content)
            items = c.get("/v1/feeds/advisories.json").json()["items"]
        app.close()
        assert parsed.bozo == 0
        assert [i["id"] for i in items] == [e.id for e in parsed.entries]
        assert parsed.entries[0].content[0].type == "text/html"
        assert items[0]["content_html"].startswith("<p><strong>Severity:")
        ids[name] = [parsed.feed.id, *(e.id for e in parsed.entries)]
    assert ids == {
        "a": [
            "tag:tracker-a.example.org,2026:feed/advisories",
            f"tag:tracker-a.example.org,2026:advisory/{ADVISORY}",
        ],
        "b": [
            "tag:tracker-b.example.org,2026:feed/advisories",
            f"tag:tracker-b.example.org,2026:advisory/{ADVISORY}",
        ],
        "none": [
            "tag:tracker.local,2026:feed/advisories",
            f"tag:tracker.local,2026:advisory/{ADVISORY}",
        ],
    }
