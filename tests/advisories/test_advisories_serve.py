"""`tracker serve`'s app under a real uvicorn server on 127.0.0.1 (free port), queried over HTTP."""

from __future__ import annotations

import socket
import threading
import time

import httpx
import uvicorn
from advkit import HUB, MIXTRAL, MIXTRAL_SHAS, NOW, ch, commit, publish

from tracker.api import create_app
from tracker.app import build
from tracker.settings import load_settings
from tracker.shared.domain import Artifact as A
from tracker.shared.domain import ChangeKind as K

M = MIXTRAL_SHAS


def test_osv_api_over_http() -> None:
    app = build(load_settings())
    try:
        publish(
            app.advisories,
            repo_id=MIXTRAL,
            commit=commit(M[1], M[0]),
            previous=M[0],
            changes=(ch(A.CONFIG, K.CHANGED, "model_type", "mistral", "mixtral"),),
            estimate_before=None,
            estimate_after=None,
            repo_url=f"{HUB}/{MIXTRAL}",
            overrides=None,
            prefix="TRACKER",
            now=NOW,
        )
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        server = uvicorn.Server(uvicorn.Config(create_app(app), log_level="warning"))
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
        thread.start()
        try:
            deadline = time.monotonic() + 20
            while not server.started and time.monotonic() < deadline:
                time.sleep(0.02)
            assert server.started
            base = f"http://127.0.0.1:{port}"
            with httpx.Client(base_url=base, timeout=10) as client:
                r = client.post("/v1/query", json={"commit": M[1]})
                assert r.status_code == 200
                assert [v["id"] for v in r.json()["vulns"]] == ["x_TRACKER-2026-1"]
                assert client.get("/v1/vulns/x_TRACKER-2026-1").json()["affected"][0][
                    "versions"
                ] == [M[1]]
                bad = client.post("/v1/query", json={"commit": "HEAD"})
                assert (bad.status_code, bad.json()["code"]) == (400, 3)
        finally:
            server.should_exit = True
            thread.join(10)
            sock.close()
        assert not thread.is_alive()
    finally:
        app.close()
