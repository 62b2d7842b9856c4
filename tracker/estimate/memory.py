"""Memory (ESTIMATES.md §2) under the estimate's settings: fixed parts, activations, KV cache.

All byte figures are exact integers or floats of bytes; reports convert to decimal GB (1e9).

Activation formula (per token, per layer): what autograd keeps for backward in transformers'
modelling code with SDPA/flash attention (no score matrix), no recomputation, activations of
`a` bytes (bf16: 2; fp32 under `precision: fp32`), checked against the bytes autograd saves in
real-shaped layers (`bench/activations.py`, `make bench`):
- each RMS/LayerNorm: its fp32 input copy, the normalized value before and after the weight
  (the latter is the next linears' input), (4 + 2a)·h, and its fp32 rsqrt; a LayerNorm
  keeps its input and output, 2a·h, and its mean and rstd; an RMSNorm that applies its weight
  in fp32 (Gemma, Qwen3-Next, gpt-oss) keeps the fp32 input copy and the fp32 normalized
  product, 8·h, two fp32 scalars and its output a·h; a norm whose output no linear reads
  (sandwich post-norms, Gemma 4's MoE-branch norms) keeps a·h less;
- softmax attention: Q, K, V as SDPA receives them (after RoPE; grouped K/V not repeated) and
  the SDPA output (o_proj's input is a view of it), a·(q + k + v + o), plus the fp32
  log-sum-exp per head; per-head q/k norms add (4 + a)·(q + k); MLA adds its low-rank
  latents, each with its norm, (4 + 2a)·(q_lora + kv_lora), its K is expanded to all heads
  (k = heads × (nope + rope)), and V is padded to that head size for the fused kernel (V and
  the output at q's width, o_proj's input a sliced copy); a fused qkv linear with RoPE
  (Phi-3, GPT-NeoX, Falcon) keeps its whole output beside the rotated q and k, and the
  rotary's cat leaves o_proj's input a copy, a·(2q + k) more; where MLA's V is not padded
  (V head = q/k head, GLM-5) V is a view of kv_b_proj's output, all of which is kept, and
  o_proj's input is a copy; a DSA indexer's top-k reaches SDPA as a T × T mask, a·T;
  transformers repeats grouped K/V to every head (k = v = q) where SDPA gets a mask (a sliding
  layer at T > window) or heads are over 256 wide; Gemma 4's weightless V norm adds 4·v;
- eager attention (families with no SDPA path in transformers 5.24: gpt-oss, BLOOM): the
  T × T probabilities per head, see `_eager_bytes`;
- gated FFN: gate, act(gate), up and their product, 4a·I; two-matrix FFN: 2a·I (GPT-2's
  Python tanh GELU, `gelu_new`: 5a·I);
- MoE: fp32 router probabilities, 4·E, and per routed token-expert pair the gathered input and
  the expert output, 2a·h, the expert's gated FFN, 4a·I_expert, and the routing indices and
  weights (28 bytes); shared experts as a gated FFN; a dense MLP beside the experts (Gemma 4)
  as a gated FFN, and Gemma 4's router its normalized, scaled input, (4 + 2a)·h. Two families
  route irregularly (`traits.py`): gpt-oss's clamped SwiGLU experts keep 7a·I_expert per pair
  and its router no fp32 probabilities (per pair 40 + 2a bytes of indices and weights);
  Llama 4 runs every expert on every token, so all E experts keep 2a·h + 4a·I_expert + a;
- gated DeltaNet and Mamba2 mixers: what transformers' torch path keeps (the chunked scan in
  fp32, used where the flash-linear-attention / mamba-ssm kernels are not installed; those
  kernels keep less), fitted to the byte on small layers (`mixers.Gdn.saved_bytes`,
  `mixers.Mamba2.saved_bytes`) and checked on real-shaped layers in `bench/activations.py`;
- Kimi delta attention and Mamba1: a·7h, an approximation of projections, conv and gate
  outputs. For KDA transformers' torch path is not followed: it builds a chunk × chunk ×
  head-size decay tensor per head (about 870 bytes per channel per token), which the fla kernel
  that Kimi's own modelling code requires never materialises;
Logits and loss once per token: bf16 logits 2·V, fp32 upcast 4·V, fp32 gradient 4·V (with
`chunked_loss`, the saved fp32 log-probabilities 4·V only).
With gradient checkpointing each layer keeps only its input (a·h per token) and one layer's
activations are live again during its recomputation.
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
    full_bytes_per_param: float = 0.0
    lora_bytes_per_param: float = 0.0
    serve_bytes_per_param: float = 0.0
    prefill_per_sequence: float = 0.0
    serve_rest_bytes_per_param: float = 2.0
    """Bytes per parameter of what serving holds outside the layers (embeddings, head, towers)."""
    lora_rest_bytes_per_param: float = 2.0
    """The same for LoRA's frozen base."""
    shards: int = 1
    serve_shards: int = 1

    @property
    def serve_per_sequence(self) -> float:
        """What each further sequence adds when serving, per card: KV cache and prefill working
        set (split over `serve_shards` cards)."""
        return (self.kv_per_sequence + self.prefill_per_sequence) / self.serve_shards

    @property
    def full_batch1(self) -> float:
        return self.full_fixed + self.act_per_sample

    @property
    def lora_batch1(self) -> float:
        return self.lora_fixed + self.act_per_sample


def _norm_bytes(spec: LayerSpec, h: int, a: float) -> float:
    """What the layer's norms keep per token (see the module docstring): a norm whose output a
    linear reads keeps that output too; `post_norms` of them feed only the residual."""
    if spec.layer_norm:
        read, post = 2 * a * h + 4.0, a * h + 4.0
    elif spec.norm_fp32:
        read, post = (8.0 + a) * h + 8.0, 8.0 * h + 8.0
    else:
        read, post = (4.0 + 2 * a) * h + 4.0, (4.0 + a) * h + 4.0
    if spec.norm_keeps_input:
        read, post = read + a * h, post + a * h
    return (spec.norms - spec.post_norms) * read + spec.post_norms * post


def _eager_bytes(spec: LayerSpec, q: int, heads: int, a: float, tokens: int) -> float:
    """Eager attention per token (K/V repeated to every head, so k = v = q): gpt-oss keeps Q and
    K for the scores, the softmax output over T keys plus the sink column (activation dtype),
    the row maxima's int64 indices, V and the output copy; BLOOM keeps the copied Q, K and V,
    its fp32 softmax output and the bf16 copy the value product reads, and the merged output."""
    if spec.sinks:
        return a * 4 * q + a * heads * (tokens + 1) + 8.0 * heads
    return a * 4 * q + (4.0 + a) * heads * tokens


def layer_activation_bytes(spec: LayerSpec, r: Reading, a: float, tokens: int = 0) -> float:
    """Activation bytes per token for one layer (see the module docstring); `tokens`, the
    sequence length, sizes the terms that grow with it (eager attention's T × T scores, an
    explicit mask); 0 leaves them out."""
    h = r.hidden
    total = _norm_bytes(spec, h, a)
    heads = spec.heads or r.num_heads
    if spec.attention in ("linear", "ssm"):
        total += spec.mixer_act or a * 7 * h
    elif spec.attention != "none":
        q = spec.q_width or r.num_heads * r.head_dim
        k = spec.k_width or r.kv_heads * r.head_dim
        v = spec.v_width or k
        masked = spec.dense_mask or (spec.window is not None and tokens > spec.window)
        if spec.attention != "mla" and (q // max(heads, 1) > 256 or masked or spec.eager):
            # transformers' SDPA path repeats grouped K/V to every head where a mask is passed
            # or the head is over 256 wide (`use_gqa_in_sdpa`), and eager always does (K and V
            # heads as wide as Q's)
            k = v = q
        if spec.attention == "mla" and v < q:
            # flash attention needs one head size: V is padded to q/k's and the output sliced
            # back (o_proj's input is then a copy)
            total += (4.0 + 2 * a) * spec.mla_latent + a * (q + k + 2 * q + v) + 4.0 * heads
        elif spec.attention == "mla":
            # V is a view of kv_b_proj's output (no padding): SDPA keeps all of it; o_proj's
            # input is a copy of the output
            kv_b = spec.kv_b_width or v
            total += (4.0 + 2 * a) * spec.mla_latent + a * (q + k + kv_b + 2 * v) + 4.0 * heads
        elif spec.eager:
            total += _eager_bytes(spec, q, heads, a, tokens)
        elif spec.bias_math:
            # fp32 Q, K, V and T × T probabilities; o's input; a causal layer's bool mask
            total += 4.0 * (q + k + v) + 4.0 * heads * tokens + a * q
            total += 8.0 * tokens if spec.bias_indices else 0.0
            total += float(tokens) if spec.kind == "decoder" else 0.0
        else:
            total += a * (q + k + v + q) + 4.0 * heads
            if spec.fused_qkv_rope:
                total += a * (q + k + q)
        if spec.dense_mask:
            total += a * tokens  # the indexer's top-k folded into a T × T mask, kept by SDPA
        if spec.qk_norm:
            qk = (spec.q_width or q) + (spec.k_width or k)
            kvh = heads * (spec.k_width or k) // max(spec.q_width or q, 1)
            if spec.norm_fp32:
                total += 8.0 * qk + 8.0 * (heads + kvh)
            else:
                total += (4.0 + a) * qk + 4.0 * (heads + kvh)
        if spec.v_norm:
            vw = spec.v_width or v
            total += 4.0 * vw + 8.0 * heads * vw // max(spec.q_width or q, 1)
        if spec.cross_kv_width:
            # cross-attention (its norm is among `norms`): Q, encoder K/V, output, log-sum-exp;
            # T5 passes its zero position bias as an activation-dtype mask (encoder length T)
            total += a * (2 * q + spec.cross_kv_width) + 4.0 * heads
            total += a * heads * tokens if spec.bias_math else 0.0
    if spec.ffn == "moe":
        k_ = spec.top_k
        expert = 2 * a * h + spec.expert_tensors * a * spec.moe_width
        if spec.routing == "dense":
            # Llama 4: every expert sees every token (input repeated per expert and scaled by
            # its score), so each keeps its input copy, the scaled input and its FFN, and the
            # transposed score; fp32 sigmoid scores over E; the top-k's int64 indices
            total += 4.0 * spec.experts + spec.experts * (expert + a) + 8 * k_
        elif spec.routing == "topk":
            # gpt-oss: per routed pair the top-k index, the bf16 softmax over the top-k logits
            # and its sorted copy, and grouped_mm's int64 permutation and bias indices (4)
            total += k_ * (expert + 40 + 2 * a)
        else:
            total += 4.0 * spec.experts + k_ * (expert + 28) + 8
        total += a * 4 * spec.shared_width
        # a dense MLP beside the experts (Gemma 4): the rest of the active width
        total += a * 4 * max(0, spec.ffn_width - k_ * spec.moe_width - spec.shared_width)
        if spec.router_norm:
            total += (4.0 + 2 * a) * h + 8.0
    elif spec.ffn == "swiglu":
        total += a * 4 * (spec.ffn_width or r.intermediate)
    elif spec.ffn != "none":
        total += a * spec.act_tensors * (spec.ffn_width or r.intermediate)
    return total


def lora_adapter_params(r: Reading, rank: int, targets: str) -> int:
    """LoRA parameters: rank × (in + out) summed over the targeted linears (head excluded)."""
    dims = r.lora_dims
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


QUANT_BYTES = {
    # bytes per weight of a quantized linear, constants included
    "nf4": 0.5 + 1 / 64 + 4 / (64 * 256),  # 4 bits, 8-bit absmax per 64, fp32 per 256 blocks
    "int4": 0.5 + (2 + 0.5) / 128,  # GPTQ: 4 bits, fp16 scale and 4-bit zero per 128
    "int8": 1.0,  # LLM.int8 / w8a8: 1 byte (row scales negligible)
    "fp8": 1.0,
}


def state_bytes(s: EstimateSettings) -> tuple[float, float, float]:
    """(weights, gradients, optimizer state) bytes per trained parameter under `s`.

    bf16-mixed / fp16-mixed: fp32 weights, gradients and two AdamW moments, in all
    `full_ft_bytes_per_param` (16) split 4 + 4 + 8; bf16 (pure): 2 + 2 + 4; fp32: 4 + 4 + 8.
    An 8-bit optimizer holds two 1-byte moments (block constants negligible).
    """
    if s.precision in ("bf16-mixed", "fp16-mixed"):
        w = g = s.full_ft_bytes_per_param / 4
        o = s.full_ft_bytes_per_param / 2
    elif s.precision == "fp32":
        w, g, o = 4.0, 4.0, 8.0
    else:
        w, g, o = 2.0, 2.0, 4.0
    if s.optimizer.endswith("8bit"):
        o = 2.0
    return w, g, o


def overhead(s: EstimateSettings) -> float:
    """The factor on fixed training memory: `full_ft_overhead` (1.2) under mixed precision, where
    autocast holds bf16 copies of the fp32 weights it casts and fp32 temporaries; 1.0 in pure
    bf16 or fp32, which cast nothing (calibrated against measured_peaks.tsv, `make bench`)."""
    return s.full_ft_overhead if s.precision in ("bf16-mixed", "fp16-mixed") else 1.0


def _sharded(s: EstimateSettings) -> tuple[int, int, int]:
    """(weight, gradient, optimizer) divisors of `s.sharding` over `s.shards` cards."""
    n = max(1, s.shards)
    if s.sharding in ("zero3", "fsdp"):
        return n, n, n
    if s.sharding == "zero2":
        return 1, n, n
    if s.sharding == "zero1":
        return 1, 1, n
    return 1, 1, 1


def _full_fixed(r: Reading, s: EstimateSettings) -> tuple[float, float]:
    """(bytes per card, effective unsharded bytes per parameter) of full fine-tuning's fixed part."""
    w, g, o = state_bytes(s)
    dw, dg, do = _sharded(s)
    largest = r.largest_layer
    weights = r.total * w / dw + (2 * largest * w if dw > 1 else 0.0)
    grads = largest * g if s.optimizer_in_backward else r.total * g / dg
    optim = r.total * o / do
    unsharded = w + (0.0 if s.optimizer_in_backward else g) + o
    return (weights + grads + optim) * overhead(s), unsharded * overhead(s)


def _base_bytes(r: Reading, s: EstimateSettings, kind: str, bf16: float) -> tuple[float, float]:
    """(bytes, bytes per layer parameter) of frozen weights: layer linears at `kind`'s width
    (bf16: `bf16` bytes), embeddings, head and towers at `bf16` bytes."""
    per = QUANT_BYTES.get(kind, bf16)
    layers = r.layer_params
    return layers * per + (r.total - layers) * bf16, per


def _lora_fixed(
    r: Reading, s: EstimateSettings, adapter: int, shipped_base: float | None = None
) -> tuple[float, float]:
    """(bytes per card, bytes per layer parameter) of LoRA's fixed part: the frozen base (bf16,
    quantized, or a quantized checkpoint as shipped, `shipped_base` bytes, QLoRA-style; plus one
    dequantized layer in flight when quantized), the adapters (and trained embeddings and head)
    with their gradients and optimizer state, sharded as set."""
    base, per = _base_bytes(r, s, s.lora_base, s.lora_base_bytes_per_param)
    if shipped_base is not None:
        base, per = shipped_base, shipped_base / max(1, r.total)
    dw, _, do = _sharded(s)
    largest = r.largest_layer
    if s.lora_base in QUANT_BYTES or shipped_base is not None:
        # one dequantized bf16 linear in flight
        widest = max((x.moe_width or x.ffn_width for x in r.layer_kinds), default=0)
        base += 2.0 * r.hidden * widest
    trained = adapter * (s.lora_adapter_bytes_per_param if s.precision != "bf16" else 8.0)
    if s.lora_trainable_embeddings:
        extra = r.embedding + r.head_params
        w, g, o = state_bytes(s)
        trained += extra * (w + g + o) - extra * s.lora_base_bytes_per_param
    gather = 2 * largest * per if dw > 1 else 0.0
    k = overhead(s)
    return (base / dw + gather + trained / do) * k, per * k


def prefill_bytes(r: Reading, tokens: int, a: float) -> float:
    """The prefill working set of a `tokens`-token prompt without autograd: the largest layer's
    live intermediates (gated FFN: act(gate), up and their product, 3·I; MoE: the routed
    tokens' share of that, fp32 router probabilities; attention: Q, K, V and output) plus the
    residual stream and the normed input, per token × tokens."""
    worst = 0.0
    for spec in r.layer_kinds:  # the largest over the kinds of layer is the largest over all
        if spec.ffn == "moe" and spec.experts:
            routed = spec.top_k * 3 * spec.moe_width + 3 * spec.shared_width
            ffn = a * (2 * r.hidden + routed) + 4.0 * spec.experts
        elif spec.ffn == "swiglu":
            ffn = a * 3 * (spec.ffn_width or r.intermediate)
        elif spec.ffn != "none":
            ffn = a * 2 * (spec.ffn_width or r.intermediate)
        else:
            ffn = 0.0
        q = spec.q_width or r.num_heads * r.head_dim
        attn = a * (2 * q + (spec.k_width or q) + (spec.v_width or q))
        worst = max(worst, ffn, attn)
    return (worst + 2 * a * r.hidden) * tokens


def encoder_alone(r: Reading) -> bool:
    """Whether `r` is an encoder built alone: no vocabulary, only encoder layers (a vision or
    speech tower, a convolutional backbone)."""
    return r.vocab == 0 and bool(r.layers) and all(s.kind == "encoder" for s in r.layer_kinds)


def input_shape(r: Reading, m: Memory) -> str | None:
    """What one sequence of the memory rows is, for an encoder built alone (None for a
    language model, whose rows are token sequences): one input of `input_tokens` tokens where
    the reader fixes it, else why token rows do not apply."""
    if not encoder_alone(r):
        return None
    if r.input_tokens:
        return (
            f"one input of {r.input_tokens:,} tokens (patches from image_size / patch_size and "
            "learned tokens), for training and serving alike"
        )
    return (
        f"not applicable: model_type {r.model_type!r} is an encoder whose config fixes no input "
        "length (audio frames or feature-map positions, not tokens); the rows assume "
        f"{m.train_tokens:,} positions per training sample and {m.serve_tokens:,} served"
    )


def compute(
    r: Reading,
    s: EstimateSettings,
    serve_bytes: float | None = None,
    *,
    lora_base_bytes: float | None = None,
    adapter_params: int | None = None,
) -> Memory:
    """All memory figures of `r` under settings `s`, per card where `s.shards` (training) or
    `s.serve_shards` (serving) > 1.
    `serve_bytes` replaces the derived serving weights (the weights as shipped,
    `tracker.estimate.shipped`); `lora_base_bytes` the frozen LoRA base (a quantized
    checkpoint as shipped); `adapter_params` the LoRA adapter count (the module tree's,
    `tracker.estimate.adapters`, where it is known)."""
    ctx = r.max_context or s.train_seq_len
    train_tokens = min(s.train_seq_len, ctx)
    serve_tokens = s.serve_seq_len
    if r.input_tokens:  # an encoder's one input (an image's patches): trained and served alike
        train_tokens = serve_tokens = r.input_tokens
    a = 4.0 if s.precision == "fp32" else s.activation_bytes
    layer_act = r.per_layer(
        lambda spec: layer_activation_bytes(spec, r, a, train_tokens) * train_tokens
    )
    # bf16 logits, their fp32 upcast and its fp32 gradient; chunked: the saved fp32 log-probs only
    logits = (4.0 if s.chunked_loss else 10.0) * r.vocab * train_tokens
    if s.grad_checkpointing:
        kept = len(r.layers) * a * r.hidden * train_tokens
        act = kept + max(layer_act, default=0.0) + logits
    else:
        act = sum(layer_act) + logits
    adapter = (
        adapter_params
        if adapter_params is not None
        else lora_adapter_params(r, s.lora_rank, s.lora_targets)
    )
    kv_scale = s.kv_bytes_per_value / 2.0
    layer_kv = r.per_layer(lambda spec: layer_kv_bytes(spec, serve_tokens, kv_scale))
    full_fixed, full_per = _full_fixed(r, s)
    lora_fixed, lora_per = _lora_fixed(r, s, adapter, lora_base_bytes)
    lora_rest = s.lora_base_bytes_per_param if lora_base_bytes is None else lora_per
    shards = max(1, s.shards)
    serve_w, serve_per = _base_bytes(r, s, s.serve_weights, s.serve_bytes_per_param)
    serve_rest = s.serve_bytes_per_param
    if serve_bytes is not None:
        # as shipped: spread evenly over the parameters for the layer split
        serve_w = serve_bytes
        serve_per = serve_rest = serve_bytes / max(1, r.total)
    prompt = min(s.serve_prompt_tokens or serve_tokens, serve_tokens)
    prefill = prefill_bytes(r, prompt, s.activation_bytes) if s.serve_prefill else 0.0
    return Memory(
        train_tokens=train_tokens,
        serve_tokens=serve_tokens,
        full_fixed=full_fixed,
        lora_fixed=lora_fixed,
        lora_adapter_params=adapter,
        serve_fixed=serve_w / max(1, s.serve_shards),
        act_per_sample=act,
        kv_per_sequence=sum(layer_kv),
        layer_act=layer_act,
        logits_act=logits,
        layer_kv=layer_kv,
        full_bytes_per_param=full_per,
        lora_bytes_per_param=lora_per,
        serve_bytes_per_param=serve_per,
        serve_rest_bytes_per_param=serve_rest,
        lora_rest_bytes_per_param=lora_rest / (overhead(s) if lora_base_bytes is not None else 1),
        prefill_per_sequence=prefill,
        shards=shards,
        serve_shards=max(1, s.serve_shards),
    )
