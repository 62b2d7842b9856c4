"""The default rules table (data, in order; first match wins) and the match/rule values it is made of.

The default is loud: a change no rule knows is `moderate`, "effect unknown" with the key named,
until a rule says otherwise. Quieter rules need a reason: a key whose effect is known to be nil
(bookkeeping, output flags, a kernel or memory switch, initialisation) is `low`, each with why; a
dropout or auxiliary-loss setting is `low` and says it affects training only; a key added or
removed with exactly its config class's default (transformers' own table) is `low` because the
model reads the same value. Louder rules come from transformers' knowledge and the estimate:
every name of a fact (`n_layer`, `num_layers`, `num_hidden_layers`) gets the same rule
(`classify` matches keys under all their alias names), generation keys follow transformers'
precedence between config.json and generation_config.json, and a key whose change alone moves the
estimate's structure or counts is `high`.

A rule with `when` applies only if that effect check (`tracker.advisories.effects`) returns
evidence for the change in its revision's context; the evidence is added to the rationale.
Rationales may name the key with `{key}`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase

from tracker.advisories.effects import (
    Context,
    Effect,
    class_default,
    classifier_head,
    estimate_moves,
    executed_generation,
    executed_generation_ids,
    executed_limit,
    executed_model,
    executed_no_effect,
    executed_tokenizer_settings,
    executed_tokenizer_special,
    executed_tokenizer_text,
    generation_governs,
    generation_shadowed,
    no_classifier_head,
    not_read_by_class,
    other_gguf_models,
    read_by_class,
    remote_config_names_type,
    renders_differently,
    renders_partly_unknown,
    renders_the_same,
    same_json,
    show,
    token_names,
)
from tracker.advisories.knowledge import MISSING
from tracker.shared.domain import Artifact, Change, ChangeKind, JSONValue, Severity

EXECUTED_PREFIX = "executed-"
"""Rules whose names start so are decided by running transformers (`tracker.advisories.execute`);
every other rule's effect is inferred."""

SEVERITY_RANK: Mapping[Severity, int] = {
    Severity.CRITICAL: 4,
    Severity.HIGH: 3,
    Severity.MODERATE: 2,
    Severity.LOW: 1,
}


@dataclass(frozen=True)
class Match:
    """What a rule or suppression matches; None matches anything, globs use fnmatch (case-sensitive).

    `key` is tried against every name the change's key has (`names`: the key under each alias of
    its last part), so a rule written for one name of a fact matches all of them.
    """

    artifact: frozenset[Artifact] | None = None
    kind: frozenset[ChangeKind] | None = None
    key: str | None = None
    file: str | None = None

    def matches(self, change: Change, names: tuple[str, ...] = ()) -> bool:
        if self.artifact is not None and change.artifact not in self.artifact:
            return False
        if self.kind is not None and change.kind not in self.kind:
            return False
        if self.key is not None:
            key = self.key
            if not any(fnmatchcase(n, key) for n in (names or (change.key,))):
                return False
        return self.file is None or fnmatchcase(change.file, self.file)


@dataclass(frozen=True)
class Rule:
    """One row of the rules table: changes matching `match` (and `when`) get `severity` for `rationale`."""

    name: str
    match: Match
    severity: Severity
    rationale: str
    when: Effect | None = None


def _m(
    artifact: Artifact | tuple[Artifact, ...] | None = None,
    kind: ChangeKind | tuple[ChangeKind, ...] | None = None,
    key: str | None = None,
    file: str | None = None,
) -> Match:
    arts = (artifact,) if isinstance(artifact, Artifact) else artifact
    kinds = (kind,) if isinstance(kind, ChangeKind) else kind
    return Match(
        artifact=frozenset(arts) if arts is not None else None,
        kind=frozenset(kinds) if kinds is not None else None,
        key=key,
        file=file,
    )


A, K, S = Artifact, ChangeKind, Severity
_KEYED = (K.ADDED, K.REMOVED, K.CHANGED, K.TYPE_CHANGED)


def _keys(names: tuple[str, ...], *, children: bool = False) -> tuple[str, ...]:
    """Glob patterns for `names` at top level and nested (`text_config.hidden_size`)."""
    out: list[str] = []
    for n in names:
        out += [n, f"*.{n}"]
        if children:
            out += [f"{n}.*", f"*.{n}.*"]
    return tuple(out)


def _rules(
    prefix: str,
    arts: Artifact | tuple[Artifact, ...],
    keys: tuple[str, ...],
    sev: Severity,
    why: str,
    when: Effect | None = None,
) -> tuple[Rule, ...]:
    return tuple(Rule(f"{prefix}:{k}", _m(arts, key=k), sev, why, when) for k in keys)


def _each(
    prefix: str,
    arts: Artifact | tuple[Artifact, ...],
    whys: Mapping[str, str],
    sev: Severity,
    *,
    nested: bool = True,
    when: Effect | None = None,
) -> tuple[Rule, ...]:
    out: list[Rule] = []
    for key, why in whys.items():
        for pattern in _keys((key,), children=True) if nested else (key,):
            out.append(Rule(f"{prefix}:{pattern}", _m(arts, key=pattern), sev, why, when))
    return tuple(out)


_CONF = (A.CONFIG,)
_CONF_GEN = (A.CONFIG, A.GENERATION_CONFIG)

# --- key lists (names are transformers' standard names where it has one; aliases match too) -------

_TOKEN_KEYS = (
    "eos_token_id",
    "bos_token_id",
    "pad_token_id",
    "unk_token_id",
    "sep_token_id",
    "cls_token_id",
    "mask_token_id",
    "decoder_start_token_id",
    "eos_token",
    "bos_token",
    "pad_token",
    "unk_token",
    "sep_token",
    "cls_token",
    "mask_token",
)
_GENERATION_TOKEN_KEYS = (
    "forced_bos_token_id",
    "forced_eos_token_id",
    "suppress_tokens",
    "begin_suppress_tokens",
    "forced_decoder_ids",
    "bad_words_ids",
    "force_words_ids",
)
_PLACEHOLDER_TOKEN_KEYS = (
    "image_token_id",
    "video_token_id",
    "audio_token_id",
    "boi_token_id",
    "eoi_token_id",
    "image_token_index",
    "vision_start_token_id",
    "vision_end_token_id",
    "vision_token_id",
)
_ARCH_KEYS = (
    "architectures",
    "model_type",
    "hidden_size",
    "intermediate_size",
    "moe_intermediate_size",
    "shared_expert_intermediate_size",
    "num_hidden_layers",
    "num_decoder_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "d_ff",
    "n_inner",
    "num_experts",
    "n_shared_experts",
    "num_experts_per_tok",
    "first_k_dense_replace",
    "moe_layer_freq",
    "decoder_sparse_step",
    "mlp_only_layers",
    "kv_lora_rank",
    "q_lora_rank",
    "qk_nope_head_dim",
    "v_head_dim",
    "multi_query",
    "num_kv_heads",
    "multi_query_group_num",
    "num_mtp_layers",
)
_COMPUTATION: Mapping[str, str] = {
    # activation and gating
    "hidden_act": "activation function changed: every MLP computes a different function",
    "hidden_activation": "activation function changed: every MLP computes a different function",
    "dense_act_fn": "activation function changed: every MLP computes a different function",
    "feed_forward_proj": "FFN type changed (activation and gating): every MLP computes a different function",
    "is_gated_act": "FFN gating changed: every MLP computes a different function",
    "projector_hidden_act": "activation of the multimodal projector changed",
    # normalisation placement and type
    "normalize_before": "normalisation placement changed (pre-norm vs post-norm)",
    "do_layer_norm_before": "normalisation placement changed (pre-norm vs post-norm)",
    "apply_residual_connection_post_layernorm": "residual taken after the norm instead of before: a different computation",
    "add_final_layer_norm": "a final layer norm module was added or removed",
    "layernorm_embedding": "an embedding layer norm was added or removed",
    "normalize_embedding": "embedding normalisation changed",
    "post_layernorm": "normalisation placement changed",
    "use_post_attention_layernorm": "normalisation placement changed",
    "parallel_attn": "attention and MLP run in parallel instead of in sequence (or back)",
    "use_parallel_residual": "attention and MLP run in parallel instead of in sequence (or back)",
    "new_decoder_architecture": "a different decoder block layout",
    "rmsnorm": "normalisation type changed (RMSNorm vs LayerNorm)",
    "norm_type": "normalisation type changed",
    "layer_norm_type": "normalisation type changed",
    "qk_layernorm": "query/key normalisation added or removed",
    "use_qk_norm": "query/key normalisation added or removed",
    "residual_in_fp32": "residual stream precision changed",
    # scaling
    "scale_embedding": "embedding scaling changed: every input is scaled differently",
    "embedding_multiplier": "embedding scaling changed: every input is scaled differently",
    "scale_attn_weights": "attention score scaling changed",
    "scale_attn_by_inverse_layer_idx": "attention score scaling changed",
    "attention_multiplier": "attention score scaling changed",
    "query_pre_attn_scalar": "attention score scaling changed",
    "attn_logit_softcapping": "attention logit soft-capping changed",
    "final_logit_softcapping": "output logit soft-capping changed: every token's probabilities change",
    "residual_multiplier": "residual scaling changed",
    "logits_scaling": "output logit scaling changed: every token's probabilities change",
    "logit_scale": "output logit scaling changed: every token's probabilities change",
    "use_logn_attn": "log-n attention scaling switched: long inputs attend differently",
    "routed_scaling_factor": "expert output scaling changed",
    "norm_topk_prob": "expert routing weights are normalised differently",
    "scoring_func": "expert routing scoring changed",
    "topk_method": "expert selection method changed",
    "n_group": "expert group routing changed",
    "topk_group": "expert group routing changed",
    # positional encoding
    "position_embedding_type": "positional-embedding type changed: positions are encoded differently",
    "rope_theta": "rotary base frequency changed: every position is encoded differently",
    "rope_scaling": "rotary scaling changed: positions are encoded differently",
    "rope_parameters": "rotary parameters changed: positions are encoded differently",
    "rotary_pct": "share of each head that is rotary changed",
    "partial_rotary_factor": "share of each head that is rotary changed",
    "rotary_dim": "share of each head that is rotary changed",
    "rotary_percent": "share of each head that is rotary changed",
    "rotary_emb_base": "rotary base frequency changed: every position is encoded differently",
    "use_dynamic_ntk": "dynamic NTK rotary scaling switched: long inputs are encoded differently",
    "alibi": "ALiBi position biases switched",
    "use_alibi": "ALiBi position biases switched",
    "position_biased_input": "absolute position embeddings switched",
    "relative_attention_num_buckets": "relative position buckets changed",
    "relative_attention_max_distance": "relative position range changed",
    "max_relative_positions": "relative position range changed",
    "no_rope_layers": "which layers use rotary positions changed",
    # attention kinds and local windows
    "layer_types": "per-layer attention kinds changed",
    "attention_types": "per-layer attention kinds changed",
    "attention_layers": "per-layer attention kinds changed",
    "attention_type": "attention kind changed",
    "use_sliding_window": "local (sliding-window) attention switched",
    "max_window_layers": "which layers use local attention changed",
    "sliding_window_pattern": "which layers use local attention changed",
    "global_attn_every_n_layers": "which layers use global attention changed",
    "sliding_window": "local-attention window changed: which earlier tokens each token attends to changes",
    "attention_window": "local-attention window changed: which earlier tokens each token attends to changes",
    "local_window_size": "local-attention window changed",
    "window_size": "local-attention window changed",
    "attention_chunk_size": "chunked-attention span changed",
    "interleaved_qkv": "the layout of the fused query/key/value projection changed: weights are read differently",
    "use_cache_quantization": "KV-cache quantisation switched: attention reads approximate keys and values",
    "use_cache_kernel": "KV-cache quantisation kernels switched",
    "softmax_in_fp32": "attention softmax precision changed",
    # model-level switches
    "is_encoder_decoder": "encoder-decoder switch changed: the model is built and run differently",
    "tie_word_embeddings": "the output head is tied to (or untied from) the input embeddings",
    "tie_encoder_decoder": "encoder and decoder weights are tied (or untied)",
    "vision_feature_layer": "which vision layer feeds the language model changed",
    "vision_feature_select_strategy": "how vision features are selected changed",
}
_DTYPE_KEYS = (
    "torch_dtype",
    "dtype",
    "quantization_config",
    "params_dtype",
    "bf16",
    "fp16",
    "fp32",
    "mamba_ssm_dtype",
)
_POSITION_LIMIT_KEYS = ("max_position_embeddings", "seq_length", "n_ctx", "max_sequence_length")
_BOOKKEEPING: Mapping[str, str] = {
    "transformers_version": "the library version that saved the file; not read when loading",
    "_name_or_path": "the path the saving process loaded from; informational only",
    "name_or_path": "the path the saving process loaded from; informational only",
    "_commit_hash": "the revision the saving process loaded; transformers 5 drops it on load",
    "_from_model_config": "marks a generation config derived from config.json; informational only",
    "_attn_implementation_autoset": "a note of the saving process; not read when loading",
    "torchscript": "a TorchScript export switch of transformers 4; transformers 5 does not read it",
    "use_bfloat16": "a TensorFlow/JAX-era switch; PyTorch transformers does not read it",
    "tf_legacy_loss": "a TensorFlow loss switch; PyTorch transformers does not read it",
    "finetuning_task": "a label naming the task a checkpoint was fine-tuned on; informational only",
    "special_tokens_map_file": "the path a tokenizer was saved from; not read when loading",
    "tokenizer_file": "the path a tokenizer was saved from; the repo's own tokenizer.json is read",
    "pretraining_pp": "the pipeline-parallel degree of pretraining; no transformers code reads it",
    "pretraining_tp": "the tensor-parallel degree of pretraining; transformers 5 reads it only in "
    "BLOOM's slow_but_exact mode, to reproduce the pretraining's matmul order (rounding only)",
}
_OUTPUT_FLAGS: Mapping[str, str] = {
    name: "output flag: what forward or generate returns besides the result, not the result itself"
    for name in (
        "output_attentions",
        "output_hidden_states",
        "return_dict",
        "use_return_dict",
        "output_scores",
        "output_logits",
        "return_dict_in_generate",
        "keys_to_ignore_at_inference",
    )
}
_RUNTIME_ONLY: Mapping[str, str] = {
    "use_cache": "whether generation keeps the KV cache: speed and memory only, the outputs are the same",
    "chunk_size_feed_forward": "computes the MLP in chunks to save memory: the outputs are the same",
    "gradient_checkpointing": "recomputes activations during training to save memory: the outputs are the same",
    "use_flash_attn": "selects the attention kernel: the same attention, faster or with less memory",
    "attn_implementation": "selects the attention kernel: the same attention, faster or with less memory",
    "_attn_implementation": "selects the attention kernel: the same attention, faster or with less memory",
    "initializer_range": "initialisation of newly created weights only: loading pretrained weights ignores it",
    "initializer_factor": "initialisation of newly created weights only: loading pretrained weights ignores it",
    "init_std": "initialisation of newly created weights only: loading pretrained weights ignores it",
}
_TRAINING_ONLY = (
    "*dropout*",
    "*_pdrop",
    "*dropout_prob*",
    "layerdrop",
    "encoder_layerdrop",
    "decoder_layerdrop",
    "drop_path_rate",
    "router_jitter_noise",
    "router_aux_loss_coef",
    "aux_loss_alpha",
    "seq_aux",
    "z_loss_coef",
    "router_z_loss_coef",
    "output_router_logits",
    "problem_type",
    "label_smoothing",
)
_LABEL_KEYS = ("id2label", "label2id", "num_labels", "_num_labels")
_TOKENIZER_MODERATE: Mapping[str, str] = {
    "padding_side": "batches are padded on the other side: batched generation with a decoder-only "
    "model needs left padding, so batched outputs can change",
    "truncation_side": "long inputs are cut on the other side: a different part of the text is kept",
    "model_max_length": "the length the tokenizer truncates to (or warns at) changed",
    "tokenizer_class": "which tokenizer class AutoTokenizer builds changed",
    "clean_up_tokenization_spaces": "decoded text is cleaned up differently (spaces before punctuation)",
    "spaces_between_special_tokens": "decoded text spaces special tokens differently",
    "model_input_names": "which inputs the tokenizer returns changed",
}
_TOKENIZER_IGNORED: Mapping[str, str] = {
    "use_fast": "transformers 5.24.0's AutoTokenizer always builds the tokenizers-backed class and "
    'ignores `use_fast` (AutoTokenizer.from_pretrained: "V5: Always use fast tokenizers")',
}
_TOKENIZER_HIGH: Mapping[str, str] = {
    "do_lower_case": "text is lower-cased before tokenizing (or no longer): the same text encodes differently",
    "strip_accents": "accents are stripped before tokenizing (or no longer): the same text encodes differently",
    "tokenize_chinese_chars": "CJK characters are split differently: the same text encodes differently",
    "legacy": "the tokenizer's legacy mode switched: text after special tokens encodes differently",
    "split_special_tokens": "special tokens in text are split (or no longer): prompts encode differently",
    "add_prefix_space": "a space is prepended (or no longer): the first word encodes differently",
}

# v4-era keys transformers 4's PretrainedConfig wrote into every config with these values; a config
# class of transformers 5 that does not declare them reads nothing, which is the same as the value.
LEGACY_DEFAULTS: Mapping[str, JSONValue] = {
    "pruned_heads": {},
    "is_decoder": False,
    "add_cross_attention": False,
    "tie_encoder_decoder": False,
    "cross_attention_hidden_size": None,
    "tokenizer_class": None,
    "prefix": None,
    "task_specific_params": None,
    "torchscript": False,
    "use_bfloat16": False,
    "tf_legacy_loss": False,
    "output_attentions": False,
    "output_hidden_states": False,
    "return_dict": True,
}


def legacy_default(change: Change, ctx: Context | None) -> str | None:
    """A v4-era key added or removed with the value transformers 4 wrote by default, that the
    config class of transformers 5 does not declare."""
    if change.artifact is not A.CONFIG or change.kind not in (K.ADDED, K.REMOVED):
        return None
    if change.key not in LEGACY_DEFAULTS:
        return None
    value = change.after if change.kind is K.ADDED else change.before
    if not same_json(value, LEGACY_DEFAULTS[change.key]):
        return None
    if ctx is not None and ctx.before is not None and ctx.before.config.value is not None:
        cls = ctx.knowledge.class_at(ctx.before.config.value, ())
        if cls is not None and cls.default(change.key) is not MISSING:
            return None  # the class declares it: `class_default` decides
    what = "added" if change.kind is K.ADDED else "removed"
    return (
        f"`{change.key}` = {show(value)} is the value transformers 4 wrote into every config; "
        f"{what}, the model reads the same"
    )


_UNREADABLE_WHY = (
    "tracker could not read the file at this revision, so none of its checks ran; treated as high "
    "(not critical: nothing is known to have changed, but nothing can be ruled out either)"
)
_TOKEN_WHY = "token ids changed: generation starts, stops, pads or is steered by different tokens"
_VOCAB_WHY = "vocabulary or token ids changed: the same text encodes to different ids than the weights expect"
_ARCH_WHY = "architecture or sizes changed: the model built from this config is a different model"
_DTYPE_WHY = "weight or compute dtype changed: numerics, memory and kernels differ"
_PIPELINE_WHY = "tokenization pipeline changed: the same text may encode to different ids"

DEFAULT_RULES: tuple[Rule, ...] = (
    Rule(
        "custom-code-removed",
        _m(A.CUSTOM_CODE, K.REMOVED),
        S.MODERATE,
        "custom code removed: loading with trust_remote_code now fails or falls back to built-in classes",
    ),
    Rule(
        "custom-code",
        _m(A.CUSTOM_CODE),
        S.CRITICAL,
        "custom code added or changed: it runs on your machine under trust_remote_code",
    ),
    Rule(
        "pickle-removed",
        _m(A.EXECUTABLE, K.REMOVED),
        S.LOW,
        "a pickle-based file was removed: nothing new runs at load time",
    ),
    Rule(
        "pickle",
        _m(A.EXECUTABLE),
        S.CRITICAL,
        "a pickle-based weight file was added or changed: unpickling it runs code when loaded",
    ),
    Rule("unreadable", _m(kind=K.UNREADABLE), S.HIGH, _UNREADABLE_WHY),
    # whole files
    Rule(
        "generation-file-removed",
        _m(A.GENERATION_CONFIG, K.REMOVED, key=""),
        S.MODERATE,
        "generation_config.json was removed: transformers now builds generation defaults from "
        "config.json, or its own defaults",
    ),
    Rule(
        "file-removed",
        _m((A.CONFIG, A.TOKENIZER, A.PROCESSOR), K.REMOVED, key=""),
        S.HIGH,
        "a file transformers loads was removed: loading fails or falls back to defaults",
    ),
    Rule(
        "file-added",
        _m((A.CONFIG, A.GENERATION_CONFIG, A.TOKENIZER, A.PROCESSOR), K.ADDED, key=""),
        S.MODERATE,
        "a file transformers reads was added: its settings now apply where defaults did",
    ),
    # executed: transformers' own code on both sides says nothing the model or generate() reads
    # changed (`executed-*` rules decide before every inferred rule they can speak for)
    Rule(
        EXECUTED_PREFIX + "no-effect",
        _m((A.CONFIG, A.SPECIAL_TOKENS, A.GENERATION_CONFIG, A.TOKENIZER), _KEYED),
        S.LOW,
        "no effective change",
        executed_no_effect,
    ),
    # executed: the tokenizer AutoTokenizer builds differs (before the inferred tokenizer rules)
    Rule(
        EXECUTED_PREFIX + "tokenizer-text",
        _m((A.TOKENIZER, A.SPECIAL_TOKENS), _KEYED),
        S.CRITICAL,
        "the same text encodes to different ids than the weights expect",
        executed_tokenizer_text,
    ),
    Rule(
        EXECUTED_PREFIX + "tokenizer-special",
        _m((A.TOKENIZER, A.SPECIAL_TOKENS), _KEYED),
        S.HIGH,
        "the tokenizer's special tokens or their ids changed (or it no longer loads): prompts "
        "start, stop or pad on different tokens",
        executed_tokenizer_special,
    ),
    Rule(
        EXECUTED_PREFIX + "tokenizer-settings",
        _m((A.TOKENIZER, A.SPECIAL_TOKENS), _KEYED),
        S.MODERATE,
        "how the tokenizer pads, truncates or decodes changed; texts encode to the same ids",
        executed_tokenizer_settings,
    ),
    # the value the model reads did not change
    Rule(
        "class-default",
        _m((A.CONFIG, A.SPECIAL_TOKENS), (K.ADDED, K.REMOVED), file="config.json"),
        S.LOW,
        "effective value unchanged",
        class_default,
    ),
    Rule(
        "legacy-default",
        _m(A.CONFIG, (K.ADDED, K.REMOVED)),
        S.LOW,
        "effective value unchanged",
        legacy_default,
    ),
    *_rules(
        "vocabulary",
        A.TOKENIZER,
        (
            "vocab",
            "vocab.*",
            "vocab_size",
            "merges",
            "merges.*",
            "added_tokens*",
            "model.vocab*",
            "model_type",
        ),
        S.CRITICAL,
        _VOCAB_WHY,
    ),
    *_rules(
        "vocabulary",
        (A.CONFIG, A.SPECIAL_TOKENS),
        (*_keys(("vocab_size",)), "added_tokens*", "added_tokens_decoder*"),
        S.CRITICAL,
        _VOCAB_WHY,
    ),
    # GGUF: each model file (a quant, or a split's shards) is a download of its own; a repo's
    # quants are alternatives, so one removed breaks only its own users
    Rule(
        "gguf-quant-removed",
        _m(A.WEIGHTS, K.REMOVED, key="", file="*.gguf"),
        S.HIGH,
        "a GGUF model file was removed: its users can no longer download it; the repo's other "
        "quant files, and their users, are unaffected",
        other_gguf_models,
    ),
    Rule(
        "gguf-last-removed",
        _m(A.WEIGHTS, K.REMOVED, key="", file="*.gguf"),
        S.CRITICAL,
        "the repo's last GGUF model file was removed: nothing is left to download",
    ),
    Rule(
        "gguf-quant-added",
        _m(A.WEIGHTS, K.ADDED, key="", file="*.gguf"),
        S.LOW,
        "a GGUF model file was added: a new download; the existing files and their users are "
        "unaffected",
    ),
    Rule(
        "gguf-requantized",
        _m(A.WEIGHTS, K.CHANGED, key="quant_census"),
        S.HIGH,
        "a GGUF model file was re-quantized under the same name: its tensors' ggml types or sizes "
        "changed, so its users get different outputs, memory use and speed",
    ),
    Rule(
        "gguf-reuploaded",
        _m(A.WEIGHTS, K.CHANGED, key="reuploaded"),
        S.LOW,
        "a GGUF model file was re-uploaded with other bytes under an unchanged header (the same "
        "keys, template and quant census): its weights' values changed (a re-quantization with "
        "another importance matrix, a corrected conversion), so outputs may differ slightly; "
        "nothing its users configure changes",
    ),
    Rule(
        "tensor-shapes",
        _m(A.WEIGHTS, (K.RESHAPED, K.ADDED, K.REMOVED)),
        S.CRITICAL,
        "tensor shapes or the set of tensors changed: code and checkpoints built for the old "
        "layout break, and missing tensors are silently re-initialised on load",
    ),
    Rule(
        "tensor-renamed",
        _m(A.WEIGHTS, K.RENAMED),
        S.HIGH,
        "a tensor was renamed: adapters, quantisation recipes and code that address it by name "
        "break, and a name the model code does not expect is re-initialised on load",
    ),
    Rule(
        "weight-values",
        _m(A.WEIGHTS, K.CHANGED, key="content"),
        S.HIGH,
        "shard files have new content: the weights, and so the model's outputs, changed (even "
        "where tensor names, shapes and dtypes did not)",
    ),
    Rule(
        "weight-dtype",
        _m(A.WEIGHTS, K.RETYPED),
        S.HIGH,
        _DTYPE_WHY,
    ),
    *_rules("weight-dtype", A.WEIGHTS, ("dtypes",), S.HIGH, _DTYPE_WHY),
    Rule(
        "weight-duplicates",
        _m(A.WEIGHTS, key="duplicates"),
        S.MODERATE,
        "tensor names stored in more than one shard changed: which copy loads depends on the "
        "order the loader reads shards in, so differing copies make the loaded weights ambiguous",
    ),
    Rule(
        "weight-layout",
        _m(A.WEIGHTS, key="shards"),
        S.LOW,
        "how the checkpoint is split into files changed: loading reads the same tensors",
    ),
    Rule(
        "weight-layout",
        _m(A.WEIGHTS, key="total_bytes"),
        S.LOW,
        "the checkpoint's total size changed; the tensor changes listed carry the effect",
    ),
    # chat templates
    Rule(
        "chat-template-removed",
        _m(A.CHAT_TEMPLATE, K.REMOVED),
        S.HIGH,
        "a chat template was removed: prompts that used it are now built differently",
    ),
    Rule(
        "chat-template-rendered",
        _m(A.CHAT_TEMPLATE, (K.RENDERED, K.BROKEN)),
        S.HIGH,
        "the chat template renders conversations differently (or no longer renders): prompts the "
        "model sees change",
    ),
    Rule(
        "chat-template-added",
        _m(A.CHAT_TEMPLATE, K.ADDED),
        S.MODERATE,
        "a chat template was added: apply_chat_template now builds prompts with it",
    ),
    Rule(
        "chat-template-same-output",
        _m(A.CHAT_TEMPLATE, K.CHANGED),
        S.LOW,
        "the template's source changed, but every canonical conversation renders exactly as before",
        renders_the_same,
    ),
    Rule(
        "chat-template-partly-unknown",
        _m(A.CHAT_TEMPLATE, K.CHANGED),
        S.MODERATE,
        "the template's source changed and no conversation it could render changed",
        renders_partly_unknown,
    ),
    Rule(
        "chat-template-source",
        _m(A.CHAT_TEMPLATE, K.CHANGED),
        S.LOW,
        "the template's source edit; its effect is the rendered changes listed with it",
        renders_differently,
    ),
    # known to have no effect on the outputs
    *_each(
        "bookkeeping",
        (A.CONFIG, A.GENERATION_CONFIG, A.TOKENIZER, A.PROCESSOR),
        _BOOKKEEPING,
        S.LOW,
    ),
    *_each("output-flag", _CONF_GEN, _OUTPUT_FLAGS, S.LOW),
    *_each("runtime-only", _CONF_GEN, _RUNTIME_ONLY, S.LOW),
    *_rules(
        "training-only",
        A.CONFIG,
        _keys(_TRAINING_ONLY),
        S.LOW,
        "affects training only (dropout, auxiliary losses and the loss choice are off at inference)",
    ),
    # executed: what transformers builds or generates differs (after the keys known to matter
    # only in training or to speed and memory, which the model's code also reads)
    Rule(
        EXECUTED_PREFIX + "model",
        _m((A.CONFIG, A.SPECIAL_TOKENS), _KEYED),
        S.HIGH,
        "the model transformers builds or runs from this config changes",
        executed_model,
    ),
    Rule(
        EXECUTED_PREFIX + "generation-ids",
        _m((A.CONFIG, A.SPECIAL_TOKENS, A.GENERATION_CONFIG), _KEYED),
        S.HIGH,
        "generation starts, stops or pads at different tokens",
        executed_generation_ids,
    ),
    Rule(
        EXECUTED_PREFIX + "generation",
        _m((A.CONFIG, A.SPECIAL_TOKENS, A.GENERATION_CONFIG), _KEYED),
        S.MODERATE,
        "generation defaults changed: generate() output differs unless you pass your own settings",
        executed_generation,
    ),
    Rule(
        EXECUTED_PREFIX + "limit",
        _m((A.CONFIG,), _KEYED),
        S.MODERATE,
        "maximum context changed: longer inputs are now accepted or refused, and cache sizing "
        "follows",
        executed_limit,
    ),
    # generation keys of config.json that generation_config.json makes irrelevant
    Rule(
        "generation-shadowed",
        _m(A.CONFIG, _KEYED),
        S.LOW,
        "shadowed generation setting",
        generation_shadowed,
    ),
    *_rules(
        "special-token-ids",
        (A.SPECIAL_TOKENS, A.CONFIG, A.GENERATION_CONFIG, A.TOKENIZER),
        _keys(_TOKEN_KEYS + _GENERATION_TOKEN_KEYS + _PLACEHOLDER_TOKEN_KEYS),
        S.HIGH,
        _TOKEN_WHY,
        token_names,
    ),
    *_rules(
        "special-token-insertion",
        (A.TOKENIZER, A.SPECIAL_TOKENS),
        ("add_bos_token", "add_eos_token"),
        S.HIGH,
        "automatic bos/eos insertion changed: every encoded prompt gets different ids",
    ),
    Rule(
        "remote-config-model-type",
        _m(A.CONFIG, _KEYED, key="model_type"),
        S.LOW,
        "`model_type` selects no config class here",
        remote_config_names_type,
    ),
    *_rules("architecture", A.CONFIG, _keys(_ARCH_KEYS), S.HIGH, _ARCH_WHY),
    # a switch the config class does not read switches nothing (`undeclared-key` says so below)
    *_each("computation", A.CONFIG, _COMPUTATION, S.HIGH, when=read_by_class),
    *_rules("weight-dtype", A.CONFIG, _keys(_DTYPE_KEYS, children=True), S.HIGH, _DTYPE_WHY),
    Rule(
        "architecture-effect",
        _m(A.CONFIG, _KEYED),
        S.HIGH,
        "the model built from this config changes",
        estimate_moves,
    ),
    *_rules(
        "classifier-labels",
        A.CONFIG,
        _LABEL_KEYS,
        S.HIGH,
        "classification labels changed: the classifier's outputs are named or sized differently",
        classifier_head,
    ),
    *_rules(
        "labels-unused",
        A.CONFIG,
        _LABEL_KEYS,
        S.LOW,
        "classification labels changed, but only a classification head reads them",
        no_classifier_head,
    ),
    Rule(
        "generation-defaults",
        _m(_CONF_GEN, _KEYED),
        S.MODERATE,
        "generation defaults changed: generate() output differs unless you pass your own settings",
        generation_governs,
    ),
    *_rules(
        "position-limits",
        A.CONFIG,
        _keys(_POSITION_LIMIT_KEYS),
        S.MODERATE,
        "maximum context changed: longer inputs are now accepted or refused, and cache sizing follows",
        read_by_class,
    ),
    *_rules(
        "norm-epsilon",
        A.CONFIG,
        _keys(("layer_norm_eps",)),
        S.MODERATE,
        "the normalisation epsilon changed: every norm's output shifts slightly (numerics)",
    ),
    Rule(
        "pipeline-settings",
        _m(A.CONFIG, key="task_specific_params*"),
        S.MODERATE,
        "per-task settings that transformers pipelines apply (e.g. summarization's generation "
        "settings) changed",
    ),
    *_rules(
        "license",
        A.MODEL_CARD,
        ("license", "license_name", "license_link", "license.*", "extra_gated*"),
        S.HIGH,
        "license or access terms changed: your right to use the model may have changed",
    ),
    Rule(
        "preflight-import-broken",
        _m(A.ESTIMATE, K.BROKEN, key="preflight.remote_code.*"),
        S.HIGH,
        "the remote code stops importing on a transformers version the watchlist pins: "
        "from_pretrained(..., trust_remote_code=True) fails there",
    ),
    Rule(
        "preflight-import-restored",
        _m(A.ESTIMATE, K.CHANGED, key="preflight.remote_code.transformers-*"),
        S.LOW,
        "the remote code imports again on a pinned transformers version: nothing that worked breaks",
    ),
    Rule(
        "preflight-native-build",
        _m(A.ESTIMATE, key="preflight.remote_code.native_builds"),
        S.MODERATE,
        "the remote code's packages that need a native (CUDA/C++) build changed: installing it "
        "may now need a compiler and the CUDA toolkit, or no longer does",
    ),
    Rule(
        "preflight-answer-found",
        _m(A.ESTIMATE, K.ADDED, key="preflight.*"),
        S.LOW,
        "a preflight answer the previous revision could not give is now known (a first safetensors "
        "upload, a first or repaired config.json): nothing that worked breaks; the change states it",
    ),
    Rule(
        "preflight-capacity",
        _m(A.ESTIMATE, key="preflight.capacity"),
        S.MODERATE,
        "what it takes to fetch and hold the checkpoint changed (a re-upload in another dtype, a "
        "quantized variant): cards, boxes and download time follow",
    ),
    Rule(
        "preflight-lora-targets",
        _m(A.ESTIMATE, key="preflight.lora.*"),
        S.HIGH,
        "a LoRA target name resolves to different modules: adapters trained with these targets no "
        "longer match the model, and a training config adapts different layers",
    ),
    Rule(
        "card-fit-lost",
        _m(A.ESTIMATE, K.FIT_LOST),
        S.HIGH,
        "a card no longer fits this setup in the estimate: deployments sized for it will run out of memory",
    ),
    Rule(
        "card-fit-gained",
        _m(A.ESTIMATE, K.FIT_GAINED),
        S.LOW,
        "a card now fits this setup in the estimate: nothing that worked breaks",
    ),
    Rule(
        "parameter-count",
        _m(A.ESTIMATE, key="params.*"),
        S.MODERATE,
        "the estimated parameter count changed",
    ),
    Rule(
        "estimate-figures",
        _m(A.ESTIMATE),
        S.LOW,
        "an estimate figure moved (memory, batch sizes); the config changes listed carry the effect",
    ),
    Rule("tokenizer-pipeline", _m(A.TOKENIZER, key="normalizer*"), S.HIGH, _PIPELINE_WHY),
    *_rules(
        "tokenizer-pipeline",
        A.TOKENIZER,
        ("pre_tokenizer*", "post_processor*", "decoder*", "model.*", "model"),
        S.HIGH,
        _PIPELINE_WHY,
    ),
    *_each("tokenizer-pipeline", A.TOKENIZER, _TOKENIZER_HIGH, S.HIGH, nested=False),
    *_each("tokenizer-ignored", A.TOKENIZER, _TOKENIZER_IGNORED, S.LOW, nested=False),
    *_each("tokenizer-settings", A.TOKENIZER, _TOKENIZER_MODERATE, S.MODERATE, nested=False),
    Rule(
        "processor",
        _m(A.PROCESSOR),
        S.MODERATE,
        "input preprocessing changed: the same inputs reach the model differently",
    ),
    Rule(
        "model-card",
        _m(A.MODEL_CARD),
        S.LOW,
        "model card text or metadata changed: documentation, no effect on loading or outputs",
    ),
    Rule(
        "broken",
        _m(kind=K.BROKEN),
        S.HIGH,
        "a file that parsed before no longer does: loading it fails",
    ),
    Rule(
        "generation-custom-entry",
        _m(A.GENERATION_CONFIG, _KEYED),
        S.MODERATE,
        "effect unknown: `{key}` is not a GenerationConfig field; transformers keeps it as a "
        "custom entry that only custom generation code reads",
    ),
    Rule(
        "undeclared-key",
        _m(A.CONFIG, _KEYED),
        S.MODERATE,
        "effect unknown",
        not_read_by_class,
    ),
    Rule(
        "effect-unknown",
        Match(),
        S.MODERATE,
        "effect unknown: no rule knows what `{key}` does, so it is treated as moderate until one says otherwise",
    ),
)
