"""Every Hub error kind the client raises maps to a tracker error; retries only for transient ones."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
from huggingface_hub import errors as hf_errors
from huggingface_hub.utils._http import hf_raise_for_status

from tracker.replica import Replica
from tracker.replica.repos import commit, init_repo
from tracker.shared import errors
from tracker.shared.domain import RepoId
from tracker.sources.hub import HubSource, _translate

URL = "http://127.0.0.1:9/api/models/acme/tiny/tree/main"


def hub_error(status: int, headers: dict[str, str] | None = None, body: bytes = b"") -> Exception:
    """The exception the real client raises for this response."""
    response = httpx2.Response(
        status, headers=headers or {}, content=body, request=httpx2.Request("GET", URL)
    )
    with pytest.raises(hf_errors.HfHubHTTPError) as info:
        hf_raise_for_status(response)
    return info.value


CASES = [
    (404, {"X-Error-Code": "RevisionNotFound"}, hf_errors.RevisionNotFoundError, errors.RevisionNotFoundError),
    (404, {"X-Error-Code": "EntryNotFound"}, hf_errors.RemoteEntryNotFoundError, errors.EntryNotFoundError),
    (401, {"X-Error-Code": "GatedRepo"}, hf_errors.GatedRepoError, errors.GatedRepoError),
    (403, {"X-Error-Code": "GatedRepo"}, hf_errors.GatedRepoError, errors.GatedRepoError),
    (404, {"X-Error-Code": "RepoNotFound"}, hf_errors.RepositoryNotFoundError, errors.RepoNotFoundError),
    (401, {"X-Error-Code": "RepoNotFound"}, hf_errors.RepositoryNotFoundError, errors.RepoNotFoundError),
    (403, {"X-Error-Message": "Access to this resource is disabled."}, hf_errors.DisabledRepoError,
     errors.AccessDeniedError),
    (400, {}, hf_errors.BadRequestError, errors.BadResponseError),
    (401, {}, hf_errors.HfHubHTTPError, errors.AccessDeniedError),
    (403, {}, hf_errors.HfHubHTTPError, errors.AccessDeniedError),
    (404, {}, hf_errors.HfHubHTTPError, errors.NotFoundError),
    (416, {}, hf_errors.HfHubHTTPError, errors.BadResponseError),
    (408, {}, hf_errors.HfHubHTTPError, errors.TransientSourceError),
    (429, {}, hf_errors.HfHubHTTPError, errors.TransientSourceError),
    (500, {}, hf_errors.HfHubHTTPError, errors.TransientSourceError),
    (502, {}, hf_errors.HfHubHTTPError, errors.TransientSourceError),
    (503, {}, hf_errors.HfHubHTTPError, errors.TransientSourceError),
    (504, {}, hf_errors.HfHubHTTPError, errors.TransientSourceError),
]  # fmt: skip


@pytest.mark.parametrize(("status", "headers", "hf_type", "ours"), CASES)
def test_http_errors_are_mapped(
    status: int, headers: dict[str, str], hf_type: type[Exception], ours: type[Exception]
) -> None:
    exc = hub_error(status, headers)
    assert type(exc) is hf_type
    mapped = _translate(exc, "acme/tiny")
    assert type(mapped) is ours
    assert str(mapped).startswith("acme/tiny: ")


def test_retry_after_and_ratelimit_headers() -> None:
    mapped = _translate(hub_error(429, {"Retry-After": "7"}), "x")
    assert isinstance(mapped, errors.TransientSourceError) and mapped.retry_after == 7.0
    mapped = _translate(hub_error(429, {"RateLimit": '"api";r=0;t=5'}), "x")
    assert isinstance(mapped, errors.TransientSourceError) and mapped.retry_after == 6.0
    mapped = _translate(hub_error(503, {"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}), "x")
    assert isinstance(mapped, errors.TransientSourceError) and mapped.retry_after is None


@pytest.mark.parametrize(
    ("exc", "ours"),
    [
        (httpx2.ReadTimeout("slow"), errors.TransientSourceError),
        (httpx2.ConnectTimeout("slow"), errors.TransientSourceError),
        (httpx2.ConnectError("refused"), errors.TransientSourceError),
        (httpx2.RemoteProtocolError("peer closed"), errors.TransientSourceError),
        (httpx2.ReadError("reset"), errors.TransientSourceError),
        (json.JSONDecodeError("Expecting value", "<html>", 0), errors.BadResponseError),
        (KeyError("branches"), errors.BadResponseError),
        (ValueError("Cannot parse date"), errors.BadResponseError),
        (OSError("Consistency check failed"), errors.BadResponseError),
        (errors.OversizedArtifactError("big"), errors.OversizedArtifactError),
    ],
)
def test_transport_and_payload_errors_are_mapped(exc: Exception, ours: type[Exception]) -> None:
    assert type(_translate(exc, "x")) is ours


@pytest.fixture
def hub(tmp_path: Path) -> Iterator[Replica]:
    commit(init_repo(tmp_path, "acme/tiny"), {"config.json": b"{}"}, "one")
    with Replica(tmp_path) as h:
        yield h


@pytest.mark.replica
def test_retries_honour_retry_after_and_never_retry_not_found(hub: Replica) -> None:
    sleeps: list[float] = []
    src = HubSource(hub.url, retry_attempts=3, retry_base_s=0.01, sleep=sleeps.append)
    rid = RepoId("acme/tiny")
    hub.inject_fault(
        r"/api/models/acme/tiny/refs", status=503, headers={"Retry-After": "2"}, times=2
    )
    assert len(src.resolve_ref(rid, "main")) == 40
    assert sleeps == [2.0, 2.0] and [r.status for r in hub.requests] == [503, 503, 200]

    sleeps.clear()
    hub.reset_requests()
    hub.inject_fault(r"/api/models/acme/tiny/refs", status=502, times=3)
    with pytest.raises(errors.TransientSourceError, match="HTTP 502"):
        src.resolve_ref(rid, "main")
    assert sleeps == [0.01, 0.02] and len(hub.requests) == 3

    sleeps.clear()
    hub.reset_requests()
    hub.inject_fault(
        r"/api/models/acme/tiny/refs", status=404, headers={"X-Error-Code": "RepoNotFound"}
    )
    with pytest.raises(errors.RepoNotFoundError):
        src.resolve_ref(rid, "main")
    hub.inject_fault(
        r"/api/models/acme/tiny/refs", status=401, headers={"X-Error-Code": "GatedRepo"}
    )
    with pytest.raises(errors.GatedRepoError):
        src.resolve_ref(rid, "main")
    assert sleeps == [] and len(hub.requests) == 2


@pytest.mark.replica
def test_truncated_and_oversized_file_bodies(hub: Replica) -> None:
    src = HubSource(hub.url, retry_attempts=1)
    rid = RepoId("acme/tiny")
    sha = src.resolve_ref(rid, "main")
    hub.inject_fault(r"/resolve/.*/config\.json", status=200, body=b'{"a"',
                     headers={"Content-Length": "100"})  # fmt: skip
    with pytest.raises(errors.SourceError):
        src.read_file(rid, sha, "config.json", 1000)
    hub.inject_fault(r"/resolve/.*/config\.json", status=200, body=b"x" * 5000)
    with pytest.raises(errors.OversizedArtifactError, match="over the cap of 100 bytes"):
        src.read_file(rid, sha, "config.json", 100)
    assert src.read_file(rid, sha, "config.json", 100) == b"{}"
