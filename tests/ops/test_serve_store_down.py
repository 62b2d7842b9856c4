"""`tracker serve` while its store is down (issue 26, item 6), as systemd runs it
(`JOURNAL_STREAM` set): PostgreSQL is reached through a TCP proxy on loopback that is closed when
the server starts. The server starts anyway; `/readyz` answers 503 with a problem document that
names the store while it is down, 200 once the proxy is open, 503 again when it closes and 200
when it is back; `/healthz` answers 200 throughout. Every line on stderr is JSON, uvicorn's access
records with their fields."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from tcpproxy import TcpProxy

from tracker.store import Store
from tracker.store.engine import head_revision

pytestmark = pytest.mark.postgres

TRACKER = Path(sys.executable).with_name("tracker")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _until_status(
    client: httpx.Client, path: str, status: int, timeout: float = 30
) -> httpx.Response:
    deadline = time.monotonic() + timeout
    while True:
        answer = client.get(path)
        if answer.status_code == status:
            return answer
        assert time.monotonic() < deadline, (answer.status_code, answer.text)
        time.sleep(0.2)


def test_serve_starts_with_the_store_down_and_readyz_follows_it(
    tmp_path: Path, pg_database: Any
) -> None:
    with pg_database("serve") as url:
        Store.open(url).close()  # migrated; then only reachable through the proxy
        direct = sa.make_url(url)
        proxy = TcpProxy((direct.host or "127.0.0.1", direct.port or 5432))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACKER_", "HF_"))}
        env.update(
            TRACKER_STATE_DIR=str(tmp_path / "state"),
            TRACKER_DATABASE_URL=direct.set(host="127.0.0.1", port=proxy.port).render_as_string(
                hide_password=False
            ),
            TRACKER_LOG_LEVEL="INFO",
            JOURNAL_STREAM="8:4242",
        )
        port = _free_port()
        proc = subprocess.Popen(
            [str(TRACKER), "serve", "--port", str(port)],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
                deadline = time.monotonic() + 90
                while True:  # the store is down: the server starts all the same
                    assert proc.poll() is None, proc.communicate()[1][-2000:]
                    try:
                        if client.get("/healthz").status_code == 200:
                            break
                    except httpx.TransportError:
                        pass
                    assert time.monotonic() < deadline, "tracker serve did not start"
                    time.sleep(0.1)

                down = client.get("/readyz")
                assert down.status_code == 503
                assert down.headers["content-type"] == "application/problem+json"
                problem = down.json()
                assert problem["type"] == "urn:tracker:problem:not-ready"
                assert problem["detail"].startswith("the store cannot be reached: ")
                assert "OperationalError" in problem["detail"]
                assert client.get("/healthz").json() == {"status": "ok"}

                proxy.start()
                ready = _until_status(client, "/readyz", 200)
                assert ready.json() == {
                    "status": "ready", "store": "reachable", "schema": head_revision()
                }  # fmt: skip

                proxy.stop()
                again = _until_status(client, "/readyz", 503)
                assert again.json()["detail"].startswith("the store cannot be reached: ")
                assert client.get("/healthz").status_code == 200

                proxy.start()
                _until_status(client, "/readyz", 200)
        finally:
            proc.terminate()
            out, err = proc.communicate(timeout=30)
            proxy.stop()
    # uvicorn shuts down gracefully, then ends by the signal it was sent
    assert proc.returncode == -signal.SIGTERM, err[-2000:]
    assert out == ""
    lines = err.splitlines()
    records = [json.loads(line) for line in lines]  # every line is a JSON object
    assert [r["event"] for r in records if r["event"] == "store.unreachable_at_start"] == [
        "store.unreachable_at_start"
    ]
    [listening] = [r for r in records if r["event"] == "serve.listening"]
    assert listening["url"] == f"http://127.0.0.1:{port}"
    access = [r for r in records if r.get("logger") == "uvicorn.access"]
    statuses = [r["status"] for r in access if r["path"] == "/readyz"]
    assert statuses[0] == 503 and statuses[-1] == 200 and 200 in statuses[:-1], statuses
    assert {(r["method"], r["http_version"], r["level"]) for r in access} == {
        ("GET", "1.1", "info")
    }
    assert {"Application startup complete.", "Finished server process"} <= {
        r["event"].split(" [")[0] for r in records if r.get("logger") == "uvicorn.error"
    }
