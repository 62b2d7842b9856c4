"""The rules table: one case per default rule, overrides before defaults, suppressions, validation."""

from __future__ import annotations

import pytest
from advkit import ch

from tracker.advisories.classify import DEFAULT_RULES, classify, highest, parse_overrides
from tracker.domain import Artifact as A
from tracker.domain import ChangeKind as K
from tracker.domain import Severity as S
from tracker.errors import ConfigError

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
    # moderate
    (
        ch(A.GENERATION_CONFIG, K.CHANGED, "temperature", 0.6, 0.7, file="generation_config.json"),
        S.MODERATE,
        "generation-defaults",
    ),
    (
        ch(A.CONFIG, K.CHANGED, "rope_scaling.factor", 8.0, 32.0),
        S.MODERATE,
        "position-limits:rope_scaling.*",
    ),
    (
        ch(A.CONFIG, K.ADDED, "rope_scaling", None, {"type": "yarn"}),
        S.MODERATE,
        "position-limits:rope_scaling",
    ),
    (
        ch(A.CONFIG, K.CHANGED, "max_position_embeddings", 4096, 32768),
        S.MODERATE,
        "position-limits:max_position_embeddings",
    ),
    (
        ch(A.CONFIG, K.REMOVED, "sliding_window", 4096, None),
        S.MODERATE,
        "position-limits:sliding_window",
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
    (ch(A.MODEL_CARD, K.CHANGED, "text", "a", "b", file="README.md"), S.LOW, "metadata"),
    (
        ch(A.EXECUTABLE, K.REMOVED, "pytorch_model.bin", "sha", None, file="pytorch_model.bin"),
        S.LOW,
        "pickle-removed",
    ),
    (ch(A.ESTIMATE, K.FIT_GAINED, "cards.H100-80GB.lora", False, True, file=""), S.LOW, "metadata"),
    (
        ch(A.CHAT_TEMPLATE, K.CHANGED, "source", "a", "b", file="tokenizer_config.json"),
        S.LOW,
        "metadata",
    ),
]


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
    hit = {rule for _, _, rule in CASES}
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
        "advisories: unknown key 'rule' (did you mean 'rules'?); expected one of rules, suppress",
        "advisories.rules[0].match: unknown key 'kynd' (did you mean 'kind'?); expected one of artifact, kind, key, file",
        "advisories.rules[0].match.artifact: 'confg' is not one of config, generation_config, tokenizer, special_tokens, chat_template, weights, custom_code, executable, model_card, processor, estimate (did you mean 'config'?)",
        "advisories.rules[0].severity: 'urgent' is not one of critical, high, moderate, low",
        "advisories.rules[1].match: must be a non-empty mapping with any of artifact, kind, key, file",
        "advisories.rules[2]: must be a mapping",
        "advisories.suppress[0].match.key: must be a glob string, got int",
        "advisories.suppress[0].reason: a non-empty reason is required (suppressions are recorded)",
    )


def test_empty_overrides_and_highest() -> None:
    assert parse_overrides(None) == parse_overrides({})
    assert highest([S.LOW, S.CRITICAL, S.MODERATE]) is S.CRITICAL
    assert highest([S.LOW, S.MODERATE]) is S.MODERATE
