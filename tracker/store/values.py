"""Frozen values the store hands out and takes in (no ORM rows cross this boundary)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from tracker.shared.domain import (
    Commit,
    GGUFArray,
    GGUFHeader,
    GGUFTensor,
    JSONValue,
    RepoId,
    SafetensorsHeader,
    Sha,
    TensorInfo,
)
from tracker.shared.errors import StoreError


@dataclass(frozen=True)
class StoredRevision:
    """One ingested revision of a repo.

    `seq` counts ingested revisions of the repo from 1 in ingestion order; `previous` is the
    revision ingested before it on the ref (None for the first); `analysed` is True once
    `mark_analysed` was called; `rewritten_away` is True once a force-push dropped it from the
    ref's history (rows are never deleted).
    """

    commit: Commit
    seq: int
    previous: Sha | None
    analysed: bool
    rewritten_away: bool = False
    ingested_at: datetime | None = None
    could_not_analyse: AnalysisOverrun | None = None

    @property
    def sha(self) -> Sha:
        return self.commit.sha


@dataclass(frozen=True)
class AnalysisOverrun:
    """A revision whose analysis overran its budget (`tracker.sandbox.analysis_worker`): recorded instead
    of analysed, published nothing, tried again only once a limit is raised.

    `kind`: `time`, `memory` or `died`; `reason`: one line; `timeout_s`/`memory_mib`: the limits
    it ran under; `at`: when it was recorded."""

    kind: str
    reason: str
    timeout_s: float
    memory_mib: int
    at: datetime

    def as_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "reason": self.reason,
            "limits": {"timeout_s": self.timeout_s, "memory_mib": self.memory_mib},
            "at": self.at.isoformat(),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> AnalysisOverrun:
        limits = data["limits"]
        return cls(
            kind=str(data["kind"]),
            reason=str(data["reason"]),
            timeout_s=float(limits["timeout_s"]),
            memory_mib=int(limits["memory_mib"]),
            at=datetime.fromisoformat(str(data["at"])),
        )


class RepoStatus(StrEnum):
    """Ingestion state of a watched repo."""

    NEW = "new"  # never polled
    OK = "ok"  # last poll succeeded
    FAILING = "failing"  # last poll failed (transient, bad response, store ...)
    GONE = "gone"  # the repo or the watched ref no longer exists
    GATED = "gated"  # gated or private and our token has no access


@dataclass(frozen=True)
class RepoState:
    """A watched repo as the store knows it: source, cursor and poll bookkeeping."""

    repo_id: RepoId
    source_kind: str
    url: str | None
    ref: str
    cursor: Sha | None
    status: RepoStatus
    last_poll_at: datetime | None
    last_success_at: datetime | None
    consecutive_failures: int
    last_error: str | None
    revisions: int
    could_not_analyse: tuple[tuple[Sha, AnalysisOverrun], ...] = ()
    """Live revisions whose analysis overran its budget, oldest first."""


class EventKind(StrEnum):
    """Things that happen to a repo besides new revisions."""

    FORCE_PUSH = "force_push"  # the cursor is no longer in the ref's history
    REF_CHANGED = "ref_changed"  # the watchlist now follows another ref (nothing is rewritten)
    REF_DELETED = "ref_deleted"
    REPO_GONE = "repo_gone"
    ACCESS_DENIED = "access_denied"  # gated / private
    RECOVERED = "recovered"  # a gone/gated/failing repo answered again


@dataclass(frozen=True)
class Event:
    """A recorded event with its time (UTC) and JSON details."""

    repo_id: RepoId
    at: datetime
    kind: EventKind
    details: dict[str, JSONValue] = field(default_factory=dict)


class FileKind(StrEnum):
    """What the store holds for a tracked path at a revision."""

    CONTENT = "content"  # the file's bytes, as fetched
    HEADER = "header"  # a parsed safetensors header (canonical JSON)
    GGUF_HEADER = "gguf_header"  # a parsed GGUF header (canonical JSON: `encode_gguf`)
    UNREADABLE = "unreadable"  # why it could not be fetched or parsed


@dataclass(frozen=True)
class FileVersion:
    """A tracked path's state at one revision.

    New content carries `data` (the store hashes and stores it); carried-forward versions carry
    only `blob_sha256` (already stored). `fetched` says whether this revision fetched it.
    """

    kind: FileKind
    blob_sha256: str | None = None
    reason: str | None = None
    data: bytes | None = None
    fetched: bool = False

    @classmethod
    def content(cls, data: bytes) -> FileVersion:
        return cls(FileKind.CONTENT, data=data, fetched=True)

    @classmethod
    def header(cls, header: SafetensorsHeader) -> FileVersion:
        return cls(FileKind.HEADER, data=encode_header(header), fetched=True)

    @classmethod
    def gguf(cls, header: GGUFHeader) -> FileVersion:
        return cls(FileKind.GGUF_HEADER, data=encode_gguf(header), fetched=True)

    @classmethod
    def unreadable(cls, reason: str) -> FileVersion:
        return cls(FileKind.UNREADABLE, reason=reason, fetched=True)

    def carried(self) -> FileVersion:
        """This version as a later revision inherits it (no bytes, not fetched)."""
        if self.data is not None:
            raise StoreError("only stored file versions can be carried forward")
        return FileVersion(self.kind, self.blob_sha256, self.reason, None, False)


def encode_header(header: SafetensorsHeader) -> bytes:
    """Canonical JSON of a parsed header (sorted keys): equal headers give equal bytes."""
    obj: dict[str, Any] = {
        name: {"dtype": t.dtype, "shape": list(t.shape), "nbytes": t.nbytes}
        for name, t in header.tensors.items()
    }
    if header.metadata:
        obj["__metadata__"] = dict(header.metadata)
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def decode_header(data: bytes) -> SafetensorsHeader:
    """Inverse of `encode_header`."""
    obj = json.loads(data)
    metadata = obj.pop("__metadata__", {})
    tensors = {
        name: TensorInfo(dtype=t["dtype"], shape=tuple(t["shape"]), nbytes=t["nbytes"])
        for name, t in obj.items()
    }
    return SafetensorsHeader(tensors=tensors, metadata=metadata)


def _gguf_value(value: JSONValue) -> JSONValue:
    if isinstance(value, GGUFArray):
        return {
            "count": value.count,
            "item_type": value.item_type,
            "sha256": value.sha256,
            "special": {str(k): v for k, v in sorted(value.special.items())},
        }
    return value


def encode_gguf(header: GGUFHeader) -> bytes:
    """Canonical JSON of a parsed GGUF header: keys and tensors in file order, each key's GGUF
    type beside its value; a digested array is `{"digest": {count, item_type, sha256, special}}`
    (a kept one a list). Equal headers give equal bytes. Floats keep their exact value (NaN and
    infinities as Python's json writes them)."""
    obj: dict[str, Any] = {
        "format": "gguf",
        "version": header.version,
        "alignment": header.alignment,
        "data_offset": header.data_offset,
        "metadata": {
            k: (
                {"type": header.types[k], "digest": _gguf_value(v)}
                if isinstance(v, GGUFArray)
                else {"type": header.types[k], "value": v}
            )
            for k, v in header.metadata.items()
        },
        "tensors": {
            name: {"type": t.ggml_type, "shape": list(t.shape), "offset": t.offset,
                   "nbytes": t.nbytes}
            for name, t in header.tensors.items()
        },
    }  # fmt: skip
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def decode_gguf(data: bytes) -> GGUFHeader:
    """Inverse of `encode_gguf`."""
    obj = json.loads(data)
    metadata: dict[str, JSONValue] = {}
    types: dict[str, str] = {}
    for key, item in obj["metadata"].items():
        types[key] = item["type"]
        if "digest" in item:
            d = item["digest"]
            metadata[key] = GGUFArray(
                item_type=d["item_type"],
                count=d["count"],
                sha256=d["sha256"],
                special={int(k): v for k, v in d["special"].items()},
            )
        else:
            metadata[key] = item["value"]
    tensors = {
        name: GGUFTensor(t["type"], tuple(t["shape"]), t["offset"], t["nbytes"])
        for name, t in obj["tensors"].items()
    }
    return GGUFHeader(
        version=obj["version"],
        metadata=metadata,
        types=types,
        tensors=tensors,
        alignment=obj["alignment"],
        data_offset=obj["data_offset"],
    )
