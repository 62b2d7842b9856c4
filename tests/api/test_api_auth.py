"""Access (issue 8, item 6): reads open by default; `TRACKER_API_READ_TOKEN` makes every read need
a bearer token (a write token reads too); writes always need the write token; 401 problems with
`WWW-Authenticate: Bearer`; tokens never echoed. In process, and with the installed
`tracker serve` as a process on loopback, where users meet it."""

from __future__ import annotations

import base64
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from apikit import ADVISORY, READ, REPO, WRITE, A, B, app_with_advisory
from fastapi.testclient import TestClient

from tracker.api import create_app
from tracker.api.auth import token_matches
from tracker.app import App
from tracker.settings import load_settings
from tracker.shared.errors import ConfigError

TRACKER = Path(sys.executable).with_name("tracker")
READ2 = "read-token-rotated-0123456789"


@pytest.fixture
def gated(tmp_path: Path) -> Iterator[TestClient]:
    app = app_with_advisory(
        tmp_path / "state", api_read_token=f"{READ},{READ2}", api_write_token=WRITE
    )
    with TestClient(create_app(app), raise_server_exceptions=False) as client:
        yield client
    app.close()


def test_reads_are_open_by_default(tmp_path: Path) -> None:
    app: App = app_with_advisory(tmp_path / "state")
    try:
        with TestClient(create_app(app)) as client:
            assert client.get(f"/v1/vulns/{ADVISORY}").status_code == 200
            assert client.post("/v1/query", json={"commit": "a" * 40}).json() == {"vulns": []}
    finally:
        app.close()


CHALLENGE = 'Basic realm="tracker", charset="UTF-8", Bearer realm="tracker"'
NEEDS = "reading needs `Authorization: Bearer <token>` (or the token as the Basic password)"


def _basic(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


def test_a_read_token_gates_every_read(gated: TestClient) -> None:
    path = f"/v1/vulns/{ADVISORY}"
    missing = gated.get(path)
    assert (missing.status_code, missing.headers["www-authenticate"]) == (401, CHALLENGE)
    assert missing.json() == {
        "type": "urn:tracker:problem:unauthorized",
        "title": "Unauthorized",
        "status": 401,
        "detail": NEEDS,
        "instance": path,
        "code": 16,
        "message": NEEDS,
    }
    wrong = gated.get(path, headers={"Authorization": f"Bearer {READ}x"})
    assert wrong.status_code == 401
    assert wrong.headers["www-authenticate"] == (
        'Basic realm="tracker", charset="UTF-8", Bearer realm="tracker", error="invalid_token"'
    )
    assert wrong.json()["detail"] == "reading: the token is not valid"
    assert READ not in wrong.text
    basic = gated.get(path, headers={"Authorization": f"Basic {READ}"})  # not base64
    assert basic.status_code == 401
    for token in (READ, READ2, WRITE):  # both read tokens during a rotation; a writer reads too
        ok = gated.get(path, headers={"Authorization": f"Bearer {token}"})
        assert (ok.status_code, ok.json()["id"]) == (200, ADVISORY)
    query = gated.post("/v1/query", json={"commit": "a" * 40})
    assert query.status_code == 401
    batch = gated.post(
        "/v1/querybatch", json={"queries": []}, headers={"Authorization": f"Bearer {READ2}"}
    )
    assert (batch.status_code, batch.json()) == (200, {"results": []})


def test_a_read_token_as_the_basic_password_reads(gated: TestClient) -> None:
    """Feed readers send HTTP Basic, not bearer tokens: the token as the password reads (any user
    name); a wrong password, or a password without its user part, is a 401; writes stay
    bearer-only."""
    path = f"/v1/vulns/{ADVISORY}"
    for user, token in (("feed", READ), ("", READ2), ("anyone", WRITE)):
        ok = gated.get(path, headers=_basic(user, token))
        assert (ok.status_code, ok.json()["id"]) == (200, ADVISORY)
    feed = gated.get("/v1/feeds/advisories.atom", headers=_basic("feed", READ))
    assert (feed.status_code, feed.headers["content-type"]) == (200, "application/atom+xml")
    for headers in (
        _basic("feed", READ + "x"),
        _basic(READ, ""),
        {"Authorization": "Basic " + base64.b64encode(READ.encode()).decode()},  # no ":"
        {"Authorization": "Basic %%%"},
        {"Authorization": "Basic " + base64.b64encode(b"feed:\xff\xfe").decode()},
    ):
        refused = gated.get(path, headers=headers)
        assert (refused.status_code, refused.json()["type"]) == (
            401, "urn:tracker:problem:unauthorized",
        ), headers  # fmt: skip
        assert READ not in refused.text
    latin = gated.get(path, headers={"Authorization": b"Basic \xff\xfe=="})  # not ASCII
    assert (latin.status_code, latin.json()["type"]) == (401, "urn:tracker:problem:unauthorized")
    write = gated.get("/v1/subscriptions", headers=_basic("admin", WRITE))
    assert (write.status_code, write.headers["www-authenticate"]) == (401, 'Bearer realm="tracker"')
    assert write.json()["detail"] == "writing needs `Authorization: Bearer <token>`"


def test_a_read_token_on_a_write_route_is_insufficient_scope(gated: TestClient) -> None:
    for token in (READ, READ2):
        r = gated.get("/v1/subscriptions", headers={"Authorization": f"Bearer {token}"})
        assert r.status_code == 403
        assert r.headers["www-authenticate"] == 'Bearer realm="tracker", error="insufficient_scope"'
        assert r.json() == {
            "type": "urn:tracker:problem:insufficient-scope",
            "title": "Forbidden",
            "status": 403,
            "detail": "writing: this token may only read (insufficient_scope); writes need a "
            "token from TRACKER_API_WRITE_TOKEN",
            "instance": "/v1/subscriptions",
        }
    poll = gated.post(f"/v1/repos/{REPO}/poll", headers={"Authorization": f"Bearer {READ}"})
    assert poll.status_code == 403
    wrong = gated.get("/v1/subscriptions", headers={"Authorization": f"Bearer {READ}x"})
    assert (wrong.status_code, wrong.json()["detail"]) == (
        401, "writing: the bearer token is not valid",
    )  # fmt: skip
    ok = gated.get("/v1/subscriptions", headers={"Authorization": f"Bearer {WRITE}"})
    assert (ok.status_code, ok.json()) == (200, [])


def test_tokens_are_compared_whole() -> None:
    assert token_matches(READ, (READ2, READ))
    assert not token_matches(READ[:-1], (READ,))
    assert not token_matches("", (READ,))
    assert not token_matches(READ, ())


@pytest.mark.parametrize("value", ["short", f"{READ},short", f"{READ}, "])
def test_a_short_read_token_is_refused_without_echoing_it(value: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(api_read_token=value)
    assert "TRACKER_API_READ_TOKEN" in str(caught.value)
    assert "at least 16 characters" in str(caught.value)
    assert value not in str(caught.value) and "short" not in str(caught.value)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_installed_server_gates_reads_and_answers_problems(tmp_path: Path) -> None:
    """`tracker serve` with TRACKER_API_READ_TOKEN, over HTTP: 401 without the token, the record
    and a 304 with it, problem documents for errors; the token is never in its output."""
    app_with_advisory(tmp_path / "state").close()
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACKER_", "HF_"))}
    env.update(TRACKER_STATE_DIR=str(tmp_path / "state"), TRACKER_API_READ_TOKEN=READ)
    log = tmp_path / "serve.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [str(TRACKER), "serve", "--port", str(port)], env=env, stdout=out, stderr=out
        )
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
            deadline = time.monotonic() + 60
            while True:
                try:
                    client.get("/openapi.json")
                    break
                except httpx.TransportError:
                    assert time.monotonic() < deadline and proc.poll() is None, log.read_text()
                    time.sleep(0.1)
            path = f"/v1/vulns/{ADVISORY}"
            denied = client.get(path)
            assert denied.status_code == 401
            assert denied.headers["content-type"] == "application/problem+json"
            assert denied.json()["detail"] == NEEDS
            auth = {"Authorization": f"Bearer {READ}"}
            ok = client.get(path, headers=auth)
            assert (ok.status_code, ok.json()["id"]) == (200, ADVISORY)
            assert ok.headers["cache-control"] == "private, no-cache"
            again = client.get(path, headers={**auth, "If-None-Match": ok.headers["etag"]})
            assert (again.status_code, again.content) == (304, b"")
            unknown = client.get("/v1/vulns/x_TRACKER-2026-404", headers=auth)
            assert (unknown.status_code, unknown.json()["code"], unknown.json()["type"]) == (
                404,
                5,
                "urn:tracker:problem:not-found",
            )
            nowhere = client.get("/nowhere", headers=auth)
            assert (nowhere.status_code, nowhere.json()["type"]) == (404, "about:blank")
            # the read API over the store, as a client meets it
            assert client.get("/v1/advisories").status_code == 401
            listed = client.get("/v1/advisories", headers=auth)
            assert [i["id"] for i in listed.json()["items"]] == [ADVISORY]
            revs = client.get(f"/v1/repos/{REPO}/revisions", params={"limit": 1}, headers=auth)
            assert [i["sha"] for i in revs.json()["items"]] == [A]
            link = revs.headers["link"]
            assert link.startswith(f"<http://127.0.0.1:{port}/v1/repos/{REPO}/revisions?")
            following = client.get(link[1 : link.index(">")], headers=auth)
            assert ([i["sha"] for i in following.json()["items"]], following.json()["next"]) == (
                [B],
                None,
            )
    finally:
        proc.terminate()
        proc.wait(20)
    assert READ not in log.read_text()


def test_the_schema_declares_bearer_and_basic_reads_and_bearer_writes(gated: TestClient) -> None:
    doc = gated.get("/openapi.json", headers={"Authorization": f"Bearer {READ}"}).json()
    schemes = doc["components"]["securitySchemes"]
    assert {k: v["scheme"] for k, v in schemes.items()} == {
        "ReadToken": "bearer",
        "ReadTokenBasic": "basic",
        "WriteToken": "bearer",
    }
    reads = [{}, {"ReadToken": []}, {"ReadTokenBasic": []}]
    for path in ("/v1/advisories", "/v1/feeds/advisories.atom", "/v1/repos/{org}/{name}/diff"):
        assert doc["paths"][path]["get"]["security"] == reads, path
    assert doc["paths"]["/v1/subscriptions"]["get"]["security"] == [{"WriteToken": []}]
