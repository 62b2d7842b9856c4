"""The Hub adapter talks to its endpoint and nowhere else (no telemetry, no agent-registry fetch),
and counts its requests per source instance."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from huggingface_hub import constants as hf_constants

from tracker.replica import Replica
from tracker.replica.repos import commit, init_repo
from tracker.shared.domain import RepoId
from tracker.sources.hub import HubSource


@pytest.mark.replica
def test_every_request_goes_to_the_configured_endpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As in a process started without HF_HUB_DISABLE_TELEMETRY (the test set-up exports it).
    monkeypatch.setattr(hf_constants, "HF_HUB_DISABLE_TELEMETRY", False)
    repo = init_repo(tmp_path / "hub", "acme/tiny")
    sha = commit(repo, {"config.json": json.dumps({"model_type": "llama"}).encode()}, "init")
    with Replica(tmp_path / "hub") as hub:
        source = HubSource(endpoint=hub.url, token=None, timeout_s=10, retry_attempts=1)
        assert source.resolve_ref(RepoId("acme/tiny"), "main") == sha
        assert source.read_file(RepoId("acme/tiny"), sha, "config.json", 1000).startswith(b"{")
        served = hub.requests
    # The source's counter sees every request the client sends, wherever it goes; the replica
    # served exactly as many, so none left for another host (the public Hub's agent registry).
    assert source.request_count == 2
    assert [r.path for r in served] == [
        "/api/models/acme/tiny/refs",
        f"/acme/tiny/resolve/{sha}/config.json",
    ]


@pytest.mark.replica
def test_requests_are_counted_per_source_instance(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "hub", "acme/tiny")
    sha = commit(repo, {"config.json": b"{}"}, "init")
    with Replica(tmp_path / "hub") as hub:
        a = HubSource(endpoint=hub.url, timeout_s=10, retry_attempts=1)
        b = HubSource(endpoint=hub.url, timeout_s=10, retry_attempts=1)
        a.resolve_ref(RepoId("acme/tiny"), "main")
        a.read_file(RepoId("acme/tiny"), sha, "config.json", 100)
        b.resolve_ref(RepoId("acme/tiny"), "main")
        assert (a.request_count, b.request_count) == (2, 1)
        assert len(hub.requests) == 3
