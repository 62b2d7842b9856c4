"""LoRA target resolution against the module tree a config implies (pure).

The tree is `tracker.estimate.adapters.derive_modules` (from the estimate's reading and the
module names transformers 5.24.0 uses for the family). A target name resolves the way PEFT
matches `target_modules`: a module whose last name part equals it
(`model.layers.3.self_attn.q_proj` for `q_proj`), among the Linear (and GPT-2 Conv1D) modules;
`all-linear` is what PEFT adapts for it (`adapters.all_linear`: every such module but the output
head, and in the families PEFT converts, the routed experts' fused parameters and the router).
Results are split by layer kind: `attention.full`, `attention.linear` (linear attention and SSM
mixers), `mlp.dense`, `mlp.shared` (shared experts), `mlp.router` (a router that is a Linear, or
that PEFT adapts), `mlp.experts` (routed experts: fused 3-D parameters in transformers 5, which
only `all-linear` reaches, and only in the families PEFT converts), `vision` (the
vision tower and its projector), `head` (a task head's Linear, not the output layer) and `other`
(a Linear outside all of these, from a remote-code tree: `census_lora`). The adapter parameters
of a target are rank × (in + out) summed over the modules it resolves to; a slot's `unsized`
counts modules whose features are not known (then the target has no adapter total). A target
in `unresolved` could not be resolved, with why. A family whose module names this table does not
know gives no resolution here, with the reason (never a guess); remote-code families are then
read from the checkpoint and the code (`census_lora`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tracker.estimate.adapters import (
    EXPERTS_ADAPTED,
    EXPERTS_NOT_ADAPTED,
    all_linear,
    derive_modules,
    named_target,
)
from tracker.estimate.reading import Reading
from tracker.shared.domain import JSONValue

KINDS = (
    "attention.full",
    "attention.linear",
    "mlp.dense",
    "mlp.shared",
    "mlp.router",
    "mlp.experts",
    "vision",
    "head",
    "other",
)
ALL_LINEAR = "all-linear"


@dataclass(frozen=True)
class LoraResolution:
    """Per target, per layer kind: modules it resolves to and their adapter parameters."""

    rank: int
    targets: Mapping[str, Mapping[str, Mapping[str, int]]]
    kinds: tuple[str, ...]
    notes: tuple[str, ...] = ()
    unresolved: Mapping[str, str] = field(default_factory=dict)

    def modules(self, target: str) -> int:
        return sum(v["modules"] for v in self.targets.get(target, {}).values())

    def adapter_params(self, target: str) -> int | None:
        """rank × (in + out) over the target's modules; None when some module is unsized."""
        slots = self.targets.get(target, {}).values()
        if any(v.get("unsized") for v in slots):
            return None
        return sum(v["adapter_params"] for v in slots)

    def to_json(self) -> dict[str, JSONValue]:
        out: dict[str, JSONValue] = {
            "rank": self.rank,
            "kinds": list(self.kinds),
            "targets": {t: {k: dict(v) for k, v in ks.items()} for t, ks in self.targets.items()},
            "notes": list(self.notes),
        }
        if self.unresolved:
            out["unresolved"] = dict(self.unresolved)
        return out

    @classmethod
    def from_json(cls, d: Mapping[str, JSONValue]) -> LoraResolution:
        return cls(
            rank=d["rank"],
            targets={t: {k: dict(v) for k, v in ks.items()} for t, ks in d["targets"].items()},
            kinds=tuple(d["kinds"]),
            notes=tuple(d.get("notes") or ()),
            unresolved=dict(d.get("unresolved") or {}),
        )


def resolve_targets(
    reading: Reading, config: Mapping[str, Any], targets: Sequence[str], rank: int
) -> tuple[LoraResolution | None, str | None]:
    """Resolve `targets` (see the module docstring); (None, why) when the tree is not known.
    `all-linear` resolves to what PEFT adapts (`tracker.estimate.adapters.all_linear`: the
    estimate's memory table counts the same adapters)."""
    modules = derive_modules(reading, config)
    if isinstance(modules, str):
        return None, modules
    adapted, experts = all_linear(reading, config, modules)
    out: dict[str, dict[str, dict[str, int]]] = {}
    unresolved: dict[str, str] = {}
    seen = list(modules)
    for t in targets:
        found = (
            adapted if t == ALL_LINEAR else named_target(reading, config, modules, list(targets), t)
        )
        if isinstance(found, str):
            unresolved[t] = found
            continue
        seen += found
        per: dict[str, dict[str, int]] = {}
        for _, kind, i, o in found:
            slot = per.setdefault(kind, {"modules": 0, "adapter_params": 0})
            slot["modules"] += 1
            slot["adapter_params"] += rank * (i + o)
        out[t] = {k: per[k] for k in KINDS if k in per}
    kinds = tuple(k for k in KINDS if any(m[1] == k for m in seen + adapted))
    notes = []
    if experts == "adapted":
        notes.append(EXPERTS_ADAPTED)
    elif experts == "not adapted":
        notes.append(EXPERTS_NOT_ADAPTED)
    resolution = LoraResolution(
        rank=rank, targets=out, kinds=kinds, notes=tuple(notes), unresolved=unresolved
    )
    return resolution, None
