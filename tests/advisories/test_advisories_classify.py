"""The rules table: one case per default rule, overrides before defaults, suppressions, validation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from advkit import ch, snap

from tracker.advisories.classify import (
    DEFAULT_RULES,
    Context,
    classify,
    highest,
    parse_overrides,
)
from tracker.shared.domain import Artifact as A
from tracker.shared.domain import Change
from tracker.shared.domain import ChangeKind as K
from tracker.shared.domain import Severity as S
from tracker.shared.errors import ConfigError

CONFIGS = Path(__file__).resolve().parents[1] / "data" / "configs"

CASES = [
    # critical
    (
        ch(A.CUSTOM_CODE, K.ADDED, "auto_map.AutoModel", None, "modeling_x.X", file="config.json"),
        S.CRITICAL,
        "custom-code",
    ),
    (
        ch(A.CUSTOM_CODE, K.CHANGED, "modeling_deepseek.py", "a", "b", file="modeling_deepseek.py"),
        S.CRITICAL,
        "custom-code",
    ),
    (
        ch(A.EXECUTABLE, K.ADDED, "pytorch_model.bin", None, "sha", file="pytorch_model.bin"),
        S.CRITICAL,
        "pickle",
    ),
    (
        ch(A.EXECUTABLE, K.CHANGED, "pytorch_model.bin", "a", "b", file="pytorch_model.bin"),
        S.CRITICAL,
        "pickle",
    ),
    (
        ch(A.TOKENIZER, K.CHANGED, "vocab_size", 32000, 32064, file="tokenizer.json"),
        S.CRITICAL,
        "vocabulary:vocab_size",
    ),
    (
        ch(A.TOKENIZER, K.CHANGED, "added_tokens[32000]", "<a>", "<b>", file="tokenizer.json"),
        S.CRITICAL,
        "vocabulary:added_tokens*",
    ),
    (
        ch(A.TOKENIZER, K.CHANGED, "merges", 1, 2, file="tokenizer.json"),
        S.CRITICAL,
        "vocabulary:merges",
    ),
    (
        ch(A.TOKENIZER, K.CHANGED, "model_type", "BPE", "Unigram", file="tokenizer.json"),
        S.CRITICAL,
        "vocabulary:model_type",
    ),
    (
        ch(A.WEIGHTS, K.CHANGED, "content", None, 4, file=""),
        S.HIGH,
        "weight-values",
    ),
    (ch(A.CONFIG, K.CHANGED, "vocab_size", 151936, 152064), S.CRITICAL, "vocabulary:vocab_size"),
    (
        ch(A.CONFIG, K.CHANGED, "text_config.vocab_size", 1, 2),
        S.CRITICAL,
        "vocabulary:*.vocab_size",
    ),
    (
        ch(
            A.WEIGHTS,
            K.RESHAPED,
            "model.embed_tokens.weight",
            [32000, 4096],
            [32064, 4096],
            file="model.safetensors",
        ),
        S.CRITICAL,
        "tensor-shapes",
    ),
    (
        ch(A.WEIGHTS, K.REMOVED, "lm_head.weight", [1], None, file="model.safetensors"),
        S.CRITICAL,
        "tensor-shapes",
    ),
    # GGUF (issue 28): without the revision, a quant file removed is taken as the last one
    (
        ch(A.WEIGHTS, K.REMOVED, "", "x.Q4_K_M.gguf", None, file="x.Q4_K_M.gguf"),
        S.CRITICAL,
        "gguf-last-removed",
    ),
    (
        ch(A.WEIGHTS, K.ADDED, "", None, "x.Q8_0.gguf", file="x.Q8_0.gguf"),
        S.LOW,
        "gguf-quant-added",
    ),
    (
        ch(
            A.WEIGHTS,
            K.CHANGED,
            "quant_census",
            {"Q4_K": {"tensors": 1, "bytes": 144}},
            {"Q8_0": {"tensors": 1, "bytes": 272}},
            file="x.gguf",
        ),
        S.HIGH,
        "gguf-requantized",
    ),
    (
        ch(
            A.WEIGHTS,
            K.CHANGED,
            "reuploaded",
            {"x.gguf": "a" * 64},
            {"x.gguf": "b" * 64},
            file="x.gguf",
        ),
        S.LOW,
        "gguf-reuploaded",
    ),
    # high
    (
        ch(A.CHAT_TEMPLATE, K.RENDERED, "tool_call", "a", "b", file="tokenizer_config.json"),
        S.HIGH,
        "chat-template-rendered",
    ),
    (
        ch(A.CHAT_TEMPLATE, K.BROKEN, "source", "a", "b", file="tokenizer_config.json"),
        S.HIGH,
        "chat-template-rendered",
    ),
    (
        ch(A.SPECIAL_TOKENS, K.CHANGED, "eos_token_id", 2, 32000, file="generation_config.json"),
        S.HIGH,
        "special-token-ids:eos_token_id",
    ),
    (
        ch(
            A.SPECIAL_TOKENS,
            K.CHANGED,
            "eos_token",
            "</s>",
            "<|im_end|>",
            file="tokenizer_config.json",
        ),
        S.HIGH,
        "special-token-ids:eos_token",
    ),
    (
        ch(A.GENERATION_CONFIG, K.CHANGED, "pad_token_id", 0, 2, file="generation_config.json"),
        S.HIGH,
        "special-token-ids:pad_token_id",
    ),
    (ch(A.CONFIG, K.CHANGED, "bos_token_id", 1, 0), S.HIGH, "special-token-ids:bos_token_id"),
    (
        ch(A.CONFIG, K.CHANGED, "architectures", ["MistralForCausalLM"], ["MixtralForCausalLM"]),
        S.HIGH,
        "architecture:architectures",
    ),
    (
        ch(A.CONFIG, K.CHANGED, "model_type", "mistral", "mixtral"),
        S.HIGH,
        "architecture:model_type",
    ),
    (
        ch(A.CONFIG, K.CHANGED, "text_config.hidden_size", 4096, 5120),
        S.HIGH,
        "architecture:*.hidden_size",
    ),
    (
        ch(A.CONFIG, K.CHANGED, "torch_dtype", "float32", "bfloat16"),
        S.HIGH,
        "weight-dtype:torch_dtype",
    ),
    (
        ch(A.WEIGHTS, K.RETYPED, "model.norm.weight", "F32", "BF16", file="model.safetensors"),
        S.HIGH,
        "weight-dtype",
    ),
    (
        ch(A.WEIGHTS, K.CHANGED, "dtypes", {"F32": 1}, {"BF16": 1}, file=""),
        S.HIGH,
        "weight-dtype:dtypes",
    ),
    (
        ch(A.MODEL_CARD, K.CHANGED, "license", "mit", "other", file="README.md"),
        S.HIGH,
        "license:license",
    ),
    (
        ch(A.ESTIMATE, K.FIT_LOST, "cards.RTX-4090-24GB.serve", True, False, file=""),
        S.HIGH,
        "card-fit-lost",
    ),
    (
        ch(A.CONFIG, K.UNREADABLE, "", None, "invalid JSON", file="config.json"),
        S.HIGH,
        "unreadable",
    ),
    (
        ch(A.TOKENIZER, K.CHANGED, "normalizer", {"type": "NFC"}, None, file="tokenizer.json"),
        S.HIGH,
        "tokenizer-pipeline",
    ),
    (ch(A.CONFIG, K.BROKEN, "", "{}", "{", file="config.json"), S.HIGH, "broken"),
    (
        ch(A.CHAT_TEMPLATE, K.REMOVED, "tool_use", "{{ x }}", None, file="tokenizer_config.json"),
        S.HIGH,
        "chat-template-removed",
    ),
    (
        ch(A.TOKENIZER, K.CHANGED, "add_bos_token", True, False, file="tokenizer_config.json"),
        S.HIGH,
        "special-token-insertion:add_bos_token",
    ),
    (
        ch(A.CONFIG, K.CHANGED, "rope_scaling.factor", 8.0, 32.0),
        S.HIGH,
        "computation:rope_scaling.*",
    ),
    (
        ch(A.CONFIG, K.ADDED, "rope_scaling", None, {"type": "yarn"}),
        S.HIGH,
        "computation:rope_scaling",
    ),
    (
        ch(A.CONFIG, K.REMOVED, "sliding_window", 4096, None),
        S.HIGH,
        "computation:sliding_window",
    ),
    (
        ch(A.CONFIG, K.CHANGED, "feed_forward_proj", "gated-gelu", "relu"),
        S.HIGH,
        "computation:feed_forward_proj",
    ),
    (
        ch(A.CONFIG, K.CHANGED, "text_config.hidden_activation", "gelu", "silu"),
        S.HIGH,
        "computation:*.hidden_activation",
    ),
    (
        ch(A.CONFIG, K.ADDED, "quantization_config", None, {"quant_method": "fp8"}),
        S.HIGH,
        "weight-dtype:quantization_config",
    ),
    (
        ch(A.WEIGHTS, K.RENAMED, "lm_head.weight", "a", "b", file="model.safetensors"),
        S.HIGH,
        "tensor-renamed",
    ),
    (
        ch(A.CONFIG, K.REMOVED, "", "config.json", None),
        S.HIGH,
        "file-removed",
    ),
    # moderate
    (
        ch(A.GENERATION_CONFIG, K.CHANGED, "temperature", 0.6, 0.7, file="generation_config.json"),
        S.MODERATE,
        "generation-defaults",
    ),
    (
        ch(A.CONFIG, K.CHANGED, "num_beams", 4, 1),
        S.MODERATE,
        "generation-defaults",
    ),
    (
        ch(A.GENERATION_CONFIG, K.ADDED, "my_setting", None, 3, file="generation_config.json"),
        S.MODERATE,
        "generation-custom-entry",
    ),
    (
        ch(
            A.GENERATION_CONFIG,
            K.REMOVED,
            "",
            "generation_config.json",
            None,
            file="generation_config.json",
        ),
        S.MODERATE,
        "generation-file-removed",
    ),
    (
        ch(A.TOKENIZER, K.ADDED, "", None, "tokenizer_config.json", file="tokenizer_config.json"),
        S.MODERATE,
        "file-added",
    ),
    (
        ch(A.CONFIG, K.CHANGED, "max_position_embeddings", 4096, 32768),
        S.MODERATE,
        "position-limits:max_position_embeddings",
    ),
    (
        ch(A.CONFIG, K.CHANGED, "layer_norm_epsilon", 1e-5, 1e-6),
        S.MODERATE,
        "norm-epsilon:layer_norm_eps",
    ),
    (
        ch(A.CONFIG, K.ADDED, "task_specific_params", None, {"summarization": {"num_beams": 4}}),
        S.MODERATE,
        "pipeline-settings",
    ),
    (
        ch(A.TOKENIZER, K.ADDED, "padding_side", None, "left", file="tokenizer_config.json"),
        S.MODERATE,
        "tokenizer-settings:padding_side",
    ),
    (
        ch(A.TOKENIZER, K.REMOVED, "use_fast", False, None, file="tokenizer_config.json"),
        S.LOW,
        "tokenizer-ignored:use_fast",
    ),
    (
        ch(A.ESTIMATE, K.CHANGED, "params.total", 7_241_732_096, 46_702_792_704, file=""),
        S.MODERATE,
        "parameter-count",
    ),
    (
        ch(A.CUSTOM_CODE, K.REMOVED, "auto_map.AutoModel", "x", None),
        S.MODERATE,
        "custom-code-removed",
    ),
    (
        ch(A.PROCESSOR, K.CHANGED, "size.height", 224, 336, file="preprocessor_config.json"),
        S.MODERATE,
        "processor",
    ),
    (
        ch(A.WEIGHTS, K.CHANGED, "duplicates", [], ["lm_head.weight: a, b"], file=""),
        S.MODERATE,
        "weight-duplicates",
    ),
    (
        ch(A.CHAT_TEMPLATE, K.ADDED, "source", None, {"lines": 3}, file="chat_template.jinja"),
        S.MODERATE,
        "chat-template-added",
    ),
    (
        ch(A.CONFIG, K.ADDED, "deepstack_visual_indexes", None, [8, 16]),
        S.MODERATE,
        "effect-unknown",
    ),
    (
        # a template source change without the differ's render facts (stored before they existed)
        ch(A.CHAT_TEMPLATE, K.CHANGED, "source", "a", "b", file="tokenizer_config.json"),
        S.MODERATE,
        "effect-unknown",
    ),
    # low
    (
        ch(
            A.GENERATION_CONFIG,
            K.REMOVED,
            "_from_model_config",
            True,
            None,
            file="generation_config.json",
        ),
        S.LOW,
        "bookkeeping:_from_model_config",
    ),
    (
        ch(
            A.GENERATION_CONFIG,
            K.CHANGED,
            "transformers_version",
            "4.31.0",
            "4.32.0",
            file="generation_config.json",
        ),
        S.LOW,
        "bookkeeping:transformers_version",
    ),
    (
        ch(A.CONFIG, K.CHANGED, "transformers_version", "4.34.0.dev0", "4.36.0.dev0"),
        S.LOW,
        "bookkeeping:transformers_version",
    ),
    (
        ch(A.CONFIG, K.CHANGED, "output_hidden_states", False, True),
        S.LOW,
        "output-flag:output_hidden_states",
    ),
    (ch(A.CONFIG, K.CHANGED, "use_cache", False, True), S.LOW, "runtime-only:use_cache"),
    (ch(A.CONFIG, K.CHANGED, "attention_dropout", 0.0, 0.1), S.LOW, "training-only:*dropout*"),
    (
        ch(A.CONFIG, K.CHANGED, "output_router_logits", True, False),
        S.LOW,
        "training-only:output_router_logits",
    ),
    (ch(A.CONFIG, K.REMOVED, "pruned_heads", {}, None), S.LOW, "legacy-default"),
    (ch(A.MODEL_CARD, K.CHANGED, "text", "a", "b", file="README.md"), S.LOW, "model-card"),
    (
        ch(A.EXECUTABLE, K.REMOVED, "pytorch_model.bin", "sha", None, file="pytorch_model.bin"),
        S.LOW,
        "pickle-removed",
    ),
    (
        ch(A.ESTIMATE, K.FIT_GAINED, "cards.H100-80GB.lora", False, True, file=""),
        S.LOW,
        "card-fit-gained",
    ),
    (
        ch(A.ESTIMATE, K.CHANGED, "memory_gb.lora", 28.4, 118.0, file=""),
        S.LOW,
        "estimate-figures",
    ),
    (ch(A.WEIGHTS, K.CHANGED, "shards", 2, 3, file=""), S.LOW, "weight-layout"),
    # preflight answers (tracker.preflight.delta)
    (
        ch(
            A.ESTIMATE,
            K.BROKEN,
            "preflight.remote_code.transformers-5.1.0",
            "importable",
            "does not import: is_torch_fx_available",
            file="",
        ),
        S.HIGH,
        "preflight-import-broken",
    ),
    (
        ch(
            A.ESTIMATE,
            K.CHANGED,
            "preflight.remote_code.transformers-5.1.0",
            "does not import",
            "importable",
            file="",
        ),
        S.LOW,
        "preflight-import-restored",
    ),
    (
        ch(
            A.ESTIMATE,
            K.CHANGED,
            "preflight.remote_code.native_builds",
            [],
            ["flash_attn"],
            file="",
        ),
        S.MODERATE,
        "preflight-native-build",
    ),
    (
        ch(
            A.ESTIMATE,
            K.CHANGED,
            "preflight.capacity",
            {"bytes_per_param": 2.0},
            {"bytes_per_param": 0.56},
            file="",
        ),
        S.MODERATE,
        "preflight-capacity",
    ),
    (
        ch(
            A.ESTIMATE,
            K.CHANGED,
            "preflight.lora.q_proj",
            {"attention.full": 48},
            {"attention.full": 12},
            file="",
        ),
        S.HIGH,
        "preflight-lora-targets",
    ),
    # an answer found where the previous revision had none (ADDED): low, capacity and LoRA alike
    (
        ch(
            A.ESTIMATE,
            K.ADDED,
            "preflight.capacity",
            "unknown: no safetensors headers at this revision (nothing to count bytes from)",
            {"bytes_per_param": 2.0},
            file="",
        ),
        S.LOW,
        "preflight-answer-found",
    ),
    (
        ch(
            A.ESTIMATE,
            K.ADDED,
            "preflight.lora.q_proj",
            "cannot resolve: no config.json at this revision",
            {"attention.full": 12},
            file="",
        ),
        S.LOW,
        "preflight-answer-found",
    ),
]

_TEMPLATE = "tokenizer_config.json"
_RENDERED_SAME = {
    "conversations": 2,
    "same": ["system_user", "tools"],
    "differs": [],
    "fails_both": {},
}
_T5 = json.loads((CONFIGS / "google__t5-v1_1-base.json").read_text())
_GPT2 = json.loads((CONFIGS / "openai-community__gpt2-xl.json").read_text())
_LLAMA = json.loads((CONFIGS / "meta-llama__Llama-2-7b-hf.json").read_text())
_CHATGLM = json.loads((CONFIGS / "THUDM__chatglm2-6b.json").read_text())
_BERT = json.loads((CONFIGS / "google-bert__bert-base-uncased.json").read_text())
_LLAMA_TOKENIZER = (
    Path(__file__).resolve().parents[2].parent
    / "shared/corpus/pairs/meta-llama__Llama-2-7b-hf/rev-637a748/tokenizer.json"
).read_bytes()

# Cases that need the revision's context (the two snapshots): (before files, after files, change,
# severity, rule, words the rationale must contain).
CONTEXT_CASES = [
    # issue 28: a repo's GGUF quant files are alternatives; one removed while others stay in the
    # tree breaks only its own users, the last one removed leaves nothing to download
    (
        {"x.Q4_K_M.gguf": b"GGUF", "x.Q8_0.gguf": b"GGUF"},
        {"x.Q8_0.gguf": b"GGUF"},
        ch(A.WEIGHTS, K.REMOVED, "", "x.Q4_K_M.gguf", None, file="x.Q4_K_M.gguf"),
        S.HIGH,
        "gguf-quant-removed",
        "its users can no longer download it; the repo's other quant files, and their users, are "
        "unaffected: 1 other GGUF model remains: x.Q8_0.gguf",
    ),
    (
        {"x.Q4_K_M.gguf": b"GGUF", "README.md": b"# x"},
        {"README.md": b"# x"},
        ch(A.WEIGHTS, K.REMOVED, "", "x.Q4_K_M.gguf", None, file="x.Q4_K_M.gguf"),
        S.CRITICAL,
        "gguf-last-removed",
        "nothing is left to download",
    ),
    # issue 24: `model_type` beside an auto_map naming the repo's own config class
    (
        {"config.json": {k: v for k, v in _CHATGLM.items() if k != "model_type"}},
        {"config.json": _CHATGLM},
        ch(A.CONFIG, K.ADDED, "model_type", None, "chatglm"),
        S.LOW,
        "remote-config-model-type",
        "AutoConfig loads under trust_remote_code whatever `model_type` says",
    ),
    (
        {"config.json": _GPT2},
        {"config.json": {**_GPT2, "scale_attn_weights": True}},
        ch(A.CONFIG, K.ADDED, "scale_attn_weights", None, True),
        S.LOW,
        "class-default",
        "GPT2Config's default in transformers 5.24.0",
    ),
    (
        {"config.json": _GPT2},
        {"config.json": {**_GPT2, "n_layer": 24}},
        ch(A.CONFIG, K.CHANGED, "n_layer", 48, 24),
        S.HIGH,
        "architecture:num_hidden_layers",
        "`n_layer` is another name of `num_hidden_layers`",
    ),
    (
        {"config.json": _T5},
        {"config.json": {**_T5, "relative_attention_max_distance": 256}},
        ch(A.CONFIG, K.ADDED, "relative_attention_max_distance", None, 256),
        S.HIGH,
        "computation:relative_attention_max_distance",
        "relative position range changed",
    ),
    (
        {"config.json": _T5},
        {"config.json": {**_T5, "d_kv": 128}},
        ch(A.CONFIG, K.CHANGED, "d_kv", 64, 128),
        S.HIGH,
        "architecture:head_dim",
        "`d_kv` is another name of `head_dim`",
    ),
    (
        {"config.json": _T5},
        {"config.json": {**_T5, "relative_attention_num_buckets": 64, "foo_width": 3}},
        ch(A.CONFIG, K.ADDED, "foo_width", None, 3),
        S.MODERATE,
        "undeclared-key",
        "T5Config in transformers 5.24.0 neither declares `foo_width` nor converts it",
    ),
    (
        # remote code (auto_map.AutoConfig): what the repo's own class reads is not known
        {"config.json": _CHATGLM},
        {"config.json": {**_CHATGLM, "foo_width": 3}},
        ch(A.CONFIG, K.ADDED, "foo_width", None, 3),
        S.MODERATE,
        "effect-unknown",
        "no rule knows what `foo_width` does",
    ),
    (
        # BERT in transformers 5 has absolute positions only: the switch is not read
        {"config.json": _BERT},
        {"config.json": {**_BERT, "position_embedding_type": "relative_key"}},
        ch(A.CONFIG, K.ADDED, "position_embedding_type", None, "relative_key"),
        S.MODERATE,
        "undeclared-key",
        "BertConfig in transformers 5.24.0 neither declares `position_embedding_type`",
    ),
    (
        {"config.json": _GPT2},
        {"config.json": {**_GPT2, "n_inner": 8192}},
        ch(A.CONFIG, K.CHANGED, "n_inner", None, 8192),
        S.HIGH,
        "architecture:n_inner",
        "architecture or sizes changed",
    ),
    (
        # GPT-2's positions are learned: a longer context is a bigger position table
        {"config.json": _GPT2},
        {"config.json": {**_GPT2, "n_positions": 2048}},
        ch(A.CONFIG, K.CHANGED, "n_positions", 1024, 2048),
        S.HIGH,
        "architecture-effect",
        "with only `n_positions` changed moves the estimate: parameters 1.558B → 1.559B",
    ),
    (
        # Llama's positions are rotary: the same change only moves the limit
        {"config.json": _LLAMA},
        {"config.json": {**_LLAMA, "max_position_embeddings": 8192}},
        ch(A.CONFIG, K.CHANGED, "max_position_embeddings", 4096, 8192),
        S.MODERATE,
        "position-limits:max_position_embeddings",
        "maximum context changed",
    ),
    (
        {"config.json": {**_T5, "num_beams": 4}},
        {"config.json": {**_T5, "num_beams": 1}, "generation_config.json": {"num_beams": 1}},
        ch(A.CONFIG, K.CHANGED, "num_beams", 4, 1),
        S.MODERATE,
        "generation-defaults",
        "config.json governed `num_beams` at the previous revision",
    ),
    (
        {"config.json": {**_T5, "num_beams": 4}, "generation_config.json": {}},
        {"config.json": {**_T5, "num_beams": 1}, "generation_config.json": {}},
        ch(A.CONFIG, K.CHANGED, "num_beams", 4, 1),
        S.LOW,
        "generation-shadowed",
        "ignores config.json's `num_beams`",
    ),
    (
        {"config.json": {**_GPT2, "architectures": ["GPT2ForSequenceClassification"]}},
        {
            "config.json": {
                **_GPT2,
                "architectures": ["GPT2ForSequenceClassification"],
                "id2label": {"0": "NEG", "1": "POS"},
            }
        },
        ch(A.CONFIG, K.ADDED, "id2label", None, {"0": "NEG", "1": "POS"}),
        S.HIGH,
        "classifier-labels:id2label",
        "GPT2ForSequenceClassification",
    ),
    (
        {"config.json": _GPT2},
        {"config.json": {**_GPT2, "id2label": {"0": "NEG", "1": "POS"}}},
        ch(A.CONFIG, K.ADDED, "id2label", None, {"0": "NEG", "1": "POS"}),
        S.LOW,
        "labels-unused:id2label",
        "no classification head",
    ),
    (
        {
            "generation_config.json": {"forced_bos_token_id": 0},
            "tokenizer.json": {
                "model": {"vocab": {"<pad>": 0, "</s>": 1, "<en>": 2}},
                "added_tokens": [],
            },
        },
        {
            "generation_config.json": {"forced_bos_token_id": 2},
            "tokenizer.json": {
                "model": {"vocab": {"<pad>": 0, "</s>": 1, "<en>": 2}},
                "added_tokens": [],
            },
        },
        ch(
            A.GENERATION_CONFIG,
            K.CHANGED,
            "forced_bos_token_id",
            0,
            2,
            file="generation_config.json",
        ),
        S.HIGH,
        "special-token-ids:forced_bos_token_id",
        'before: 0 = "<pad>"; after: 2 = "<en>"',
    ),
    (
        # the real Llama-2 tokenizer names the ids: 32000 is past its 32,000-token vocabulary
        {"tokenizer.json": _LLAMA_TOKENIZER, "generation_config.json": {"eos_token_id": 2}},
        {"tokenizer.json": _LLAMA_TOKENIZER, "generation_config.json": {"eos_token_id": 32000}},
        ch(A.SPECIAL_TOKENS, K.CHANGED, "eos_token_id", 2, 32000, file="generation_config.json"),
        S.HIGH,
        "special-token-ids:eos_token_id",
        'before: 2 = "</s>"; after: 32000 = (no such id)',
    ),
    (
        # T5's decoder start token: also what training shifts labels with
        {"config.json": _T5, "tokenizer.json": _LLAMA_TOKENIZER},
        {"config.json": {**_T5, "decoder_start_token_id": 1}, "tokenizer.json": _LLAMA_TOKENIZER},
        ch(A.SPECIAL_TOKENS, K.CHANGED, "decoder_start_token_id", 0, 1),
        S.HIGH,
        "special-token-ids:decoder_start_token_id",
        'before: 0 = "<unk>"; after: 1 = "<s>"',
    ),
    (
        {_TEMPLATE: {}},
        {_TEMPLATE: {}},
        Change(
            A.CHAT_TEMPLATE,
            K.CHANGED,
            _TEMPLATE,
            "source",
            "a",
            "b",
            "s",
            "",
            {"rendered": _RENDERED_SAME},
        ),
        S.LOW,
        "chat-template-same-output",
        "rendered output unchanged for 2 conversations (system_user, tools)",
    ),
    (
        {_TEMPLATE: {}},
        {_TEMPLATE: {}},
        Change(
            A.CHAT_TEMPLATE,
            K.CHANGED,
            _TEMPLATE,
            "source",
            "a",
            "b",
            "s",
            "",
            {"rendered": {**_RENDERED_SAME, "fails_both": {"tool_calls": "raised: no tools"}}},
        ),
        S.MODERATE,
        "chat-template-partly-unknown",
        "1 could not be rendered in either revision, so the change's effect on them is unknown (tool_calls: raised: no tools)",
    ),
    (
        {_TEMPLATE: {}},
        {_TEMPLATE: {}},
        Change(
            A.CHAT_TEMPLATE,
            K.CHANGED,
            _TEMPLATE,
            "source",
            "a",
            "b",
            "s",
            "",
            {"rendered": {**_RENDERED_SAME, "differs": ["tools"]}},
        ),
        S.LOW,
        "chat-template-source",
        "renders differently for tools",
    ),
]


_MISTRAL = {
    **_LLAMA,
    "model_type": "mistral",
    "architectures": ["MistralForCausalLM"],
    "max_position_embeddings": 32768,
    "sliding_window": 4096,
}
_GEN = {"do_sample": False, "temperature": 0.6, "top_p": 0.9, "bos_token_id": 1, "eos_token_id": 2}
EXECUTED_CASES = [
    # issue 24: a layer count spelled with another family's name: LlamaConfig has no `n_layer`
    # in its attribute_map and no Llama module reads it (inferred: an alias of the layer count)
    (
        {"config.json": _LLAMA},
        {"config.json": {**_LLAMA, "n_layer": 40}},
        ch(A.CONFIG, K.ADDED, "n_layer", None, 40),
        S.LOW,
        "executed-no-effect",
        "`n_layer` (unset) → 40 in LlamaConfig, but no attribute the model reads changed",
    ),
    # issue 24: `seq_length`, read by nothing
    (
        {"config.json": _LLAMA},
        {"config.json": {**_LLAMA, "seq_length": 4096}},
        ch(A.CONFIG, K.ADDED, "seq_length", None, 4096),
        S.LOW,
        "executed-no-effect",
        "checked with transformers 5.24.0: `seq_length` (unset) → 4096 in LlamaConfig",
    ),
    # issue 24: a sliding window equal to the context length is no window
    (
        {"config.json": _MISTRAL},
        {"config.json": {**_MISTRAL, "sliding_window": 32768}},
        ch(A.CONFIG, K.CHANGED, "sliding_window", 4096, 32768),
        S.HIGH,
        "executed-model",
        "`sliding_window` 4096 → 32768 (no window: ≥ max_position_embeddings)",
    ),
    (
        {"config.json": {**_MISTRAL, "sliding_window": 32768}},
        {"config.json": {**_MISTRAL, "sliding_window": None}},
        ch(A.CONFIG, K.CHANGED, "sliding_window", 32768, None),
        S.LOW,
        "executed-no-effect",
        "MistralConfig gives the same effective attributes with and without this change",
    ),
    # the activation the MLP builds
    (
        {"config.json": _LLAMA},
        {"config.json": {**_LLAMA, "hidden_act": "gelu"}},
        ch(A.CONFIG, K.CHANGED, "hidden_act", "silu", "gelu"),
        S.HIGH,
        "executed-model",
        "model.layers.*.mlp.act_fn: SiLUActivation → GELUActivation",
    ),
    (
        {"config.json": _LLAMA},
        {"config.json": {**_LLAMA, "max_position_embeddings": 8192}},
        ch(A.CONFIG, K.CHANGED, "max_position_embeddings", 4096, 8192),
        S.MODERATE,
        "executed-limit",
        "reads it only as a limit (LlamaRotaryEmbedding",
    ),
    # no generation_config.json: config.json's eos is generate()'s
    (
        {"config.json": _LLAMA},
        {"config.json": {**_LLAMA, "eos_token_id": 5}},
        ch(A.CONFIG, K.CHANGED, "eos_token_id", 2, 5),
        S.HIGH,
        "executed-generation-ids",
        "`eos_token_id` 2 → 5), from config.json (no generation_config.json)",
    ),
    (
        {"config.json": _LLAMA, "generation_config.json": _GEN},
        {"config.json": _LLAMA, "generation_config.json": {**_GEN, "do_sample": True}},
        ch(A.GENERATION_CONFIG, K.CHANGED, "do_sample", False, True, file="generation_config.json"),
        S.MODERATE,
        "executed-generation",
        "greedy → sampling; `do_sample` false → true",
    ),
    (
        {"config.json": _LLAMA, "generation_config.json": _GEN},
        {"config.json": _LLAMA, "generation_config.json": {**_GEN, "temperature": 0.9}},
        ch(A.GENERATION_CONFIG, K.CHANGED, "temperature", 0.6, 0.9, file="generation_config.json"),
        S.LOW,
        "executed-no-effect",
        "(`temperature` unused by greedy decoding)",
    ),
]


# tokenizers, as AutoTokenizer builds them (stand-ins: Llama-2's tokenizer_config.json keys, and a
# three-word WordLevel tokenizer.json with a Whitespace pre-tokenizer)
_TOK = {
    "tokenizer_class": "LlamaTokenizer",
    "bos_token": "<s>",
    "eos_token": "</s>",
    "unk_token": "<unk>",
    "add_bos_token": True,
    "use_fast": False,
}
_WORDS = {
    "version": "1.0",
    "added_tokens": [{"id": 2, "content": "[UNK]", "single_word": False, "lstrip": False,
                      "rstrip": False, "normalized": False, "special": True}],
    "normalizer": None,
    "pre_tokenizer": {"type": "Whitespace"},
    "post_processor": None,
    "decoder": None,
    "model": {"type": "WordLevel", "vocab": {"hello": 0, "world": 1, "[UNK]": 2},
              "unk_token": "[UNK]"},
}  # fmt: skip
_SWAPPED = {"hello": 1, "world": 0, "[UNK]": 2}
_WORDS_CONF = {"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "[UNK]"}
EXECUTED_CASES += [
    (
        {"tokenizer_config.json": _TOK},
        {"tokenizer_config.json": {k: v for k, v in _TOK.items() if k != "use_fast"}},
        ch(A.TOKENIZER, K.REMOVED, "use_fast", False, None, file="tokenizer_config.json"),
        S.LOW,
        "executed-no-effect",
        "AutoTokenizer builds LlamaTokenizer, and what it makes is the same with and without "
        "this change",
    ),
    (
        {"tokenizer_config.json": _TOK},
        {"tokenizer_config.json": {**_TOK, "padding_side": "right"}},
        ch(A.TOKENIZER, K.ADDED, "padding_side", None, "right", file="tokenizer_config.json"),
        S.MODERATE,
        "executed-tokenizer-settings",
        'padding_side "left" → "right"',
    ),
    (
        {"tokenizer_config.json": _TOK},
        {"tokenizer_config.json": {**_TOK, "add_bos_token": False}},
        ch(A.TOKENIZER, K.CHANGED, "add_bos_token", True, False, file="tokenizer_config.json"),
        S.HIGH,
        "executed-tokenizer-special",
        '"Hello world" encodes to [1] → []',
    ),
    (
        {"tokenizer_config.json": _WORDS_CONF, "tokenizer.json": _WORDS},
        {
            "tokenizer_config.json": _WORDS_CONF,
            "tokenizer.json": {**_WORDS, "model": {**_WORDS["model"], "vocab": _SWAPPED}},
        },
        ch(A.TOKENIZER, K.CHANGED, "vocab", None, None, file="tokenizer.json"),
        S.CRITICAL,
        "executed-tokenizer-text",
        '"Hello world" encodes to [2, 1] → [2, 0]',
    ),
]


@pytest.fixture(scope="module")
def executor() -> object:
    from tracker.advisories.execute import Executor

    ex = Executor()
    if not ex.warm():
        pytest.skip("transformers is not importable")
    return ex


@pytest.mark.parametrize(
    ("before", "after", "change", "severity", "rule", "words"),
    EXECUTED_CASES,
    ids=[f"{c[2].artifact}-{c[2].kind}-{c[2].key}-{c[4]}" for c in EXECUTED_CASES],
)
def test_rules_decided_by_running_transformers(  # type: ignore[no-untyped-def]
    executor, before, after, change, severity, rule, words
) -> None:
    got = classify(change, context=Context(snap(before), snap(after), executor=executor))
    assert (got.severity, got.rule, got.decided_by) == (severity, rule, "transformers 5.24.0")
    assert words in got.rationale, got.rationale
    assert got.rationale.count("checked with transformers 5.24.0") == 1
    # without transformers the same change is inferred, and says so
    inferred = classify(change, context=Context(snap(before), snap(after)))
    assert inferred.decided_by == "inferred"
    assert inferred.rationale.startswith("inferred (transformers 5.24.0 not run on it): ")


@pytest.mark.parametrize(
    ("before", "after", "change", "severity", "rule", "words"),
    CONTEXT_CASES,
    ids=[f"{c[2].artifact}-{c[2].kind}-{c[2].key}-{c[4]}" for c in CONTEXT_CASES],
)
def test_rules_that_read_the_revision(before, after, change, severity, rule, words) -> None:  # type: ignore[no-untyped-def]
    got = classify(change, context=Context(snap(before), snap(after)))
    assert (got.severity, got.rule) == (severity, rule), got.rationale
    assert words in got.rationale


@pytest.mark.parametrize(
    ("change", "severity", "rule"),
    CASES,
    ids=[f"{c.artifact}-{c.kind}-{c.key}" for c, _, _ in CASES],
)
def test_default_rules(change, severity, rule) -> None:  # type: ignore[no-untyped-def]
    got = classify(change)
    assert (got.severity, got.rule) == (severity, rule)
    assert got.rationale
    assert got.suppressed is None


def test_every_default_rule_is_exercised_or_a_pattern_variant() -> None:
    hit = {rule for _, _, rule in CASES} | {c[4] for c in CONTEXT_CASES + EXECUTED_CASES}
    families = {r.name.split(":")[0] for r in DEFAULT_RULES}
    assert families <= {h.split(":")[0] for h in hit}


def test_overrides_come_before_defaults_and_globs_match_files() -> None:
    o = parse_overrides(
        {
            "rules": [
                {
                    "match": {"artifact": "config", "key": "transformers_version"},
                    "severity": "moderate",
                    "rationale": "we pin it",
                },
                {
                    "match": {"artifact": ["custom_code"], "file": "*.py"},
                    "severity": "low",
                    "name": "own-code",
                },
            ]
        }
    )
    got = classify(ch(A.CONFIG, K.CHANGED, "transformers_version", "a", "b"), o)
    assert (got.severity, got.rule, got.rationale) == (S.MODERATE, "watchlist-rule-0", "we pin it")
    assert got.decided_by == "watchlist"
    got = classify(ch(A.CUSTOM_CODE, K.CHANGED, "modeling.py", "a", "b", file="modeling.py"), o)
    assert (got.severity, got.rule) == (S.LOW, "own-code")
    # the file glob does not match config.json, so auto_map keeps the default
    assert (
        classify(ch(A.CUSTOM_CODE, K.ADDED, "auto_map.AutoModel", None, "x"), o).severity
        is S.CRITICAL
    )


def test_suppression_keeps_severity_and_records_reason() -> None:
    o = parse_overrides(
        {
            "suppress": [
                {"match": {"kind": "rendered", "key": "tool_*"}, "reason": "we do not use tools"}
            ]
        }
    )
    got = classify(ch(A.CHAT_TEMPLATE, K.RENDERED, "tool_call", "a", "b"), o)
    assert (got.severity, got.suppressed) == (S.HIGH, "we do not use tools")
    assert classify(ch(A.CHAT_TEMPLATE, K.RENDERED, "multi_turn", "a", "b"), o).suppressed is None


def test_invalid_overrides_report_every_problem_at_once() -> None:
    with pytest.raises(ConfigError) as exc:
        parse_overrides(
            {
                "rule": [],
                "rules": [
                    {"match": {"artifact": "confg", "kynd": "added"}, "severity": "urgent"},
                    {"match": {}, "severity": "low"},
                    "x",
                ],
                "suppress": [{"match": {"key": 3}}],
            }
        )
    assert exc.value.problems == (
        "advisories.rules[0].match.artifact[0]: 'confg' is not one of config, generation_config, tokenizer, special_tokens, chat_template, weights, custom_code, executable, model_card, processor, estimate, lineage (did you mean 'config'?)",
        "advisories.rules[0].match: unknown key 'kynd' (did you mean 'kind'?); allowed: artifact, kind, key, file",
        "advisories.rules[0].severity: 'urgent' is not one of critical, high, moderate, low",
        "advisories.rules[1].match: must name any of artifact, kind, key, file",
        "advisories.rules[2]: must be a mapping, not str",
        "advisories.suppress[0].match.key: must be a string, got 3",
        "advisories.suppress[0]: needs a non-empty 'reason' (suppressions are recorded)",
        "advisories: unknown key 'rule' (did you mean 'rules'?); allowed: rules, suppress, unlisted_code",
    )
    with pytest.raises(ConfigError) as exc:
        parse_overrides({"unlisted_code": " "})
    assert exc.value.problems == (
        "advisories.unlisted_code: a non-empty reason is required (why this repo's trees lack "
        "its code)",
    )
    assert parse_overrides({"unlisted_code": "no .py here"}).unlisted_code == "no .py here"


def test_empty_overrides_and_highest() -> None:
    assert parse_overrides(None) == parse_overrides({})
    assert highest([S.LOW, S.CRITICAL, S.MODERATE]) is S.CRITICAL
    assert highest([S.LOW, S.MODERATE]) is S.MODERATE


def test_a_model_build_over_its_time_limit_leaves_the_change_to_the_inferred_rules(
    monkeypatch: pytest.MonkeyPatch, executor: object
) -> None:
    from tracker.advisories import execute

    fresh = execute.Executor()
    assert fresh.warm()
    monkeypatch.setattr(execute, "BUILD_LIMIT_S", 1e-6)
    change = ch(A.CONFIG, K.CHANGED, "hidden_act", "silu", "gelu")
    before, after = {"config.json": _LLAMA}, {"config.json": {**_LLAMA, "hidden_act": "gelu"}}
    got = classify(change, context=Context(snap(before), snap(after), executor=fresh))
    assert (got.severity, got.rule, got.decided_by) == (
        S.HIGH,
        "computation:hidden_act",
        "inferred",
    )
    assert got.rationale.startswith("inferred (transformers 5.24.0 not run on it): ")
    assert fresh.builds == 1  # tried once, given up, not cached
