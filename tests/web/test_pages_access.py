"""The pages' conditional GET and read token: a page answers a strong ETag and 304 on
`If-None-Match`; with `TRACKER_API_READ_TOKEN` set, a page without the token is a 401 with a
form, whose POST to /session turns a valid token into an HttpOnly cookie; the token never reaches
`tracker serve`'s log. The pages link their feeds (`<link rel="alternate">` and visibly)."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from tracker.api import create_app
from tracker.app import build
from tracker.settings import load_settings

TOKEN = "pages-read-token-0123456789"
TRACKER = Path(sys.executable).with_name("tracker")


@pytest.fixture
def open_pages(tmp_path: Path) -> Iterator[TestClient]:
    app = build(load_settings(state_dir=tmp_path / "state"))
    with TestClient(create_app(app), follow_redirects=False) as client:
        yield client
    app.close()


@pytest.fixture
def gated_pages(tmp_path: Path) -> Iterator[TestClient]:
    app = build(load_settings(state_dir=tmp_path / "state", api_read_token=TOKEN))
    with TestClient(create_app(app), follow_redirects=False) as client:
        yield client
    app.close()


def test_a_page_answers_an_etag_and_304(open_pages: TestClient) -> None:
    home = open_pages.get("/")
    assert home.status_code == 200
    assert home.headers["cache-control"] == "public, no-cache"
    assert home.headers["content-type"] == "text/html; charset=utf-8"
    assert home.headers["content-security-policy"].startswith("default-src 'none';")
    again = open_pages.get("/", headers={"If-None-Match": home.headers["etag"]})
    assert (again.status_code, again.content) == (304, b"")
    assert again.headers["etag"] == home.headers["etag"]
    # an error page is never a 304
    missing = open_pages.get("/repos/acme/none")
    assert missing.status_code == 404 and "etag" not in missing.headers
    # the form is harmless when no token is set: back to the page
    r = open_pages.post("/session", data={"token": "x", "next": "/repos/acme/none"})
    assert (r.status_code, r.headers["location"]) == (303, "/repos/acme/none")
    # a body with more fields than the form has is no form of ours: back home, never a 500
    many = open_pages.post("/session", content="&".join(f"f{i}=1" for i in range(9)),
                           headers={"Content-Type": "application/x-www-form-urlencoded"})  # fmt: skip
    assert (many.status_code, many.headers["location"]) == (303, "/")


def test_home_links_the_feeds_of_everything(open_pages: TestClient) -> None:
    html = open_pages.get("/").text
    links = re.findall(r'<link rel="alternate" type="([^"]+)" href="([^"]+)"', html)
    assert links == [
        ("application/atom+xml", "/v1/feeds/advisories.atom"),
        ("application/feed+json", "/v1/feeds/advisories.json"),
    ]
    visible = re.search(r'<p class="subscribe" id="subscribe">(.*?)</p>', html)
    assert visible is not None
    assert re.findall(r'<a href="([^"]+)" type="[^"]+">([^<]+)</a>', visible.group(1)) == [
        ("/v1/feeds/advisories.atom", "Atom feed"),
        ("/v1/feeds/advisories.json", "JSON Feed"),
    ]


def test_the_read_token_gates_the_pages(gated_pages: TestClient) -> None:
    for path in ("/", "/repos/acme/x?rev=HEAD", "/advisories/x_TRACKER-2026-1"):
        r = gated_pages.get(path)
        assert r.status_code == 401, path
        assert r.headers["www-authenticate"] == 'Bearer realm="tracker"'
        assert '<form method="post" action="/session" class="token">' in r.text
        want = path.replace("&", "&amp;")
        assert f'<input type="hidden" name="next" value="{want}">' in r.text
    assert gated_pages.get("/static/style.css").status_code == 200  # the form is styled
    # a wrong token: the form again, no cookie
    wrong = gated_pages.post("/session", data={"token": "nope-nope-nope", "next": "/"})
    assert wrong.status_code == 401 and "That token is not valid." in wrong.text
    assert "set-cookie" not in wrong.headers and "nope-nope-nope" not in wrong.text
    # a program: the bearer header, as for the API
    bearer = gated_pages.get("/", headers={"Authorization": f"Bearer {TOKEN}"})
    assert bearer.status_code == 200
    assert bearer.headers["cache-control"] == "private, no-cache"
    # a browser: the form's POST sets the cookie and goes back to the page asked for
    ok = gated_pages.post("/session", data={"token": TOKEN, "next": "/repos/acme/x?rev=HEAD"})
    assert (ok.status_code, ok.headers["location"]) == (303, "/repos/acme/x?rev=HEAD")
    assert ok.headers["set-cookie"] == (f"tracker_read={TOKEN}; HttpOnly; Path=/; SameSite=strict")
    assert gated_pages.get("/").status_code == 200  # the client keeps the cookie
    # the form never sends a browser to another site
    away = gated_pages.post("/session", data={"token": TOKEN, "next": "//evil.example/x"})
    assert away.headers["location"] == "/"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_tracker_serve_never_logs_the_token(tmp_path: Path) -> None:
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACKER_", "HF_"))}
    env.update(
        TRACKER_STATE_DIR=str(tmp_path / "state"),
        TRACKER_API_READ_TOKEN=TOKEN,
        TRACKER_LOG_LEVEL="DEBUG",
    )
    proc = subprocess.Popen(
        [str(TRACKER), "serve", "--port", str(port)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        with httpx.Client(base_url=base, timeout=10) as client:
            deadline = time.monotonic() + 120
            while True:
                try:
                    if client.get("/static/style.css").status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                assert time.monotonic() < deadline, "tracker serve did not start"
                time.sleep(0.1)
            assert client.get("/").status_code == 401
            r = client.post("/session", data={"token": TOKEN, "next": "/"})
            assert r.status_code == 303
            assert client.get("/").status_code == 200  # by the cookie
            headers = {"Authorization": f"Bearer {TOKEN}"}
            assert client.get("/v1/feeds/advisories.atom", headers=headers).status_code == 200
            assert client.post("/session", data={"token": "wrong-" + TOKEN}).status_code == 401
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    # the access log is on (JSON records with their fields on a non-terminal stderr)...
    access = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert {"method": "POST", "path": "/session", "status": 303}.items() <= next(
        a for a in access if a.get("path") == "/session" and a.get("status") == 303
    ).items()
    assert TOKEN not in out  # ...and never holds the token
