"""Raw HTTP behaviour of the replica: ranges, headers, fault injection, concurrency, keep-alive, CLI."""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import pickle
import subprocess
import sys
import threading
import zipfile
from collections import OrderedDict
from io import BytesIO
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers_replica import T0
from huggingface_hub import HfApi
from huggingface_hub.errors import HfHubHTTPError

from tracker.replica import Replica
from tracker.replica.repos import commit, init_repo, write_sparse_lfs_object

pytestmark = pytest.mark.replica


def _lfs_url(hub: Replica, path: str) -> str:
    head = httpx.head(f"{hub.url}/acme/llama/resolve/main/{path}")
    assert head.status_code == 302
    return head.headers["Location"]


def test_resolve_headers(hub: Replica, llama: dict[str, Any]) -> None:
    files: dict[str, bytes] = llama["files"]
    config = httpx.head(f"{hub.url}/acme/llama/resolve/main/config.json")
    assert config.status_code == 200
    blob_id = hashlib.sha1(
        b"blob %d\0" % len(files["config.json"]) + files["config.json"]
    ).hexdigest()
    assert config.headers["ETag"] == f'"{blob_id}"'
    assert config.headers["X-Repo-Commit"] == llama["second"]
    assert config.headers["Content-Length"] == str(len(files["config.json"]))
    assert config.headers["Accept-Ranges"] == "bytes"
    model = httpx.head(f"{hub.url}/acme/llama/resolve/v1.0/model.safetensors")
    oid = hashlib.sha256(files["model.safetensors"]).hexdigest()
    assert model.status_code == 302
    assert model.headers["X-Linked-Etag"] == f'"{oid}"'
    assert model.headers["X-Linked-Size"] == str(len(files["model.safetensors"]))
    assert model.headers["X-Repo-Commit"] == llama["first"]
    assert not any(h.lower().startswith("x-xet") for h in model.headers)
    cdn = httpx.head(model.headers["Location"])
    assert cdn.status_code == 200
    assert cdn.headers["ETag"] == f'"{oid}"'
    assert cdn.headers["X-Repo-Commit"] == llama["first"]
    assert cdn.headers["Content-Length"] == str(len(files["model.safetensors"]))
    tampered = model.headers["Location"].replace("sig=", "sig=0")
    assert httpx.get(tampered).status_code == 403


def test_range_requests(hub: Replica, llama: dict[str, Any]) -> None:
    data: bytes = llama["files"]["model.safetensors"]
    size = len(data)
    url = _lfs_url(hub, "model.safetensors")
    cases = {
        "bytes=0-9": (206, data[0:10], f"bytes 0-9/{size}"),
        "bytes=5-": (206, data[5:], f"bytes 5-{size - 1}/{size}"),
        "bytes=-4": (206, data[-4:], f"bytes {size - 4}-{size - 1}/{size}"),
        f"bytes=10-{size + 100}": (206, data[10:], f"bytes 10-{size - 1}/{size}"),
        "bytes=0-1,4-5": (200, data, None),  # multi-range: served whole
    }
    for spec, (status, body, content_range) in cases.items():
        response = httpx.get(url, headers={"Range": spec})
        assert response.status_code == status, spec
        assert response.content == body, spec
        assert response.headers.get("Content-Range") == content_range, spec
    for spec in (f"bytes={size}-", f"bytes={size + 5}-{size + 9}", "bytes=-0"):
        response = httpx.get(url, headers={"Range": spec})
        assert response.status_code == 416, spec
        assert response.headers["Content-Range"] == f"bytes */{size}"
    # Regular (non-LFS) files take ranges too.
    text: bytes = llama["files"]["config.json"]
    part = httpx.get(
        f"{hub.url}/acme/llama/resolve/main/config.json", headers={"Range": "bytes=2-6"}
    )
    assert (part.status_code, part.content) == (206, text[2:7])
    head = httpx.head(url, headers={"Range": "bytes=3-4"})
    assert (head.status_code, head.headers["Content-Length"]) == (206, "2")


def test_sparse_multi_gigabyte_object_is_streamed(root: Path, hub: Replica) -> None:
    repo = init_repo(root, "acme/big")
    size = 2**31 + 10  # past the signed 32-bit limit
    pointer = write_sparse_lfs_object(repo, b"HEAD-BYTES", size)
    commit(repo, {"model.bin": pointer}, "2 GiB sparse", date=T0)
    api = HfApi(endpoint=hub.url, token=False)
    info = api.model_info("acme/big", files_metadata=True)
    assert info.siblings is not None and info.siblings[0].size == size
    (entry,) = api.list_repo_tree("acme/big", expand=True)
    assert entry.security is not None  # type: ignore[union-attr]
    assert entry.security["status"] == "unscanned"  # type: ignore[union-attr]  # not a pickle
    head = httpx.head(f"{hub.url}/acme/big/resolve/main/model.bin", follow_redirects=True)
    assert head.headers["Content-Length"] == str(size)
    tail = httpx.get(
        f"{hub.url}/acme/big/resolve/main/model.bin",
        headers={"Range": f"bytes={size - 3}-"},
        follow_redirects=True,
    )
    assert (tail.status_code, tail.content) == (206, b"\0\0\0")
    start = httpx.get(
        f"{hub.url}/acme/big/resolve/main/model.bin",
        headers={"Range": "bytes=0-9"},
        follow_redirects=True,
    )
    assert start.content == b"HEAD-BYTES"


def test_fault_injection(hub: Replica, llama: dict[str, Any]) -> None:
    api = HfApi(endpoint=hub.url, token=False)
    hub.inject_fault(r"/commits/", status=503, body=b"busy", headers={"Retry-After": "0"}, times=1)
    assert len(list(api.list_repo_commits("acme/llama"))) == 2  # the client retried once
    commits = [r for r in hub.requests if "/commits/" in r.path]
    assert [r.status for r in commits] == [503, 200]

    hub.inject_fault(r"^/api/models/acme/llama$", status=500, body=b"<html>oops</html>",
                     headers={"Content-Type": "text/html"}, method="GET")  # fmt: skip
    with pytest.raises(HfHubHTTPError) as err:
        api.model_info("acme/llama")
    assert err.value.response.status_code == 500
    assert api.model_info("acme/llama").sha == llama["second"]  # consumed after one use

    hub.inject_fault(r"/refs$", status=200, body=b'{"branches": [', times=2,
                     headers={"Content-Type": "application/json"})  # fmt: skip
    for _ in range(2):
        with pytest.raises(ValueError):
            api.list_repo_refs("acme/llama")
    assert api.list_repo_refs("acme/llama").branches

    hub.inject_fault(r"refs/pr/1", status=404, headers={"X-Error-Code": "RevisionNotFound"})
    with pytest.raises(HfHubHTTPError):
        api.model_info("acme/llama", revision="refs/pr/1")  # matched on the decoded path

    hub.inject_fault(r"/refs$", status=200, method="POST")
    assert api.list_repo_refs("acme/llama").branches  # method filter: GET is not faulted
    with pytest.raises(ValueError):
        hub.inject_fault(r"x", times=0)


def test_fault_disconnect_and_truncation(hub: Replica, llama: dict[str, Any]) -> None:
    hub.inject_fault(r"/refs$", disconnect=True)
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{hub.url}/api/models/acme/llama/refs")
    hub.inject_fault(r"/refs$", body=b'{"bra', headers={"Content-Length": "100"}, status=200)
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{hub.url}/api/models/acme/llama/refs")
    assert httpx.get(f"{hub.url}/api/models/acme/llama/refs").status_code == 200


def test_requests_are_recorded(hub: Replica, llama: dict[str, Any]) -> None:
    hub.reset_requests()
    httpx.get(f"{hub.url}/api/models/acme/llama/tree/main?recursive=true&expand=false")
    httpx.get(f"{hub.url}/acme/llama/resolve/main/extra.txt", headers={"Range": "bytes=0-1"})
    records = hub.requests
    assert [(r.method, r.path, r.query, r.status, r.range) for r in records] == [
        ("GET", "/api/models/acme/llama/tree/main", "recursive=true&expand=false", 200, None),
        ("GET", "/acme/llama/resolve/main/extra.txt", "", 206, "bytes=0-1"),
    ]
    assert records[1].bytes_sent == 2
    hub.reset_requests()
    assert hub.requests == []


def test_concurrent_clients_and_keep_alive(hub: Replica, llama: dict[str, Any]) -> None:
    results: list[int] = []
    lock = threading.Lock()

    def worker() -> None:
        with httpx.Client() as client:
            for _ in range(10):
                status = client.get(f"{hub.url}/api/models/acme/llama/refs").status_code
                with lock:
                    results.append(status)

    threads = [threading.Thread(target=worker) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert results == [200] * 160

    host, port = hub.url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        for _ in range(3):  # three requests on one connection
            conn.request("GET", "/api/models/acme/llama/refs")
            response = conn.getresponse()
            assert response.status == 200
            assert json.loads(response.read())["branches"]
        conn.request("HEAD", "/acme/llama/resolve/main/extra.txt")
        head = conn.getresponse()
        assert head.read() == b"" and head.headers["Content-Length"] == "6"
        conn.request("GET", "/acme/llama/resolve/main/extra.txt")
        assert conn.getresponse().read() == b"extra\n"
    finally:
        conn.close()


class _Evil:
    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (os.system, ("echo pwned",))


def test_pickle_scan_in_tree(root: Path, hub: Replica) -> None:
    repo = init_repo(root, "acme/pickles")
    zipped = BytesIO()
    with zipfile.ZipFile(zipped, "w") as archive:  # the torch.save layout
        archive.writestr("archive/data.pkl", pickle.dumps(OrderedDict(a=1), protocol=2))
    commit(
        repo,
        {
            "evil.bin": pickle.dumps(_Evil(), protocol=4),  # never loaded, only scanned
            "pytorch_model.bin": zipped.getvalue(),
            "config.json": b"{}",
        },
        "pickles",
        date=T0,
    )
    in_git = pickle.dumps(OrderedDict(b=2), protocol=4)
    commit(repo, {"state.pkl": in_git}, "a pickle kept in git", date=T0, lfs=lambda p, d: False)
    api = HfApi(endpoint=hub.url, token=False)
    tree = {e.path: e for e in api.list_repo_tree("acme/pickles", expand=True)}
    assert tree["state.pkl"].lfs is None  # type: ignore[union-attr]
    assert tree["state.pkl"].security["status"] == "safe"  # type: ignore[index]
    evil = tree["evil.bin"].security
    assert evil is not None and evil["status"] == "unsafe"
    assert evil["pickle_import_scan"]["highestSafetyLevel"] == "dangerous"
    modules = {(i["module"], i["name"]) for i in evil["pickle_import_scan"]["imports"]}
    assert modules == {(os.system.__module__, "system")}
    good = tree["pytorch_model.bin"].security
    assert good is not None and good["status"] == "safe"
    assert good["pickle_import_scan"]["imports"] == [
        {"module": "collections", "name": "OrderedDict", "safety": "innocuous"}
    ]
    assert tree["config.json"].security["pickle_import_scan"] is None  # type: ignore[index]
    info = api.model_info("acme/pickles", securityStatus=True)
    assert info.security_repo_status == {
        "scansDone": True,
        "filesWithIssues": [{"path": "evil.bin", "level": "unsafe"}],
    }


def test_cli_serve(root: Path, llama: dict[str, Any]) -> None:
    code = "import sys; from tracker.cli import main; main(sys.argv[1:])"
    proc = subprocess.Popen(
        [sys.executable, "-c", code, "replica", "serve", "--root", str(root), "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = json.loads(proc.stdout.readline())
        refs = httpx.get(f"{line['url']}/api/models/acme/llama/refs").json()
        assert {b["name"] for b in refs["branches"]} == {"main", "dev"}
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()
        proc.stderr.close()
    assert proc.returncode == 0


@pytest.mark.parametrize("disable_xet", ["1", ""])
def test_client_via_hf_endpoint_in_subprocess(
    tmp_path: Path, hub: Replica, llama: dict[str, Any], disable_xet: str
) -> None:
    script = (
        "from huggingface_hub import hf_hub_download, HfApi\n"
        "p = hf_hub_download('acme/llama', 'model.safetensors')\n"
        "print(HfApi().model_info('acme/llama').sha)\n"
        "print(open(p, 'rb').read().hex())\n"
    )
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HF_ENDPOINT": hub.url,
        "HF_HOME": str(tmp_path / "sub-hf-home"),
        "HF_HUB_DISABLE_TELEMETRY": "1",
    }
    if disable_xet:  # with Xet left on, the client must still stay on plain HTTP (no Xet headers)
        env["HF_HUB_DISABLE_XET"] = disable_xet
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    sha, data = out.stdout.split()
    assert sha == llama["second"]
    assert bytes.fromhex(data) == llama["files"]["model.safetensors"]


def test_broken_repo_is_a_500_and_the_server_keeps_serving(
    root: Path, hub: Replica, llama: dict[str, Any]
) -> None:
    broken = init_repo(root, "acme/broken")
    commit(broken, {"a.txt": b"a\n"}, "init", date=T0)
    for pack in (broken / "objects").rglob("*"):
        if pack.is_file() and pack.parent.name != "info":
            pack.unlink()  # refs survive, objects are gone
    response = httpx.get(f"{hub.url}/api/models/acme/broken/tree/main")
    assert response.status_code == 500
    assert "replica error" in response.json()["error"]
    assert httpx.get(f"{hub.url}/api/models/acme/llama/refs").status_code == 200
    status, _ = _raw_with_length(hub, "abc")
    assert status == 400


def _raw_with_length(hub: Replica, length: str) -> tuple[int, bytes]:
    host, port = hub.url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        conn.putrequest("POST", "/api/models/acme/llama/paths-info/main")
        conn.putheader("Content-Length", length)
        conn.endheaders()
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def test_multi_chunk_lfs_download(root: Path, hub: Replica, tmp_path: Path) -> None:
    from huggingface_hub import hf_hub_download

    repo = init_repo(root, "acme/chunks")
    data = b"".join(hashlib.sha256(str(i).encode()).digest() for i in range(110_000))  # ~3.4 MiB
    commit(repo, {"weights.bin": data}, "big", date=T0)
    path = hf_hub_download(
        "acme/chunks", "weights.bin", endpoint=hub.url, cache_dir=tmp_path / "c", token=False
    )
    assert Path(path).read_bytes() == data
    gets = [r for r in hub.requests if r.method == "GET" and r.path.startswith("/cdn-lfs/")]
    assert [r.bytes_sent for r in gets] == [len(data)]
