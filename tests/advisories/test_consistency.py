"""Consistency findings a revision introduces (issue 11 item 6), from real files: Qwen2.5-1.5B's config
and chat-template tokens; each check alone, and nothing when the files it reads did not change."""

from __future__ import annotations

import json
from pathlib import Path

from tests.diff.diffkit import make_snapshot
from tracker.advisories.consistency import introduced
from tracker.advisories.effects import Context
from tracker.shared.domain import SafetensorsHeader, Severity, TensorInfo

CONFIG = json.loads(
    (Path(__file__).parents[1] / "data" / "configs" / "Qwen__Qwen2.5-1.5B.json").read_text()
)
VOCAB = CONFIG["vocab_size"]
TOKENS = {"151643": {"content": "<|endoftext|>"}, "151644": {"content": "<|im_start|>"},
          "151645": {"content": "<|im_end|>"}}  # fmt: skip
TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
)


def _files(
    *, eos: int = 151643, template: str = TEMPLATE, dtype: str = "bfloat16"
) -> dict[str, bytes]:
    return {
        "config.json": json.dumps({**CONFIG, "torch_dtype": dtype}).encode(),
        "generation_config.json": json.dumps({"eos_token_id": eos}).encode(),
        "tokenizer_config.json": json.dumps(
            {"added_tokens_decoder": TOKENS, "chat_template": template}
        ).encode(),
    }


def _step(
    before: dict[str, bytes], after: dict[str, bytes], **kw: object
) -> list[tuple[str, Severity, str]]:
    ctx = Context(make_snapshot(before, **kw), make_snapshot(after, sha="1" * 40, **kw))  # type: ignore[arg-type]
    return [(f.check, f.severity, f.text) for f in introduced(ctx)]


def test_an_eos_equal_to_vocab_size_is_out_of_the_vocabulary() -> None:
    found = _step(_files(), _files(eos=VOCAB))
    assert found == [
        (
            "token-id-out-of-vocab",
            Severity.HIGH,
            f"`eos_token_id` {VOCAB} in generation_config.json is outside the vocabulary "
            f"(`vocab_size` {VOCAB}: ids 0 to {VOCAB - 1}): the model cannot produce or embed it",
        ),
        (
            "token-id-disagrees",
            Severity.MODERATE,
            f"`eos_token_id` is 151643 in config.json but {VOCAB} in generation_config.json: "
            "generation uses the latter, code reading the model config the former",
        ),
    ]
    assert _step(_files(eos=VOCAB), _files(eos=VOCAB)) == []  # not introduced here


def test_a_template_token_the_tokenizer_does_not_define() -> None:
    typo = TEMPLATE.replace("<|im_end|>", "<|im_ end|>").replace("<|im_start|>", "<|im_strat|>")
    (found,) = _step(_files(), _files(template=typo))
    assert found[:2] == ("template-token-undefined", Severity.MODERATE)
    assert found[2].startswith("the chat template writes `<|im_strat|>`, which the tokenizer")


def test_torch_dtype_that_disagrees_with_the_checkpoint() -> None:
    header = SafetensorsHeader(
        {"w": TensorInfo("F32", (2, 2), 16), "b": TensorInfo("F32", (2,), 8)}
    )
    kw = {"headers": {"model.safetensors": header}, "extra_tree": {"model.safetensors": "a" * 64}}
    assert _step(_files(dtype="float32"), _files(dtype="float32"), **kw) == []
    (found,) = _step(_files(dtype="float32"), _files(dtype="bfloat16"), **kw)
    assert found == (
        "dtype-disagrees-with-checkpoint",
        Severity.MODERATE,
        "`torch_dtype` is 'bfloat16' but the checkpoint's floating-point tensors are stored as "
        '2 F32: loading with `torch_dtype="auto"` converts them',
    )


LLAMA = Path(__file__).resolve().parents[2].parent / "shared" / "corpus" / "models"


def _llama(**edits: object) -> dict[str, bytes]:
    """meta-llama/Llama-2-7b-hf's real files (test_tokenizer_view's), generation_config.json
    with `edits` applied."""
    from tests.advisories.test_tokenizer_view import _files as tokenizer_files

    model = LLAMA / "meta-llama__Llama-2-7b-hf"
    generation = {**json.loads((model / "generation_config.json").read_bytes()), **edits}
    return {
        **tokenizer_files(),
        "config.json": (model / "config.json").read_bytes(),
        "generation_config.json": json.dumps(generation).encode(),
    }


def test_an_eos_list_without_the_tokenizers_eos() -> None:
    assert _step(_llama(), _llama()) == []  # the real files are consistent
    assert _step(_llama(), _llama(eos_token_id=[0, 1])) == [
        (
            "special-token-mismatch",
            Severity.HIGH,
            "`eos_token_id` [0, 1] in generation_config.json does not include the tokenizer's eos "
            "token `</s>` (id 2, named in special_tokens_map.json): generation does not stop at it",
        ),
        (
            "token-id-disagrees",
            Severity.MODERATE,
            "`eos_token_id` is 2 in config.json but [0, 1] in generation_config.json: generation "
            "uses the latter, code reading the model config the former",
        ),
    ]
    # a list holding the tokenizer's eos: no mismatch (the lists still differ from config.json)
    assert [f[0] for f in _step(_llama(), _llama(eos_token_id=[2, 0]))] == ["token-id-disagrees"]


def test_a_quantized_checkpoint_is_no_dtype_disagreement() -> None:
    """DeepSeek-R1's real config (`torch_dtype` bfloat16, FP8 `quantization_config`) beside its
    checkpoint's census: FP8 weights with F32 scales are what the quantizer reads."""
    config = (LLAMA / "deepseek-ai__DeepSeek-R1" / "config.json").read_bytes()
    header = SafetensorsHeader(
        {
            "w": TensorInfo("F8_E4M3", (128, 128), 128 * 128),
            "w_scale_inv": TensorInfo("F32", (1, 1), 4),
            "b_scale_inv": TensorInfo("F32", (1, 1), 4),
        }
    )
    kw = {"headers": {"model.safetensors": header}, "extra_tree": {"model.safetensors": "a" * 64}}
    unquantized = json.dumps(
        {k: v for k, v in json.loads(config).items() if k != "quantization_config"}
    ).encode()
    (found,) = _step({}, {"config.json": unquantized}, **kw)
    assert found[0] == "dtype-disagrees-with-checkpoint"
    assert _step({}, {"config.json": config}, **kw) == []
