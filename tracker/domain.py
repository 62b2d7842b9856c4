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

from tracker.errors import InvalidRepoIdError
from tracker.estimate_values import CardFit as CardFit
from tracker.estimate_values import CheckpointCensus as CheckpointCensus
from tracker.estimate_values import CostEstimate as CostEstimate
from tracker.estimate_values import Estimate as Estimate
from tracker.estimate_values import Finding as Finding
from tracker.estimate_values import Fit as Fit
from tracker.estimate_values import LayoutPattern as LayoutPattern
from tracker.estimate_values import MemoryFigures as MemoryFigures
from tracker.estimate_values import ParamCounts as ParamCounts
from tracker.estimate_values import SafetensorsHeader as SafetensorsHeader
from tracker.estimate_values import Structure as Structure
from tracker.estimate_values import TensorInfo as TensorInfo
from tracker.estimate_values import Verification as Verification
from tracker.estimate_values import VerificationStatus as VerificationStatus

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


@dataclass(frozen=True)
class Snapshot:
    """What tracker knows of a repo at one revision.

    `tree` lists every file (tracked or not); `files` holds the bytes of the tracked files that
    could be fetched; `headers` the parsed safetensors headers by file path; `unreadable` maps a
    tracked path to why it could not be read (fetch or parse failure), so that "could not read"
    is visible downstream and never mistaken for "no change".
    """

    repo_id: RepoId
    sha: Sha
    tree: tuple[TreeEntry, ...]
    files: Mapping[str, bytes]
    headers: Mapping[str, SafetensorsHeader] = field(default_factory=dict)
    unreadable: Mapping[str, str] = field(default_factory=dict)

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


@dataclass(frozen=True)
class Advisory:
    """One OSV advisory; `record` is the OSV JSON object, valid against the official schema."""

    id: str
    repo_id: RepoId
    introduced: Sha
    group: Artifact
    severity: Severity
    record: Mapping[str, JSONValue]
