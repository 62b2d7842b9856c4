"""Findings (ESTIMATES.md §4): each with an id, a level, the evidence and a fix."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tracker.estimate.reading import ConfigView, Reading
from tracker.estimate.settings import EstimateSettings

DTYPE_CENSUS = {"bfloat16": "BF16", "float16": "F16", "float32": "F32"}
EQUAL_HEAD_FAMILIES = frozenset({"gpt2", "bloom", "gpt_neox", "bert", "falcon", "RefinedWeb"})


def _finding(fid: str, level: str, evidence: str, fix: str) -> dict[str, str]:
    return {"id": fid, "level": level, "evidence": evidence, "fix": fix}


def findings(
    config: Mapping[str, Any],
    r: Reading,
    s: EstimateSettings,
    checkpoint: Mapping[str, Any] | None,
    max_token_id: int | None = None,
) -> list[dict[str, str]]:
    """Findings about `config` and its reading; pure, deterministic order."""
    out: list[dict[str, str]] = []
    c = ConfigView(config)
    for comp in ("dense_mlp", "attention"):
        for spec in r.layers[:1]:
            biggest = max(r.hidden * max(spec.ffn_width, 1), r.hidden * r.num_heads * r.head_dim)
            if biggest > s.huge_linear_threshold:
                out.append(_finding(
                    "huge-linear-params", "warning",
                    f"a single {comp} linear holds {biggest:,} parameters "
                    f"(threshold {s.huge_linear_threshold:,})",
                    "check hidden_size/intermediate_size for a typo",
                ))
                break
        break
    for key in ("max_position_embeddings",):
        ctx = r.max_context
        rope = c.raw("rope_scaling") or c.raw("rope_parameters")
        kind = rope.get("rope_type", rope.get("type")) if isinstance(rope, Mapping) else None
        if isinstance(rope, Mapping) and kind in ("linear", "dynamic", "yarn"):
            orig = rope.get("original_max_position_embeddings")
            factor = rope.get("factor")
            if (isinstance(orig, int) and isinstance(factor, int | float) and ctx
                    and not isinstance(factor, bool) and orig * factor < ctx * 0.99):
                out.append(_finding(
                    "rope-scaling-inconsistent", "warning",
                    f"rope_scaling factor {factor} × original {orig} = {orig * factor:g} < "
                    f"{key} {ctx}",
                    "raise the rope factor or lower max_position_embeddings",
                ))
    if (r.family in EQUAL_HEAD_FAMILIES and r.num_heads * r.head_dim != r.hidden):
        out.append(_finding(
            "head-dim-mismatch", "error",
            f"heads {r.num_heads} × head_dim {r.head_dim} ≠ hidden {r.hidden}",
            "this architecture requires heads × head_dim == hidden_size",
        ))
    declared = c.str("torch_dtype") or c.str("dtype")
    if checkpoint and declared in DTYPE_CENSUS:
        census = checkpoint.get("dtypes", {})
        want = DTYPE_CENSUS[declared]
        top = max(census, key=lambda d: census[d]) if census else None
        if top is not None and top != want:
            out.append(_finding(
                "dtype-disagrees", "warning",
                f"config torch_dtype {declared} but most stored elements are {top}",
                "trust the census; fix torch_dtype in config.json",
            ))
    if max_token_id is not None and max_token_id >= r.vocab:
        out.append(_finding(
            "vocab-too-small", "error",
            f"vocab_size {r.vocab} but the tokenizer's highest token id is {max_token_id}",
            "resize the embeddings to at least max token id + 1",
        ))
    for flag, note in zip(r.flags, r.notes, strict=False):
        if flag in ("unknown-architecture", "custom-code", "mtp-not-built"):
            out.append(_finding(flag, "info", note, "treat the count as derived, not verified"))
    return out
