"""The push side's HTTP routes in process: subscriptions behind the write token, the Hub's webhook
(X-Webhook-Secret, what it queues and what it ignores), the manual poll trigger. Errors say what
went wrong in a problem document's `detail`; no secret or token is ever echoed."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from tracker.api import create_app
from tracker.app import App, build
from tracker.settings import load_settings

TOKEN = "write-token-0123456789abcdef"
HUB_SECRET = "hub-secret-0001"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
GOOD = {"X-Webhook-Secret": HUB_SECRET}
REPO = "mistralai/Mixtral-8x7B-v0.1"
A, B = "a" * 40, "b" * 40


def _app(tmp_path: Path, **kw: object) -> App:
    (tmp_path / "watchlist.yaml").write_text(f"repos:\n  - id: {REPO}\n")
    settings = load_settings(
        state_dir=tmp_path / "state",
        watchlist=tmp_path / "watchlist.yaml",
        webhook_allow_networks="127.0.0.0/8",
        **kw,
    )
    return build(settings)


@pytest.fixture
def api(tmp_path: Path) -> Iterator[tuple[TestClient, App]]:
    app = _app(tmp_path, api_write_token=TOKEN, hub_webhook_secret=HUB_SECRET)
    with TestClient(create_app(app), raise_server_exceptions=False) as client:
        yield client, app
    app.close()


def _hook(repo: str = REPO, scope: str = "repo.content", ref: str = "refs/heads/main") -> dict:  # type: ignore[type-arg]
    return {
        "event": {"action": "update", "scope": scope},
        "repo": {"type": "model", "name": repo, "headSha": B},
        "updatedRefs": [{"ref": ref, "oldSha": A, "newSha": B}],
        "webhook": {"id": "w1", "version": 3},
    }


def test_subscriptions_need_the_write_token_and_never_list_secrets(
    api: tuple[TestClient, App],
) -> None:
    client, app = api
    body = {"url": "http://127.0.0.1:9/hook", "repos": ["mistralai/*"], "kinds": ["config"]}
    assert client.get("/v1/subscriptions").status_code == 401
    wrong = client.post("/v1/subscriptions", json=body, headers={"Authorization": "Bearer x" * 3})
    assert wrong.status_code == 401
    assert wrong.headers["www-authenticate"] == 'Bearer realm="tracker", error="invalid_token"'
    assert wrong.headers["content-type"] == "application/problem+json"
    assert wrong.json() == {
        "type": "urn:tracker:problem:unauthorized",
        "title": "Unauthorized",
        "status": 401,
        "detail": "writing: the bearer token is not valid",
        "instance": "/v1/subscriptions",
    }
    created = client.post("/v1/subscriptions", json=body, headers=AUTH)
    assert created.status_code == 201
    sub = created.json()
    assert sub["secret"].startswith("whsec_") and sub["kinds"] == ["config"]
    assert (sub["id"], sub["min_severity"], sub["enabled"]) == (1, "low", True)
    listed = client.get("/v1/subscriptions", headers=AUTH)
    assert listed.status_code == 200 and sub["secret"] not in listed.text
    assert [s["id"] for s in listed.json()] == [1] and listed.json()[0]["secret"] is None
    refused = client.post(
        "/v1/subscriptions", json={**body, "url": "http://169.254.169.254/x"}, headers=AUTH
    )
    assert refused.status_code == 422
    assert "link-local" in refused.json()["detail"]
    bad_kind = client.post("/v1/subscriptions", json={**body, "kinds": ["nope"]}, headers=AUTH)
    assert bad_kind.status_code == 400
    rotated = client.post("/v1/subscriptions/1/rotate", json={"grace_s": 60}, headers=AUTH)
    assert rotated.status_code == 200
    assert rotated.json()["secret"] != sub["secret"] and rotated.json()["secrets_in_use"] == 2
    log = client.get("/v1/subscriptions/1/deliveries", headers=AUTH)
    assert (log.status_code, log.json()) == (200, [])
    assert client.delete("/v1/subscriptions/1", headers=AUTH).status_code == 204
    gone = client.get("/v1/subscriptions/1", headers=AUTH)
    assert gone.status_code == 404 and gone.json()["detail"] == "no subscription 1"
    assert app.webhooks.subscriptions() == []


def test_writes_are_refused_without_a_configured_token(tmp_path: Path) -> None:
    app = _app(tmp_path)
    with TestClient(create_app(app), raise_server_exceptions=False) as client:
        r = client.post("/v1/repos/mistralai/Mixtral-8x7B-v0.1/poll", headers=AUTH)
        assert r.status_code == 403 and "TRACKER_API_WRITE_TOKEN" in r.json()["detail"]
        off = client.post("/v1/hooks/huggingface", json=_hook(), headers=GOOD)
        assert off.status_code == 404 and "TRACKER_HUB_WEBHOOK_SECRET" in off.json()["detail"]
    app.close()


def test_the_hub_webhook_queues_a_poll_of_a_watched_repo_only(
    api: tuple[TestClient, App],
) -> None:
    client, app = api
    assert client.post("/v1/hooks/huggingface", json=_hook()).status_code == 401
    forged = client.post("/v1/hooks/huggingface", json=_hook(), headers={"X-Webhook-Secret": "x"})
    assert forged.status_code == 403 and HUB_SECRET not in forged.text
    bad = client.post("/v1/hooks/huggingface", content=b"{not json", headers=GOOD)
    assert bad.status_code == 400
    # a payload that breaks the declared shape is refused whatever its scope (schemathesis'
    # negative data found `headSha: [...]` acknowledged with a 200)
    shaped = {**_hook(scope="discussion")}
    shaped["repo"] = {**shaped["repo"], "headSha": ["not", "a", "sha"]}
    wrong = client.post("/v1/hooks/huggingface", json=shaped, headers=GOOD)
    assert (wrong.status_code, wrong.headers["content-type"]) == (400, "application/problem+json")
    assert wrong.json()["detail"] == (
        "not a Hub webhook payload: repo.headSha: not a string or null"
    )
    for payload, why in (
        (_hook("acme/other"), "ignored: acme/other is not watched"),
        (_hook(scope="discussion"), "ignored: scope 'discussion' does not change the repo's files"),
        (_hook(ref="refs/pr/1"), "ignored: the watched ref main did not move"),
        (
            _hook("acme/" + "x" * 97),  # the Hub's names are longer than any watchable repo id
            "ignored: repo.name is not a watchable repo id (repo id 'acme/"
            + "x" * 97
            + "': '"
            + "x" * 97
            + "' must be 1-96 characters of letters, digits, '.', '_' or '-', not "
            "start with '.' or '-', and contain no '..')",
        ),
    ):
        r = client.post("/v1/hooks/huggingface", json=payload, headers=GOOD)
        assert (r.status_code, r.json()["queued"], r.json()["detail"]) == (200, False, why)
    assert app.webhooks.pending_poll_requests() == []
    queued = client.post("/v1/hooks/huggingface", json=_hook(), headers=GOOD)
    assert (queued.status_code, queued.json()["queued"]) == (202, True)
    replay = client.post("/v1/hooks/huggingface", json=_hook(), headers=GOOD)
    assert (replay.status_code, replay.json()["detail"]) == (
        200,
        f"a poll of {REPO} was already queued",
    )
    assert app.webhooks.pending_poll_requests() == [REPO]


def test_the_manual_poll_trigger(api: tuple[TestClient, App]) -> None:
    client, app = api
    assert client.post(f"/v1/repos/{REPO}/poll").status_code == 401
    r = client.post(f"/v1/repos/{REPO}/poll", headers=AUTH)
    assert (r.status_code, r.json()["queued"]) == (202, True)
    unwatched = client.post("/v1/repos/acme/other/poll", headers=AUTH)
    assert unwatched.status_code == 404 and unwatched.json()["detail"] == (
        "acme/other is not on the watchlist"
    )
    [req] = app.webhooks.claim_poll_requests(app.clock(), lease=timedelta(minutes=1))
    assert (req.repo_id, req.reason) == (REPO, "manual")
