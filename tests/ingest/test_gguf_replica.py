"""GGUF repos through the Hub replica and the real huggingface_hub client: headers read by Range,
stored so that a restart reads nothing again, a hostile header recorded as "could not read" for
its file while the rest of the revision is ingested; the stored headers agree with gguf-py's
GGUFReader and with Hugging Face's @huggingface/gguf (node, reading the replica by Range)."""

from __future__ import annotations

import hashlib
import json
import shutil
import struct
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import gguf
import pytest
from ggufkit import (
    assert_agrees_with_gguf_py,
    element_bytes,
    gguf_reader,
    write_kinds,
    write_llama2,
    write_qwen25,
)
from helpers_ingest import open_store

from tracker.ingest.snapshots import poll_repo
from tracker.replica import Replica
from tracker.replica.repos import commit, init_repo
from tracker.shared.domain import GGUFArray, GGUFHeader, RepoId
from tracker.sources.gguf import TYPE_NAMES, parse_gguf_bytes
from tracker.sources.hub import HubSource
from tracker.store import RepoStatus
from tracker.watchlist import WatchedRepo

pytestmark = pytest.mark.replica

RID = RepoId("acme/llama-gguf")
T0 = datetime(2025, 3, 1, tzinfo=UTC)
WEB = Path(__file__).resolve().parents[1] / "web"
HOSTILE = b"GGUF" + struct.pack("<IQQ", 3, 0, 10**9)  # declares a billion keys


def _files(work: Path) -> dict[str, Path]:
    (single,) = write_llama2(work / "llama-2-7b.Q4_K_M.gguf", work, layers=2)
    (work / "split").mkdir()
    shards = write_llama2(work / "split" / "llama-2-7b.gguf", work, layers=2, split_max_tensors=8)
    (qwen,) = write_qwen25(work / "qwen2.5-7b-instruct-q4_k_m.gguf", version=2)
    (kinds,) = write_kinds(work / "kinds.gguf")
    out = {"llama-2-7b.Q4_K_M.gguf": single, "qwen/qwen2.5-7b-instruct-q4_k_m.gguf": qwen,
           "kinds.gguf": kinds}  # fmt: skip
    out.update({f"split/{f.name}": f for f in shards})
    return out


@pytest.fixture(scope="module")
def hub_files(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Replica, dict[str, Path]]]:
    """One replica and one set of written files for the module (writing them and starting the
    server are most of its time)."""
    root, work = tmp_path_factory.mktemp("hub"), tmp_path_factory.mktemp("work")
    local = _files(work)
    with Replica(root) as replica:
        yield replica, local


def _npm_oracle(urls: list[str]) -> list[dict[str, Any]]:
    """What @huggingface/gguf reads at each URL (one node process for all of them)."""
    node = shutil.which("node")
    assert node is not None, "node is needed for the @huggingface/gguf oracle"
    proc = subprocess.run(
        [node, str(WEB / "gguf_remote.mjs"), *urls], capture_output=True, timeout=300, check=False
    )
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    out = json.loads(proc.stdout)
    assert len(out) == len(urls)
    return out  # type: ignore[no-any-return]


def _nested_bytes(value: list[list[Any]]) -> bytes:
    out = b""
    for inner in value:
        kind = 8 if inner and isinstance(inner[0], str) else 5  # GGUFWriter's choice: string/int32
        item = "string" if kind == 8 else "int32"
        out += struct.pack("<IQ", kind, len(inner)) + element_bytes(inner, item)
    return out


BOM = "\ufeff"


def _restore_boms(key: str, value: list[Any], local: Path) -> list[Any]:
    """@huggingface/gguf decodes strings with TextDecoder's default BOM handling, which drops a
    leading U+FEFF: Llama-2's token 30143 *is* U+FEFF and reads as "". Where gguf-py reads a
    string beginning with U+FEFF, the npm value must be that string without it; it is put back
    so that the rest is compared element by element (through the digest)."""
    field = gguf_reader(local).fields[key]
    if field.types[-1] != gguf.GGUFValueType.STRING:
        return value
    py = field.contents()
    fixed = list(value)
    for i, s in enumerate(py):
        if isinstance(s, str) and s.startswith(BOM):
            assert value[i] == s.removeprefix(BOM), (key, i)
            fixed[i] = s
    return fixed


def _agrees_with_npm(header: GGUFHeader, out: dict[str, Any], local: Path) -> None:
    """Every key and tensor the npm reader read equals tracker's stored header."""
    keys = {
        k: v for k, v in out["keys"].items() if k not in ("version", "tensor_count", "kv_count")
    }
    assert list(keys) == list(header.metadata)
    assert out["keys"]["version"]["value"] == header.version
    assert int(out["tensorDataOffset"]) == header.data_offset
    for key, entry in keys.items():
        mine, value = header.metadata[key], entry["value"]
        typ = TYPE_NAMES[entry["type"]]
        if typ == "array":
            typ = f"array[{TYPE_NAMES[entry['subType']]}]"
        assert header.types[key] == typ, key
        if isinstance(mine, GGUFArray):
            assert mine.count == len(value), key
            if mine.item_type == "array":
                raw = _nested_bytes(value)
            else:
                items = [int(v) for v in value] if "int" in mine.item_type else value
                if mine.item_type == "string":
                    items = value = _restore_boms(key, value, local)
                raw = element_bytes(items, mine.item_type)
            assert mine.sha256 == hashlib.sha256(raw).hexdigest(), key
            assert all(value[i] == v for i, v in mine.special.items()), key
        elif typ in ("uint64", "int64"):
            assert mine == int(value), key
        else:
            assert mine == value, (key, mine, value)
    assert [t["name"] for t in out["tensors"]] == list(header.tensors)
    for t in out["tensors"]:
        mine = header.tensors[t["name"]]
        assert [int(d) for d in t["shape"]] == list(mine.shape) and int(t["offset"]) == mine.offset


def test_gguf_repo_by_range_both_oracles_hostile_file_and_restart(
    tmp_path: Path, hub_files: tuple[Replica, dict[str, Path]]
) -> None:
    hub, local = hub_files
    repo = init_repo(hub.root, RID)
    files: dict[str, bytes | None] = {p: f.read_bytes() for p, f in local.items()}
    files |= {"README.md": b"---\nlicense: llama2\n---\n# GGUF\n", "bad.gguf": HOSTILE}
    first = commit(repo, files, "Upload GGUF files", date=T0)
    hub.reset_requests()
    store = open_store(tmp_path)
    src = HubSource(hub.url, None, timeout_s=30, retry_attempts=2, retry_base_s=0.01)
    report = poll_repo(store, src, WatchedRepo(RID))
    assert report.status is RepoStatus.OK and report.new_revisions == (first,)
    snap = store.snapshot(RID, first)
    assert set(snap.gguf) == set(local)
    assert snap.unreadable == {
        "bad.gguf": "UnreadableArtifactError: bad.gguf: key/value count: declares "
        "1,000,000,000, over the bound of 10,000"
    }
    assert snap.files["README.md"].startswith(b"---")  # the rest of the revision is in
    for path, f in local.items():
        assert_agrees_with_gguf_py(f, snap.gguf[path])
    assert sorted(snap.gguf_models) == [
        "bad.gguf", "kinds.gguf", "llama-2-7b.Q4_K_M.gguf",
        "qwen/qwen2.5-7b-instruct-q4_k_m.gguf", "split/llama-2-7b.gguf",
    ]  # fmt: skip
    split = snap.gguf_models["split/llama-2-7b.gguf"]
    assert split.complete and len(split.shards) == 3
    assert not snap.gguf_models["bad.gguf"].complete
    # every .gguf read was a Range read (redirected to the LFS store, answered 206), never a
    # whole file
    gets = [r for r in hub.requests if "/resolve/" in r.path and r.path.endswith(".gguf")]
    assert gets and all(r.range is not None and r.status == 302 for r in gets)
    ranged = [r for r in hub.requests if r.range is not None]
    assert len(ranged) == 2 * len(gets) and {r.status for r in ranged} == {302, 206}
    assert not [r for r in hub.requests if r.method == "GET" and r.status == 200
                and r.bytes_sent > 100_000]  # fmt: skip
    # the second oracle, reading the replica's resolve URL by Range
    urls = [f"{hub.url}/{RID}/resolve/{first}/{path}" for path in local]
    for path, out in zip(local, _npm_oracle(urls), strict=True):
        _agrees_with_npm(snap.gguf[path], out, local[path])
    store.close()
    # a restart: a new store on the same database; a revision that changes only the README
    # reads no GGUF file again, and its snapshot carries the stored headers
    second = commit(repo, {"README.md": b"---\nlicense: llama2\n---\n# GGUF v2\n"}, "card",
                    date=T0 + timedelta(days=1))  # fmt: skip
    store = open_store(tmp_path)
    hub.reset_requests()
    report = poll_repo(store, src, WatchedRepo(RID))
    assert report.new_revisions == (second,)
    assert not [r for r in hub.requests if r.path.endswith(".gguf")]
    again = store.snapshot(RID, second)
    assert again.gguf == snap.gguf and again.unreadable == snap.unreadable
    store.close()


def test_answers_that_are_not_the_bytes_asked_for_are_read_again(
    hub_files: tuple[Replica, dict[str, Path]],
) -> None:
    """A server that ignores Range (the whole file from byte 0 for a read at 1 MiB), and a body
    cut short of its Content-Length, are the transport's faults: read again, the same header."""
    hub, local = hub_files
    data = local["llama-2-7b.Q4_K_M.gguf"].read_bytes()  # a 1.7 MB header: two reads
    assert (1 << 20) < len(data) < (3 << 20)
    rid = RepoId("acme/ranges")
    sha = commit(init_repo(hub.root, rid), {"model.gguf": data}, "upload", date=T0)
    expected = parse_gguf_bytes(data, max_bytes=100_000_000, file_size=len(data))
    src = HubSource(hub.url, None, timeout_s=30, retry_attempts=3, retry_base_s=0.01)
    (entry,) = [e for e in src.list_tree(rid, sha) if e.path == "model.gguf"]

    def read() -> GGUFHeader:
        return src.read_gguf_header(rid, sha, "model.gguf", 100_000_000, expect=entry)

    hub.inject_fault(r"/resolve/.*model\.gguf$", status=200, body=data, times=2)
    hub.reset_requests()
    assert read() == expected
    ranges = [r.range for r in hub.requests if r.path.endswith("model.gguf")]
    rest = f"bytes=1048576-{len(data) - 1}"  # the second read stops at the file's end
    assert ranges == ["bytes=0-1048575", rest, rest]  # the whole-file answer read again
    cut = {"Content-Length": str(1 << 20), "Content-Range": f"bytes 0-1048575/{len(data)}"}
    hub.inject_fault(r"/resolve/.*model\.gguf$", status=206, body=data[:1000], headers=cut)
    assert read() == expected
