"""Frozen values that pass between pipeline stages; ORM rows and huggingface_hub objects never do.

Stages: sources → snapshots (ingest) → diff → estimate → advisories → feeds. Each stage takes and
returns the values defined here (or values defined next to the stage when only it uses them).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from functools import cached_property
from typing import Any, NewType

from tracker.errors import InvalidRepoIdError

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
    return when.astimezone(UTC)


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
class TensorInfo:
    """A tensor as a safetensors header declares it."""

    dtype: str
    shape: tuple[int, ...]
    nbytes: int


@dataclass(frozen=True)
class SafetensorsHeader:
    """The parsed JSON header of one .safetensors file (the weights themselves are never read)."""

    tensors: Mapping[str, TensorInfo]
    metadata: Mapping[str, str] = field(default_factory=dict)


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


class VerificationStatus(StrEnum):
    """How far an estimate can be vouched for."""

    VERIFIED = (
        "verified"  # a reader for this family, nothing in the config or checkpoint disputes it
    )
    CHECKED = "checked"  # no family reader, but the checkpoint census agrees within tolerance
    UNVERIFIED = "unverified"  # numbers shown, but no fit verdict may be published from them


@dataclass(frozen=True)
class Verification:
    """Whether the estimate can be vouched for, and why not: `reasons` in words, `unknown_keys`
    the config keys the reader did not understand, `census_delta_pct` our count against the
    checkpoint census (None without one), `tolerance_pct` the agreement required."""

    status: VerificationStatus
    reader: str
    reasons: tuple[str, ...] = ()
    unknown_keys: tuple[str, ...] = ()
    census_delta_pct: float | None = None
    tolerance_pct: float = 1.0

    @property
    def vouched(self) -> bool:
        """False when no advisory may say a card fits or no longer fits from this estimate."""
        return self.status is not VerificationStatus.UNVERIFIED


@dataclass(frozen=True)
class ParamCounts:
    """Parameter counts: total, active per token, embeddings, and by component (with shares)."""

    total: int
    active: int
    embedding: int
    by_component: Mapping[str, int]
    shares: Mapping[str, float]


@dataclass(frozen=True)
class MemoryFigures:
    """Memory in decimal GB at the settings used (ESTIMATES.md §2); `serve_weights_source` is
    "derived" (our count) or "checkpoint" (stored bytes, used when the count is unverified)."""

    full_finetune: float
    full_finetune_states: float
    lora: float
    lora_adapter_params: int
    activations_per_sample: float
    serve_weights: float
    kv_cache: float
    train_tokens: int
    serve_tokens: int
    serve_prefill: float = 0.0
    serve_weights_source: str = "derived"


@dataclass(frozen=True)
class Fit:
    """One setup on one card: largest batch (0: not at batch 1), borderline, and where one card
    cannot hold batch 1, a split over `split_cards` cards (`split` layers per card)."""

    batch: int
    borderline: bool
    split: tuple[int, ...] | None
    summary: str
    split_cards: int = 0


@dataclass(frozen=True)
class CardFit:
    """A card and the fit of each setup on it."""

    name: str
    vram_gb: float
    full_finetune: Fit
    lora: Fit
    serve: Fit

    def fit(self, setup: str) -> Fit:
        """The fit of setup `setup` ("full_finetune", "lora" or "serve")."""
        return {"full_finetune": self.full_finetune, "lora": self.lora, "serve": self.serve}[setup]


@dataclass(frozen=True)
class CostEstimate:
    """Roofline training cost; `assumptions` states every input beside the number."""

    flops: float
    tokens: int
    hours: float | None
    usd: float | None
    assumptions: Mapping[str, JSONValue]


@dataclass(frozen=True)
class LayoutPattern:
    """Hybrid-layout facts (ESTIMATES.md §4)."""

    hybrid: bool
    full_attention_layers: int
    linear_layers: int
    period: int | None
    ratio: str | None
    summary: str


@dataclass(frozen=True)
class Structure:
    """The structure graph (folded nodes with shapes, a rendering) and the layout facts."""

    graph: tuple[Mapping[str, JSONValue], ...]
    pattern: LayoutPattern


@dataclass(frozen=True)
class Finding:
    """One finding about a config: id, level (error/warning/info), evidence and a fix."""

    id: str
    level: str
    evidence: str
    fix: str


@dataclass(frozen=True)
class CheckpointCensus:
    """What the safetensors headers say: stored parameters (packed values unpacked; scales,
    buffers and modules transformers does not build left out), bytes, elements per dtype, our
    count's delta against it, and the elements left out as bookkeeping / not built."""

    params: int
    bytes: int
    dtypes: Mapping[str, int]
    delta_pct: float | None
    already_quantized: bool
    bytes_per_param: float | None
    scale_elements: int
    bookkeeping_elements: int = 0
    not_built_elements: int = 0


@dataclass(frozen=True)
class Estimate:
    """The estimate of one config (ESTIMATES.md §5); `to_json` is its one JSON form (store,
    `--json`, API) and `from_json` reads it back, older reports included."""

    architecture: str
    model_type: str
    family: str
    custom_code: bool
    params: ParamCounts
    layers: int
    memory: MemoryFigures
    cards: tuple[CardFit, ...]
    cost: CostEstimate
    structure: Structure
    findings: tuple[Finding, ...]
    checkpoint: CheckpointCensus | None
    verification: Verification
    flags: tuple[str, ...]
    notes: tuple[str, ...]
    settings: Mapping[str, JSONValue]

    def card(self, name: str) -> CardFit | None:
        return next((c for c in self.cards if c.name == name), None)

    def to_json(self) -> dict[str, JSONValue]:
        """The §5 JSON object (`memory_gb` for `memory`)."""
        out: dict[str, JSONValue] = json.loads(json.dumps(asdict(self)))
        out["memory_gb"] = out.pop("memory")
        for card in out["cards"]:
            for setup in ("full_finetune", "lora", "serve"):
                fit = card[setup]
                split, n = fit.pop("split"), fit.pop("split_cards")
                fit["split"] = None if split is None else {"cards": n, "layers": split}
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, JSONValue]) -> Estimate:
        """The inverse of `to_json`; a report stored before `verification` existed reads as
        verified unless it was a best-effort generic reading (flag `unknown-architecture`)."""
        p, m, c, s = data["params"], data["memory_gb"], data["cost"], data["structure"]
        ck = data.get("checkpoint")
        flags = tuple(data.get("flags") or ())
        return cls(
            architecture=data["architecture"],
            model_type=data["model_type"],
            family=data.get("family", data["model_type"]),
            custom_code=data["custom_code"],
            params=ParamCounts(
                p["total"], p["active"], p["embedding"], dict(p["by_component"]), dict(p["shares"])
            ),
            layers=data["layers"],
            memory=MemoryFigures(**m),
            cards=tuple(_card_from_json(x) for x in data["cards"]),
            cost=CostEstimate(c["flops"], c["tokens"], c["hours"], c["usd"], c["assumptions"]),
            structure=Structure(tuple(s["graph"]), LayoutPattern(**s["pattern"])),
            findings=tuple(Finding(**f) for f in data["findings"]),
            checkpoint=None if ck is None else CheckpointCensus(**ck),
            verification=_verification_from_json(data.get("verification"), flags),
            flags=flags,
            notes=tuple(data.get("notes") or ()),
            settings=dict(data.get("settings") or {}),
        )


def _card_from_json(data: Mapping[str, JSONValue]) -> CardFit:
    def fit(x: Mapping[str, JSONValue]) -> Fit:
        split = x.get("split")
        return Fit(
            batch=x["batch"],
            borderline=x["borderline"],
            split=None if split is None else tuple(split["layers"]),
            summary=x.get("summary") or f"batch {x['batch']}",
            split_cards=0 if split is None else split["cards"],
        )

    return CardFit(
        data["name"],
        data["vram_gb"],
        fit(data["full_finetune"]),
        fit(data["lora"]),
        fit(data["serve"]),
    )


def _verification_from_json(data: JSONValue, flags: tuple[str, ...]) -> Verification:
    if data is None:
        if "unknown-architecture" in flags:
            reason = "estimated before verification existed, by a best-effort generic reading"
            return Verification(VerificationStatus.UNVERIFIED, "general", (reason,))
        return Verification(VerificationStatus.VERIFIED, "family")
    return Verification(
        status=VerificationStatus(data["status"]),
        reader=data["reader"],
        reasons=tuple(data.get("reasons") or ()),
        unknown_keys=tuple(data.get("unknown_keys") or ()),
        census_delta_pct=data.get("census_delta_pct"),
        tolerance_pct=data.get("tolerance_pct", 1.0),
    )


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
