"""Frozen values that pass between pipeline stages; ORM rows and huggingface_hub objects never do.

Stages: sources → snapshots (ingest) → diff → estimate → advisories → feeds. Each stage takes and
returns the values defined here (or values defined next to the stage when only it uses them).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from functools import cached_property
from typing import Any, NewType

from tracker.shared.errors import InvalidRepoIdError
from tracker.shared.estimate_values import CardFit as CardFit
from tracker.shared.estimate_values import CheckpointCensus as CheckpointCensus
from tracker.shared.estimate_values import CostEstimate as CostEstimate
from tracker.shared.estimate_values import Estimate as Estimate
from tracker.shared.estimate_values import Finding as Finding
from tracker.shared.estimate_values import Fit as Fit
from tracker.shared.estimate_values import LayoutPattern as LayoutPattern
from tracker.shared.estimate_values import MemoryFigures as MemoryFigures
from tracker.shared.estimate_values import ParamCounts as ParamCounts
from tracker.shared.estimate_values import SafetensorsHeader as SafetensorsHeader
from tracker.shared.estimate_values import Structure as Structure
from tracker.shared.estimate_values import TensorInfo as TensorInfo
from tracker.shared.estimate_values import Verification as Verification
from tracker.shared.estimate_values import VerificationStatus as VerificationStatus

RepoId = NewType("RepoId", str)
"""`org/name` as on the Hub (validated by `parse_repo_id`)."""

Sha = NewType("Sha", str)
"""A full 40-hex git commit id."""

JSONValue = Any
"""Any value json.loads can return."""

Clock = Callable[[], datetime]
"""What stages that stamp times are given (the App's clock; tests pass a fixed one)."""

_REPO_PART = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9_-])?$")
_SHA = re.compile(r"^[0-9a-f]{40}$")


def parse_repo_id(text: str) -> RepoId:
    """Return `text` as a RepoId, or raise InvalidRepoIdError.

    Accepts exactly `ORG/NAME`, each part 1–96 characters of `[A-Za-z0-9._-]`, not starting with
    `.` or `-`, containing no `..` and not ending with `.` (the Hub's own rules, which also keep
    repo ids safe to use as path components).
    """
    parts = text.split("/")
    if len(parts) != 2:
        raise InvalidRepoIdError(f"repo id {text!r} must be ORG/NAME (exactly one '/')")
    for part in parts:
        if ".." in part or not _REPO_PART.match(part):
            raise InvalidRepoIdError(
                f"repo id {text!r}: {part!r} must be 1-96 characters of letters, digits, '.', '_' "
                "or '-', not start with '.' or '-', and contain no '..'"
            )
    return RepoId(text)


def rfc3339(when: datetime) -> str:
    """`when` as an OSV timestamp: UTC, whole seconds, `Z` suffix. Naive datetimes are taken as UTC."""
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_rfc3339(text: str) -> datetime:
    """The aware UTC datetime of an RFC 3339 timestamp (`Z` or an offset); ValueError otherwise."""
    when = datetime.fromisoformat(text)
    if when.tzinfo is None:
        raise ValueError(f"timestamp {text!r} has no offset")
    try:
        return when.astimezone(UTC)
    except OverflowError:  # 0001-01-01T00:00+01:00, 9999-12-31T23:59-01:00: no UTC instant
        raise ValueError(f"timestamp {text!r} is out of range in UTC") from None


# A ref name as git's check-ref-format accepts it (the watchlist's `ref`, and the base of every
# revision the API and CLI take, `tracker.store.store.REVISION_PATTERN`): slash-separated
# components of characters other than control characters, space, ~ ^ : ? * [ \\; no component
# starts with "." or ends with ".lock"; no ".." and no "@{" anywhere; not ending with "."; not
# the single character "@". (git also forbids a leading or trailing or doubled "/": the
# components are non-empty.) ECMA and Python regexes read it alike: it is the OpenAPI pattern too.
_REF_PLAIN = r"[^\x00-\x20\x7f~^:?*\[\\/.@]"
_REF_COMPONENT = r"(?!\.)(?![^/~]*\.lock(?:[/~]|$))(?:" + _REF_PLAIN + r"|\.(?![.~]|$)|@(?!\{))+"
REF_NAME = r"(?!@(?:~|$))" + _REF_COMPONENT + r"(?:/" + _REF_COMPONENT + r")*"
_REF_NAME_RE = re.compile(REF_NAME)


def is_ref_name(text: str) -> bool:
    """Whether `text` is a ref name git would accept (`REF_NAME`)."""
    return _REF_NAME_RE.fullmatch(text) is not None


def is_full_sha(text: str) -> bool:
    """True when `text` is a full lowercase 40-hex commit id."""
    return bool(_SHA.match(text))


@dataclass(frozen=True)
class Commit:
    """One revision of a repo, as the source lists it."""

    sha: Sha
    parents: tuple[Sha, ...]
    date: datetime
    title: str
    message: str
    authors: tuple[str, ...]


@dataclass(frozen=True)
class TreeEntry:
    """One file in a repo's tree at a revision.

    `blob_id` is the git object id (for LFS files, the pointer's); `lfs_sha256` is the LFS oid of
    the real content. `identity` is what tells whether content changed between revisions.
    `security` is the Hub's per-file scan status where the source gives it (None otherwise).
    """

    path: str
    blob_id: str
    size: int
    lfs_sha256: str | None = None
    security: Mapping[str, JSONValue] | None = None

    @property
    def identity(self) -> str:
        return self.lfs_sha256 or self.blob_id


GGUF_SPLIT = re.compile(r"^(?P<stem>.+)-(?P<no>[0-9]{5})-of-(?P<count>[0-9]{5})\.gguf$")
"""A split GGUF's shard name, as llama.cpp's gguf-split writes it (`%s-%05d-of-%05d.gguf`)."""


@dataclass(frozen=True)
class GGUFArray:
    """A GGUF array kept as a digest, not whole (token, score, token-type and merge lists; any
    array of arrays): `item_type` its elements' GGUF type name (`string`, `float32`, `array`),
    `count` how many, `sha256` the digest of its elements' bytes as the file stores them (little
    endian; a string as its u64 length and UTF-8 bytes), and `special` the elements at the ids
    the header's `tokenizer.ggml.*_token_id` keys name, by id (for the per-token arrays: tokens,
    scores, token types)."""

    item_type: str
    count: int
    sha256: str
    special: Mapping[int, JSONValue] = field(default_factory=dict)


@dataclass(frozen=True)
class GGUFTensor:
    """A tensor as a GGUF header declares it: its ggml type name (`Q4_K`, `F16`), its shape in
    GGUF order (ne0, the fastest-moving dimension, first), its offset in the data section and its
    size in bytes (whole blocks of its type)."""

    ggml_type: str
    shape: tuple[int, ...]
    offset: int
    nbytes: int


@dataclass(frozen=True)
class GGUFHeader:
    """The header of one .gguf file, read by Range (`tracker.sources.gguf`; never the weights).

    `metadata` maps each key, in file order, to its value: a bool, int, float or str, a list for
    an array of at most `tracker.sources.gguf.ARRAY_KEEP` scalars, or a GGUFArray (digest) for a
    longer one or an array of arrays; `types` gives each key's GGUF type (`uint32`, `string`,
    `array[int32]`). `data_offset` is where the tensor data begins (the header's length, padded to
    `alignment`)."""

    version: int
    metadata: Mapping[str, JSONValue]
    types: Mapping[str, str]
    tensors: Mapping[str, GGUFTensor]
    alignment: int
    data_offset: int

    @property
    def special_ids(self) -> dict[str, int]:
        """The tokenizer's special ids by key (`tokenizer.ggml.eos_token_id`: 2)."""
        return {
            k: v
            for k, v in self.metadata.items()
            if k.startswith("tokenizer.ggml.")
            and k.endswith("_token_id")
            and isinstance(v, int)
            and not isinstance(v, bool)
        }


@dataclass(frozen=True)
class GGUFModel:
    """One model stored as GGUF: a single `.gguf` file, or the shards of a split one
    (`NAME-00001-of-00003.gguf` …) read as one.

    `path` names it (the single file's path; for a split, `NAME.gguf`); `shards` are the files it
    is made of, in order, as their names say; `headers` the shards whose header was read;
    `missing` the shards not in the tree; `unreadable` why a shard could not be read. The model's
    metadata is its first shard's (gguf-split writes every key there, and only the `split.*`
    keys in the others); its tensors are every shard's."""

    path: str
    shards: tuple[str, ...]
    headers: Mapping[str, GGUFHeader]
    missing: tuple[str, ...] = ()
    unreadable: Mapping[str, str] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        return not self.missing and not self.unreadable

    @property
    def metadata(self) -> Mapping[str, JSONValue]:
        first = self.headers.get(self.shards[0])
        return first.metadata if first is not None else {}

    @property
    def tensors(self) -> dict[str, GGUFTensor]:
        out: dict[str, GGUFTensor] = {}
        for shard in self.shards:
            header = self.headers.get(shard)
            if header is not None:
                out.update(header.tensors)
        return out

    @property
    def quant_census(self) -> dict[str, tuple[int, int]]:
        """Per ggml type (`Q4_K`, `F32` …), sorted by name: how many of the model's tensors have
        it and their bytes (every shard's tensors; a tensor's bytes are whole blocks of its type,
        as the header declares them)."""
        out: dict[str, tuple[int, int]] = {}
        for t in self.tensors.values():
            n, size = out.get(t.ggml_type, (0, 0))
            out[t.ggml_type] = (n + 1, size + t.nbytes)
        return dict(sorted(out.items()))


def gguf_shard(path: str) -> tuple[str, int, int]:
    """(the model's path, this shard's number from 1, the number of shards) of a .gguf path:
    `(path, 1, 1)` for a file that is not a shard of a split."""
    name = path.rsplit("/", 1)[-1]
    m = GGUF_SPLIT.match(name)
    if m is None or int(m["no"]) < 1 or int(m["no"]) > int(m["count"]):
        return path, 1, 1
    return path[: len(path) - len(name)] + m["stem"] + ".gguf", int(m["no"]), int(m["count"])


def gguf_models(
    paths: frozenset[str] | set[str],
    headers: Mapping[str, GGUFHeader],
    unreadable: Mapping[str, str],
) -> dict[str, GGUFModel]:
    """The GGUF models among `paths` (a tree's), by model path: split shards grouped as one."""
    groups: dict[tuple[str, int], set[str]] = {}
    for path in paths:
        if not path.endswith(".gguf"):
            continue
        model, _, count = gguf_shard(path)
        groups.setdefault((model, count), set()).add(path)
    out: dict[str, GGUFModel] = {}
    for (model, count), present in sorted(groups.items()):
        shards: tuple[str, ...]
        if count == 1:
            shards = (model,)
        else:
            stem = model.removesuffix(".gguf")
            shards = tuple(f"{stem}-{i:05d}-of-{count:05d}.gguf" for i in range(1, count + 1))
        key = model if model not in out else f"{model} ({count} shards)"
        out[key] = GGUFModel(
            path=model,
            shards=shards,
            headers={s: headers[s] for s in shards if s in headers},
            missing=tuple(s for s in shards if s not in present),
            unreadable={s: unreadable[s] for s in shards if s in unreadable},
        )
    return out


@dataclass(frozen=True)
class Snapshot:
    """What tracker knows of a repo at one revision.

    `tree` lists every file (tracked or not); `files` holds the bytes of the tracked files that
    could be fetched; `headers` the parsed safetensors headers by file path; `unreadable` maps a
    tracked path to why it could not be read (fetch or parse failure), so that "could not read"
    is visible downstream and never mistaken for "no change". `gguf` holds the parsed headers
    of the `.gguf` files by path (`gguf_models` groups split shards into models).
    """

    repo_id: RepoId
    sha: Sha
    tree: tuple[TreeEntry, ...]
    files: Mapping[str, bytes]
    headers: Mapping[str, SafetensorsHeader] = field(default_factory=dict)
    unreadable: Mapping[str, str] = field(default_factory=dict)
    gguf: Mapping[str, GGUFHeader] = field(default_factory=dict)

    @cached_property
    def gguf_models(self) -> dict[str, GGUFModel]:
        """The GGUF models of this revision (split shards read as one), by model path."""
        return gguf_models(self.paths, self.gguf, self.unreadable)

    @cached_property
    def paths(self) -> frozenset[str]:
        """Every path in the tree (tracked or not)."""
        return frozenset(e.path for e in self.tree)

    @cached_property
    def _entries(self) -> dict[str, TreeEntry]:
        return {e.path: e for e in reversed(self.tree)}  # the first entry of a path wins

    def entry(self, path: str) -> TreeEntry | None:
        return self._entries.get(path)


class Artifact(StrEnum):
    """What kind of tracked thing a change is about."""

    CONFIG = "config"
    GENERATION_CONFIG = "generation_config"
    TOKENIZER = "tokenizer"
    SPECIAL_TOKENS = "special_tokens"
    CHAT_TEMPLATE = "chat_template"
    WEIGHTS = "weights"
    CUSTOM_CODE = "custom_code"
    EXECUTABLE = "executable"
    MODEL_CARD = "model_card"
    PROCESSOR = "processor"
    ESTIMATE = "estimate"
    LINEAGE = "lineage"  # a derivative left behind by its base model (`tracker.lineage.check`)


class ChangeKind(StrEnum):
    """The closed set of change kinds every differ reports in."""

    ADDED = "added"  # a key, file, token, tensor or template appeared
    REMOVED = "removed"  # ... disappeared
    CHANGED = "changed"  # a value changed (same type)
    TYPE_CHANGED = "type_changed"  # a value changed type (e.g. int -> list)
    RENAMED = "renamed"  # a tensor with the same shape and dtype under a new name
    RESHAPED = "reshaped"  # a tensor's shape changed
    RETYPED = "retyped"  # a tensor's dtype changed
    RENDERED = "rendered"  # a chat template renders a canonical conversation differently
    BROKEN = "broken"  # a template/file that parsed before no longer parses or renders
    UNREADABLE = "unreadable"  # the file could not be read at the new revision ("could not read")
    FIT_LOST = "fit_lost"  # estimate: a setup that fitted a card no longer does
    FIT_GAINED = "fit_gained"  # estimate: a setup that did not fit now does


@dataclass(frozen=True)
class Change:
    """One semantic change between two revisions.

    `file` is the repo path the change was found in ("" for whole-repo facts such as estimates);
    `key` locates it inside: a JSON path (`text_config.hidden_size`), a token name (`eos_token`),
    a tensor name, a conversation name, a card field. `summary` is one human line.
    `detail` holds longer evidence (a unified diff, a rendered-prompt diff), possibly empty.
    `facts` holds structured observations of the differ that classification reads (e.g. how a
    changed chat template renders the canonical conversations); never part of the change's value.
    """

    artifact: Artifact
    kind: ChangeKind
    file: str
    key: str
    before: JSONValue
    after: JSONValue
    summary: str
    detail: str = ""
    facts: Mapping[str, JSONValue] = field(default_factory=dict)

    def to_json(self) -> dict[str, JSONValue]:
        """This change as a JSON object (the wire format of the diff store, `--json` and feeds).

        `facts` is included only when there are some.
        """
        out: dict[str, JSONValue] = {
            "artifact": self.artifact.value,
            "kind": self.kind.value,
            "file": self.file,
            "key": self.key,
            "before": self.before,
            "after": self.after,
            "summary": self.summary,
            "detail": self.detail,
        }
        if self.facts:
            out["facts"] = dict(self.facts)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, JSONValue]) -> Change:
        """The inverse of `to_json` (KeyError/ValueError on a malformed object)."""
        return cls(
            artifact=Artifact(data["artifact"]),
            kind=ChangeKind(data["kind"]),
            file=data["file"],
            key=data["key"],
            before=data["before"],
            after=data["after"],
            summary=data["summary"],
            detail=data.get("detail", ""),
            facts=dict(data.get("facts") or {}),
        )


@dataclass(frozen=True)
class Diff:
    """All changes between two revisions of one repo, in a stable order."""

    repo_id: RepoId
    before: Sha | None
    after: Sha
    changes: tuple[Change, ...]


class Severity(StrEnum):
    """Advisory severity, most to least severe."""

    CRITICAL = "critical"
    HIGH = "high"
    MODERATE = "moderate"
    LOW = "low"


class AdvisoryState(StrEnum):
    """Where an advisory is in its lifecycle (stored beside the record)."""

    OPEN = "open"  # affects the commits in its versions list and every later one so far
    FIXED = "fixed"  # a later commit undid its changes (a `fixed` event)
    WITHDRAWN = "withdrawn"  # no longer stands (OSV `withdrawn`); see WithdrawnBy


class WithdrawnBy(StrEnum):
    """What withdrew an advisory: decides whether and when it may be restored."""

    REWRITE = "rewrite"  # a history rewrite dropped its introducing commit; restored if it returns
    REPAIR = "repair"  # `tracker repair`: published from a fault of the transport; stays withdrawn


@dataclass(frozen=True)
class Advisory:
    """One OSV advisory; `record` is the OSV JSON object, valid against the official schema."""

    id: str
    repo_id: RepoId
    introduced: Sha
    group: Artifact
    severity: Severity
    record: Mapping[str, JSONValue]
