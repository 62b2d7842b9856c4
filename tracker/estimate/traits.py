"""What a family's modelling code fixes that its config does not say: defaults and layouts.

The general reader (`general.py`) reads everything a config states. Some facts are not in any
config key: Qwen2 always puts a bias on q/k/v and never on o_proj; Gemma ties its head unless told
otherwise; GPT-2 learns a position table of `n_positions` rows. `TRAITS` records those facts per
model_type, each with the reason, as transformers 5.24.0 defines them. A family absent from the
table is read with `Traits()`, the Llama layout, and nothing else changes: the traits are not
readers, they only supply what the config is silent about. The leave-one-family-out benchmark
reads every corpus config with `Traits()` to measure how far the config alone carries.
"""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Traits:
    """Defaults a family's code applies where its config is silent (None: take the config's word).

    `tie`: head tied to the input embeddings when `tie_word_embeddings` is absent (the family's
    config class default).
    `qkv_bias` / `o_bias` / `mlp_bias`: biases the code always (True) or never (False) builds.
    `norm`: "rms" (weight only) or "layer" (weight and bias); None lets the config's epsilon key
    decide. `gated`: gated MLP (gate/up/down) or a two-matrix MLP; None lets the activation decide.
    `norms_per_sublayer`: 2 where each sublayer has a pre- and a post-norm (Gemma 2/3).
    `parallel_norms`: norms per layer of a parallel attention+MLP block (None: one shared norm).
    `positions`: config key of a learned absolute position table, `position_offset` extra rows.
    `embed_norm`: a norm right after the token embeddings. `qk_norm`: per-head q/k RMSNorms.
    `q_gate`: q_proj doubled for a sigmoid output gate. `shared_gate`: a sigmoid h→1 gate on the
    shared expert. `router_bias` / `expert_bias`: biases of the router and of every expert linear.
    `sinks`: one learned attention-sink logit per head. `halved_intermediate`: the config's
    intermediate size counts both halves of the gated MLP. `sliding_all`: every layer attends
    through `sliding_window` unless layer_types say otherwise. `alternate_sliding`: even layers
    sliding, odd layers full. `nope_interval`: with `attention_chunk_size`, the layers whose
    `no_rope_layers` entry is 0 attend in full and the others through the chunk; without that list
    (or with an empty one) every `no_rope_layer_interval`-th layer, by default this one, is a
    full-attention layer (Llama 4). `one_norm_per_mixer`: a per-layer list names one mixer per layer
    (Nemotron-H), each with its own single pre-norm. `parallel`: attention and MLP always read
    the same input (no config key says so). `bias_covers_mlp`: the config's `bias` switch also
    covers the MLP. `shared_expert`: config key holding the width of a shared expert the code
    always builds. `qk_norm_key_has_params`: False where `use_qk_norm` is a parameter-free norm.
    `k_bias`: False where k_proj alone has no bias (Whisper). `head_bias`: the LM head has a bias.
    `fused_qkv` / `fused_gate_up`: one linear module for q/k/v (for gate and up): the same
    parameters, but one LoRA adapter instead of three (two).
    `tie_fixed`: the head is tied whatever `tie_word_embeddings` says (transformers 5's T5 reads
    the key as a decoder-output scaling switch). `token_types`: a token-type embedding table of
    `type_vocab_size` rows (default 2) beside the token embeddings. `task_heads`: the head is
    chosen by the architecture name, BERT's way (`general.task_head_params`).
    `moe_beside_dense_norms`: the MoE block is added beside the layer's dense MLP rather than
    replacing it, with this many more norms (Gemma 4: the dense branch's post-norm and the MoE
    branch's pre- and post-norm); None: MoE layers have no dense MLP. `router_scales`: the
    router carries a per-channel (hidden) and a per-expert scale vector.
    `full_head_dim`: head size of full-attention layers where the config does not give
    `global_head_dim` (the family's config default).
    Activations only (no parameters): `norm_fp32`: the RMSNorm applies its weight in fp32, so it
    keeps the fp32 normalised value as well as the fp32 input copy (Gemma's `(1 + w).float()`,
    Qwen3-Next's, gpt-oss's fp32 product). `v_norm`: a weightless RMSNorm on V (Gemma 4).
    `eager`: transformers 5.24 has no SDPA path for the family (gpt-oss: attention sinks,
    `_supports_sdpa = False`; BLOOM: ALiBi in its own attention), so its default attention is
    eager and keeps the T × T probabilities.
    `routing`: what the MoE block keeps for routing where it is not the usual top-k over fp32
    router probabilities: "topk" (gpt-oss: softmax over the top-k logits in the activation
    dtype, experts on grouped_mm), "dense" (Llama 4: every token goes through every expert).
    `expert_tensors`: tensors an expert keeps per routed token at its width (4: gate, act(gate),
    up, product; gpt-oss's clamped SwiGLU keeps 7, see its entry).
    `act_params`: learned parameters of each MLP's activation (xIELU's alpha_p and alpha_n).
    `norm` may also be "none": norms without weights (NanoChat's RMSNorm).
    `dynamic_mask`: Doge's dynamic mask attention (A per KV head, dt_proj KV width → KV heads).
    `residual_scales`: learned per-channel residual scales per layer (Doge: 2).
    `cdmoe`: with `is_moe`, Doge's CDMoE: the dense MLP plus a product-key router
    (h → 2·⌊√E⌋) and two E×h expert embeddings.
    `paired_layers`: each configured layer holds two attention + dense-MLP sublayers and one MoE
    beside the second (LongCat-Flash's shortcut-connected MoE): read as twice the layers, the MoE
    on every second one.
    `parallel_ssm`: every layer runs attention and a Mamba2 mixer side by side (Falcon-H1).
    `o_bias_always`: o_proj has a bias whatever `attention_bias` says (RecurrentGemma).
    `ngram`: ProphetNet's n-gram decoder (stream embeddings, relative-position linears).
    `lightning`: "linear_attention" layers are MiniMax's lightning attention (qkv_proj,
    output_gate, out_proj and a norm over heads × head size).
    """

    tie: bool = False
    qkv_bias: bool | None = None
    o_bias: bool | None = None
    mlp_bias: bool | None = None
    norm: str | None = None
    gated: bool | None = None
    norms_per_sublayer: int = 1
    parallel_norms: int | None = None
    positions: str | None = None
    position_offset: int = 0
    embed_norm: bool = False
    qk_norm: bool = False
    q_gate: bool = False
    shared_gate: bool = False
    router_bias: bool = False
    expert_bias: bool = False
    sinks: bool = False
    halved_intermediate: bool = False
    sliding_all: bool = False
    alternate_sliding: bool = False
    nope_interval: int | None = None
    one_norm_per_mixer: bool = False
    final_norm: bool = True
    parallel: bool = False
    bias_covers_mlp: bool = False
    shared_expert: str | None = None
    qk_norm_key_has_params: bool = True
    k_bias: bool = True
    head_bias: bool = False
    fused_qkv: bool = False
    alibi: bool = False  # ALiBi biases, no rotary embedding (BLOOM)
    fused_gate_up: bool = False
    tie_fixed: bool = False
    token_types: bool = False
    task_heads: bool = False
    moe_beside_dense_norms: int | None = None
    router_scales: bool = False
    full_head_dim: int | None = None
    norm_fp32: bool = False
    v_norm: bool = False
    eager: bool = False
    routing: str = "softmax"
    expert_tensors: int = 4
    act_params: int = 0
    dynamic_mask: bool = False
    residual_scales: int = 0
    cdmoe: bool = False
    paired_layers: bool = False
    parallel_ssm: bool = False
    o_bias_always: bool = False
    ngram: bool = False
    lightning: bool = False


LLAMA = Traits()
"""The Llama layout (untied head unless the config ties it): the families read with no traits."""

GENERAL = Traits(tie=True)
"""What a family without traits is read as: the Llama layout, and where `tie_word_embeddings`
is absent, transformers' base default (`PreTrainedConfig.tie_word_embeddings = True`)."""

_QWEN2 = Traits(qkv_bias=True, o_bias=False)  # Qwen2Attention: q/k/v bias=True, o_proj bias=False
_QWEN3 = Traits(qk_norm=True)  # Qwen3Attention: q_norm/k_norm RMSNorm(head_dim)
_QWEN_NEXT = replace(
    _QWEN3, q_gate=True, shared_gate=True, norm_fp32=True
)  # attn_output_gate; gated shared expert
_GEMMA = Traits(tie=True, norm_fp32=True)  # GemmaConfig(tie_word_embeddings=True)
_GEMMA2 = replace(_GEMMA, norms_per_sublayer=2, alternate_sliding=True)  # pre+post norms
_GEMMA3 = replace(_GEMMA, norms_per_sublayer=2, qk_norm=True)
# Gemma 4 text: Gemma 3's layout; `enable_moe_block` adds the experts beside the dense MLP (three
# more norms per layer), the router scales its input per channel and its output per expert, and
# full layers' head size defaults to 512 (Gemma4TextConfig pops `global_head_dim` with 512).
_GEMMA4 = replace(
    _GEMMA3, moe_beside_dense_norms=3, router_scales=True, full_head_dim=512, v_norm=True
)
_GPT = Traits(
    tie=True,
    qkv_bias=True,
    o_bias=True,
    mlp_bias=True,
    norm="layer",
    gated=False,
    fused_qkv=True,
)

TRAITS: dict[str, Traits] = {
    "qwen2": _QWEN2,
    "mimo": _QWEN2,  # custom code over Qwen2's layout
    "qwen2_moe": replace(_QWEN2, shared_gate=True),  # shared_expert_gate: Linear(h, 1)
    "qwen3": _QWEN3,
    "qwen3_moe": _QWEN3,
    "qwen3_vl": _QWEN3,
    "qwen3_vl_text": _QWEN3,
    "qwen3_vl_moe_text": _QWEN3,
    "qwen3_next": _QWEN_NEXT,
    "qwen3_5_text": _QWEN_NEXT,
    "qwen3_5_moe_text": _QWEN_NEXT,
    # Mistral's config carries one sliding_window for every layer (no layer list, no switch).
    "mistral": Traits(sliding_all=True),
    "mixtral": Traits(sliding_all=True),
    "gemma": _GEMMA,
    "gemma2": _GEMMA2,
    "gemma3_text": _GEMMA3,
    # Gemma 3n text: Gemma 3's layout with AltUp, LAuReL, per-layer inputs and FFN widths
    "gemma3n_text": _GEMMA3,
    "gemma4_text": _GEMMA4,
    # Gemma 4 unified: Gemma 4's text stack, head sizes per layer from per_layer_config
    "gemma4_unified_text": _GEMMA4,
    # GptOssAttention: q/k/v/o with bias and a sink per head; router and experts with biases.
    # Irregular experts (activations only): GptOssExperts' gate_up output is interleaved
    # (gate = [..., ::2], up = [..., 1::2]) and clamped, glu = gate·sigmoid(1.702·gate), and
    # the product is (up + 1)·glu: per routed token autograd keeps the whole gate_up output
    # (2·I), the clamped gate, the sigmoid, up + 1, glu and the product (down's input), 7·I
    # against a plain SwiGLU's 4·I; its router softmaxes only the top-k logits, in bf16.
    "gpt_oss": Traits(
        routing="topk",
        expert_tensors=7,
        qkv_bias=True,
        o_bias=True,
        sinks=True,
        router_bias=True,
        expert_bias=True,
        norm_fp32=True,
        eager=True,
    ),
    # GPT-2: Conv1D with bias everywhere, LayerNorm, GELU MLP, a learned table of n_positions.
    "gpt2": replace(_GPT, positions="n_positions"),
    # BLOOM: ALiBi (no position table), a LayerNorm after the embeddings.
    "bloom": replace(_GPT, embed_norm=True, alibi=True, eager=True),
    # GPT-NeoX: parallel residual still keeps two LayerNorms per layer; untied by default.
    "gpt_neox": replace(_GPT, tie=False, parallel_norms=2),
    # Phi-3: qkv_proj and gate_up_proj are single linears.
    "phi3": Traits(fused_qkv=True, fused_gate_up=True),
    # Falcon (and its custom-code RefinedWeb): LayerNorm, GELU MLP, untied head in the checkpoints
    # we read; the new decoder architecture normalises attention and MLP inputs separately.
    "falcon": Traits(tie=True, norm="layer", gated=False, bias_covers_mlp=True, fused_qkv=True),
    "RefinedWeb": Traits(norm="layer", gated=False, bias_covers_mlp=True, fused_qkv=True),
    "RefinedWebModel": Traits(norm="layer", gated=False, bias_covers_mlp=True, fused_qkv=True),
    # GPT-BigCode (StarCoder): GPT-2's layout with multi-query attention.
    "gpt_bigcode": replace(_GPT, positions="n_positions"),
    # OPT: learned positions with 2 extra rows, LayerNorm, ReLU MLP, biases everywhere, tied.
    "opt": replace(_GPT, positions="max_position_embeddings", position_offset=2),
    # StarCoder2: LayerNorm (its config names the epsilon `norm_epsilon`), GELU two-matrix MLP,
    # `use_bias` on every linear.
    "starcoder2": Traits(norm="layer", gated=False, qkv_bias=True, o_bias=True, mlp_bias=True),
    # GPT-J: attention and MLP in parallel off one LayerNorm; MLP biases, none on q/k/v/o.
    "gptj": Traits(
        norm="layer", gated=False, mlp_bias=True, parallel=True, tie=False, head_bias=True
    ),
    "codegen": Traits(
        norm="layer",
        gated=False,
        mlp_bias=True,
        parallel=True,
        tie=False,
        head_bias=True,
        fused_qkv=True,
    ),
    # Llama 4 text: a shared expert as wide as intermediate_size in every MoE layer; its
    # `use_qk_norm` is an L2 norm without parameters.
    # Irregular routing (activations only): Llama4TextMoe runs every expert on every token
    # (dense routing: the input is repeated once per expert and scaled by its sigmoid score,
    # 0 for the experts not chosen), so autograd keeps every expert's activations, not top-k's.
    # Layer kinds: Llama4TextConfig fills an absent or empty no_rope_layers with a NoPE layer every
    # no_rope_layer_interval (default 4) layers; NoPE layers attend in full, the others through
    # attention_chunk_size.
    "llama4_text": Traits(
        shared_expert="intermediate_size",
        qk_norm_key_has_params=False,
        routing="dense",
        nope_interval=4,
    ),
    # ChatGLM: RMSNorm unless `rmsnorm: false`, SwiGLU; output_layer never tied.
    "chatglm": Traits(norm="rms", gated=True, fused_qkv=True, fused_gate_up=True),
    # QWen (v1, custom code): c_attn with bias, c_proj without; its intermediate_size is the width
    # of w1 and w2 together, so each half is intermediate_size / 2; RMSNorm despite the
    # `layer_norm_epsilon` key.
    "qwen": Traits(
        qkv_bias=True, o_bias=False, norm="rms", halved_intermediate=True, fused_qkv=True
    ),
    # InternLM (v1, custom code): q/k/v/o biases unless `bias: false`.
    "internlm": Traits(qkv_bias=True, o_bias=True),
    # Nemotron-H: RMSNorm (its config names the epsilon layer_norm_epsilon), squared-ReLU MLP with
    # two matrices, one mixer (Mamba2, attention, MLP or MoE) and one norm per layer.
    "nemotron_h": Traits(norm="rms", gated=False, one_norm_per_mixer=True),
    # Mamba / Falcon-Mamba (pure SSM, general.py `_pure_mamba`): RMSNorm despite the
    # `layer_norm_epsilon` key, head tied unless the config says otherwise (MambaConfig default).
    "mamba": Traits(tie=True, norm="rms"),
    "falcon_mamba": Traits(tie=True, norm="rms"),
    # Mamba2 (pure SSM): RMSNorm, head untied unless the config ties it (Mamba2Config default).
    "mamba2": Traits(norm="rms"),
    # Arcee (AFM): the Llama layout with a two-matrix up/down MLP (ReLU²), whatever the activation.
    "arcee": Traits(gated=False),
    # Cosmos 3 Edge's text model: the Llama layout with a two-matrix fc1/fc2 MLP (relu2).
    "cosmos3_edge_text": Traits(gated=False),
    # Apertus: a two-matrix up/down MLP whose xIELU activation learns alpha_p and alpha_n (one
    # each), q/k RMSNorms; Apertus 1.5's text model is the same stack.
    "apertus": Traits(gated=False, qk_norm=True, act_params=2),
    "apertus1p5": Traits(gated=False, qk_norm=True, act_params=2),
    # AFMoE: q/k RMSNorms, a sigmoid output gate (gate_proj, as wide as q_proj), pre- and
    # post-norms around attention and MLP, the router's expert bias.
    "afmoe": Traits(qk_norm=True, q_gate=True, norms_per_sublayer=2, router_bias=True),
    # ERNIE 4.5 MoE: the router's moe_statics (one bias per expert).
    "ernie4_5_moe": Traits(router_bias=True),
    # XGLM: GPT's layout with separate q/k/v and sinusoidal positions (no table).
    "xglm": replace(_GPT, fused_qkv=False),
    # CTRL: separate Wq/Wk/Wv with biases, a biased two-matrix MLP, LayerNorms, sinusoidal
    # positions, the head tied to `w` with a bias of its own.
    "ctrl": replace(_GPT, fused_qkv=False, head_bias=True),
    # LFM2 / LFM3: q/k RMSNorms (q_layernorm, k_layernorm), the head tied by default.
    "lfm2": Traits(qk_norm=True, tie=True),
    "lfm3": Traits(qk_norm=True, tie=True),
    # Doge: dynamic mask attention, q/k norms, per-layer residual scales; CDMoE with is_moe.
    "doge": Traits(qk_norm=True, dynamic_mask=True, residual_scales=2, cdmoe=True),
    # LongCat-Flash: two MLA attention + MLP sublayers per layer and one MoE (with zero experts)
    "longcat_flash": Traits(paired_layers=True, moe_beside_dense_norms=0),
    # XLM: post-norm LayerNorm layers with biased linears, learned positions, a LayerNorm after
    # the embeddings and none at the end, the prediction layer tied with a bias.
    "xlm": replace(
        _GPT,
        fused_qkv=False,
        positions="max_position_embeddings",
        embed_norm=True,
        final_norm=False,
        head_bias=True,
    ),
    # Falcon-H1: attention and Mamba2 in parallel in every layer, then the MLP.
    "falcon_h1": Traits(parallel_ssm=True),
    # RecurrentGemma: MLP of intermediate_size / 2 with biases, o_proj with a bias, q/k/v
    # without, Gemma's tied head.
    "recurrent_gemma": Traits(
        tie=True, halved_intermediate=True, mlp_bias=True, o_bias_always=True, qkv_bias=False
    ),
    # MiniMax (text-01): lightning-attention linear layers between full ones; the alpha/beta
    # factors scale residuals and block_size chunks the scan (no parameters).
    "minimax": Traits(lightning=True),
    # NanoChat: fc1/fc2 MLP (ReLU²), RMSNorms without weights (also on q and k), untied head.
    "nanochat": Traits(gated=False, norm="none"),
    # BERT: post-norm LayerNorm layers (a norm after the embeddings, none at the end), biases on
    # every linear, a GELU two-matrix MLP, learned positions, token-type embeddings, and task
    # heads by architecture name (MLM transform, pooler).
    "bert": Traits(
        tie=True,
        qkv_bias=True,
        o_bias=True,
        mlp_bias=True,
        norm="layer",
        gated=False,
        positions="max_position_embeddings",
        embed_norm=True,
        final_norm=False,
        token_types=True,
        task_heads=True,
    ),
}


# Encoder-decoders (read by `encdec.py`): what each stack adds besides the shared layout.
_BART = Traits(tie=True, position_offset=2, embed_norm=True)  # learned positions start at 2
TRAITS |= {
    "bart": replace(_BART, final_norm=False),  # post-norm layers, no final norm per stack
    "mbart": _BART,  # pre-norm with a final LayerNorm per stack
    "marian": Traits(tie=True, final_norm=False),  # sinusoidal tables are (frozen) parameters
    "pegasus": Traits(tie=True),
    "whisper": Traits(tie=True, k_bias=False),  # k_proj alone without bias
    # ProphetNet: post-norm stacks with a LayerNorm after each stack's embeddings, learned
    # positions without offset, the n-gram decoder.
    "prophetnet": Traits(tie=True, embed_norm=True, final_norm=False, ngram=True),
    # TrOCR: BART's decoder alone (post-norm, learned positions from 2, layernorm_embedding)
    "trocr": replace(_BART, final_norm=False),
    # T5: RMSNorm (T5LayerNorm), no bias on any linear, a ReLU two-matrix MLP unless
    # `feed_forward_proj` says "gated-..."; the head always tied in transformers 5.
    # Its relative position bias (first layer of each stack) comes from the config's
    # `relative_attention_num_buckets`, which the general encoder-decoder reading reads.
    "t5": Traits(tie=True, tie_fixed=True, qkv_bias=False, norm="rms", gated=False),
}
