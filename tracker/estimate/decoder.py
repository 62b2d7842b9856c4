"""The transformer-stack count: embeddings, per-layer mixer and FFN, norms, head.

The general reader (`general.py`) fills a `Dec` description from a config; `build_decoder` walks
the layers once (bounded by MAX_LAYERS) and returns the per-layer specs while adding every
parameter to the tally. Counts follow transformers' module layout: each nn.Linear is in×out
(+out with bias), each RMSNorm its width, each LayerNorm twice its width; fused expert tensors
count E×in×out. Mixers: full/sliding attention (MHA/GQA/MQA or MLA), gated-DeltaNet and Kimi
delta attention (linear attention), Mamba2 and Mamba1 (SSM). FFNs: dense (gated or not), MoE with
routed, shared and latent experts.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tracker.estimate.reading import LayerSpec, Tally

if TYPE_CHECKING:
    from tracker.estimate.mixers import Gdn, Kda, Mamba1, Mamba2, Mla

BF16 = 2
FP32 = 4


@dataclass(eq=False)  # it holds per-layer functions, which compare by identity: no __eq__
class Dec:
    """Everything the stack count needs; defaults are the Llama layout.

    `layer_kind(i)`: "full" | "sliding" | "linear" | "mamba" | "none" (no mixer in the layer);
    `ffn_kind(i)`: "dense" | "moe" | "none" (default: "moe" where `is_moe(i)`, else "dense").
    `norm_params`: parameters per norm (0: hidden, an RMSNorm); `norms_per_sublayer`: 2 where a
    sublayer has a pre- and a post-norm; `parallel_norms`: norms of a parallel attention+MLP layer.
    """

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
    q_gate: bool = False
    gated_mlp: bool = True
    mlp_bias: bool = False
    norm_params: int = 0
    norms_per_sublayer: int = 1
    parallel: bool = False
    parallel_norms: int = 1
    final_norm: bool = True
    learned_positions: int = 0
    token_types: int = 0  # rows of a token-type embedding table (BERT)
    task_head: int = 0  # parameters of heads chosen by the architecture name (BERT)
    embed_norm: bool = False
    sinks: bool = False
    head_bias: bool = False
    fused_qkv: bool = False
    fused_gate_up: bool = False
    act_tensors: int = 2  # tensors a two-matrix MLP keeps at its width for backward
    alibi: bool = False  # ALiBi instead of rotary embeddings
    # MoE
    experts: int = 0
    top_k: int = 0
    moe_intermediate: int = 0
    gated_experts: bool = True
    shared_intermediate: int = 0  # total width of the shared expert(s)
    shared_gate: bool = False  # a sigmoid gate h→1 on the shared expert
    router_bias: bool = False
    expert_bias: bool = False
    latent: int = 0  # experts work in a latent width, with h→latent and latent→h projections
    latent_norm: bool = False
    is_moe: Callable[[int], bool] = field(default=lambda i: False)
    dense_intermediate: int | None = None  # width of non-MoE layers' MLP (default intermediate)
    # per-layer kinds
    layer_kind: Callable[[int], str] = field(default=lambda i: "full")
    ffn_kind: Callable[[int], str] | None = None
    window: int | None = None
    mla: Mla | None = None
    linear: Gdn | Kda | None = None
    ssm: Mamba2 | Mamba1 | None = None
    kv_heads_for: Callable[[int], int] | None = None
    has_indexer: Callable[[int], bool] = field(default=lambda i: True)
    # per-layer-kind attention shapes and shared K/V (Gemma 4's keys, read wherever they appear)
    full_head_dim: int | None = None  # head size of full-attention layers (`global_head_dim`)
    full_kv_heads: int | None = None  # their KV heads (`num_global_key_value_heads`)
    full_k_eq_v: bool = False  # full layers use the key projection as values (no v_proj)
    kv_shared_from: int | None = None  # layers from this index reuse earlier K/V: no k/v/k_norm
    shared_kv_mlp_factor: int = 1  # MLP width multiplier on those layers (`use_double_wide_mlp`)
    # the MoE block added beside the dense MLP (None: it replaces it), with this many more norms
    moe_beside_dense_norms: int | None = None
    router_scales: bool = False  # the router's per-channel (h) and per-expert (E) scale vectors
    norm_fp32: bool = False  # RMSNorms apply their weight in fp32 (activations only)
    v_norm: bool = False  # a weightless RMSNorm on V (Gemma 4; activations only)
    eager: bool = False  # no SDPA path in transformers: eager attention (activations only)
    routing: str = "softmax"  # MoE routing as autograd sees it (Traits.routing; activations only)
    expert_tensors: int = 4  # tensors an expert keeps per routed token at its width
    per_layer_input: int = 0  # width of per-layer input embeddings (`hidden_size_per_layer_input`)
    per_layer_vocab: int = 0  # rows of their table (`vocab_size_per_layer_input`)
    conv: tuple[int, int] | None = None  # short-convolution mixers: (kernel, bias) (LFM2)
    dynamic_mask: bool = False  # Doge: A (KV heads) and dt_proj (KV width → KV heads)
    residual_scales: int = 0  # per-channel residual scale vectors per layer (Doge)
    zero_experts: int = 0  # zero-computation experts the router also scores (LongCat-Flash)
    cdmoe: tuple[int, int] | None = None  # Doge's CDMoE: (experts, top-k) beside the dense MLP
    layer_head_dim: Callable[[int], int] | None = None  # per-layer head size (per_layer_config)
    rglru: tuple[int, int, int] | None = None  # RG-LRU blocks: (lru_width, heads, conv width)
    layer_intermediate: Callable[[int], int] | None = None  # per-layer FFN width (Gemma 3n)
    altup: int = 0  # AltUp streams (Gemma 3n): per-layer router and coefficients, projections
    laurel: int = 0  # LAuReL rank (Gemma 3n): a low-rank residual per layer and its norm
    lightning: bool = False  # "linear" layers are MiniMax's lightning attention
    head_gate: bool = False  # attention output gate Linear(h, heads) (LFM3's g_proj)
    norm_weightless: bool = False  # norms without parameters (NanoChat)
    act_params: int = 0  # learned activation parameters per MLP (xIELU's alpha_p, alpha_n)
    attn_res: bool = False  # attention residuals: an RMSNorm and an h→1 pseudo-query per sublayer


def _linear(n_in: int, n_out: int, bias: bool) -> int:
    return n_in * n_out + (n_out if bias else 0)


@dataclass(frozen=True)
class Mixer:
    """One layer's mixer: parameters, LoRA in+out dims, KV bytes per token, fixed state, type."""

    params: int
    lora: int
    kv_bytes: int
    state_bytes: int
    kind: str
    k_width: int = 0
    v_width: int = 0
    q_width: int = 0
    latent: int = 0
    act: int = 0  # bytes autograd keeps per token (linear attention / SSM; 0: the general rule)
    kv_b: int = 0  # MLA: kv_b_proj's output width when V is a view of it (V not padded)
    dense_mask: bool = False  # MLA with a DSA indexer: SDPA gets the top-k as a T × T mask


def _linear_attention(h: int, la: Gdn | Kda) -> Mixer:
    from tracker.estimate.mixers import Kda

    if isinstance(la, Kda):
        q = la.heads * la.head_dim
        hd = la.head_dim
        params = 3 * h * q + 3 * q * la.conv_kernel  # q/k/v projections, depthwise conv
        params += h * hd + hd * q + q + la.heads  # forget gate (low rank), dt_bias, A_log
        params += h * la.heads  # beta projection
        params += hd + q * h  # gated norm, o_proj
        lora = 3 * (h + q) + (h + hd) + (hd + q) + (h + la.heads) + (q + h)
        if la.full_rank_gate:
            params += h * q  # output gate g_proj
            lora += h + q
        else:
            params += h * hd + hd * q  # output gate g_a_proj, g_b_proj (low rank)
            lora += (h + hd) + (hd + q)
        state = la.heads * hd * hd * FP32 + 3 * q * (la.conv_kernel - 1) * BF16
        # transformers' torch path for KDA is not followed (see memory.py): act stays 0
        return Mixer(params, lora, 0, state, "linear", q, q, q)
    kd, vd = la.key_heads * la.key_dim, la.value_heads * la.value_dim
    conv_dim = 2 * kd + vd
    params = h * (2 * kd + 2 * vd) + h * 2 * la.value_heads  # in_proj_qkvz, in_proj_ba
    params += conv_dim * la.conv_kernel + 2 * la.value_heads + la.value_dim + vd * h
    lora = (h + 2 * kd + 2 * vd) + (h + 2 * la.value_heads) + vd + h
    state = (
        la.value_heads * la.key_dim * la.value_dim * FP32 + conv_dim * (la.conv_kernel - 1) * BF16
    )
    return Mixer(params, lora, 0, state, "linear", kd, vd, kd, act=la.saved_bytes())


def _ssm(h: int, m: Mamba2 | Mamba1) -> Mixer:
    from tracker.estimate.mixers import Mamba1

    if isinstance(m, Mamba1):
        di = m.d_inner
        params = _linear(h, 2 * di, m.bias) + di * m.conv_kernel + (di if m.conv_bias else 0)
        params += di * (m.dt_rank + 2 * m.state) + _linear(m.dt_rank, di, True)
        params += di * m.state + di + _linear(di, h, m.bias)  # A_log, D, out_proj
        lora = (h + 2 * di) + (di + m.dt_rank + 2 * m.state) + (m.dt_rank + di) + (di + h)
        state = di * m.state * FP32 + di * (m.conv_kernel - 1) * BF16
        return Mixer(params, lora, 0, state, "ssm", di, di, di)
    di = m.heads * m.head_dim
    conv_dim = di + 2 * m.groups * m.state
    params = _linear(h, 2 * di + 2 * m.groups * m.state + m.heads, m.bias)
    params += conv_dim * m.conv_kernel + (conv_dim if m.conv_bias else 0)
    params += 3 * m.heads + _linear(di, h, m.bias)  # A_log, D, dt_bias, out_proj
    params += di if m.norm else 0  # the gated norm
    lora = (h + 2 * di + 2 * m.groups * m.state + m.heads) + di + h
    state = m.heads * m.head_dim * m.state * FP32 + conv_dim * (m.conv_kernel - 1) * BF16
    return Mixer(params, lora, 0, state, "ssm", di, di, di, act=m.saved_bytes())


def _mla(d: Dec, m: Mla, layer: int) -> Mixer:
    h = d.hidden
    nh = d.heads
    qk = m.qk_nope + m.qk_rope
    params = lora = 0
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
    if m.out_gate:
        params += h * nh * m.v_head
        lora += h + nh * m.v_head
    if m.indexer is not None and m.q_lora_rank and d.has_indexer(layer):
        ih, idim = m.indexer
        params += m.q_lora_rank * ih * idim + h * idim + 2 * idim + h * ih
        lora += (m.q_lora_rank + ih * idim) + (h + idim) + (h + ih)
    kv_bytes = (m.kv_lora_rank + m.qk_rope) * BF16
    latent = (m.q_lora_rank or 0) + m.kv_lora_rank
    kv_b = nh * (m.qk_nope + m.v_head) if m.v_head >= qk else 0
    indexed = m.indexer is not None and bool(m.q_lora_rank) and d.has_indexer(layer)
    return Mixer(
        params, lora, kv_bytes, 0, "mla", nh * qk, nh * m.v_head, nh * qk, latent, 0, kv_b, indexed
    )


def mixer_params(d: Dec, kind: str, layer: int) -> Mixer:
    """The mixer of layer `layer` of kind `kind` (see `Dec.layer_kind`)."""
    h = d.hidden
    if kind == "none":
        return Mixer(0, 0, 0, 0, "none")
    if kind == "hybrid" and d.ssm is not None:
        # attention and an SSM side by side on the same input (Falcon-H1): both counted, the
        # attention's KV cache beside the SSM's fixed state
        a, m = mixer_params(d, "full", layer), _ssm(h, d.ssm)
        return Mixer(
            a.params + m.params,
            a.lora + m.lora,
            a.kv_bytes,
            m.state_bytes,
            a.kind,
            a.k_width,
            a.v_width,
            a.q_width,
        )
    if kind == "linear" and d.linear is not None:
        return _linear_attention(h, d.linear)
    if kind == "mamba" and d.ssm is not None:
        return _ssm(h, d.ssm)
    if kind == "linear" and d.lightning:
        # MiniMax's lightning attention: qkv_proj h→3q, output_gate h→q, out_proj q→h and an
        # RMSNorm over q = heads × head size; a fixed heads × d × d fp32 state per sequence
        q = d.heads * d.head_dim
        params = 3 * h * q + h * q + q * h + q
        lora = (h + 3 * q) + (h + q) + (q + h)
        state = d.heads * d.head_dim * d.head_dim * FP32
        return Mixer(params, lora, 0, state, "linear", q, q, q)
    if kind == "recurrent" and d.rglru is not None:
        # RecurrentGemma's recurrent block: linear_y, linear_x (h→lru) and linear_out with
        # biases, a depthwise conv with bias, and the RG-LRU (recurrent_param; input and
        # recurrent gates block-diagonal over the heads, with biases); a fixed state per sequence
        lru, nh, w = d.rglru
        block = lru // nh
        params = 2 * _linear(h, lru, True) + _linear(lru, h, True) + lru * w + lru
        params += lru + 2 * (nh * block * block + lru)
        lora = 2 * (h + lru) + (lru + h)
        state = lru * FP32 + lru * (w - 1) * BF16
        return Mixer(params, lora, 0, state, "linear", lru, lru, lru)
    if kind == "conv" and d.conv is not None:
        # LFM2's ShortConv: in_proj h→3h (B, C, x), a depthwise conv over the kernel, out_proj;
        # it caches the last `kernel` inputs per sequence (no per-token KV)
        k, b = d.conv
        params = _linear(h, 3 * h, bool(b)) + h * k + (h if b else 0) + _linear(h, h, bool(b))
        lora = (h + 3 * h) + (h + h)
        return Mixer(params, lora, 0, h * k * BF16, "ssm", h, h, h)
    if d.mla is not None:
        return _mla(d, d.mla, layer)
    kvh = kv_heads_of(d, kind, layer)
    hd = d.full_head_dim if kind == "full" and d.full_head_dim else d.head_dim
    if d.layer_head_dim is not None:
        hd = d.layer_head_dim(layer)
    q_out = d.heads * hd * (2 if d.q_gate else 1)
    shared = d.kv_shared_from is not None and layer >= d.kv_shared_from
    kv_mats = 0 if shared else (1 if d.full_k_eq_v and kind == "full" else 2)
    params = _linear(h, q_out, d.q_bias) + kv_mats * _linear(h, kvh * hd, d.kv_bias)
    params += _linear(d.heads * hd, h, d.o_bias)
    if d.qk_norm:
        params += hd if shared else 2 * hd  # a layer reusing K/V has no k_norm
    if d.sinks:
        params += d.heads
    if d.head_gate:
        params += h * d.heads
    if d.dynamic_mask:
        params += kvh + _linear(kvh * hd, kvh, d.o_bias)
    if d.fused_qkv:
        lora = (h + q_out + kv_mats * kvh * hd) + (d.heads * hd + h)
    else:
        lora = (h + q_out) + kv_mats * (h + kvh * hd) + (d.heads * hd + h)
    if kind == "sliding":
        atype = "sliding"
    elif kvh == d.heads:
        atype = "mha"
    elif kvh == 1:
        atype = "mqa"
    else:
        atype = "gqa"
    # transformers caches keys and values separately even where K=V (values skip the key's norm
    # and rotary embedding); a layer reusing earlier K/V caches nothing of its own.
    kv_bytes = 0 if shared else 2 * kvh * hd * BF16
    return Mixer(params, lora, kv_bytes, 0, atype, kvh * hd, kvh * hd, d.heads * hd)


def kv_heads_of(d: Dec, kind: str, layer: int) -> int:
    """Key/value heads of layer `layer` of kind `kind` (full layers may have their own count)."""
    if kind == "full" and d.full_kv_heads:
        return d.full_kv_heads
    return d.kv_heads_for(layer) if d.kv_heads_for else d.kv_heads


def _mlp(d: Dec, h: int, inter: int, gated: bool, bias: bool) -> tuple[int, int]:
    if gated:
        lora = (h + 2 * inter) + (inter + h) if d.fused_gate_up else 3 * (h + inter)
        return 2 * _linear(h, inter, bias) + _linear(inter, h, bias) + d.act_params, lora
    return _linear(h, inter, bias) + _linear(inter, h, bias) + d.act_params, 2 * (h + inter)


def build_decoder(d: Dec, t: Tally) -> list[LayerSpec]:
    """Add the whole stack's parameters to `t`; return one LayerSpec per layer.

    Layers that share (mixer kind, FFN kind, KV heads, indexer) are identical, so each distinct
    kind is counted once and its tally contributions are multiplied by its layer count (integer
    arithmetic: the totals are exactly those of a layer-by-layer walk).
    """
    h = d.hidden
    norm = 0 if d.norm_weightless else d.norm_params or h
    t.add("embeddings", d.vocab * h)
    if d.learned_positions:
        t.add("embeddings", d.learned_positions * h)
    if d.token_types:
        t.add("embeddings", d.token_types * h)
    if d.embed_norm:
        t.add("norms", norm)
    if d.per_layer_input:
        # per-layer input embeddings: a table of n_layers × width per token, the projection of
        # the hidden state to the same width, and its RMSNorm
        ple = d.n_layers * d.per_layer_input
        t.add("embeddings", (d.per_layer_vocab or d.vocab) * ple)
        t.add("embeddings", h * ple + d.per_layer_input)
    mla_indexer = d.mla is not None and d.mla.indexer is not None and bool(d.mla.q_lora_rank)
    Key = tuple[str, str, int, bool, bool, int, int]
    kinds: dict[Key, tuple[LayerSpec, list[tuple[str, int, int]]]] = {}
    uses: dict[Key, int] = {}
    specs: list[LayerSpec] = []
    # once per layer: what the loop reads of `d` is looked up once, here
    layer_kind, ffn_kind, is_moe, has_indexer = d.layer_kind, d.ffn_kind, d.is_moe, d.has_indexer
    experts, shared_from = bool(d.experts), d.kv_shared_from
    # `kv_heads_of` without a call per layer where it is one number for all of them
    uniform_kv = None if d.full_kv_heads or d.kv_heads_for else d.kv_heads
    for i in range(d.n_layers):
        kind = layer_kind(i)
        if ffn_kind is not None:
            ffn = ffn_kind(i)
        elif experts and is_moe(i):
            ffn = "moe"
        else:
            ffn = "dense"
        if ffn == "moe" and not experts:
            ffn = "dense"
        kvh = uniform_kv if uniform_kv is not None else kv_heads_of(d, kind, i)
        shared = shared_from is not None and i >= shared_from
        hd = d.layer_head_dim(i) if d.layer_head_dim is not None else 0
        width = d.layer_intermediate(i) if d.layer_intermediate is not None else 0
        key = (kind, ffn, kvh, has_indexer(i) if mla_indexer else True, shared, hd, width)
        known = kinds.get(key)
        if known is None:
            known = kinds[key] = _layer(d, kind, ffn, i, norm)
            uses[key] = 0
        uses[key] += 1
        specs.append(known[0])
    for key, (_, adds) in kinds.items():
        n = uses[key]
        for component, count, active in adds:
            t.add(component, n * count, n * active)
    if d.altup > 1:  # AltUp's projections into and out of the extra streams
        t.add("embeddings", 2 * (d.altup - 1) * h * h)
    if d.attn_res:
        t.add("attention_residuals", 2 * h)  # the output's pseudo-query and its RMSNorm
    if d.final_norm:
        t.add("norms", norm)
    if not d.tied:
        t.add("head", d.vocab * h)
    if d.head_bias:
        t.add("head", d.vocab)
    if d.task_head:
        t.add("head", d.task_head)
    return specs


def _layer(
    d: Dec, kind: str, ffn: str, i: int, norm: int
) -> tuple[LayerSpec, list[tuple[str, int, int]]]:
    """One layer's spec and its (component, params, active params) contributions, in order."""
    h = d.hidden
    adds: list[tuple[str, int, int]] = []
    mx = mixer_params(d, kind, i)
    if mx.params:
        component = {"linear": "linear_attention", "ssm": "ssm"}.get(mx.kind, "attention")
        adds.append((component, mx.params, mx.params))
    layer_total = layer_active = mx.params
    lora = mx.lora
    sublayers = (kind != "none") + (ffn != "none")
    n_norms = d.parallel_norms if d.parallel else sublayers * d.norms_per_sublayer
    if d.attn_res:
        # each sublayer attends over the earlier blocks' outputs with a learned pseudo-query
        # (Linear(h, 1)) on RMSNorm'd keys (Kimi-K3's self_attention_res / mlp_res)
        res = sublayers * 2 * h
        adds.append(("attention_residuals", res, res))
        layer_total += res
        layer_active += res
    if d.altup or d.laurel:
        # AltUp: output scale (built whatever altup_correct_scale says), correction (n×n) and prediction (n×n²) coefficients, a modality
        # router h→n and its norm; LAuReL: h→rank→h and a post-norm
        n_in = d.altup
        side = h + n_in * n_in + n_in**3 + h * n_in + h if n_in else 0
        side += 2 * h * d.laurel + h if d.laurel else 0
        adds.append(("dense_mlp", side, side))
        layer_total += side
        layer_active += side
    if d.residual_scales:
        res = d.residual_scales * h
        adds.append(("norms", res, res))
        layer_total += res
        layer_active += res
    beside = ffn == "moe" and d.moe_beside_dense_norms is not None
    # norms whose output no linear reads: sandwich post-norms and the MoE branch's norms beside
    # the dense MLP (its pre-norm's output is gathered per expert, counted with the experts)
    post_norms = 0 if d.parallel else sublayers * (d.norms_per_sublayer - 1)
    if beside:
        n_norms += d.moe_beside_dense_norms or 0
        post_norms += d.moe_beside_dense_norms or 0
    shared_kv = d.kv_shared_from is not None and i >= d.kv_shared_from
    base_width = d.dense_intermediate or d.intermediate
    if d.layer_intermediate is not None:
        base_width = d.layer_intermediate(i)
    dense_width = base_width * (d.shared_kv_mlp_factor if shared_kv else 1)
    n_params = n_norms * norm
    adds.append(("norms", n_params, n_params))
    layer_total += n_params
    layer_active += n_params
    experts = top_k = 0
    width = 0
    ffn_type = "none"
    if ffn == "moe":
        e, k, mi = d.experts, d.top_k, d.moe_intermediate
        w = d.latent or h
        per_expert = (3 if d.gated_experts else 2) * w * mi
        if d.expert_bias:
            per_expert += (2 * mi if d.gated_experts else mi) + w
        routed = e * per_expert
        # transformers 5.24's LongcatFlashExperts allocates gate_up_proj for the zero experts too
        # (total_experts rows), though they never run: counted, never active
        routed += d.zero_experts * (2 if d.gated_experts else 1) * w * mi
        adds.append(("routed_experts", routed, k * per_expert))
        scored = e + d.zero_experts
        router = _linear(h, scored, d.router_bias) + (h + e if d.router_scales else 0)
        adds.append(("router", router, router))
        layer_total += routed + router
        layer_active += k * per_expert + router
        lora += e * (3 if d.gated_experts else 2) * (w + mi)
        if d.latent:
            lat = 2 * h * d.latent + (d.latent if d.latent_norm else 0)
            adds.append(("shared_experts", lat, lat))
            layer_total += lat
            layer_active += lat
            lora += 2 * (h + d.latent)
        if d.shared_intermediate:
            s_params, s_lora = _mlp(d, h, d.shared_intermediate, d.gated_mlp, d.mlp_bias)
            if d.shared_gate:
                s_params += h
            adds.append(("shared_experts", s_params, s_params))
            layer_total += s_params
            layer_active += s_params
            lora += s_lora
        ffn_type = "moe"
        experts, top_k = e, k
        width = k * mi + d.shared_intermediate
        if beside:
            m_params, m_lora = _mlp(d, h, dense_width, d.gated_mlp, d.mlp_bias)
            adds.append(("dense_mlp", m_params, m_params))
            layer_total += m_params
            layer_active += m_params
            lora += m_lora
            width += dense_width
    elif ffn == "dense":
        width = dense_width
        m_params, m_lora = _mlp(d, h, width, d.gated_mlp, d.mlp_bias)
        if d.cdmoe is not None:
            # CDMoE: a product-key router h → 2·⌊√E⌋ and down/up expert embeddings (E × h each),
            # of which top-k rows per token are read
            e, k = d.cdmoe
            keys = math.isqrt(e)
            adds.append(("router", h * 2 * keys, h * 2 * keys))
            adds.append(("routed_experts", 2 * e * h, 2 * k * h))
            layer_total += h * 2 * keys + 2 * e * h
            layer_active += h * 2 * keys + 2 * k * h
        adds.append(("dense_mlp", m_params, m_params))
        layer_total += m_params
        layer_active += m_params
        lora += m_lora
        ffn_type = "swiglu" if d.gated_mlp else "gelu"
    if d.per_layer_input:
        # the per-layer input's gate (h→width), projection (width→h) and post-norm
        ple = 2 * h * d.per_layer_input + h
        adds.append(("dense_mlp", ple, ple))
        layer_total += ple
        layer_active += ple
        lora += 2 * (h + d.per_layer_input)
    spec = LayerSpec(
        attention=mx.kind,
        ffn=ffn_type,
        params=layer_total,
        active_params=layer_active,
        kv_bytes_per_token=mx.kv_bytes,
        window=d.window if kind == "sliding" else None,
        state_bytes=mx.state_bytes,
        lora_dims=lora,
        experts=experts,
        top_k=top_k,
        ffn_width=width,
        q_width=mx.q_width,
        k_width=mx.k_width,
        v_width=mx.v_width,
        heads=d.heads,
        moe_width=d.moe_intermediate if ffn == "moe" else 0,
        gated=d.gated_experts if ffn == "moe" else d.gated_mlp,
        norms=n_norms,
        latent=d.latent if ffn == "moe" else 0,
        shared_width=d.shared_intermediate if ffn == "moe" else 0,
        mla_latent=mx.latent,
        qk_norm=d.qk_norm and mx.kind not in ("linear", "ssm", "mla"),
        mixer_act=mx.act,
        layer_norm=d.norm_params == 2 * h,
        fused_qkv_rope=d.fused_qkv
        and not d.learned_positions
        and not d.alibi
        and mx.kind in ("mha", "gqa", "mqa", "sliding"),
        act_tensors=d.act_tensors,
        norm_fp32=d.norm_fp32,
        post_norms=post_norms,
        router_norm=d.router_scales and ffn == "moe",
        v_norm=d.v_norm and mx.kind not in ("linear", "ssm", "mla"),
        kv_b_width=mx.kv_b,
        dense_mask=mx.dense_mask,
        eager=d.eager and mx.kind not in ("linear", "ssm", "none"),
        sinks=d.sinks,
        routing=d.routing if ffn == "moe" else "softmax",
        expert_tensors=d.expert_tensors,
    )
    return spec, adds
