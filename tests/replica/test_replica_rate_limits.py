"""The replica's own rate limits (`Replica(rate_limits=...)`): the Hub's `RateLimit` and
`RateLimit-Policy` headers on every answer of a limited bucket (HUB-PROTOCOL.md §10), a 429 in
the Hub's shape once a fixed window's quota is spent, unlimited buckets untouched, and
huggingface_hub's own reading of that 429."""

from __future__ import annotations

import math
import time
from pathlib import Path

import httpx
import pytest
from huggingface_hub import HfApi
from huggingface_hub.errors import HfHubHTTPError

from tracker.replica import Replica
from tracker.replica.repos import commit, init_repo

pytestmark = pytest.mark.replica

WINDOW_S = 300  # long: the test's requests fall in one window


def test_rate_limit_headers_then_429_in_the_hubs_shape(tmp_path: Path) -> None:
    repo = init_repo(tmp_path, "acme/m")
    commit(repo, {"config.json": b"{}"}, "one")
    if time.time() % WINDOW_S > WINDOW_S - 10:  # start well inside one window
        time.sleep(WINDOW_S - time.time() % WINDOW_S + 0.05)
    with Replica(tmp_path, rate_limits={"api": 2}, rate_window_s=WINDOW_S) as hub:
        with httpx.Client(base_url=hub.url) as client:
            answers = [client.get("/api/models/acme/m/refs") for _ in range(3)]
            resolved = client.get("/acme/m/resolve/main/config.json")
        requests = hub.requests
        with pytest.raises(HfHubHTTPError) as caught:
            HfApi(endpoint=hub.url).model_info("acme/m")
    assert len({math.floor(r.at / WINDOW_S) for r in requests}) == 1
    reset = [
        max(1, math.ceil((math.floor(r.at / WINDOW_S) + 1) * WINDOW_S - r.at)) for r in requests
    ]
    assert [a.status_code for a in answers] == [200, 200, 429]
    assert [a.headers["RateLimit"] for a in answers] == [
        f'"api";r=1;t={reset[0]}', f'"api";r=0;t={reset[1]}', f'"api";r=0;t={reset[2]}',
    ]  # fmt: skip
    assert {a.headers["RateLimit-Policy"] for a in answers} == {
        f'"fixed window";"api";q=2;w={WINDOW_S}'
    }
    assert answers[2].json() == {
        "error": f"You have reached your 'api' rate limit (2 requests per {WINDOW_S} s window); "
        f"retry after {reset[2]} seconds"
    }
    assert "Retry-After" not in answers[2].headers  # the Hub sends none
    assert [r.status for r in requests] == [200, 200, 429, 200]  # the log has the 429 too
    # `resolvers` is not limited here: no headers, and it never counted in `api`.
    assert resolved.status_code == 200 and "RateLimit" not in resolved.headers
    # huggingface_hub reads the 429 as the Hub's (model_info does not retry).
    assert caught.value.response is not None and caught.value.response.status_code == 429
    assert "you have reached your 'api' rate limit" in str(caught.value)


def test_rate_limits_are_checked() -> None:
    with pytest.raises(ValueError):
        Replica(Path("."), rate_limits={"downloads": 5})
    with pytest.raises(ValueError):
        Replica(Path("."), rate_limits={"api": 0})
