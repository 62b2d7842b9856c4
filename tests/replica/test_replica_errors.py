"""Every not-found kind, gated and private repos, and path traversal, as the real client sees them."""

from __future__ import annotations

import http.client
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers_replica import T0, make_llama
from huggingface_hub import HfApi, hf_hub_download
from huggingface_hub.errors import (
    GatedRepoError,
    HfHubHTTPError,
    NotASafetensorsRepoError,
    RemoteEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)

from tracker.replica import Replica
from tracker.replica.repos import commit, init_repo

pytestmark = pytest.mark.replica


def _api(hub: Replica, token: str | bool = False) -> HfApi:
    return HfApi(endpoint=hub.url, token=token)


def test_missing_repo_revision_and_entry(
    hub: Replica, llama: dict[str, Any], cache_dir: Path
) -> None:
    api = _api(hub)
    with pytest.raises(RepositoryNotFoundError) as repo_err:
        api.model_info("acme/nope")
    assert repo_err.value.response.status_code == 401  # anonymous: the Hub's 401, plus X-Error-Code
    assert repo_err.value.response.headers["X-Error-Code"] == "RepoNotFound"
    with pytest.raises(RevisionNotFoundError):
        api.model_info("acme/llama", revision="no-such-branch")
    with pytest.raises(RevisionNotFoundError):
        list(api.list_repo_commits("acme/llama", revision="0" * 40))
    with pytest.raises(RevisionNotFoundError):
        list(api.list_repo_tree("acme/llama", revision="v9"))
    with pytest.raises(RemoteEntryNotFoundError):
        list(api.list_repo_tree("acme/llama", path_in_repo="no/such/dir"))
    with pytest.raises(RemoteEntryNotFoundError):
        hf_hub_download(
            "acme/llama", "missing.txt", endpoint=hub.url, cache_dir=cache_dir, token=False
        )
    with pytest.raises(RevisionNotFoundError):
        hf_hub_download(
            "acme/llama", "config.json", revision="nope", endpoint=hub.url, cache_dir=cache_dir
        )
    with pytest.raises(RepositoryNotFoundError):
        hf_hub_download("acme/nope", "config.json", endpoint=hub.url, cache_dir=cache_dir)
    with pytest.raises(RepositoryNotFoundError):
        api.list_repo_refs("acme/nope")
    assert api.repo_exists("acme/llama") is True
    assert api.repo_exists("acme/nope") is False
    assert api.revision_exists("acme/llama", "dev") is True
    assert api.revision_exists("acme/llama", "gone") is False
    assert api.file_exists("acme/llama", "config.json") is True
    assert api.file_exists("acme/llama", "nope.json") is False
    with pytest.raises(NotASafetensorsRepoError):
        api.get_safetensors_metadata("acme/nope")  # the client's own rule (HUB-PROTOCOL.md §14.11)


def test_short_sha_and_rev_syntax_are_not_revisions(hub: Replica, llama: dict[str, Any]) -> None:
    api = _api(hub)
    for rev in (llama["first"][:7], "main~1", "HEAD", "main^", "--all", "refs/heads/../heads/main"):
        with pytest.raises(RevisionNotFoundError):
            api.model_info("acme/llama", revision=rev)
    assert api.model_info("acme/llama", revision="refs/heads/dev").sha == llama["first"]


def test_gated_repo(root: Path, hub: Replica, cache_dir: Path) -> None:
    make_llama(root)
    (root / "acme" / "llama.replica.json").write_text(json.dumps({"gated": "manual"}))
    (root / ".replica-tokens.json").write_text(
        json.dumps({"hf_granted": ["acme/llama"], "hf_other": ["acme/other"]})
    )
    info = _api(hub).model_info("acme/llama")  # metadata stays visible, as on the Hub
    assert info.gated == "manual"
    assert _api(hub).list_repo_refs("acme/llama").branches[0].name in ("dev", "main")
    with pytest.raises(GatedRepoError) as anon:
        hf_hub_download(
            "acme/llama", "config.json", endpoint=hub.url, cache_dir=cache_dir, token=False
        )
    assert anon.value.response.status_code == 401
    with pytest.raises(GatedRepoError) as other:
        hf_hub_download(
            "acme/llama", "config.json", endpoint=hub.url, cache_dir=cache_dir, token="hf_other"
        )
    assert other.value.response.status_code == 403
    with pytest.raises(GatedRepoError):
        list(_api(hub).list_repo_commits("acme/llama"))
    with pytest.raises(GatedRepoError):
        _api(hub).get_safetensors_metadata("acme/llama")
    path = hf_hub_download(
        "acme/llama", "model.safetensors", endpoint=hub.url, cache_dir=cache_dir, token="hf_granted"
    )
    assert (
        Path(path).stat().st_size == 8 + int.from_bytes(Path(path).read_bytes()[:8], "little") + 38
    )
    assert len(list(_api(hub, "hf_granted").list_repo_commits("acme/llama"))) == 2


def test_private_repo_and_bad_token(root: Path, hub: Replica) -> None:
    repo = init_repo(root, "acme/secret")
    commit(repo, {"a.txt": b"a\n"}, "init", date=T0)
    (root / "acme" / "secret.replica.json").write_text(json.dumps({"private": True}))
    (root / ".replica-tokens.json").write_text(json.dumps({"hf_ok": ["acme/secret"], "hf_no": []}))
    with pytest.raises(RepositoryNotFoundError) as anon:
        _api(hub).model_info("acme/secret")
    assert anon.value.response.status_code == 401
    with pytest.raises(RepositoryNotFoundError) as denied:
        _api(hub, "hf_no").model_info("acme/secret")
    assert denied.value.response.status_code == 404  # hidden: same as a missing repo
    assert _api(hub, "hf_ok").model_info("acme/secret").private is True
    with pytest.raises(HfHubHTTPError) as bad:
        _api(hub, "hf_unknown").model_info("acme/secret")
    assert not isinstance(bad.value, RepositoryNotFoundError)
    assert bad.value.response.status_code == 401
    assert "Invalid credentials" in bad.value.response.headers["X-Error-Message"]


def _raw(hub: Replica, method: str, path: str) -> tuple[int, bytes]:
    """Send `path` byte for byte (no client-side normalisation of `..` or `%2e`)."""
    host, port = hub.url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        conn.putrequest(method, path, skip_accept_encoding=True)
        conn.endheaders()
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def test_traversal_is_rejected(
    tmp_path: Path, root: Path, hub: Replica, llama: dict[str, Any]
) -> None:
    secret = b"TOP-SECRET-OUTSIDE-ROOT"
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "HEAD").write_bytes(secret)
    (tmp_path / "secret.txt").write_bytes(secret)
    attempts = [
        "/api/models/../outside",
        "/api/models/%2e%2e/outside",
        "/api/models/acme/%2e%2e",
        "/api/models/acme/..%2F..%2Foutside",
        "/api/models/acme%2F..%2F..%2F/outside/refs",
        "/api/models/acme/llama/../../../secret.txt",
        "/%2e%2e/outside/resolve/main/HEAD",
        "/../outside/resolve/main/HEAD",
        "/acme/llama/resolve/main/..%2F..%2F..%2F..%2Fsecret.txt",
        "/acme/llama/resolve/main/../../../../secret.txt",
        "/acme/llama/resolve/%2e%2e%2f%2e%2e/secret.txt",
        "/acme/llama/resolve/main/%2Fetc%2Fpasswd",
        "/api/models/acme/llama/tree/main/..%2F..%2F..",
        "/api/models/-acme/llama",
        "/api/models/acme/ll%00ama",
        "/api/models/acme/llama/revision/..%2F..%2Fsecret.txt",
        "/cdn-lfs/acme/llama/" + "0" * 64 + "?commit=x&path=..%2F..%2Fsecret.txt&sig=bad",
    ]
    for path in attempts:
        status, body = _raw(hub, "GET", path)
        assert 400 <= status < 500, (path, status)
        assert secret not in body, path
    status, _ = _raw(hub, "GET", "/api/models/acme/llama/refs")
    assert status == 200


def test_invalid_repo_id_is_a_bad_request(hub: Replica) -> None:
    response = httpx.get(f"{hub.url}/api/models/ac%20me/llama")
    assert response.status_code == 400
    assert "Invalid repo id" in response.json()["error"]
