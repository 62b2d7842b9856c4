"""Per-family readings of decoder-only configs into the generic `Dec` description.

Each reader follows the module layout of the pinned transformers (5.24.0) for its model_type;
custom-code model types are read as their nearest native relative (named in the notes).
"""

from __future__ import annotations

from collections.abc import Callable

from tracker.errors import EstimateError
from tracker.estimate.decoder import Dec, LinearAttn, Mla
from tracker.estimate.layout import full_attention_layers
from tracker.estimate.reading import MAX_EXPERTS, MAX_LAYERS, ConfigView


class Notes:
    """Flags (machine ids) and notes (human lines) gathered while reading."""

    def __init__(self) -> None:
        self.flags: list[str] = []
        self.notes: list[str] = []

    def flag(self, flag: str, note: str) -> None:
        if flag not in self.flags:
            self.flags.append(flag)
            self.notes.append(note)


def base(c: ConfigView, n: Notes) -> Dec:
    """The Llama layout: q/k/v/o, SwiGLU MLP, two RMSNorms per layer, optional tied head."""
    h = c.int("hidden_size", "n_embd", "d_model", "dim")
    heads = c.int("num_attention_heads", "n_head", "num_heads")
    kv = c.int("num_key_value_heads", "n_head_kv", "num_kv_heads", default=heads)
    if heads % kv:
        n.flag("kv-heads-not-divisor", f"num_key_value_heads={kv} does not divide heads={heads}")
    hd = c.int("head_dim", default=h // heads if h >= heads else 1)
    layers = c.int("num_hidden_layers", "n_layer", "num_layers", maximum=MAX_LAYERS)
    vocab = c.int("vocab_size", "padded_vocab_size")
    inter = c.int("intermediate_size", "ffn_hidden_size", "n_inner", default=4 * h)
    bias = c.bool("attention_bias", False)
    d = Dec(
        hidden=h,
        vocab=vocab,
        n_layers=layers,
        heads=heads,
        kv_heads=kv,
        head_dim=hd,
        intermediate=inter,
        tied=c.bool("tie_word_embeddings", False),
        q_bias=bias,
        kv_bias=bias,
        o_bias=bias,
        mlp_bias=c.bool("mlp_bias", False),
    )
    window = c.opt_int("sliding_window")
    if window is not None:
        d.window = window
    return d


def _llama(c: ConfigView, n: Notes) -> Dec:
    return base(c, n)


def _mistral(c: ConfigView, n: Notes) -> Dec:
    d = base(c, n)
    if d.window:
        d.layer_kind = lambda i: "sliding"
    return d


def _qwen2(c: ConfigView, n: Notes) -> Dec:
    d = base(c, n)
    d.q_bias = d.kv_bias = True
    d.o_bias = False
    _qwen_sliding(c, d)
    return d


def _qwen_sliding(c: ConfigView, d: Dec) -> None:
    if c.bool("use_sliding_window", False) and d.window:
        mwl = c.int("max_window_layers", default=d.n_layers, minimum=0, maximum=MAX_LAYERS)
        d.layer_kind = lambda i: "sliding" if i >= mwl else "full"
    else:
        d.window = None
    types = c.list("layer_types")
    if types and len(types) == d.n_layers:
        kinds = ["sliding" if t == "sliding_attention" else "full" for t in types]
        d.layer_kind = lambda i: kinds[i]


def _qwen3(c: ConfigView, n: Notes) -> Dec:
    d = base(c, n)
    d.qk_norm = True
    _qwen_sliding(c, d)
    return d


def _moe_common(c: ConfigView, d: Dec, *, experts_key: tuple[str, ...]) -> None:
    d.experts = c.int(*experts_key, maximum=MAX_EXPERTS)
    d.top_k = c.int("num_experts_per_tok", "num_experts_per_token", "top_k", default=1)
    if d.top_k > d.experts:
        raise EstimateError(f"config top-k {d.top_k} exceeds the {d.experts} experts")


def _mixtral(c: ConfigView, n: Notes) -> Dec:
    d = _mistral(c, n)
    _moe_common(c, d, experts_key=("num_local_experts",))
    d.moe_intermediate = d.intermediate
    d.is_moe = lambda i: True
    return d


def _qwen_moe(c: ConfigView, d: Dec) -> None:
    _moe_common(c, d, experts_key=("num_experts",))
    d.moe_intermediate = c.int("moe_intermediate_size")
    step = c.int("decoder_sparse_step", default=1)
    only = {int(x) for x in (c.list("mlp_only_layers") or []) if isinstance(x, int)}
    d.is_moe = lambda i: i not in only and (i + 1) % step == 0


def _qwen3_moe(c: ConfigView, n: Notes) -> Dec:
    d = _qwen3(c, n)
    _qwen_moe(c, d)
    return d


def _qwen2_moe(c: ConfigView, n: Notes) -> Dec:
    d = _qwen2(c, n)
    _qwen_moe(c, d)
    d.shared_intermediate = c.int("shared_expert_intermediate_size", default=0, minimum=0)
    d.shared_gate = bool(d.shared_intermediate)
    return d


def _qwen_next(c: ConfigView, n: Notes, *, split: bool) -> Dec:
    d = _qwen3(c, n)
    d.q_gate = True
    d.linear = LinearAttn(
        key_heads=c.int("linear_num_key_heads"),
        key_dim=c.int("linear_key_head_dim"),
        value_heads=c.int("linear_num_value_heads"),
        value_dim=c.int("linear_value_head_dim"),
        conv_kernel=c.int("linear_conv_kernel_dim", default=4),
        split_proj=split,
    )
    full = full_attention_layers(c, d.n_layers)
    d.layer_kind = lambda i: "full" if i in full else "linear"
    if c.has("num_experts") and c.int("num_experts", minimum=0) > 0:
        _qwen_moe(c, d)
        d.shared_intermediate = c.int("shared_expert_intermediate_size", default=0, minimum=0)
        d.shared_gate = bool(d.shared_intermediate)
    return d


def _deepseek(c: ConfigView, n: Notes) -> Dec:
    d = base(c, n)
    q_lora = c.opt_int("q_lora_rank")
    indexer = None
    if c.has("index_n_heads"):
        indexer = (c.int("index_n_heads"), c.int("index_head_dim"))
    d.mla = Mla(
        q_lora_rank=q_lora,
        kv_lora_rank=c.int("kv_lora_rank"),
        qk_nope=c.int("qk_nope_head_dim"),
        qk_rope=c.int("qk_rope_head_dim"),
        v_head=c.int("v_head_dim"),
        indexer=indexer,
    )
    d.o_bias = d.q_bias = c.bool("attention_bias", False)
    if c.has("n_routed_experts"):
        _moe_common(c, d, experts_key=("n_routed_experts",))
        d.moe_intermediate = c.int("moe_intermediate_size")
        shared = c.int("n_shared_experts", default=0, minimum=0)
        d.shared_intermediate = shared * d.moe_intermediate
        first = c.int("first_k_dense_replace", default=0, minimum=0, maximum=MAX_LAYERS)
        freq = c.int("moe_layer_freq", default=1)
        d.is_moe = lambda i: i >= first and i % freq == 0
        kinds = c.list("mlp_layer_types")
        if kinds and len(kinds) == d.n_layers:
            sparse = [k == "sparse" for k in kinds]
            d.is_moe = lambda i: sparse[i]
    itypes = c.list("indexer_types")
    if indexer is not None and itypes and len(itypes) == d.n_layers:
        own = [t == "full" for t in itypes]
        d.has_indexer = lambda i: own[i]
    mtp = c.int("num_nextn_predict_layers", default=0, minimum=0, maximum=MAX_LAYERS)
    if mtp:
        n.flag(
            "mtp-not-built",
            f"{mtp} multi-token-prediction layer(s) (num_nextn_predict_layers) are in the "
            "checkpoint but transformers does not build them: not counted",
        )
    if c.str("topk_method") == "noaux_tc" or c.has("n_routed_experts"):
        n.notes.append(
            "router e_score_correction_bias is a buffer in transformers, not a parameter"
        )
    return d


def _gpt_oss(c: ConfigView, n: Notes) -> Dec:
    d = base(c, n)
    d.q_bias = d.kv_bias = d.o_bias = True
    d.sinks = True
    _moe_common(c, d, experts_key=("num_local_experts",))
    d.moe_intermediate = d.intermediate
    d.router_bias = d.expert_bias = True
    d.is_moe = lambda i: True
    types = c.list("layer_types")
    if types and len(types) == d.n_layers:
        kinds = ["sliding" if t == "sliding_attention" else "full" for t in types]
        d.layer_kind = lambda i: kinds[i]
    return d


def _granitemoe(c: ConfigView, n: Notes) -> Dec:
    d = base(c, n)
    _moe_common(c, d, experts_key=("num_local_experts",))
    d.moe_intermediate = d.intermediate
    d.is_moe = lambda i: True
    return d


def _gemma(c: ConfigView, n: Notes) -> Dec:
    d = base(c, n)
    d.tied = c.bool("tie_word_embeddings", True)
    return d


def _gemma3(c: ConfigView, n: Notes) -> Dec:
    d = _gemma(c, n)
    d.qk_norm = True
    d.norms_per_layer = 4
    types = c.list("layer_types")
    if types and len(types) == d.n_layers:
        kinds = ["sliding" if t == "sliding_attention" else "full" for t in types]
        d.layer_kind = lambda i: kinds[i]
    elif d.window:
        pattern = c.int("sliding_window_pattern", default=6)
        d.layer_kind = lambda i: "full" if (i + 1) % pattern == 0 else "sliding"
    return d


def _gemma2(c: ConfigView, n: Notes) -> Dec:
    d = _gemma(c, n)
    d.norms_per_layer = 4
    d.layer_kind = lambda i: "sliding" if i % 2 == 0 else "full"
    return d


def _phi3(c: ConfigView, n: Notes) -> Dec:
    d = base(c, n)
    d.fused_qkv = True
    return d


def _internlm(c: ConfigView, n: Notes) -> Dec:
    d = base(c, n)
    bias = c.bool("bias", True)
    d.q_bias = d.kv_bias = d.o_bias = bias
    n.flag("read-as-llama", "custom-code internlm read as llama (q/k/v/o bias from `bias`)")
    return d


def _qwen1(c: ConfigView, n: Notes) -> Dec:
    d = base(c, n)
    d.intermediate = c.int("intermediate_size", "ffn_hidden_size") // 2
    d.head_dim = c.int("kv_channels", default=d.head_dim)
    d.q_bias = d.kv_bias = not c.bool("no_bias", True) or True
    d.o_bias = False
    n.flag(
        "read-as-qwen2",
        "custom-code QWen read as qwen2: c_attn with bias, MLP width intermediate_size/2",
    )
    return d


def _llama4_text(c: ConfigView, n: Notes) -> Dec:
    d = base(c, n)
    _moe_common(c, d, experts_key=("num_local_experts",))
    d.moe_intermediate = d.intermediate
    d.shared_intermediate = d.intermediate
    d.dense_intermediate = c.int("intermediate_size_mlp", default=d.intermediate)
    step = c.int("interleave_moe_layer_step", default=1)
    moe_layers = c.list("moe_layers")
    if moe_layers is not None:
        chosen = {int(x) for x in moe_layers if isinstance(x, int)}
        d.is_moe = lambda i: i in chosen
    else:
        d.is_moe = lambda i: (i + 1) % step == 0
    chunk = c.opt_int("attention_chunk_size")
    if chunk:
        nope = c.list("no_rope_layers")
        d.window = chunk
        if nope and len(nope) == d.n_layers:
            flags = [bool(x) for x in nope]
            d.layer_kind = lambda i: "sliding" if flags[i] else "full"
        else:
            d.layer_kind = lambda i: "full" if (i + 1) % 4 == 0 else "sliding"
    return d


Reader = Callable[[ConfigView, Notes], Dec]

READERS: dict[str, Reader] = {
    "llama": _llama,
    "mistral": _mistral,
    "qwen2": _qwen2,
    "mimo": _qwen2,
    "qwen3": _qwen3,
    "qwen3_moe": _qwen3_moe,
    "qwen3_vl": _qwen3,
    "qwen3_vl_text": _qwen3,
    "qwen3_vl_moe_text": _qwen3_moe,
    "qwen2_moe": _qwen2_moe,
    "qwen3_next": lambda c, n: _qwen_next(c, n, split=False),
    "qwen3_5_text": lambda c, n: _qwen_next(c, n, split=True),
    "qwen3_5_moe_text": lambda c, n: _qwen_next(c, n, split=True),
    "mixtral": _mixtral,
    "deepseek_v3": _deepseek,
    "deepseek_v32": _deepseek,
    "deepseek_v2": _deepseek,
    "kimi_k2": _deepseek,
    "glm_moe_dsa": _deepseek,
    "gpt_oss": _gpt_oss,
    "granitemoe": _granitemoe,
    "gemma": _gemma,
    "gemma2": _gemma2,
    "gemma3_text": _gemma3,
    "phi3": _phi3,
    "internlm": _internlm,
    "qwen": _qwen1,
    "llama4_text": _llama4_text,
}
