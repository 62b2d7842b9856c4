"""Assemble the §5 JSON report of one estimate from the reading, memory, fit, cost and findings."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tracker.domain import SafetensorsHeader
from tracker.estimate import cards, checkpoint, cost, findings, memory, structure
from tracker.estimate.memory import GB
from tracker.estimate.reading import Reading
from tracker.estimate.settings import EstimateSettings


def _gb(x: float) -> float:
    return round(x / GB, 3)


def build_report(
    config: Mapping[str, Any],
    r: Reading,
    headers: Mapping[str, SafetensorsHeader] | None,
    s: EstimateSettings,
    *,
    max_token_id: int | None = None,
) -> dict[str, Any]:
    """The §5 object: params, layers, architecture, memory_gb, cards, cost, structure, ..."""
    m = memory.compute(r, s)
    ck = checkpoint.compare(headers or {}, r.total)
    total = r.total
    shares = {k: round(v / total, 6) for k, v in r.by_component.items() if v}
    return {
        "architecture": r.architecture,
        "model_type": r.model_type,
        "family": r.family,
        "custom_code": r.custom_code,
        "params": {
            "total": total,
            "active": r.active,
            "embedding": r.embedding,
            "by_component": {k: v for k, v in r.by_component.items() if v},
            "shares": shares,
        },
        "layers": len(r.layers),
        "memory_gb": {
            "full_finetune": _gb(m.full_batch1),
            "full_finetune_states": _gb(m.full_fixed),
            "lora": _gb(m.lora_batch1),
            "lora_adapter_params": m.lora_adapter_params,
            "activations_per_sample": _gb(m.act_per_sample),
            "serve_weights": _gb(m.serve_fixed),
            "kv_cache": _gb(m.kv_per_sequence),
            "train_tokens": m.train_tokens,
            "serve_tokens": m.serve_tokens,
        },
        "cards": cards.card_table(r, m, s),
        "cost": cost.training_cost(r, s),
        "structure": structure.structure(r),
        "findings": findings.findings(config, r, s, ck, max_token_id),
        "checkpoint": ck,
        "flags": list(r.flags),
        "notes": list(r.notes),
        "settings": {
            "train_seq_len": s.train_seq_len,
            "serve_seq_len": s.serve_seq_len,
            "lora_rank": s.lora_rank,
            "lora_targets": s.lora_targets,
            "headroom": s.headroom,
            "borderline_factor": s.borderline_factor,
        },
    }
