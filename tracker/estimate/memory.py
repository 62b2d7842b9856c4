"""Memory at the reference settings (ESTIMATES.md §2): fixed parts, activations, KV cache.

All byte figures are exact integers or floats of bytes; reports convert to decimal GB (1e9).

Activation formula (per token, per layer; SDPA/flash attention so no score matrix is stored,
no recomputation, bf16 activations `a` = 2 bytes, fp32 norms):
- norm inputs kept in fp32: 4·h per norm (two norms per layer);
- attention: a·(h + q + kv + q) + 4·heads — the projection input, Q, K and V, the attention
  output (input of o_proj), plus the fp32 log-sum-exp per head that flash attention saves;
- dense FFN (gated): a·(h + 4·I) — input, gate, up, act(gate), product; non-gated: a·(h + 2·I);
- MoE: the same over the active width (top-k experts + shared), plus fp32 router logits 4·E;
- linear-attention / SSM mixers: a·(h + 6·h) as a documented approximation of projection,
  conv and gate outputs (the chunked scan keeps O(state) per chunk, counted in `state_bytes`);
- residual stream: a·h.
Logits and loss once per token: bf16 logits 2·V, fp32 upcast 4·V, fp32 gradient 4·V.
"""

from __future__ import annotations

from dataclasses import dataclass

from tracker.estimate.reading import LayerSpec, Reading
from tracker.estimate.settings import EstimateSettings

GB = 1e9
LORA_ATTN_TARGETS = ("q", "k", "v", "o")


@dataclass(frozen=True)
class Memory:
    """Byte figures of one estimate; per-sample/per-sequence parts scale with the batch."""

    train_tokens: int
    serve_tokens: int
    full_fixed: float
    lora_fixed: float
    lora_adapter_params: int
    serve_fixed: float
    act_per_sample: float
    kv_per_sequence: float
    layer_act: tuple[float, ...]
    logits_act: float
    layer_kv: tuple[float, ...]

    @property
    def full_batch1(self) -> float:
        return self.full_fixed + self.act_per_sample

    @property
    def lora_batch1(self) -> float:
        return self.lora_fixed + self.act_per_sample


def layer_activation_bytes(spec: LayerSpec, r: Reading, a: float) -> float:
    """Activation bytes per token for one layer (see the module docstring)."""
    h = r.hidden
    total = 8.0 * h + a * h  # two fp32 norm inputs + residual
    if spec.attention in ("linear", "ssm"):
        total += a * 7 * h
    elif spec.attention != "none":
        q = spec.q_width or r.num_heads * r.head_dim
        kv = spec.kv_bytes_per_token / 2 if spec.kv_bytes_per_token else q
        total += a * (h + 2 * q + kv) + 4.0 * r.num_heads
    if spec.ffn == "moe":
        total += a * (h + 4 * spec.ffn_width) + 4.0 * spec.experts
    elif spec.ffn == "swiglu":
        total += a * (h + 4 * (spec.ffn_width or r.intermediate))
    elif spec.ffn != "none":
        total += a * (h + 2 * (spec.ffn_width or r.intermediate))
    return total


def lora_adapter_params(r: Reading, rank: int, targets: str) -> int:
    """LoRA parameters: rank × (in + out) summed over the targeted linears (head excluded)."""
    dims = sum(spec.lora_dims for spec in r.layers)
    if targets.strip() in ("all-linear", "all", ""):
        return rank * dims
    wanted = {t.strip() for t in targets.split(",") if t.strip()}
    h = r.hidden
    per_layer = 0
    q = r.num_heads * r.head_dim
    kv = r.kv_heads * r.head_dim
    sizes = {
        "q": h + q,
        "k": h + kv,
        "v": h + kv,
        "o": q + h,
        "gate": h + r.intermediate,
        "up": h + r.intermediate,
        "down": h + r.intermediate,
    }
    per_layer = sum(sizes.get(t, 0) for t in wanted)
    return rank * per_layer * len(r.layers)


def layer_kv_bytes(spec: LayerSpec, tokens: int, kv_scale: float = 1.0) -> float:
    """One layer's KV cache for one sequence: per-token bytes × min(tokens, window) + fixed
    recurrent state."""
    held = tokens if spec.window is None else min(tokens, spec.window)
    return spec.kv_bytes_per_token * kv_scale * held + spec.state_bytes


def compute(r: Reading, s: EstimateSettings, serve_bytes: float | None = None) -> Memory:
    """All memory figures of `r` under settings `s`; `serve_bytes` replaces the derived serving
    weights (the checkpoint's bytes, when the count cannot be vouched for)."""
    ctx = r.max_context or s.train_seq_len
    train_tokens = min(s.train_seq_len, ctx)
    serve_tokens = s.serve_seq_len
    a = s.activation_bytes
    layer_act = tuple(layer_activation_bytes(spec, r, a) * train_tokens for spec in r.layers)
    logits = 10.0 * r.vocab * train_tokens
    adapter = lora_adapter_params(r, s.lora_rank, s.lora_targets)
    kv_scale = s.kv_bytes_per_value / 2.0
    layer_kv = tuple(layer_kv_bytes(spec, serve_tokens, kv_scale) for spec in r.layers)
    return Memory(
        train_tokens=train_tokens,
        serve_tokens=serve_tokens,
        full_fixed=r.total * s.full_ft_bytes_per_param * s.full_ft_overhead,
        lora_fixed=r.total * s.lora_base_bytes_per_param + adapter * s.lora_adapter_bytes_per_param,
        lora_adapter_params=adapter,
        serve_fixed=r.total * s.serve_bytes_per_param if serve_bytes is None else serve_bytes,
        act_per_sample=sum(layer_act) + logits,
        kv_per_sequence=sum(layer_kv),
        layer_act=layer_act,
        logits_act=logits,
        layer_kv=layer_kv,
    )
