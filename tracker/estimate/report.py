"""Assemble one estimate (the typed §5 report) from the reading, memory, fit, cost and findings."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tracker.estimate import cards, checkpoint, cost, findings, memory, structure
from tracker.estimate.memory import GB
from tracker.estimate.reading import Reading
from tracker.estimate.settings import EstimateSettings
from tracker.estimate.verify import verify
from tracker.estimate_values import (
    Estimate,
    MemoryFigures,
    ParamCounts,
    SafetensorsHeader,
    VerificationStatus,
)


def _gb(x: float) -> float:
    return round(x / GB, 3)


def build_report(
    config: Mapping[str, Any],
    r: Reading,
    headers: Mapping[str, SafetensorsHeader] | None,
    s: EstimateSettings,
    *,
    max_token_id: int | None = None,
) -> Estimate:
    """The estimate of reading `r`: counts, memory, cards, cost, structure, findings, census and
    verification. An unverified count with a census serves from the checkpoint's bytes."""
    built = sum(n for spec, n in r.layer_runs if spec.kind != "encoder") or len(r.layers)
    ck = checkpoint.compare(
        headers or {}, r.total, layers=built, bits=checkpoint.quant_bits(config)
    )
    check = verify(r, ck)
    fallback = check.status is VerificationStatus.UNVERIFIED and ck is not None and ck.bytes > 0
    m = memory.compute(r, s, serve_bytes=float(ck.bytes) if fallback and ck else None)
    total = r.total
    by_component = {k: v for k, v in r.by_component.items() if v}
    return Estimate(
        architecture=r.architecture,
        model_type=r.model_type,
        family=r.family,
        custom_code=r.custom_code,
        params=ParamCounts(
            total=total,
            active=r.active,
            embedding=r.embedding,
            by_component=by_component,
            shares={k: round(v / total, 6) for k, v in by_component.items()},
            # every reader counts the embedding rows as active (Tally.add with no active figure)
            active_without_embedding=r.active - r.embedding,
        ),
        layers=len(r.layers),
        memory=MemoryFigures(
            full_finetune=_gb(m.full_batch1),
            full_finetune_states=_gb(m.full_fixed),
            lora=_gb(m.lora_batch1),
            lora_adapter_params=m.lora_adapter_params,
            activations_per_sample=_gb(m.act_per_sample),
            serve_weights=_gb(m.serve_fixed),
            kv_cache=_gb(m.kv_per_sequence),
            serve_prefill=_gb(m.prefill_per_sequence),
            train_tokens=m.train_tokens,
            serve_tokens=m.serve_tokens,
            serve_weights_source="checkpoint" if fallback else "derived",
        ),
        cards=cards.card_table(r, m, s),
        cost=cost.training_cost(r, s),
        structure=structure.structure(r),
        findings=tuple(findings.findings(config, r, s, ck, max_token_id)),
        checkpoint=ck,
        verification=check,
        flags=r.flags,
        notes=r.notes,
        settings=s.to_json(),
    )
