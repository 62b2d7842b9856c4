"""The general reader: a decoder-only or encoder-decoder config read by what it says.

Sizes come from the alias sets transformers' configs use (`hidden_size` / `n_embd` / `d_model`,
`num_hidden_layers` / `n_layer` / `num_layers`, ...). Features are read wherever their keys appear,
whatever the model_type: MoE (`num_experts`, `num_local_experts`, `n_routed_experts`, shared and
latent experts, `first_k_dense_replace`, `moe_layer_freq`, `decoder_sparse_step`,
`mlp_only_layers`, ...), MLA (`kv_lora_rank`, `q_lora_rank`, `qk_rope_head_dim`, ...), linear
attention (gated DeltaNet keys, Kimi's `linear_attn_config`), Mamba mixers, per-layer kinds in every
list form (`layer_types`, `layers_block_type`, `hybrid_override_pattern`, 1-indexed layer lists),
parallel attention+MLP blocks and learned position tables. What a family's code fixes without a
config key comes from `traits.py`.
"""

from __future__ import annotations

from collections.abc import Callable

from tracker.estimate.decoder import Dec
from tracker.estimate.reading import MAX_EXPERTS, MAX_LAYERS, ConfigView, Notes
from tracker.estimate.traits import Traits
from tracker.shared.errors import EstimateError

HIDDEN = ("hidden_size", "n_embd", "d_model", "n_embed", "dim", "model_dim", "emb_dim")
LAYERS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers")
HEADS = ("num_attention_heads", "n_head", "num_heads", "n_heads", "attention_heads")  # xglm
KV_HEADS = ("num_key_value_heads", "n_head_kv", "num_kv_heads", "n_kv_heads")
HEAD_DIM = ("head_dim", "kv_channels", "d_kv", "attention_head_dim")
INTERMEDIATE = ("intermediate_size", "ffn_hidden_size", "n_inner", "d_ff", "ffn_dim", "dff")
VOCAB = ("padded_vocab_size", "vocab_size", "n_vocab")
CONTEXT = (
    "max_position_embeddings",
    "n_positions",
    "seq_length",
    "max_sequence_length",
    "n_ctx",
    "max_seq_len",
)
EXPERTS = (
    "num_local_experts",
    "num_experts",
    "n_routed_experts",
    "moe_num_experts",
    "n_experts",
    "num_routed_experts",
)
TOP_K = (
    "num_experts_per_tok",
    "num_experts_per_token",
    "experts_per_token",
    "moe_top_k",
    "top_k_experts",
    "num_selected_experts",
    "moe_k",
    "moe_topk",
)
MOE_WIDTH = (
    "moe_intermediate_size",
    "expert_intermediate_size",
    "moe_ffn_hidden_size",
    "expert_ffn_hidden_size",
)
SHARED_COUNT = ("n_shared_experts", "num_shared_experts", "moe_num_shared_experts")
SHARED_WIDTH = (
    "shared_expert_intermediate_size",
    "moe_shared_expert_intermediate_size",
    "shared_intermediate_size",
)
LATENT = ("routed_expert_hidden_size", "moe_latent_size")
LATENT_NORM = ("latent_moe_use_norm", "moe_latent_use_norm")
GATED_ACTS = ("silu", "swish", "swiglu", "geglu", "reglu", "situ")

FULL_NAMES = {"full_attention", "attention", "full", "global", "global_attention"}
SLIDING_NAMES = {"sliding_attention", "sliding", "local", "local_attention", "chunked_attention"}
LINEAR_NAMES = {"linear_attention", "linear", "kda", "gated_deltanet", "deltanet"}
MAMBA_NAMES = {"mamba", "mamba2", "ssm"}
CONV_NAMES = {"conv", "short_conv"}
PATTERN_CHARS = {"M": ("mamba", "none"), "*": ("full", "none"), "-": ("none", "dense")}
PATTERN_CHARS["E"] = ("none", "moe")
BLOCK_FFNS = {"mlp": "dense", "moe": "moe"}
"""Per-layer list values naming a layer that is an FFN alone (Nemotron-H's `layers_block_type`)."""


def layer_count(c: ConfigView) -> int:
    """Layers from the alias set, else from the length of a per-layer list."""
    n = c.opt_int(*LAYERS, maximum=MAX_LAYERS)
    if n is not None:
        return n
    for key in ("layer_types", "layers_block_type", "block_configs"):
        items = c.list(key)
        if items:
            return min(len(items), MAX_LAYERS)
    pattern = c.str("hybrid_override_pattern")
    if pattern:
        return min(len(pattern), MAX_LAYERS)
    raise EstimateError(f"config lacks {' / '.join(LAYERS)} and any per-layer list")


def _bool_of(c: ConfigView, keys: tuple[str, ...], default: bool) -> bool:
    key = c.first_key(*keys)
    return default if key is None else c.bool(key, default)


def norm_kind(c: ConfigView, tr: Traits) -> str:
    """ "rms" or "layer": an explicit `rmsnorm` switch, the family's norm, else the epsilon's name."""
    if c.has("rmsnorm"):
        return "rms" if c.bool("rmsnorm", True) else "layer"
    if tr.norm is not None:
        c.mark("layer_norm_epsilon", "layer_norm_eps", "layernorm_epsilon", "rms_norm_eps")
        return tr.norm
    if c.first_key("rms_norm_eps", "rms_norm_epsilon") is not None:
        return "rms"
    if c.first_key("layer_norm_eps", "layer_norm_epsilon", "layernorm_epsilon") is not None:
        return "layer"
    return "rms"


def gated_mlp(c: ConfigView, tr: Traits, norm: str) -> bool:
    """Gated (gate/up/down) or two-matrix MLP: `feed_forward_proj`, the family, else the activation.

    A SiLU/SwiGLU-family activation means a gated MLP; otherwise a LayerNorm model (the GPT
    lineage) has two matrices and an RMSNorm model (Gemma's GeGLU) stays gated.
    """
    if c.has("feed_forward_proj"):
        return c.str("feed_forward_proj").startswith("gated")
    acts = ("hidden_act", "hidden_activation", "activation_function", "mlp_hidden_act")
    key = c.first_key(*acts)
    if tr.gated is not None:
        c.mark(*acts)
        return tr.gated
    act = c.str(key).lower() if key else ""
    if any(a in act for a in GATED_ACTS):
        return True
    return norm != "layer"


def read_decoder(c: ConfigView, tr: Traits, n: Notes, *, vocab: int | None = None) -> Dec:
    """The `Dec` description of a decoder-only config (see the module docstring); `vocab` the
    vocabulary to assume where the config names none (None: EstimateError)."""
    h = c.int(*HIDDEN)
    # A pure Mamba model: no attention, no MLP, one RMSNorm and one SSM mixer per layer. Mamba (v1,
    # MambaConfig / FalconMambaConfig) is sized by `state_size` and `time_step_rank`; Mamba2
    # (Mamba2Config) by `state_size` and `n_groups`, its `num_heads` being the SSM's heads.
    mamba2 = c.has("state_size") and c.has("n_groups") and not c.has("num_attention_heads")
    no_heads = c.first_key(*HEADS) is None
    pure_ssm = mamba2 or (no_heads and c.has("state_size") and c.has("time_step_rank"))
    heads = c.int(*HEADS, default=1 if pure_ssm else None)
    layers = layer_count(c)
    if tr.paired_layers:
        layers = min(2 * layers, MAX_LAYERS)
    kv = _kv_heads(c, heads)
    if heads % kv:
        n.flag("kv-heads-not-divisor", f"key/value heads {kv} do not divide heads {heads}")
    hd = c.int(*HEAD_DIM, default=h // heads if h >= heads else 1)
    vocab = c.int(*VOCAB, default=vocab)
    widths = c.raw("intermediate_size")
    per_layer_inter: list[int] | None = None
    if isinstance(widths, list):  # one FFN width per layer (Gemma 3n)
        if len(widths) != layers or not all(
            isinstance(x, int) and not isinstance(x, bool) and x > 0 for x in widths
        ):
            raise EstimateError(
                f"config intermediate_size lists {len(widths)} widths for {layers} layers"
            )
        per_layer_inter = [int(x) for x in widths]
        inter = per_layer_inter[0]
    else:
        inter = c.int(*INTERMEDIATE, default=4 * h)
    if tr.halved_intermediate:
        inter //= 2
    if c.bool("block_auto_adjust_ff_dim", False):
        # LFM2: two thirds of intermediate_size (SwiGLU's width), then the multiplier and the
        # rounding up to block_multiple_of where a multiplier is given (Lfm2MLP)
        inter = int(2 * inter / 3)
        if c.raw("block_ffn_dim_multiplier") is not None:
            inter = int(c.float("block_ffn_dim_multiplier", 1.0) * inter)
            step = c.int("block_multiple_of", default=256, minimum=1)
            inter = step * -(-inter // step)
    c.mark("block_ffn_dim_multiplier", "block_multiple_of")
    norm = norm_kind(c, tr)
    gated = gated_mlp(c, tr, norm)
    d = Dec(
        hidden=h,
        vocab=vocab,
        n_layers=layers,
        heads=heads,
        kv_heads=kv,
        head_dim=hd,
        intermediate=inter,
        tied=c.bool("tie_word_embeddings", tr.tie),
        gated_mlp=gated,
        gated_experts=gated,
        norm_params=2 * h if norm == "layer" else 0,
        norm_weightless=norm == "none",
        act_params=tr.act_params,
        norms_per_sublayer=tr.norms_per_sublayer,
        final_norm=tr.final_norm and c.bool("post_layer_norm", True),
        embed_norm=tr.embed_norm,
        sinks=tr.sinks,
        norm_fp32=tr.norm_fp32,
        v_norm=tr.v_norm,
        eager=tr.eager,
        routing=tr.routing,
        expert_tensors=tr.expert_tensors,
        qk_norm=_qk_norm(c, tr),
        q_gate=c.bool("attn_output_gate", tr.q_gate),
        router_bias=tr.router_bias,
        expert_bias=tr.expert_bias,
        shared_gate=tr.shared_gate,
        head_bias=tr.head_bias,
        fused_qkv=tr.fused_qkv,
        fused_gate_up=tr.fused_gate_up,
    )
    _biases(c, tr, d)
    _parallel(c, tr, d)
    if c.has("conv_L_cache"):  # LFM2's short-convolution mixers: kernel and bias
        d.conv = (c.int("conv_L_cache", minimum=1), c.bool("conv_bias", False))
    d.head_gate = c.bool("use_attention_gate", False)  # a Linear(h, heads) output gate
    if per_layer_inter is not None:
        fixed_widths = per_layer_inter
        d.layer_intermediate = lambda i: fixed_widths[i]
    # Gemma 3n's AltUp (altup_num_inputs streams) and LAuReL (laurel_rank) blocks
    d.altup = (
        c.int("altup_num_inputs", default=0, minimum=0, maximum=64)
        if c.has("altup_num_inputs")
        else 0
    )
    d.laurel = c.int("laurel_rank", default=0, minimum=0)
    c.mark("altup_coef_clip", "altup_active_idx", "activation_sparsity_pattern")
    c.mark("altup_correct_scale")  # applies the scale; the vector is built either way
    d.dynamic_mask = tr.dynamic_mask
    d.residual_scales = tr.residual_scales
    if tr.dynamic_mask:
        c.mark("keep_window_size")  # which positions the mask keeps; no parameter
    if c.bool("use_sandwich_norm", False):
        d.norms_per_sublayer = 2
    c.mark("scale_embedding")  # a factor on the embeddings' output, no parameter
    if (c.str("hidden_act") or c.str("activation_function")) == "gelu_new":
        d.act_tensors = 5  # NewGELUActivation in Python keeps x, tanh, 1 + tanh, x/2 and out
    d.alibi = tr.alibi or c.bool("alibi", False)
    if tr.positions is not None:
        d.learned_positions = c.int(tr.positions, default=1024) + tr.position_offset
    elif c.str("position_embedding_type") == "absolute":
        d.learned_positions = c.int(*CONTEXT) + tr.position_offset
    if tr.token_types:
        d.token_types = c.int("type_vocab_size", default=2)
    langs = c.int("n_langs", default=1, minimum=0)
    if c.bool("use_lang_emb", False) and langs > 1:  # XLM's language embeddings
        d.token_types += langs
    if c.bool("asm", False):
        n.unknown("asm (XLM's adaptive softmax head)")
    if tr.task_heads:
        d.task_head = task_head_params(c, h, vocab)
    _mixers(c, d, n, tr)
    if pure_ssm:
        _pure_mamba(c, d)
        return d
    _moe(c, tr, d, n)
    _layer_kinds(c, tr, d, n)
    _per_layer_config(c, d, n)
    if tr.parallel_ssm and d.ssm is not None:
        d.layer_kind = lambda i: "hybrid"
    _per_kind_attention(c, tr, d)
    # Attention residuals (Kimi-K3): each sublayer reads a softmax mix of earlier blocks' outputs
    # instead of the plain residual; the block size only groups layers, the weights are per layer.
    d.attn_res = (c.opt_int("attn_res_block_size", minimum=0) or 0) > 0
    mtp = c.int("num_nextn_predict_layers", default=0, minimum=0, maximum=MAX_LAYERS)
    mtp += c.int("mtp_num_hidden_layers", default=0, minimum=0, maximum=MAX_LAYERS)
    c.mark("mtp_hybrid_override_pattern", "mtp_layers_block_type", "mtp_use_dedicated_embeddings")
    if mtp:
        n.flag(
            "mtp-not-built",
            f"{mtp} multi-token-prediction layer(s) (num_nextn_predict_layers) are in the "
            "checkpoint but transformers does not build them: not counted",
        )
    return d


def _pure_mamba(c: ConfigView, d: Dec) -> None:
    """Every layer a Mamba (v1) mixer with its pre-norm, no FFN; d_inner is `intermediate_size`
    (MambaConfig sets it to expand × hidden), Δ rank `time_step_rank` ("auto": ⌈hidden / 16⌉)."""
    from tracker.estimate.mixers import Mamba1, Mamba2  # loaded only when used

    h = d.hidden
    rank = c.raw("time_step_rank", "auto")
    expand = c.int("expand", default=2)
    if c.has("n_groups"):  # Mamba2Config: heads × head_dim inner width, n_groups B/C groups
        d.ssm = Mamba2(
            heads=c.int("num_heads"),
            head_dim=c.int("head_dim"),
            groups=c.int("n_groups"),
            state=c.int("state_size"),
            conv_kernel=c.int("conv_kernel", default=4),
            bias=c.bool("use_bias", False),
            conv_bias=c.bool("use_conv_bias", True),
            chunk=c.int("chunk_size", default=256),
        )
        c.mark("time_step_rank", "intermediate_size")
    else:
        d.ssm = Mamba1(
            d_inner=c.int("intermediate_size", default=expand * h),
            state=c.int("state_size"),
            conv_kernel=c.int("conv_kernel", default=4),
            dt_rank=-(-h // 16) if rank == "auto" else c.int("time_step_rank"),
            bias=c.bool("use_bias", False),
            conv_bias=c.bool("use_conv_bias", True),
        )
    d.layer_kind = lambda i: "mamba"
    d.ffn_kind = lambda i: "none"
    d.window = None
    d.norm_params = 0  # MambaRMSNorm (its epsilon is named layer_norm_epsilon)
    c.mark("time_step_scale", "time_step_init_scheme", "use_mambapy", "use_associative_scan")
    c.mark("mixer_rms_eps", "layer_norm_epsilon")


def task_head_params(
    c: ConfigView,
    h: int,
    v: int,
    width: int | None = None,
    pooler: bool = True,
    embed_width: int | None = None,
) -> int:
    """BERT's heads, chosen by the architecture name, not by any size key: ForMaskedLM,
    ForCausalLM (LMHeadModel) and ForPreTraining add the MLM transform (dense h→`width` +
    LayerNorm) and an output bias, the decoder tied to the input embeddings unless the config
    unties it or `width` is not `embed_width`, the embeddings' (RemBERT's output_embedding_size: a
    decoder of its own); ForPreTraining also the pooler and the next-sentence linear; the base model and the
    sequence classifiers have a pooler (`pooler`: ELECTRA has none), the classifiers a linear to
    their labels."""
    archs = c.list("architectures") or []
    arch = str(archs[0]) if archs else "BertModel"
    w = width or h
    head = 0
    lm = ("ForMaskedLM", "ForPreTraining", "ForCausalLM", "LMHeadModel")
    if arch.endswith(lm):
        head += h * w + w + 2 * w + v
        tied = c.bool("tie_word_embeddings", True)
        if w != (embed_width or h):
            head += v * w  # a decoder as wide as the transform, with the bias above
        elif not tied:
            head += v * w + v  # an untied decoder keeps its own bias beside the head's
        if arch.endswith("ForPreTraining"):
            head += h * h + h + 2 * h + 2
    elif pooler and (arch == "" or arch.endswith("Model") or "Classification" in arch):
        head += h * h + h  # pooler
        if "Classification" in arch:
            labels = len(c.raw("id2label", {}) or {}) or 2
            head += h * labels + labels
    return head


def _qk_norm(c: ConfigView, tr: Traits) -> bool:
    keys = ("use_qk_norm", "qk_layernorm", "qk_norm")
    if not tr.qk_norm_key_has_params:
        c.mark(*keys)
        return tr.qk_norm
    return _bool_of(c, keys, False) or tr.qk_norm


def _kv_heads(c: ConfigView, heads: int) -> int:
    # Multi-query without Falcon's new decoder architecture: one K/V head, whatever else is set.
    if c.bool("multi_query", False) and not c.bool("new_decoder_architecture", c.has("n_head_kv")):
        c.mark(*KV_HEADS)
        return 1
    key = c.first_key(*KV_HEADS)
    if key is not None:
        return c.int(key, maximum=heads if heads else 1)
    if c.bool("multi_query_attention", False) and c.has("multi_query_group_num"):
        return c.int("multi_query_group_num", maximum=heads)
    c.mark("multi_query_group_num")
    if c.bool("multi_query", False):
        return 1
    return heads


def _biases(c: ConfigView, tr: Traits, d: Dec) -> None:
    """q/k/v, o and MLP biases from whichever bias keys the config uses."""
    qkv_keys = ("qkv_bias", "add_qkv_bias", "use_qkv_bias", "attention_bias", "bias")
    o_keys = ("attention_bias", "bias", "add_bias_linear")
    mlp_keys = ("mlp_bias", "add_bias_linear", *(("bias",) if tr.bias_covers_mlp else ()))
    no_bias = c.bool("no_bias", False) if c.has("no_bias") else None
    d.q_bias = d.kv_bias = _bool_of(c, qkv_keys, bool(tr.qkv_bias))
    o_default = bool(tr.o_bias) if no_bias is None else not no_bias
    d.o_bias = tr.o_bias_always or _bool_of(c, o_keys, o_default)
    mlp_default = bool(tr.mlp_bias) if no_bias is None else not no_bias
    d.mlp_bias = _bool_of(c, mlp_keys, mlp_default)


def _parallel(c: ConfigView, tr: Traits, d: Dec) -> None:
    """Parallel attention+MLP blocks: one shared norm, or two (Falcon's new architecture)."""
    keys = ("parallel_attn", "use_parallel_residual", "parallel_residual", "parallel_block")
    parallel = tr.parallel or any(c.bool(k, False) for k in keys)
    # Falcon's RefinedWeb configs predate `new_decoder_architecture`: its code selects the new
    # architecture (separate attention and MLP norms, grouped KV) from the presence of n_head_kv.
    new_arch = c.bool("new_decoder_architecture", c.has("n_head_kv"))
    if new_arch:
        parallel = True
        d.parallel_norms = c.int("num_ln_in_parallel_attn", default=2)
    elif tr.parallel_norms is not None:
        d.parallel_norms = tr.parallel_norms
    d.parallel = parallel


def _mixers(c: ConfigView, d: Dec, n: Notes, tr: Traits | None = None) -> None:
    """MLA, linear attention and SSM dimensions, wherever their keys appear."""
    h = d.hidden
    if c.has("kv_lora_rank"):
        indexer = None
        if c.has("index_n_heads"):
            indexer = (c.int("index_n_heads"), c.int("index_head_dim"))
        nope = c.int("qk_nope_head_dim", default=128)
        from tracker.estimate.mixers import Mla  # loaded only when used

        d.mla = Mla(
            q_lora_rank=c.opt_int("q_lora_rank"),
            kv_lora_rank=c.int("kv_lora_rank"),
            qk_nope=nope,
            qk_rope=c.int("qk_rope_head_dim", default=64),
            v_head=c.int("v_head_dim", default=nope),
            indexer=indexer,
            out_gate=c.bool("mla_use_output_gate", False),
        )
        c.mark("mla_use_nope", "qk_head_dim")
        itypes = c.list("indexer_types")
        if indexer is not None and itypes and len(itypes) == d.n_layers:
            own = [t == "full" for t in itypes]
            d.has_indexer = lambda i: own[i]
    if c.has("linear_num_key_heads"):
        from tracker.estimate.mixers import Gdn  # loaded only when used

        d.linear = Gdn(
            key_heads=c.int("linear_num_key_heads"),
            key_dim=c.int("linear_key_head_dim"),
            value_heads=c.int("linear_num_value_heads"),
            value_dim=c.int("linear_value_head_dim"),
            conv_kernel=c.int("linear_conv_kernel_dim", default=4),
        )
    lac = c.sub("linear_attn_config")
    if lac is not None and lac.has("num_heads"):
        from tracker.estimate.mixers import Kda  # loaded only when used

        d.linear = Kda(
            heads=lac.int("num_heads"),
            head_dim=lac.int("head_dim", default=128),
            conv_kernel=lac.int("short_conv_kernel_size", default=4),
            full_rank_gate=lac.bool("use_full_rank_gate", False),
        )
        # the decay's lower bound only changes the gate's formula, not its weights
        lac.mark("gate_lower_bound")
    elif d.linear is None and c.has("linear_num_heads"):
        from tracker.estimate.mixers import Kda  # loaded only when used

        d.linear = Kda(
            heads=c.int("linear_num_heads"),
            head_dim=c.int("linear_head_dim", default=128),
            conv_kernel=c.int("linear_conv_kernel_dim", default=4),
        )
    m_heads = c.opt_int("mamba_num_heads", "mamba_n_heads")
    expand = c.opt_int("mamba_expand", "expand")
    if m_heads is not None or c.has("mamba_head_dim") or c.has("mamba_d_head"):
        m_hd = c.int("mamba_head_dim", "mamba_d_head", default=64)
        if m_heads is None:
            m_heads = max(1, (expand or 2) * h // m_hd)
        d_ssm = c.opt_int("mamba_d_ssm", minimum=1)  # Falcon-H1: the inner width itself
        if d_ssm is not None and d_ssm != m_heads * m_hd:
            n.unknown(f"mamba_d_ssm {d_ssm} is not mamba heads × head size {m_heads * m_hd}")
        from tracker.estimate.mixers import Mamba2  # loaded only when used

        d.ssm = Mamba2(
            heads=m_heads,
            head_dim=m_hd,
            groups=c.int("n_groups", "mamba_n_groups", default=1),
            state=c.int("ssm_state_size", "mamba_d_state", default=128),
            conv_kernel=c.int("conv_kernel", "mamba_d_conv", default=4),
            bias=_bool_of(c, ("use_bias", "mamba_proj_bias"), False),
            conv_bias=_bool_of(c, ("use_conv_bias", "mamba_conv_bias"), True),
            chunk=c.int("chunk_size", "mamba_chunk_size", default=256, minimum=1),  # Mamba2Config
            norm=c.bool("mamba_rms_norm", True),
        )
        c.mark("mamba_norm_before_gate")  # where the gated norm applies, not its size
    elif c.has("mamba_d_state") or c.has("mamba_dt_rank"):
        d_inner = (expand or 2) * h
        rank = c.raw("mamba_dt_rank", "auto")
        dt_rank = -(-h // 16) if rank == "auto" else c.int("mamba_dt_rank")
        from tracker.estimate.mixers import Mamba1  # loaded only when used

        d.ssm = Mamba1(
            d_inner=d_inner,
            state=c.int("mamba_d_state", default=16),
            conv_kernel=c.int("mamba_d_conv", default=4),
            dt_rank=dt_rank,
            bias=c.bool("mamba_proj_bias", False),
            conv_bias=c.bool("mamba_conv_bias", True),
        )
    if tr is not None and tr.lightning and d.linear is None:
        d.lightning = True
        c.mark("block_size", "full_attn_alpha_factor", "full_attn_beta_factor")
        c.mark("linear_attn_alpha_factor", "linear_attn_beta_factor")
        c.mark("mlp_alpha_factor", "mlp_beta_factor")
    if c.has("lru_width"):  # RecurrentGemma's RG-LRU recurrent blocks
        d.rglru = (
            c.int("lru_width", minimum=1),
            d.heads,
            c.int("conv1d_width", default=4, minimum=1),
        )
    if d.mla is None and d.linear is None and d.ssm is None and c.has("linear_attn_config"):
        n.unknown("linear_attn_config (no head count)")


def _per_layer_config(c: ConfigView, d: Dec, n: Notes) -> None:
    """`per_layer_config` (Gemma 4 unified): overrides keyed by layer index ("05"); a layer's own
    `head_dim` is read, any other override is named as not understood."""
    per = c.sub("per_layer_config")
    if per is None:
        return
    dims: dict[int, int] = {}
    for key in per.data:
        if not str(key).isdigit() or not 0 <= int(key) < d.n_layers:
            raise EstimateError(f"config per_layer_config key {key!r} is not a layer index")
        entry = per.sub(str(key))
        if entry is None:
            raise EstimateError(f"config per_layer_config[{key!r}] is not an object")
        if entry.has("head_dim"):
            dims[int(key)] = entry.int("head_dim", minimum=1)
        for other in sorted(set(entry.data) - {"head_dim"}):
            n.unknown(f"per_layer_config.{key}.{other}")
    if dims:
        d.layer_head_dim = lambda i: dims.get(i, d.head_dim)


def _per_kind_attention(c: ConfigView, tr: Traits, d: Dec) -> None:
    """Full layers' own head size and KV heads, K=V full layers, layers reusing earlier K/V, and
    per-layer input embeddings, wherever their keys appear (Gemma 4 names them so).

    `num_global_key_value_heads` applies only where `attention_k_eq_v` is true or absent, as
    Gemma4TextConfig applies it. Layers from `num_hidden_layers - num_kv_shared_layers` on reuse
    the K/V of earlier layers and build no k/v projections or k_norm; `use_double_wide_mlp`
    doubles their MLP width.
    """
    k_eq_v = c.bool("attention_k_eq_v", False)
    if d.mla is None:
        d.full_head_dim = c.opt_int("global_head_dim") or tr.full_head_dim
        if not c.has("attention_k_eq_v") or k_eq_v:
            d.full_kv_heads = c.opt_int("num_global_key_value_heads", maximum=d.heads)
        d.full_k_eq_v = k_eq_v
    c.mark("global_head_dim", "num_global_key_value_heads", "attention_k_eq_v")
    shared = c.int("num_kv_shared_layers", default=0, minimum=0, maximum=d.n_layers)
    if shared:
        d.kv_shared_from = d.n_layers - shared
        d.shared_kv_mlp_factor = 2 if c.bool("use_double_wide_mlp", False) else 1
    c.mark("use_double_wide_mlp")
    d.per_layer_input = c.int("hidden_size_per_layer_input", default=0, minimum=0)
    if d.per_layer_input:
        d.per_layer_vocab = c.int("vocab_size_per_layer_input", default=d.vocab)
    c.mark("vocab_size_per_layer_input")


def _moe(c: ConfigView, tr: Traits, d: Dec, n: Notes) -> None:
    """Routed, shared and latent experts and which layers carry them."""
    key = c.first_key(*EXPERTS)
    if key is None:
        return
    if c.has("is_moe") and not c.bool("is_moe", True):  # Doge: the expert keys stay unused
        c.mark(*EXPERTS, *TOP_K, *MOE_WIDTH, *SHARED_COUNT, *SHARED_WIDTH)
        return
    if tr.cdmoe:
        e = c.int(key, minimum=1, maximum=MAX_EXPERTS * MAX_EXPERTS)
        d.cdmoe = (e, c.int(*TOP_K, default=1, minimum=1, maximum=e))
        c.mark("norm_topk_prob")
        return
    if c.has("enable_moe_block") and not c.bool("enable_moe_block", True):
        c.mark(*EXPERTS, *TOP_K, *MOE_WIDTH, *SHARED_COUNT, *SHARED_WIDTH)
        return
    d.moe_beside_dense_norms = tr.moe_beside_dense_norms
    d.router_scales = tr.router_scales
    e = c.int(key, minimum=0, maximum=MAX_EXPERTS)
    if e == 0:
        c.mark(*TOP_K, *MOE_WIDTH, *SHARED_COUNT, *SHARED_WIDTH)
        return
    k_key = c.first_key(*TOP_K)
    if k_key is None:
        n.note(f"{key}={e} without a top-k key: one expert per token assumed")
    k = 1 if k_key is None else c.int(k_key)
    if k > e:
        raise EstimateError(f"config top-k {k} exceeds the {e} experts")
    d.experts, d.top_k = e, k
    d.moe_intermediate = c.int(*MOE_WIDTH, default=d.intermediate)
    width = c.opt_int(*SHARED_WIDTH, minimum=0)
    count = c.opt_int(*SHARED_COUNT, minimum=0)
    if width:
        d.shared_intermediate = width
    elif count:
        d.shared_intermediate = count * d.moe_intermediate
    elif tr.shared_expert is not None:
        d.shared_intermediate = c.int(tr.shared_expert)
    d.shared_gate = tr.shared_gate and bool(d.shared_intermediate)
    latent = c.opt_int(*LATENT)
    if latent:
        d.latent = latent
        d.latent_norm = _bool_of(c, LATENT_NORM, False)
    dense = c.opt_int("intermediate_size_mlp", "dense_intermediate_size")
    if dense is not None:
        d.dense_intermediate = dense
    d.is_moe = _moe_layers(c, d.n_layers)
    # zero-computation experts (LongCat-Flash): the router scores them beside the routed ones
    d.zero_experts = c.int("zero_expert_num", default=0, minimum=0, maximum=MAX_EXPERTS)
    if tr.paired_layers:  # the second of each pair carries the MoE beside its dense MLP
        d.is_moe = lambda i: i % 2 == 1
    for extra in ("topk_method", "scoring_func", "norm_topk_prob", "routed_scaling_factor"):
        c.mark(extra)
    c.mark("n_group", "topk_group", "num_expert_group", "moe_renormalize", "use_grouped_topk")
    c.mark("moe_router_activation_func", "router_aux_loss_coef", "output_router_logits")
    c.mark("moe_norm_min", "route_scale")


def _moe_layers(c: ConfigView, n: int) -> Callable[[int], bool]:
    """Which layers are MoE, from every form configs use (all of them when none is given)."""
    kinds = c.list("mlp_layer_types")
    c.mark("first_k_dense_replace", "moe_layer_freq", "decoder_sparse_step", "mlp_only_layers")
    c.mark("num_dense_layers", "moe_layer_start_index", "moe_layer_end_index", "moe_layer_interval")
    if kinds is not None and len(kinds) == n:
        sparse = [k in ("sparse", "moe") for k in kinds]
        return lambda i: sparse[i]
    listed = c.list("moe_layers")
    if listed is not None:
        chosen = {int(x) for x in listed if isinstance(x, int) and not isinstance(x, bool)}
        return lambda i: i in chosen
    freq_raw = c.raw("moe_layer_freq")
    if isinstance(freq_raw, list) and len(freq_raw) == n:
        flags = [bool(x) for x in freq_raw]
        return lambda i: flags[i]
    freq = c.int("moe_layer_freq", default=1) if not isinstance(freq_raw, list) else 1
    only = {int(x) for x in (c.list("mlp_only_layers") or []) if isinstance(x, int)}
    step = c.int("decoder_sparse_step", "moe_layer_interval", default=1)
    first = c.int(
        "first_k_dense_replace",
        "num_dense_layers",
        "moe_layer_start_index",
        default=0,
        minimum=0,
        maximum=MAX_LAYERS,
    )
    # ERNIE 4.5: MoE from moe_layer_start_index to moe_layer_end_index inclusive (-1: the last)
    end = c.int("moe_layer_end_index", default=-1, minimum=-1, maximum=MAX_LAYERS)
    last = n - 1 if end < 0 else end
    inter = c.int("interleave_moe_layer_step", default=1)
    period = c.int("expert_layer_period", default=1)
    offset = c.int("expert_layer_offset", default=0, minimum=0, maximum=MAX_LAYERS)

    def moe(i: int) -> bool:
        if i in only or i < first or i > last:
            return False
        return (
            (i + 1) % step == 0 and i % freq == 0 and (i + 1) % inter == 0 and i % period == offset
        )

    return moe


def _layer_kinds(c: ConfigView, tr: Traits, d: Dec, n: Notes) -> None:
    """Per-layer mixer kinds (and FFN kinds where one mixer fills a layer) from any list form."""
    layers = d.n_layers
    window = c.opt_int("sliding_window", "attention_window_size", minimum=0) or None
    chunk = c.opt_int("attention_chunk_size", minimum=0) or None
    d.window = window or chunk
    types = c.list("layer_types")
    blocks = c.list("layers_block_type")
    pattern = c.str("hybrid_override_pattern")
    lac = c.sub("linear_attn_config")
    kinds: list[str] | None = None
    per_layer = types if types is not None else blocks
    if per_layer is not None and any(str(v).lower() in BLOCK_FFNS for v in per_layer):
        # One block per layer (Nemotron-H's `layers_block_type`): an MLP or MoE entry is a layer
        # of that FFN alone, every other entry a mixer alone, each with its one pre-norm.
        key = "layer_types" if types is not None else "layers_block_type"
        ffns = [BLOCK_FFNS.get(str(v).lower(), "none") for v in per_layer]
        named = _named([v for v in per_layer if str(v).lower() not in BLOCK_FFNS], -1, key, n)
        alone = iter(named)
        kinds = ["none" if f != "none" else next(alone) for f in ffns]
        if len(kinds) != layers:
            raise EstimateError(f"config {key} has {len(kinds)} entries for {layers} layers")
        d.ffn_kind = lambda i: ffns[i]
        if tr.one_norm_per_mixer:
            d.norms_per_sublayer = 1
    elif types is not None:
        kinds = _named(types, layers, "layer_types", n)
    elif blocks is not None:
        kinds = _named(blocks, layers, "layers_block_type", n)
    elif pattern:
        if len(pattern) != layers:
            n.flag(
                "pattern-length",
                f"hybrid_override_pattern has {len(pattern)} entries for {layers} layers",
            )
            pattern = pattern[:layers].ljust(layers, "*")
        bad = sorted({ch for ch in pattern if ch not in PATTERN_CHARS})
        if bad:
            n.unknown(f"hybrid_override_pattern symbols {''.join(bad)}")
        mixers = [PATTERN_CHARS.get(ch, ("full", "none")) for ch in pattern]
        d.layer_kind = lambda i: mixers[i][0]
        d.ffn_kind = lambda i: mixers[i][1]
        if tr.one_norm_per_mixer:
            d.norms_per_sublayer = 1
        return
    elif lac is not None and lac.list("full_attn_layers") is not None:
        kinds = ["linear"] * layers
        for x in lac.list("full_attn_layers") or []:
            if isinstance(x, bool) or not isinstance(x, int) or not 1 <= x <= layers:
                raise EstimateError(
                    f"config full_attn_layers entry {x!r} is not a layer number 1..{layers}"
                )
            kinds[x - 1] = "full"
        lac.mark("kda_layers")
    elif c.list("block_types") and d.rglru is not None:
        # RecurrentGemma: block_types repeat over the layers; its attention is always local
        cycle = [str(x) for x in c.list("block_types") or []]
        kinds = [
            "recurrent" if cycle[i % len(cycle)] == "recurrent" else "sliding"
            for i in range(layers)
        ]
        unknown = sorted({x for x in cycle if x not in ("recurrent", "attention")})
        if unknown:
            n.unknown(f"block_types values {', '.join(unknown)}")
    elif c.list("full_attn_idxs") is not None:  # LFM2: the attention layers, convs between
        idxs = {x for x in c.list("full_attn_idxs") or [] if isinstance(x, int)}
        kinds = ["full" if i in idxs else "conv" for i in range(layers)]
    elif c.has("full_attention_interval"):
        k = c.int("full_attention_interval")
        kinds = ["full" if (i + 1) % k == 0 else "linear" for i in range(layers)]
    elif "attn_layer_indices" in c.data and d.ssm is not None:
        listed = {x for x in (c.list("attn_layer_indices") or []) if isinstance(x, int)}
        kinds = ["full" if i in listed else "mamba" for i in range(layers)]
    elif c.has("attn_layer_period"):
        period = c.int("attn_layer_period")
        offset = c.int("attn_layer_offset", default=0, minimum=0, maximum=MAX_LAYERS)
        kinds = ["full" if i % period == offset else "mamba" for i in range(layers)]
    elif d.window and c.has("sliding_window_pattern"):
        p = c.int("sliding_window_pattern")
        kinds = ["full" if (i + 1) % p == 0 else "sliding" for i in range(layers)]
    elif d.window and c.has("use_sliding_window"):
        if c.bool("use_sliding_window", False):
            first = c.int("max_window_layers", default=layers, minimum=0, maximum=MAX_LAYERS)
            kinds = ["sliding" if i >= first else "full" for i in range(layers)]
        else:
            d.window = None
            c.mark("max_window_layers")
    elif chunk and (
        c.list("no_rope_layers") is not None or c.has("no_rope_layer_interval") or tr.nope_interval
    ):
        nope = c.list("no_rope_layers") or []
        if not nope:  # transformers' default for an absent or empty list (Llama4TextConfig)
            every = c.int(
                "no_rope_layer_interval",
                default=tr.nope_interval or 4,
                minimum=1,
                maximum=MAX_LAYERS,
            )
            nope = [int((i + 1) % every != 0) for i in range(layers)]
        kinds = ["sliding" if i < len(nope) and nope[i] else "full" for i in range(layers)]
    elif d.window and tr.sliding_all:
        kinds = ["sliding"] * layers
    elif tr.alternate_sliding:
        kinds = ["sliding" if i % 2 == 0 else "full" for i in range(layers)]
    elif d.window and not c.has("use_sliding_window"):
        kinds = ["sliding"] * layers
    # One per-layer form decides; the others a config may carry as well are its aliases.
    c.mark(
        "max_window_layers",
        "use_sliding_window",
        "full_attention_interval",
        "sliding_window_pattern",
        "global_attn_every_n_layers",
        "full_attn_idxs",
    )
    c.mark("layer_types", "layers_block_type", "hybrid_override_pattern")
    if kinds is None:
        d.window = None if not tr.sliding_all else d.window
        return
    if "sliding" not in kinds:
        d.window = None
    if d.linear is None and d.ssm is not None:
        # Hybrids that call their SSM layers "linear attention" (Granite 4): sized by Mamba keys.
        kinds = ["mamba" if k == "linear" else k for k in kinds]
    linear_ready = d.linear if d.linear is not None else (True if d.lightning else None)
    for kind, ready in (("linear", linear_ready), ("mamba", d.ssm), ("conv", d.conv)):
        if kind in kinds and ready is None:
            n.unknown(f"{kind} layers without the keys that size them")
    fixed = kinds
    d.layer_kind = lambda i: fixed[i]


def _named(values: list[object], layers: int, key: str, n: Notes) -> list[str]:
    """Mixer kinds of a per-layer list (`layers` -1: any length)."""
    if layers >= 0 and len(values) != layers:
        raise EstimateError(f"config {key} has {len(values)} entries for {layers} layers")
    out: list[str] = []
    unknown: set[str] = set()
    for v in values:
        name = str(v).lower()
        if name in FULL_NAMES:
            out.append("full")
        elif name in SLIDING_NAMES:
            out.append("sliding")
        elif name in LINEAR_NAMES:
            out.append("linear")
        elif name in MAMBA_NAMES:
            out.append("mamba")
        elif name in CONV_NAMES:
            out.append("conv")
        else:
            unknown.add(str(v))
            out.append("full")
    if unknown:
        n.unknown(f"{key} values {', '.join(sorted(unknown))}")
    return out
