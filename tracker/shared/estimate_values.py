"""The frozen values of an estimate report (`Estimate` and its parts, safetensors headers).

Kept apart from tracker.shared.domain, which re-exports every name here, so that a one-off `tracker
estimate CONFIG` builds only these classes (each dataclass costs its share of the process start:
`make bench`, estimate section).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

JSONValue = Any
"""Any value json.loads can return."""


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


class VerificationStatus(StrEnum):
    """How far an estimate can be vouched for."""

    VERIFIED = (
        "verified"  # a reader for this family, nothing in the config or checkpoint disputes it
    )
    CHECKED = "checked"  # no family reader, but the checkpoint census agrees within tolerance
    # custom code read under another (native) type's semantics, no census to check it against:
    # the count follows from the config and that reading, nothing disputes it, nothing confirms it
    DERIVED = "derived"
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


ACTIVE_HEADLINE = "with_embedding"
"""Which active count the headline `active` is: the embedding rows count as active (a token reads
one row, but the whole table is held and, tied, is the head); `active_without_embedding` is the
other convention (Kimi-K3: 105.36 B with, 104.19 B without)."""


@dataclass(frozen=True)
class ParamCounts:
    """Parameter counts: total, active per token (with the embedding; `active_headline` names
    that), active per token without the embedding, embeddings, and by component (with shares)."""

    total: int
    active: int
    embedding: int
    by_component: Mapping[str, int]
    shares: Mapping[str, float]
    active_without_embedding: int = 0
    active_headline: str = ACTIVE_HEADLINE


@dataclass(frozen=True)
class MemoryFigures:
    """Memory in decimal GB at the settings used (ESTIMATES.md §2). Serving holds the weights as
    shipped (`tracker.estimate.shipped`): `serve_weights_source` is "checkpoint" (the index's
    total_size or the headers' bytes), "quantization_config" (the config's quantization applied
    to our count), "derived" (bf16 of our count) or "settings" (re-quantized as `serve_weights`
    says); `serve_weights_format` says the format in words; `serve_weights_upcast` is the bf16
    figure of our count for a quantized checkpoint (a user who upcasts; None otherwise).
    `lora_base` is the frozen base's format; `lora_experts` says whether LoRA on all-linear
    adapts the routed experts' fused 3-D parameters ("adapted", "not adapted"; None without
    routed experts or with named targets). `serve_prefill` is the prefill working set of one
    sequence's prompt (0 when the setting is off), which serving fit adds per sequence next to
    `kv_cache`. `input` says what one sequence is for an encoder built alone (one input's
    tokens where its reader fixes them, else why token rows do not apply); None for a
    language model."""

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
    serve_weights_format: str = "bf16"
    serve_weights_upcast: float | None = None
    lora_base: str = "bf16"
    lora_experts: str | None = None
    input: str | None = None


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
    serve_upcast: Fit | None = None
    """Serving a quantized checkpoint upcast to bf16 (None where the checkpoint is not quantized)."""

    def fit(self, setup: str) -> Fit:
        """The fit of setup `setup` ("full_finetune", "lora", "serve" or "serve_upcast")."""
        fits = {"full_finetune": self.full_finetune, "lora": self.lora, "serve": self.serve}
        if setup == "serve_upcast" and self.serve_upcast is not None:
            return self.serve_upcast
        return fits[setup]


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
            for setup in ("full_finetune", "lora", "serve", "serve_upcast"):
                fit = card.get(setup)
                if fit is None:
                    continue
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
                p["total"],
                p["active"],
                p["embedding"],
                dict(p["by_component"]),
                dict(p["shares"]),
                p.get("active_without_embedding", p["active"] - p["embedding"]),
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
        None if data.get("serve_upcast") is None else fit(data["serve_upcast"]),
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
