"""Assemble one estimate (the typed §5 report) from the reading, memory, fit, cost and findings."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from tracker.estimate import adapters, cards, checkpoint, cost, findings, memory, shipped, structure
from tracker.estimate.memory import GB
from tracker.estimate.reading import Reading
from tracker.estimate.settings import EstimateSettings
from tracker.estimate.verify import verify
from tracker.shared.estimate_values import (
    Estimate,
    MemoryFigures,
    ParamCounts,
    SafetensorsHeader,
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
    total_size: int | None = None,
) -> Estimate:
    """The estimate of reading `r`: counts, memory, cards, cost, structure, findings, census and
    verification. Serving holds the weights as shipped (`shipped`: the checkpoint's bytes,
    `total_size` from its index where known, else its `quantization_config`, else bf16),
    verified or not; a quantized checkpoint adds a bf16 upcast row and is LoRA's frozen base as
    shipped (unless the settings name the base). LoRA on all-linear counts the adapters PEFT
    creates (`adapters`), as preflight's target resolution does."""
    built = sum(n for spec, n in r.layer_runs if spec.kind != "encoder") or len(r.layers)
    ck = checkpoint.compare(
        headers or {}, r.total, layers=built, bits=checkpoint.quant_bits(config)
    )
    check = verify(r, ck)
    ship = shipped.shipped(config, r, ck, total_size)
    as_shipped = s.serve_weights == "shipped"
    qlora = s.lora_base == "shipped" and ship.quantized
    found = (
        adapters.all_linear_params(r, config, s.lora_rank)
        if s.lora_targets.strip() in ("all-linear", "all", "")
        else None
    )
    experts: str | None = None
    if found is None and s.lora_targets.strip() in ("all-linear", "all", ""):
        experts = "adapted" if any(x.ffn == "moe" and x.experts for x in r.layers) else None
    elif found is not None:
        experts = found[1]
    m = memory.compute(
        r,
        s,
        serve_bytes=ship.bytes if as_shipped else None,
        lora_base_bytes=ship.bytes if qlora else None,
        adapter_params=None if found is None else found[0],
    )
    upcast = None
    if as_shipped and ship.quantized:
        # the bf16 row: our count upcast, everything else as shipped
        upcast = memory.compute(r, replace(s, serve_weights="bf16"))
    if as_shipped:
        source, fmt = ship.source, ship.format
    else:
        source, fmt = "settings", f"{s.serve_weights} (re-quantized from our count)"
    if qlora:
        base = f"as shipped: {ship.format}"
    elif s.lora_base == "shipped":
        base = "bf16"
    else:
        base = s.lora_base
    table = cards.card_table(r, m, s, upcast)
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
            serve_weights_source=source,
            serve_weights_format=fmt,
            serve_weights_upcast=None if upcast is None else _gb(upcast.serve_fixed),
            lora_base=base,
            lora_experts=experts,
            input=memory.input_shape(r, m),
        ),
        cards=table,
        cost=cost.training_cost(r, s, table),
        structure=structure.structure(r),
        findings=tuple(findings.findings(config, r, s, ck, max_token_id)),
        checkpoint=ck,
        verification=check,
        flags=r.flags,
        notes=r.notes,
        settings=s.to_json(),
    )
