"""The Hub adapter talks to its endpoint and nowhere else (no telemetry, no agent-registry fetch)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx2
import pytest

import tracker.sources.hub as hub_module
from tracker.domain import RepoId
from tracker.replica import Replica
from tracker.replica.repos import commit, init_repo
from tracker.sources.hub import HubSource


@pytest.mark.replica
def test_every_request_goes_to_the_configured_endpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[str] = []
    original = hub_module._count_request

    def spy(request: httpx2.Request) -> None:
        seen.append(str(request.url))
        original(request)

    monkeypatch.setattr(hub_module, "_count_request", spy)
    monkeypatch.setattr(hub_module, "_installed_timeout", None)  # re-install the client factory
    repo = init_repo(tmp_path / "hub", "acme/tiny")
    sha = commit(repo, {"config.json": json.dumps({"model_type": "llama"}).encode()}, "init")
    with Replica(tmp_path / "hub") as hub:
        url = hub.url
        source = HubSource(endpoint=hub.url, token=None, timeout_s=10, retry_attempts=1)
        assert source.resolve_ref(RepoId("acme/tiny"), "main") == sha
        assert source.read_file(RepoId("acme/tiny"), sha, "config.json", 1000).startswith(b"{")
    assert seen, "the spy saw no request: the counter hook is not installed"
    assert all(u.startswith(url + "/") for u in seen), seen
