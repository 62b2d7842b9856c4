"""Keys of a config that could shape the model but that no reader consulted.

After reading, every key the reader looked at is known (`ConfigView.used`). A key left over is
"not understood" when it looks structural (its name speaks of sizes, counts, layers, experts,
heads, projections...), it is set (not null, false, zero or empty), and it is not one of the keys
known to leave the parameter count alone (token ids, generation defaults, dropout, epsilons,
rotary settings, initialisation, kernels and dtypes). Such keys make the estimate unverified and
are listed by name, so a new architecture's MoE or hybrid keys are never silently ignored.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

STRUCTURAL = re.compile(
    r"(size|dim|^num_|^n_|_num_|layers?$|layer_|expert|heads?$|head_|rank|hidden|intermediate"
    r"|ffn|inner|kernel|moe|latent|proj|embed|state|conv|lora|shared|dense|sparse|router|block"
    r"|group|width|depth|vocab|mlp|attn|attention|^kv|qk|ssm|mamba|linear|window|pattern|types"
    r"|period|interval|freq|step|gate|mixer|expand|positions|indexer|index_|mtp|nextn|res_)"
)
"""Name fragments of keys that may change what is built."""

HARMLESS = re.compile(
    r"(dropout|pdrop|_eps$|epsilon|_act$|activation|initializer|init_|token_id|_dtype$|softcap"
    r"|multiplier|scaling|rope|rotary|_beam|return_sequences|penalty|^output_|^use_cache$"
    r"|^tokenizer_|^summary_|loss|_lr$)"
)
"""Name fragments of keys that never change the parameter count (numerics, generation, heads
transformers does not build for a causal LM)."""

SUBTREES_SKIPPED = frozenset(
    {
        "quantization_config",
        "rope_scaling",
        "rope_parameters",
        "auto_map",
        "id2label",
        "label2id",
        "task_specific_params",
        "compression_config",
        "generation_config",
        "pruned_heads",
    }
)
"""Sub-mappings that never hold parameters of their own (quantization, rotary and label maps)."""

NON_STRUCTURAL = frozenset(
    {
        # token ids and tokenizer bookkeeping
        "audio_token_id",
        "boa_token_id",
        "boi_token_id",
        "boi_token_index",
        "eoa_token_id",
        "eoa_token_index",
        "eoi_token_id",
        "eoi_token_index",
        "image_token_id",
        "image_token_index",
        "video_token_id",
        "vision_start_token_id",
        "vision_end_token_id",
        "media_placeholder_token_id",
        "tokenizer_model_max_length",
        "tokenizer_padding_side",
        "mm_tokens_per_image",
        "vision_soft_tokens_per_image",
        "max_num_patches",
        "min_num_patches",
        # numerics, kernels, caches and training switches
        "chunk_size_feed_forward",
        "chunk_size",
        "attention_softmax_in_fp32",
        "apply_query_key_layer_scaling",
        "apply_residual_connection_post_layernorm",
        "attn_logit_softcapping",
        "final_logit_softcapping",
        "attention_multiplier",
        "embedding_multiplier",
        "residual_multiplier",
        "logits_scaling",
        "residual_in_fp32",
        "rescale_prenorm_residual",
        "fp32_residual_connection",
        "mamba_ssm_cache_dtype",
        "mamba_ssm_dtype",
        "mamba_hidden_act",
        "mamba_chunk_size",
        "use_mamba_kernels",
        "time_step_floor",
        "time_step_limit",
        "time_step_max",
        "time_step_min",
        "moe_router_dtype",
        "moe_shared_expert_overlap",
        "moe_aux_loss_coeff",
        "aux_loss_alpha",
        "seq_aux",
        "ep_size",
        "swiglu_limit",
        "gate_lower_bound",
        "index_topk",
        "index_topk_freq",
        "index_topk_pattern",
        "index_skip_topk_offset",
        "index_share_for_mtp_iteration",
        "indexer_rope_interleave",
        "rope_interleave",
        "rope_local_base_freq",
        "partial_rotary_factor",
        "rotary_pct",
        "rotary_emb_base",
        "rotary_dim",
        "original_rope",
        "use_dynamic_ntk",
        "use_logn_attn",
        "query_pre_attn_scalar",
        "scale_attn_weights",
        "skip_bias_add",
        "skip_bias_add_qkv",
        "bias_dropout_fusion",
        "masked_softmax_fusion",
        "use_flash_attn",
        "use_bidirectional_attention",
        "cross_attention_hidden_size",
        "add_cross_attention",
        "num_logits_to_keep",
        "gradient_checkpointing",
        "cache_implementation",
        "initial_context_length",
        "attn_pdrop",
        "embd_pdrop",
        "resid_pdrop",
        "attention_dropout",
        "hidden_dropout",
        "output_router_logits",
        "use_mrope",
        "freeze_mm_mlp_adapter",
        "tune_mm_mlp_adapter",
        "unfreeze_vision_tower",
        "mm_projector_lr",
        "use_s2",
        "use_unified_vision_chunk",
        "activation_situ_beta",
        "activation_situ_linear_beta",
        "params_dtype",
        "original_max_position_embeddings",
        "n_ctx",
        "model_max_length",
        "max_length",
        "min_length",
        "num_beam_groups",
        "output_gate_type",
        "median_filter_width",
        "classifier_proj_size",
        "relative_attention_max_distance",
        "dense_act_fn",
    }
)
"""Keys whose names look structural but that never change the parameter count."""


def _set(value: Any) -> bool:
    if value is None or value is False:
        return False
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value == 0:
        return False
    return not (isinstance(value, (str, list, dict)) and not value)


_NEVER_MAPPINGS = frozenset({str, int, float, bool, list, type(None)})
"""JSON's scalars and arrays: a value of exactly one of these types is not a Mapping, known
without `isinstance(value, Mapping)` (an ABC check, the costliest step for most keys)."""


def unread_keys(data: Mapping[str, Any], used: set[str], path: str = "") -> list[str]:
    """Dotted names of set, structural-looking keys under `data` that were never consulted."""
    out: list[str] = []
    for key, value in data.items():
        name = f"{path}.{key}" if path else str(key)
        if key in SUBTREES_SKIPPED:
            continue
        if type(value) in _NEVER_MAPPINGS or not isinstance(value, Mapping):
            if name in used or key in NON_STRUCTURAL or not _set(value):
                continue
            if HARMLESS.search(str(key)):
                continue
            if STRUCTURAL.search(str(key)):
                out.append(name)
            continue
        if str(key).endswith("_config"):
            # A sub-model (vision_config, audio_config, text_config, speech_config...): read by
            # its own reader (vision.py, the text reader), or its parameters are missing.
            if name not in used and _set(value):
                out.append(name)
            continue
        if name in used:
            out += unread_keys(value, used, name)
        elif STRUCTURAL.search(str(key)) and _set(value):
            out.append(name)
    return sorted(out)
