"""`/docs` (Swagger UI) works with the network off: the installed `tracker serve`,
read by Debian's Chromium with every host but loopback unresolvable, renders the API's own
operations, and every resource the page loaded came from the server itself."""

from __future__ import annotations

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
from pagekit import CHROMEDRIVER, CHROMIUM

TRACKER = Path(sys.executable).with_name("tracker")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def served(tmp_path: Path) -> Iterator[str]:
    """`tracker serve` as a process over an empty store, on a free loopback port."""
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACKER_", "HF_"))}
    env["TRACKER_STATE_DIR"] = str(tmp_path / "state")
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
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
        "--window-size=1280,1000",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
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
