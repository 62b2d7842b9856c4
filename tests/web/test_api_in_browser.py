"""The API as a browser meets it, through the installed `tracker serve` and Debian's Chromium
with every host but loopback unresolvable: `/docs` (Swagger UI) renders the API's own operations
from the server's own files (the network is off), and a dashboard on another origin reads the
API with a token in `fetch` (CORS)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pagekit import chromium

TRACKER = Path(sys.executable).with_name("tracker")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


READ = "dash-read-token-0123456789abcdef"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[str]:
    """`tracker serve` as a process over a store with one advisory, on a free loopback port,
    reads gated by a token."""
    from tests.api.apikit import app_with_advisory

    app_with_advisory(tmp_path / "state").close()
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACKER_", "HF_"))}
    env["TRACKER_STATE_DIR"] = str(tmp_path / "state")
    env["TRACKER_API_READ_TOKEN"] = READ
    proc = subprocess.Popen(
        [str(TRACKER), "serve", "--port", str(port)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(base + "/healthz", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None, "tracker serve exited"
            assert time.monotonic() < deadline, "tracker serve did not start"
            time.sleep(0.1)
        yield base
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


@pytest.fixture
def offline_browser() -> Iterator[Any]:
    """A headless Chromium that can resolve no host but loopback (the network is off for it)."""
    driver = chromium("--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1")
    try:
        yield driver
    finally:
        driver.quit()


def _loaded_from(driver: Any) -> list[str]:
    names = driver.execute_script(
        "return performance.getEntriesByType('resource').map(e => e.name)"
    )
    return [str(n) for n in names]


def _wait_text(driver: Any, css: str, timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = driver.execute_script(
            "const e = document.querySelector(arguments[0]); return e ? e.textContent : null", css
        )
        if found:
            return str(found)
        time.sleep(0.1)
    raise AssertionError(f"{css} never appeared on {driver.current_url}")


def test_swagger_ui_renders_with_the_network_off(served: str, offline_browser: Any) -> None:
    driver = offline_browser
    driver.get(served + "/docs")
    assert _wait_text(driver, ".swagger-ui .info .title").startswith("tracker")
    # the API's own operations are listed (the schema was read from the server)
    _wait_text(driver, "#operations-default-get_vulns_v1_vulns__advisory_id__get, .opblock")
    paths = driver.execute_script(
        "return [...document.querySelectorAll('.opblock-summary-path')].map(e => e.textContent)"
    )
    assert "/v1/vulns/{advisory_id}" in [p.replace("\u200b", "") for p in paths]
    loaded = _loaded_from(driver)
    assert any(u.endswith("/static-offline-docs/swagger-ui-bundle.js") for u in loaded)
    assert [u for u in loaded if not u.startswith(served + "/")] == []
    severe = [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert severe == []

    # no ReDoc: its sidebar loads a logo from cdn.redoc.ly
    assert httpx.get(served + "/redoc", timeout=10).status_code == 404


DASHBOARD = """<!doctype html><meta charset="utf-8"><title>waiting</title>
<script>
fetch(API + "/v1/advisories", {headers: {"Authorization": "Bearer " + TOKEN}})
  .then(r => r.json().then(j => { document.title = "ok " + r.headers.get("ETag") + " " +
    j.items.map(i => i.id + ":" + i.severity).join(","); }))
  .catch(e => { document.title = "failed " + e; });
</script>"""


def test_a_dashboard_on_another_origin_reads_the_api_with_its_token(
    served: str, offline_browser: Any, tmp_path: Path
) -> None:
    """CORS: a page served from another loopback port (another origin) fetches
    `/v1/advisories` with the read token in the Authorization header (a preflighted request):
    it reads the JSON and the exposed ETag. Without CORS the fetch fails."""
    from tests.api.apikit import ADVISORY

    site = tmp_path / "dash"
    site.mkdir()
    page = DASHBOARD.replace("API", json.dumps(served), 1).replace("TOKEN", json.dumps(READ), 1)
    (site / "index.html").write_text(page)
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1",
         "--directory", str(site)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{port}/", timeout=2)
                break
            except httpx.HTTPError:
                assert time.monotonic() < deadline, "the dashboard's server did not start"
                time.sleep(0.1)
        offline_browser.get(f"http://127.0.0.1:{port}/index.html")
        deadline = time.monotonic() + 30
        while offline_browser.title == "waiting" and time.monotonic() < deadline:
            time.sleep(0.1)
        direct = httpx.get(
            served + "/v1/advisories", headers={"Authorization": f"Bearer {READ}"}, timeout=10
        )
        [item] = direct.json()["items"]
        assert item["id"] == ADVISORY
        assert offline_browser.title == f"ok {direct.headers['etag']} {ADVISORY}:{item['severity']}"
    finally:
        server.terminate()
        server.wait(timeout=10)
