"""The stored preflight over HTTP (issue 15 item 4): `/v1/repos/ORG/NAME/revisions/REV/preflight`
answers the answer `tracker poll` stored with the revision, equal to what the installed
`tracker preflight ORG/NAME@REV --json` computes from the store with no network; ETag/304; a
revision the store lacks is a 404 problem document."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from tracker.api import create_app

TRACKER = Path(sys.executable).with_name("tracker")
LLAMA = "meta-llama/Llama-2-7b-hf"
CHATGLM = "THUDM/chatglm2-6b"


def _cli(demo_run: Any, *args: str) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACKER_", "HF_"))}
    env["TRACKER_STATE_DIR"] = str(demo_run.root / "state")
    env["TRACKER_WATCHLIST"] = str(demo_run.app.settings.watchlist)
    env["TRACKER_HF_ENDPOINT"] = "http://127.0.0.1:9"  # nothing listens: the store must answer
    done = subprocess.run(
        [str(TRACKER), *args], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    out: dict[str, Any] = json.loads(done.stdout)
    return out


def test_the_stored_preflight_over_http_equals_the_cli(demo_run: Any) -> None:
    app = demo_run.app
    with TestClient(create_app(app)) as client:
        for repo, rev in ((LLAMA, "HEAD"), (CHATGLM, "HEAD~1")):
            sha = app.store.resolve(repo, rev)
            r = client.get(f"/v1/repos/{repo}/revisions/{rev}/preflight")
            assert r.status_code == 200, r.text
            body = r.json()
            assert (body["repo"], body["sha"], body["error"]) == (repo, sha, None)
            cli = _cli(demo_run, "preflight", f"{repo}@{rev}", "--json")
            assert (
                cli.pop("target")
                == f"{repo}@{sha[:12]} (ingested revision {sha}, read from the store)"
            )
            assert body["preflight"] == cli
            assert r.headers["cache-control"] == "public, no-cache"
            again = client.get(
                f"/v1/repos/{repo}/revisions/{sha}/preflight",
                headers={"If-None-Match": r.headers["etag"]},
            )
            assert again.status_code == 304
        lora = client.get(f"/v1/repos/{LLAMA}/revisions/HEAD/preflight").json()["preflight"]["lora"]
        assert lora["targets"]["q_proj"]  # 32 layers of 4096 -> 4096, at the settings' rank
        assert sum(v["modules"] for v in lora["targets"]["q_proj"].values()) == 32
        missing = client.get(f"/v1/repos/{LLAMA}/revisions/deadbeef/preflight")
        assert missing.status_code == 404
        assert missing.headers["content-type"] == "application/problem+json"
        assert "deadbeef" in missing.json()["detail"]
