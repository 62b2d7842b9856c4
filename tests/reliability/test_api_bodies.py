"""Issue 10, items 6 and 8: request bodies are limited while they stream in, and a JSON body nested
too deep is refused before a route parses it.

Before: the API read a 100 MB chunked body in full before its 1 MB check rejected it, and a
nested JSON body under 1 MB raised RecursionError in the route (500). Driven through the real
FastAPI app (`tracker.api.create_app`) over a real SQLite store, at the ASGI level (so the bytes
the server pulled can be counted exactly) and with the TestClient.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from tracker.api import create_app
from tracker.api.limits import MAX_BODY
from tracker.settings import Settings
from tracker.store import Store
from tracker.store.advisories import AdvisoryStore

CHUNK = 64 * 1024


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FastAPI]:
    store = Store.open(f"sqlite:///{tmp_path_factory.mktemp('api') / 'tracker.db'}")
    app = SimpleNamespace(settings=Settings(), advisories=AdvisoryStore(store.engine))
    yield create_app(app)  # type: ignore[arg-type]
    store.close()


def _post(api: FastAPI, total: int, headers: list[tuple[bytes, bytes]]) -> tuple[int, Any, int]:
    """POST /v1/query with a `total`-byte body sent in 64 KiB chunks; (status, JSON answer,
    bytes the server pulled)."""
    pulled = 0
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        nonlocal pulled
        n = min(CHUNK, total - pulled)
        pulled += n
        return {"type": "http.request", "body": b" " * n, "more_body": pulled < total}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
        "scheme": "http", "path": "/v1/query", "raw_path": b"/v1/query", "query_string": b"",
        "headers": [(b"content-type", b"application/json"), *headers], "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80), "root_path": "",
    }  # fmt: skip
    asyncio.run(api(scope, receive, send))  # type: ignore[arg-type]
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return status, json.loads(body), pulled


def test_a_100_mb_chunked_body_is_refused_after_one_megabyte(api: FastAPI) -> None:
    status, answer, pulled = _post(api, 100_000_000, [(b"transfer-encoding", b"chunked")])
    assert (status, answer) == (
        413,
        {
            "type": "urn:tracker:problem:too-large",
            "title": "Request Entity Too Large",
            "status": 413,
            "detail": "request body over 1,000,000 bytes",
            "instance": "/v1/query",
            "code": 3,
            "message": "request body over 1,000,000 bytes",
        },
    )
    assert MAX_BODY < pulled <= MAX_BODY + CHUNK  # not one chunk more than needed


def test_a_declared_length_over_the_limit_is_refused_before_reading(api: FastAPI) -> None:
    status, answer, pulled = _post(api, 100_000_000, [(b"content-length", b"100000000")])
    assert (status, answer["code"], pulled) == (413, 3, 0)


def test_a_body_at_the_limit_reaches_the_route(api: FastAPI) -> None:
    status, answer, pulled = _post(api, MAX_BODY, [])
    assert pulled == MAX_BODY
    assert (status, answer["message"]) == (  # the route's own JSON check answered
        400,
        "request body is not valid JSON: Expecting value: line 1 column 1000001 (char 1000000)",
    )


def test_a_deeply_nested_json_body_is_a_400_not_a_500(api: FastAPI) -> None:
    client = TestClient(api, raise_server_exceptions=False)
    nested = "[" * 100_000 + "]" * 100_000  # 200 kB, under the size limit
    r = client.post("/v1/query", content=nested, headers={"content-type": "application/json"})
    assert (r.status_code, r.json()) == (
        400,
        {
            "type": "urn:tracker:problem:invalid-request",
            "title": "Bad Request",
            "status": 400,
            "detail": "request body is JSON nested deeper than 64 levels",
            "instance": "/v1/query",
            "code": 3,
            "message": "request body is JSON nested deeper than 64 levels",
        },
    )
    ok = client.post("/v1/query", json={"commit": "a" * 40})
    assert (ok.status_code, ok.json()) == (200, {"vulns": []})
