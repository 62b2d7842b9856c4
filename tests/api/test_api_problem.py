"""Every error of the HTTP app is an RFC 9457 problem document: our own errors, validation errors,
unknown routes and methods, store failures and crashes (500, logged, never echoed). Driven through
the real FastAPI app over a real SQLite store."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from apikit import ADVISORY, WRITE, app_with_advisory
from fastapi.testclient import TestClient

from tracker.api import create_app
from tracker.api.problem import PROBLEM_TYPE
from tracker.app import App
from tracker.shared.errors import StoreError


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[TestClient, App]]:
    app = app_with_advisory(tmp_path / "state", api_write_token=WRITE)
    with TestClient(create_app(app), raise_server_exceptions=False) as client:
        yield client, app
    app.close()


def _problem(r: object) -> dict[str, object]:
    assert r.headers["content-type"] == PROBLEM_TYPE  # type: ignore[attr-defined]
    return r.json()  # type: ignore[attr-defined, no-any-return]


def test_an_unknown_route_is_a_404_problem(served: tuple[TestClient, App]) -> None:
    client, _ = served
    r = client.get("/v1/nothing/here")
    assert r.status_code == 404
    assert _problem(r) == {
        "type": "about:blank",
        "title": "Not Found",
        "status": 404,
        "detail": "no such resource: /v1/nothing/here",
        "instance": "/v1/nothing/here",
    }


def test_a_wrong_method_is_a_405_problem_with_allow(served: tuple[TestClient, App]) -> None:
    client, _ = served
    r = client.delete("/v1/query")
    assert (r.status_code, r.headers["allow"]) == (405, "POST")  # not HEAD: POST only
    assert _problem(r) == {
        "type": "about:blank",
        "title": "Method Not Allowed",
        "status": 405,
        "detail": "DELETE is not allowed on /v1/query",
        "instance": "/v1/query",
        "code": 12,
        "message": "DELETE is not allowed on /v1/query",
    }


def test_every_405_lists_exactly_the_methods_its_path_answers(
    served: tuple[TestClient, App],
) -> None:
    """RFC 9110 §15.5.6 over the whole schema: for each path, a method it does not declare is a
    405 whose `Allow` is exactly the declared ones (and HEAD where GET is). Starlette listed only
    the first route's: `PUT /v1/subscriptions` said `Allow: GET` though POST is there too."""
    client, _ = served
    paths = client.get("/openapi.json").json()["paths"]
    checked = 0
    for template, operations in paths.items():
        path = template.replace("{path}", "config.json")
        path = re.sub(r"\{[^}]+\}", "x", path)
        declared = {m.upper() for m in operations}
        expected = sorted(declared | ({"HEAD"} if "GET" in declared else set()))
        for method in ("GET", "POST", "PUT", "PATCH", "DELETE"):
            if method in declared:
                continue
            r = client.request(method, path)
            assert r.status_code == 405, (method, path, r.status_code)
            assert r.headers["allow"] == ", ".join(expected), (method, path)
            checked += 1
    assert checked >= 60  # every path of the schema, several methods each
    r = client.put("/v1/subscriptions")
    assert r.headers["allow"] == "GET, HEAD, POST"


def test_a_validation_error_is_a_400_problem_listing_every_error(
    served: tuple[TestClient, App],
) -> None:
    client, _ = served
    auth = {"Authorization": f"Bearer {WRITE}"}
    r = client.post("/v1/subscriptions", json={"repos": "x", "min_severity": "dire"}, headers=auth)
    assert r.status_code == 400
    doc = _problem(r)
    assert (doc["type"], doc["title"], doc["instance"]) == (
        "urn:tracker:problem:invalid-request",
        "Bad Request",
        "/v1/subscriptions",
    )
    assert doc["detail"] == "body.url: Field required"
    assert [e["location"] for e in doc["errors"]] == [  # type: ignore[union-attr, index]
        "body.url",
        "body.repos",
        "body.min_severity",
    ]
    limit = client.get("/v1/subscriptions/1/deliveries?limit=0", headers=auth)
    assert (limit.status_code, _problem(limit)["detail"]) == (
        400,
        "query.limit: Input should be greater than or equal to 1",
    )


def test_a_store_failure_is_a_503_problem(
    served: tuple[TestClient, App], monkeypatch: pytest.MonkeyPatch
) -> None:
    client, app = served

    def broken(advisory_id: str) -> None:
        raise StoreError("database is locked\nSQL: SELECT secret stuff")

    monkeypatch.setattr(app.advisories, "get", broken)
    r = client.get(f"/v1/vulns/{ADVISORY}")
    assert (r.status_code, r.headers["retry-after"]) == (503, "5")
    assert _problem(r) == {
        "type": "urn:tracker:problem:store-unavailable",
        "title": "Service Unavailable",
        "status": 503,
        "detail": "the store cannot be read right now; try again shortly",
        "instance": f"/v1/vulns/{ADVISORY}",
        "code": 14,
        "message": "the store cannot be read right now; try again shortly",
    }


def test_a_crash_is_a_500_problem_without_the_traceback(
    served: tuple[TestClient, App],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    client, app = served

    def crash(advisory_id: str) -> None:
        raise ZeroDivisionError("secret-internal-state-42")

    monkeypatch.setattr(app.advisories, "get", crash)
    r = client.get(f"/v1/vulns/{ADVISORY}")
    assert r.status_code == 500
    assert _problem(r) == {
        "type": "urn:tracker:problem:internal",
        "title": "Internal Server Error",
        "status": 500,
        "detail": "an internal error occurred; it is logged on the server",
        "instance": f"/v1/vulns/{ADVISORY}",
        "code": 13,
        "message": "an internal error occurred; it is logged on the server",
    }
    assert "secret-internal-state-42" not in r.text and "Traceback" not in r.text
    logged = capsys.readouterr()
    assert "api.unhandled" in logged.out + logged.err
    assert "secret-internal-state-42" in logged.out + logged.err  # the operator sees it


def test_the_openapi_schema_declares_problem_documents(served: tuple[TestClient, App]) -> None:
    client, _ = served
    schema = client.get("/openapi.json").json()
    problem = schema["components"]["schemas"]["Problem"]
    assert problem["required"] == ["type", "title", "status", "detail", "instance"]
    assert "HTTPValidationError" not in schema["components"]["schemas"]
    ref = {"$ref": "#/components/schemas/Problem"}
    for path, item in schema["paths"].items():
        for method, op in item.items():
            responses = op["responses"]
            assert responses["default"]["content"] == {PROBLEM_TYPE: {"schema": ref}}, (
                path,
                method,
            )
            assert responses["400"]["content"] == {PROBLEM_TYPE: {"schema": ref}}
    vuln = schema["paths"]["/v1/vulns/{advisory_id}"]["get"]["responses"]
    assert sorted(vuln) == [
        "200",
        "304",
        "400",
        "401",
        "403",
        "404",
        "413",
        "500",
        "503",
        "default",
    ]
