"""The generic decoder-only transformer count: embeddings, per-layer attention and FFN, norms, head.

Families fill a `Dec` description from their config (see `families.py`); `build_decoder` walks
the layers once (bounded by MAX_LAYERS) and returns the tally and per-layer specs. Counts follow
transformers' module layout: each nn.Linear is in×out (+out with bias), each RMSNorm its width,
each LayerNorm twice its width; fused expert tensors count E×in×out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from tracker.estimate.reading import LayerSpec, Tally

BF16 = 2
FP32 = 4


@dataclass
class Mla:
    """Multi-head latent attention dimensions (DeepSeek-V2/V3 style)."""

    q_lora_rank: int | None
    kv_lora_rank: int
    qk_nope: int
    qk_rope: int
    v_head: int
    indexer: tuple[int, int] | None = None  # (index_n_heads, index_head_dim): DSA indexer


@dataclass
class LinearAttn:
    """Gated DeltaNet dimensions (Qwen3-Next / Qwen3.5 linear-attention layers)."""

    key_heads: int
    key_dim: int
    value_heads: int
    value_dim: int
    conv_kernel: int
    split_proj: bool = False  # Qwen3.5: in_proj_qkv, in_proj_z, in_proj_b, in_proj_a


@dataclass
class Dec:
    """Everything the generic decoder count needs; defaults are the Llama layout."""

    hidden: int
    vocab: int
    n_layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    tied: bool = False
    q_bias: bool = False
    kv_bias: bool = False
    o_bias: bool = False
    qk_norm: bool = False
    q_gate: bool = False  # q_proj doubled for an output gate (Qwen3-Next)
    fused_qkv: bool = False  # one qkv_proj (Phi-3): same count
    gated_mlp: bool = True
    mlp_bias: bool = False
    norm_params: int = 0  # per norm; 0 means hidden (RMSNorm)
    norms_per_layer: int = 2
    final_norm: bool = True
    learned_positions: int = 0
    embed_norm: bool = False
    sinks: bool = False
    # MoE
    experts: int = 0
    top_k: int = 0
    moe_intermediate: int = 0
    shared_intermediate: int = 0  # total width of the shared expert(s)
    shared_gate: bool = False  # a sigmoid gate h→1 on the shared expert
    router_bias: bool = False
    expert_bias: bool = False
    is_moe: Callable[[int], bool] = field(default=lambda i: False)
    dense_intermediate: int | None = None  # width of non-MoE layers' MLP (default intermediate)
    # attention kinds
    layer_kind: Callable[[int], str] = field(default=lambda i: "full")  # full|sliding|linear
    window: int | None = None
    mla: Mla | None = None
    linear: LinearAttn | None = None
    kv_heads_for: Callable[[int], int] | None = None
    has_indexer: Callable[[int], bool] = field(default=lambda i: True)


def _linear(n_in: int, n_out: int, bias: bool) -> int:
    return n_in * n_out + (n_out if bias else 0)


def attention_params(d: Dec, kind: str, layer: int) -> tuple[int, int, int, str]:
    """(params, lora in+out dims, kv bytes per token, attention type) for one attention block."""
    h = d.hidden
    if kind == "linear" and d.linear is not None:
        la = d.linear
        kd, vd = la.key_heads * la.key_dim, la.value_heads * la.value_dim
        conv_dim = 2 * kd + vd
        if la.split_proj:
            proj = h * conv_dim + h * vd + 2 * h * la.value_heads
            lora = (h + conv_dim) + (h + vd) + 2 * (h + la.value_heads)
        else:
            proj = h * (2 * kd + 2 * vd) + h * 2 * la.value_heads
            lora = (h + 2 * kd + 2 * vd) + (h + 2 * la.value_heads)
        params = proj + conv_dim * la.conv_kernel + 2 * la.value_heads + la.value_dim + vd * h
        return params, lora + vd + h, 0, "linear"
    if d.mla is not None:
        m = d.mla
        nh = d.heads
        qk = m.qk_nope + m.qk_rope
        params = 0
        lora = 0
        if m.q_lora_rank:
            params += _linear(h, m.q_lora_rank, d.q_bias) + m.q_lora_rank
            params += m.q_lora_rank * nh * qk
            lora += h + m.q_lora_rank + m.q_lora_rank + nh * qk
        else:
            params += h * nh * qk
            lora += h + nh * qk
        params += _linear(h, m.kv_lora_rank + m.qk_rope, d.q_bias) + m.kv_lora_rank
        params += m.kv_lora_rank * nh * (m.qk_nope + m.v_head)
        params += _linear(nh * m.v_head, h, d.o_bias)
        lora += (h + m.kv_lora_rank + m.qk_rope) + (m.kv_lora_rank + nh * (m.qk_nope + m.v_head))
        lora += nh * m.v_head + h
        if m.indexer is not None and m.q_lora_rank and d.has_indexer(layer):
            ih, idim = m.indexer
            params += m.q_lora_rank * ih * idim + h * idim + 2 * idim + h * ih
            lora += (m.q_lora_rank + ih * idim) + (h + idim) + (h + ih)
        kv_bytes = (m.kv_lora_rank + m.qk_rope) * BF16
        return params, lora, kv_bytes, "mla"
    kvh = d.kv_heads_for(layer) if d.kv_heads_for else d.kv_heads
    hd = d.head_dim
    q_out = d.heads * hd * (2 if d.q_gate else 1)
    params = _linear(h, q_out, d.q_bias) + 2 * _linear(h, kvh * hd, d.kv_bias)
    params += _linear(d.heads * hd, h, d.o_bias)
    if d.qk_norm:
        params += 2 * hd
    if d.sinks:
        params += d.heads
    lora = (h + q_out) + 2 * (h + kvh * hd) + (d.heads * hd + h)
    kv_bytes = 2 * kvh * hd * BF16
    if kind == "sliding":
        atype = "sliding"
    elif kvh == d.heads:
        atype = "mha"
    elif kvh == 1:
        atype = "mqa"
    else:
        atype = "gqa"
    return params, lora, kv_bytes, atype


def _mlp(d: Dec, h: int, inter: int) -> tuple[int, int]:
    mats = 3 if d.gated_mlp else 2
    if d.gated_mlp:
        params = 2 * _linear(h, inter, d.mlp_bias) + _linear(inter, h, d.mlp_bias)
    else:
        params = _linear(h, inter, d.mlp_bias) + _linear(inter, h, d.mlp_bias)
    lora = mats * (h + inter)
    return params, lora


def build_decoder(d: Dec, t: Tally) -> list[LayerSpec]:
    """Add the whole decoder's parameters to `t`; return one LayerSpec per layer.

    Layers that share (attention kind, MoE or dense, KV heads, indexer) are identical, so each
    distinct kind is counted once and its tally contributions are multiplied by its layer count
    (integer arithmetic: the totals are exactly those of a layer-by-layer walk).
    """
    h = d.hidden
    norm = d.norm_params or h
    t.add("embeddings", d.vocab * h)
    if d.learned_positions:
        t.add("embeddings", d.learned_positions * h)
    if d.embed_norm:
        t.add("norms", norm)
    mla_indexer = d.mla is not None and d.mla.indexer is not None and bool(d.mla.q_lora_rank)
    kinds: dict[tuple[str, bool, int, bool], tuple[LayerSpec, list[tuple[str, int, int]]]] = {}
    uses: dict[tuple[str, bool, int, bool], int] = {}
    specs: list[LayerSpec] = []
    for i in range(d.n_layers):
        kind = d.layer_kind(i)
        moe = bool(d.experts) and d.is_moe(i)
        kvh = d.kv_heads_for(i) if d.kv_heads_for else d.kv_heads
        key = (kind, moe, kvh, d.has_indexer(i) if mla_indexer else True)
        known = kinds.get(key)
        if known is None:
            known = kinds[key] = _layer(d, kind, i, moe, norm)
            uses[key] = 0
        uses[key] += 1
        specs.append(known[0])
    for key, (_, adds) in kinds.items():
        n = uses[key]
        for component, count, active in adds:
            t.add(component, n * count, n * active)
    if d.final_norm:
        t.add("norms", norm)
    if not d.tied:
        t.add("head", d.vocab * h)
    return specs


def _layer(
    d: Dec, kind: str, i: int, moe: bool, norm: int
) -> tuple[LayerSpec, list[tuple[str, int, int]]]:
    """One layer's spec and its (component, params, active params) contributions, in order."""
    h = d.hidden
    adds: list[tuple[str, int, int]] = []
    a_params, a_lora, kv, atype = attention_params(d, kind, i)
    component = "linear_attention" if atype == "linear" else "attention"
    adds.append((component, a_params, a_params))
    layer_total = a_params
    layer_active = a_params
    lora = a_lora
    n_params = d.norms_per_layer * norm
    adds.append(("norms", n_params, n_params))
    layer_total += n_params
    layer_active += n_params
    experts = top_k = 0
    width = d.dense_intermediate or d.intermediate
    if moe:
        e, k, mi = d.experts, d.top_k, d.moe_intermediate
        per_expert = (3 if d.gated_mlp else 2) * h * mi
        if d.expert_bias:
            per_expert += (2 * mi if d.gated_mlp else mi) + h
        routed = e * per_expert
        adds.append(("routed_experts", routed, k * per_expert))
        router = _linear(h, e, d.router_bias)
        adds.append(("router", router, router))
        layer_total += routed + router
        layer_active += k * per_expert + router
        lora += e * (3 if d.gated_mlp else 2) * (h + mi)
        if d.shared_intermediate:
            s_params, s_lora = _mlp(d, h, d.shared_intermediate)
            if d.shared_gate:
                s_params += h
            adds.append(("shared_experts", s_params, s_params))
            layer_total += s_params
            layer_active += s_params
            lora += s_lora
        ffn = "moe"
        experts, top_k = e, k
        width = k * mi + d.shared_intermediate
    else:
        inter = d.dense_intermediate or d.intermediate
        m_params, m_lora = _mlp(d, h, inter)
        adds.append(("dense_mlp", m_params, m_params))
        layer_total += m_params
        layer_active += m_params
        lora += m_lora
        ffn = "swiglu" if d.gated_mlp else "gelu"
    spec = LayerSpec(
        attention=atype,
        ffn=ffn,
        params=layer_total,
        active_params=layer_active,
        kv_bytes_per_token=kv,
        window=d.window if kind == "sliding" else None,
        state_bytes=_linear_state(d) if atype == "linear" else 0,
        lora_dims=lora,
        experts=experts,
        top_k=top_k,
        ffn_width=width,
        q_width=d.heads * d.head_dim,
    )
    return spec, adds


def _linear_state(d: Dec) -> int:
    """Per-sequence recurrent state of a gated-DeltaNet layer: fp32 k×v per value head + conv."""
    la = d.linear
    if la is None:
        return 0
    kd, vd = la.key_heads * la.key_dim, la.value_heads * la.value_dim
    recurrent = la.value_heads * la.key_dim * la.value_dim * FP32
    conv = (2 * kd + vd) * (la.conv_kernel - 1) * BF16
    return recurrent + conv
