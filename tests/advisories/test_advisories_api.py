"""The OSV API over a real SQLite store filled by publish() from the real Mixtral config history."""

from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace

import pytest
from advkit import HUB, MIXTRAL, MIXTRAL_SHAS, NOW, ch, commit, publish
from fastapi.testclient import TestClient

from tracker.advisories.service import withdraw_rewritten
from tracker.api import create_app
from tracker.settings import Settings
from tracker.shared.domain import Artifact as A
from tracker.shared.domain import ChangeKind as K
from tracker.store.advisories import AdvisoryStore

M = MIXTRAL_SHAS
M5, M6 = "41c1fe324a57f555d8df74b85a1353a583746532", "ccf7a6502058c82841f1be65cf7e35764be35318"
URL = f"{HUB}/{MIXTRAL}"
HISTORY = [
    (M[0], None, ()),
    (
        M[1],
        M[0],
        (
            ch(A.CONFIG, K.CHANGED, "model_type", "mistral", "mixtral"),
            ch(A.CONFIG, K.ADDED, "sliding_window", None, 4096),
        ),
    ),
    (M[2], M[1], (ch(A.CONFIG, K.CHANGED, "output_router_logits", True, False),)),
    (M[3], M[2], (ch(A.CONFIG, K.REMOVED, "sliding_window", 4096, None),)),
    (M5, M[3], (ch(A.CONFIG, K.ADDED, "sliding_window", None, None),)),
    (M6, M5, (ch(A.CONFIG, K.CHANGED, "sliding_window", None, 4096),)),
]
# advisory -> the commits its versions list contains (computed by hand from HISTORY)
EXPECTED = {
    "x_TRACKER-2026-1": [M[1], M[2], M[3], M5, M6],
    "x_TRACKER-2026-2": [M[2], M[3], M5, M6],
    "x_TRACKER-2026-3": [M[3], M5],  # fixed at M6
    "x_TRACKER-2026-4": [M5, M6],
}


@pytest.fixture
def client(store: AdvisoryStore) -> TestClient:
    for i, (sha, prev, changes) in enumerate(HISTORY):
        publish(
            store,
            repo_id=MIXTRAL,
            commit=commit(sha, prev),
            previous=prev,
            changes=changes,
            estimate_before=None,
            estimate_after=None,
            repo_url=URL,
            overrides=None,
            prefix="TRACKER",
            now=NOW + timedelta(hours=i),
        )
    app = SimpleNamespace(settings=Settings(), advisories=store)
    return TestClient(create_app(app, page_size=2))


def _all_ids(client: TestClient, body: dict) -> list[str]:
    ids: list[str] = []
    while True:
        r = client.post("/v1/query", json=body)
        assert r.status_code == 200, r.text
        ids += [v["id"] for v in r.json()["vulns"]]
        token = r.json().get("next_page_token")
        if not token:
            return ids
        body = {**body, "page_token": token}


@pytest.mark.parametrize("sha", [M[0], M[1], M[2], M[3], M5, M6])
def test_query_by_commit_returns_exactly_the_advisories_containing_it(
    client: TestClient, sha: str
) -> None:
    expected = sorted(
        (i for i, vs in EXPECTED.items() if sha in vs), key=lambda i: int(i.rsplit("-", 1)[1])
    )
    assert _all_ids(client, {"commit": sha}) == expected


def test_query_returns_full_records_and_paginates(client: TestClient) -> None:
    r = client.post("/v1/query", json={"commit": M5})
    body = r.json()
    assert [v["id"] for v in body["vulns"]] == ["x_TRACKER-2026-1", "x_TRACKER-2026-2"]
    assert body["vulns"][0]["affected"][0]["versions"] == EXPECTED["x_TRACKER-2026-1"]
    assert "next_page_token" in body
    r2 = client.post("/v1/query", json={"commit": M5, "page_token": body["next_page_token"]})
    assert [v["id"] for v in r2.json()["vulns"]] == ["x_TRACKER-2026-3", "x_TRACKER-2026-4"]
    assert "next_page_token" not in r2.json()


def test_query_by_package(client: TestClient) -> None:
    everything = ["x_TRACKER-2026-1", "x_TRACKER-2026-2", "x_TRACKER-2026-3", "x_TRACKER-2026-4"]
    assert _all_ids(client, {"package": {"purl": f"pkg:huggingface/{MIXTRAL}"}}) == everything
    assert _all_ids(client, {"package": {"purl": f"pkg:huggingface/{MIXTRAL}@{M6}"}}) == [
        "x_TRACKER-2026-1",
        "x_TRACKER-2026-2",
        "x_TRACKER-2026-4",
    ]
    assert _all_ids(client, {"package": {"name": URL, "ecosystem": "GIT"}, "version": M[1]}) == [
        "x_TRACKER-2026-1"
    ]
    assert _all_ids(client, {"package": {"purl": "pkg:huggingface/other/model"}}) == []


def test_withdrawn_advisories_leave_queries_but_stay_readable(
    client: TestClient, store: AdvisoryStore
) -> None:
    withdraw_rewritten(store, MIXTRAL, [M[2]], NOW + timedelta(days=1))
    assert _all_ids(client, {"commit": M[2]}) == ["x_TRACKER-2026-1"]
    r = client.get("/v1/vulns/x_TRACKER-2026-2")
    assert r.status_code == 200
    assert r.json()["withdrawn"] == "2026-12-01T09:30:00Z"


def test_querybatch_returns_ids_and_modified(client: TestClient) -> None:
    r = client.post("/v1/querybatch", json={"queries": [{"commit": M[1]}, {"commit": M[0]}]})
    assert r.status_code == 200
    assert r.json() == {
        "results": [
            {"vulns": [{"id": "x_TRACKER-2026-1", "modified": "2026-11-30T14:30:00Z"}]},
            {"vulns": []},
        ]
    }


def test_get_vuln_by_id(client: TestClient) -> None:
    r = client.get("/v1/vulns/x_TRACKER-2026-3")
    assert r.status_code == 200
    assert r.json()["affected"][0]["ranges"][0]["events"] == [{"introduced": M[3]}, {"fixed": M6}]
    missing = client.get("/v1/vulns/x_TRACKER-2026-99")
    assert missing.status_code == 404
    assert missing.headers["content-type"] == "application/problem+json"
    assert missing.json() == {  # an RFC 9457 problem document carrying osv.dev's code and message
        "type": "urn:tracker:problem:not-found",
        "title": "Not Found",
        "status": 404,
        "detail": "Bug not found.",
        "instance": "/v1/vulns/x_TRACKER-2026-99",
        "code": 5,
        "message": "Bug not found.",
    }


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/query", {"commit": M[1], "colour": "red"}),
        ("/v1/query", {"commit": M[1][:12]}),
        ("/v1/query", {"commit": "z" * 40}),
        ("/v1/query", {"commit": 12}),
        ("/v1/query", {"commit": M[1], "version": M[1]}),
        ("/v1/query", {"commit": M[1], "package": {"purl": f"pkg:huggingface/{MIXTRAL}"}}),
        ("/v1/query", {}),
        ("/v1/query", []),
        ("/v1/query", {"package": {"purl": "pkg:pypi/requests"}}),
        ("/v1/query", {"package": {"purl": "pkg:huggingface/a/../b"}}),
        ("/v1/query", {"package": {"purl": f"pkg:huggingface/{MIXTRAL}@{M[1]}"}, "version": M[1]}),
        ("/v1/query", {"package": {"name": URL, "ecosystem": "PyPI"}}),
        ("/v1/query", {"package": {"name": URL, "ecosystem": "GIT", "extra": 1}}),
        ("/v1/query", {"package": {"name": URL, "ecosystem": "GIT"}, "version": "v1.0"}),
        ("/v1/query", {"commit": M[1], "page_token": "not-a-token"}),
        ("/v1/querybatch", {"queries": [{"commit": M[1]}] * 1001}),
        ("/v1/querybatch", {"queries": [{"commit": M[1]}, {"commit": "abc"}]}),
        ("/v1/querybatch", {"queries": {"commit": M[1]}}),
        ("/v1/querybatch", {"queries": [], "more": True}),
    ],
)
def test_bad_queries_get_osv_400(client: TestClient, path: str, body: object) -> None:
    r = client.post(path, json=body)
    assert r.status_code == 400, r.text
    assert r.headers["content-type"] == "application/problem+json"
    assert r.json()["code"] == 3
    assert r.json()["message"] == r.json()["detail"] != ""
    assert (r.json()["status"], r.json()["instance"]) == (400, path)


def test_non_json_body_is_400(client: TestClient) -> None:
    r = client.post("/v1/query", content=b"<html>", headers={"content-type": "application/json"})
    assert r.status_code == 400
    assert r.json()["code"] == 3
