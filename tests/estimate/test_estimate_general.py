"""The general reader on architectures it has no family reader for (issue 9), Kimi-K3 as the hybrid
it is, and the self-check against the checkpoint census.

Stand-ins: where a test needs a config of an unknown type, it takes a real corpus config and changes
only what the test is about (its model_type, the name of a key), and says so.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tracker.estimate import estimate
from tracker.estimate.params import read_config
from tracker.estimate.settings import EstimateSettings
from tracker.shared.domain import SafetensorsHeader, TensorInfo, VerificationStatus

CONFIGS = Path(__file__).parents[1] / "data" / "configs"


def load(name: str) -> dict[str, Any]:
    return json.loads((CONFIGS / f"{name}.json").read_text())


def renamed(name: str, **changes: Any) -> dict[str, Any]:
    """A real config under a model_type no reader knows (the only change besides `changes`)."""
    return (
        load(name) | {"model_type": "acme_unseen", "architectures": ["AcmeForCausalLM"]} | changes
    )


# --- Kimi-K3: 24 full-attention MLA layers and 69 Kimi-delta-attention layers ------------------

H, VOCAB, HEADS = 7168, 163840, 96
Q_LORA, KV_LORA, NOPE, ROPE, V = 1536, 512, 128, 64, 128
KDA = 96 * 128  # linear-attention width: 96 heads × 128
EXPERTS, TOP_K, MOE_I, LATENT, SHARED_I, DENSE_I = 896, 16, 3072, 3584, 2 * 3072, 33792


def kimi_k3_text_count() -> tuple[int, int]:
    """(total, active) of Kimi-K3's language model written out from its layer shapes.

    MLA layer: q_a (h→1536) + its norm, q_b (1536→96·192), kv_a (h→512+64) + its norm,
    kv_b (512→96·(128+128)), o (96·128→h), output gate (h→96·128).
    KDA layer: q/k/v (h→12288 each), depthwise conv (3·12288 × 4), forget gate (h→128→12288,
    dt_bias 12288, A_log 96), beta (h→96), output gate full rank (`use_full_rank_gate`:
    g_proj h→12288), gated norm (128), o (12288→h).
    MoE layer: 896 experts of gate/up/down at the 3584 latent width (3584↔3072), router (h→896),
    latent projections h→3584→h and the latent norm, 2 shared experts (h↔6144, gated).
    Layer 0 is dense: gate/up/down h↔33792. Two RMSNorms per layer, a final norm, untied head.
    Attention residuals (`attn_res_block_size`): before attention and before the MLP, an RMSNorm
    (h) and a pseudo-query Linear(h, 1); one more pair for the output.
    """
    mla = (H * Q_LORA + Q_LORA) + Q_LORA * HEADS * (NOPE + ROPE)
    mla += H * (KV_LORA + ROPE) + KV_LORA + KV_LORA * HEADS * (NOPE + V)
    mla += HEADS * V * H + H * HEADS * V
    kda = 3 * H * KDA + 3 * KDA * 4
    kda += H * 128 + 128 * KDA + KDA + 96
    kda += H * 96
    kda += H * KDA + 128 + KDA * H
    attn_res = 2 * (H + H)
    expert = 3 * LATENT * MOE_I
    moe_fixed = H * EXPERTS + 2 * H * LATENT + LATENT + 3 * H * SHARED_I
    dense = 3 * H * DENSE_I
    full_layers = [i for i in range(1, 94) if i % 4 == 0 or i == 93]  # 1-indexed, as listed
    assert len(full_layers) == 24
    total = 2 * VOCAB * H + H + 2 * H  # embeddings, head, final norm, output attention residual
    active = total
    for layer in range(1, 94):
        mixer = mla if layer in full_layers else kda
        ffn_total = dense if layer == 1 else EXPERTS * expert + moe_fixed
        ffn_active = dense if layer == 1 else TOP_K * expert + moe_fixed
        total += mixer + ffn_total + 2 * H + attn_res
        active += mixer + ffn_active + 2 * H + attn_res
    return total, active


def test_kimi_k3_is_read_as_the_hybrid_it_is() -> None:
    config = load("moonshotai__Kimi-K3")
    r = read_config(config)
    kinds = [spec.attention for spec in r.layers]
    assert (kinds.count("mla"), kinds.count("linear"), len(kinds)) == (24, 69, 93)
    assert [i + 1 for i, k in enumerate(kinds) if k == "mla"] == config["text_config"][
        "linear_attn_config"
    ]["full_attn_layers"]
    total, active = kimi_k3_text_count()
    text_total = r.total - r.by_component["vision_tower"]
    assert text_total == total
    assert r.active == active
    report = estimate(config).to_json()
    # ~98% of the parameters are routed experts, of which 16 of 896 are active per token.
    routed = 92 * EXPERTS * 3 * LATENT * MOE_I
    assert report["params"]["by_component"]["routed_experts"] == routed
    share = report["params"]["shares"]["routed_experts"]
    assert share == round(routed / report["params"]["total"], 6) and round(share, 2) == 0.98
    assert report["params"]["active"] == active
    pattern = report["structure"]["pattern"]
    assert (pattern["hybrid"], pattern["full_attention_layers"], pattern["linear_layers"]) == (
        True,
        24,
        69,
    )
    assert (pattern["period"], pattern["ratio"]) == (4, "2.9")
    # KV cache only over the 24 MLA layers (one 512+64 latent per token, bf16) plus the fixed
    # linear-attention state of the 69 KDA layers (fp32 96×128×128, conv 3·12288×3 bf16).
    state = 96 * 128 * 128 * 4 + 3 * KDA * 3 * 2
    kv = 24 * (KV_LORA + ROPE) * 2 * 4096 + 69 * state
    assert report["memory_gb"]["kv_cache"] == round(kv / 1e9, 3)
    # Every key of its config is understood (attention residuals and the full-rank KDA output
    # gate are counted above), so the family reading is vouched for; read under kimi_linear's
    # semantics with no census, it is derived (not "verified": nothing has checked it).
    v = report["verification"]
    assert (v["status"], v["unknown_keys"]) == ("derived", [])
    assert v["reasons"] == [
        "custom code read under native model_type 'kimi_linear'; no checkpoint census to check "
        "the count against"
    ]
    # Without those two features the count is what it was when they were unknown keys.
    text = config["text_config"]
    bare = {k: x for k, x in text.items() if k != "attn_res_block_size"}
    bare["linear_attn_config"] = text["linear_attn_config"] | {"use_full_rank_gate": False}
    plain = read_config(config | {"text_config": bare})
    res = 93 * 4 * H + 2 * H
    gate = 69 * (H * KDA - (H * 128 + 128 * KDA))
    assert r.total - plain.total == res + gate == 5_908_391_936


@pytest.mark.slow
def test_kimi_k3_text_matches_transformers_kimi_linear_without_its_own_keys() -> None:
    """Kimi-K3's text config is a KimiLinear config plus keys transformers does not know; without
    those keys (latent experts, MLA output gate, attention residuals, full-rank output gate) our
    count equals the meta-device count."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    text = dict(load("moonshotai__Kimi-K3")["text_config"])
    for key in (
        "routed_expert_hidden_size",
        "latent_moe_use_norm",
        "mla_use_output_gate",
        "attn_res_block_size",
    ):
        text.pop(key)
    # transformers' KDA has the low-rank output gate only
    text["linear_attn_config"] = text["linear_attn_config"] | {"use_full_rank_gate": False}
    text.pop("auto_map")
    text["hidden_act"] = "silu"  # K3's "situ" is not in transformers' table; no parameters
    cfg = transformers.KimiLinearConfig(**text)
    with torch.device("meta"):
        model = transformers.KimiLinearForCausalLM(cfg)
    assert read_config(text).total == sum(p.numel() for p in model.parameters())


# --- families beyond the corpus: transformers' own default configs -----------------------------

NATIVE_DEFAULTS = (
    ("bart", "BartForConditionalGeneration"),
    ("mbart", "MBartForConditionalGeneration"),
    ("marian", "MarianMTModel"),
    ("pegasus", "PegasusForConditionalGeneration"),
    ("whisper", "WhisperForConditionalGeneration"),
    ("falcon", "FalconForCausalLM"),
    ("gptj", "GPTJForCausalLM"),
    ("codegen", "CodeGenForCausalLM"),
    ("gpt_bigcode", "GPTBigCodeForCausalLM"),
    ("opt", "OPTForCausalLM"),
    ("starcoder2", "Starcoder2ForCausalLM"),
    ("bamba", "BambaForCausalLM"),
    ("granitemoehybrid", "GraniteMoeHybridForCausalLM"),
    ("kimi_linear", "KimiLinearForCausalLM"),
    ("qwen2_moe", "Qwen2MoeForCausalLM"),
    ("deepseek_v2", "DeepseekV2ForCausalLM"),
    ("stablelm", "StableLmForCausalLM"),
    ("mamba", "MambaForCausalLM"),
    ("falcon_mamba", "FalconMambaForCausalLM"),
    ("mamba2", "Mamba2ForCausalLM"),
    ("qwen3_asr", "Qwen3ASRForConditionalGeneration"),
    ("qwen3_asr", "Qwen3ASRForTokenClassification"),
    ("omniasr", "OmniASRForConditionalGeneration"),
)


@pytest.mark.slow
@pytest.mark.parametrize(("model_type", "arch"), NATIVE_DEFAULTS)
def test_default_configs_of_native_families_are_exact(model_type: str, arch: str) -> None:
    """No corpus config exists for these families; transformers' default config of each class (a
    stand-in, the class's reference sizes) is read exactly as transformers builds it."""
    import warnings

    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cfg = CONFIG_MAPPING[model_type]()
        with torch.device("meta"):
            model = getattr(transformers, arch)._from_config(cfg)
    truth = sum(p.numel() for p in model.parameters())
    data = cfg.to_dict() | {"architectures": [arch]}
    assert read_config(data).total == truth


# --- what the issue found silently wrong -------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["Qwen__Qwen3-30B-A3B", "mistralai__Mixtral-8x7B-v0.1", "deepseek-ai__DeepSeek-V3"],
)
def test_moe_of_an_unknown_type_is_read_from_its_keys(name: str) -> None:
    known = read_config(load(name))
    unseen = read_config(renamed(name))
    assert "unknown-architecture" in unseen.flags
    assert abs(unseen.total - known.total) / known.total < 1e-6  # Qwen3's q/k norms: a trait
    assert abs(unseen.active - known.active) / known.active < 1e-5
    assert unseen.by_component["routed_experts"] == known.by_component["routed_experts"]


def test_unknown_moe_keys_are_named_and_make_the_estimate_unverified() -> None:
    # Stand-in: Qwen3-30B-A3B with its expert keys renamed to names no reader knows.
    config = renamed("Qwen__Qwen3-30B-A3B")
    config["n_expert_slots"] = config.pop("num_experts")
    config["expert_ffn_width"] = config.pop("moe_intermediate_size")
    config["experts_routed_per_token"] = config.pop("num_experts_per_tok")
    v = estimate(config).verification
    assert v.status is VerificationStatus.UNVERIFIED and not v.vouched
    # decoder_sparse_step too: a MoE key left without experts to apply it to
    assert v.unknown_keys == (
        "decoder_sparse_step",
        "expert_ffn_width",
        "experts_routed_per_token",
        "n_expert_slots",
    )
    assert "expert_ffn_width, experts_routed_per_token, n_expert_slots" in v.reasons[0]


def test_hybrid_listed_under_layers_block_type_without_a_layer_count() -> None:
    # Stand-in: Qwen3-Next with its layer kinds under Jamba/Zamba's key and no num_hidden_layers.
    known = read_config(load("Qwen__Qwen3-Next-80B-A3B-Thinking"))
    config = renamed("Qwen__Qwen3-Next-80B-A3B-Thinking")
    del config["num_hidden_layers"], config["full_attention_interval"]
    config["layers_block_type"] = [
        "linear_attention" if (i + 1) % 4 else "full_attention" for i in range(48)
    ]
    unseen = read_config(config)
    assert len(unseen.layers) == 48
    assert [s.attention for s in unseen.layers] == [s.attention for s in known.layers]
    assert abs(unseen.total - known.total) / known.total < 0.002  # q_gate: a Qwen3-Next trait


def test_encoder_decoder_of_an_unknown_type_is_estimated() -> None:
    known = read_config(load("google-t5__t5-base"))
    unseen = estimate(renamed("google-t5__t5-base"))
    assert abs(unseen.params.total - known.total) / known.total < 0.01
    assert unseen.layers == 24


def test_parallel_attention_and_mla_without_head_dim() -> None:
    # Falcon-40B (parallel attention+MLP, grouped KV): exact but for the head, which its config
    # does not say is untied, so an unknown type takes transformers' base default (tied).
    falcon = read_config(load("tiiuae__falcon-40b"))
    unseen = read_config(renamed("tiiuae__falcon-40b"))
    assert unseen.tied and unseen.total == falcon.total - falcon.vocab * falcon.hidden
    deepseek = load("deepseek-ai__DeepSeek-V3")
    assert "head_dim" not in deepseek
    assert read_config(renamed("deepseek-ai__DeepSeek-V3")).total == 671026404352


def test_tie_default_is_the_familys_then_transformers_base_default() -> None:
    gemma = load("unsloth__codegemma-7b-it")
    assert "tie_word_embeddings" not in gemma
    assert read_config(gemma).tied  # GemmaConfig ties by default
    assert read_config(renamed("unsloth__codegemma-7b-it")).tied  # PreTrainedConfig's default
    llama4 = load("meta-llama__Llama-4-Scout-17B-16E-Instruct")
    assert not read_config(llama4).tied  # Llama4TextConfig does not


# --- the self-check against the checkpoint ----------------------------------------------------


def header(tensors: dict[str, tuple[str, tuple[int, ...]]]) -> dict[str, SafetensorsHeader]:
    size = {"BF16": 2, "F32": 4, "U8": 1, "I32": 4, "F8_E4M3": 1}
    infos = {}
    for name, (dtype, shape) in tensors.items():
        n = 1
        for d in shape:
            n *= d
        infos[name] = TensorInfo(dtype, shape, n * size[dtype])
    return {"model.safetensors": SafetensorsHeader(infos)}


def test_census_leaves_out_buffers_scales_and_unbuilt_layers_and_unpacks_quantized() -> None:
    from tracker.estimate.checkpoint import compare

    h = header(
        {
            "model.layers.0.self_attn.q_proj.weight": ("F8_E4M3", (64, 64)),
            "model.layers.0.self_attn.q_proj.weight_scale_inv": ("F32", (1, 1)),
            "model.layers.0.self_attn.rotary_emb.inv_freq": ("F32", (32,)),
            "model.layers.0.mlp.gate.e_score_correction_bias": ("F32", (8,)),
            "model.layers.0.mlp.down_proj.qweight": ("I32", (8, 64)),  # 8 × 4-bit per int32
            "model.layers.0.mlp.down_proj.qzeros": ("I32", (1, 8)),
            "model.layers.0.mlp.down_proj.scales": ("BF16", (1, 64)),
            "model.layers.0.mlp.up_proj.weight": ("U8", (64, 32)),  # NF4: 2 per byte
            "model.layers.0.mlp.up_proj.weight.absmax": ("F32", (32,)),
            "model.layers.0.mlp.up_proj.weight.quant_state.bitsandbytes__nf4": ("U8", (100,)),
            "model.layers.1.mlp.up_proj.weight": ("BF16", (64, 64)),  # an MTP layer (not built)
            "transformer.h.0.attn.bias": ("BF16", (1, 1, 16, 16)),  # GPT-2's causal mask
        }
    )
    ck = compare(h, 64 * 64 * 3, layers=1)
    assert ck is not None
    assert ck.params == 64 * 64 + 8 * 64 * 8 + 64 * 32 * 2
    assert ck.scale_elements == 1 + 8 + 64 + 32 + 100
    assert ck.bookkeeping_elements == 32 + 8 + 256
    assert ck.not_built_elements == 64 * 64
    assert ck.already_quantized and ck.delta_pct == 0.0


def _census_of(config: dict[str, Any], factor: float) -> dict[str, SafetensorsHeader]:
    """One BF16 tensor holding `factor` × the config's derived count (a stand-in census)."""
    n = int(read_config(config).total * factor)
    return header({"model.embed_tokens.weight": ("BF16", (n,))})


def test_verification_statuses_and_serving_from_checkpoint_bytes() -> None:
    known = load("Qwen__Qwen3-0.6B")
    assert estimate(known).verification.status is VerificationStatus.VERIFIED
    unseen = renamed("Qwen__Qwen3-0.6B")
    bare = estimate(unseen).verification
    assert bare.status is VerificationStatus.UNVERIFIED
    assert "no checkpoint census" in bare.reasons[0]
    checked = estimate(unseen, _census_of(unseen, 1.0))
    assert checked.verification.status is VerificationStatus.CHECKED
    # serving holds the checkpoint as shipped, whether or not the count is vouched for
    assert checked.checkpoint is not None
    assert checked.memory.serve_weights_source == "checkpoint"
    assert checked.memory.serve_weights == round(checked.checkpoint.bytes / 1e9, 3)
    assert checked.memory.serve_weights_format == "BF16"
    assert checked.memory.serve_weights_upcast is None  # nothing to upcast
    off = estimate(unseen, _census_of(unseen, 1.05))
    v = off.verification
    assert v.status is VerificationStatus.UNVERIFIED
    assert v.reasons == ("our count differs from the checkpoint census by -4.76% (tolerance ±1%)",)
    assert off.checkpoint is not None
    assert off.memory.serve_weights_source == "checkpoint"
    assert off.memory.serve_weights == round(off.checkpoint.bytes / 1e9, 3)
    # a known family whose checkpoint disagrees is not vouched for either
    assert not estimate(known, _census_of(known, 0.9)).verification.vouched


@pytest.mark.parametrize(
    ("name", "total"),
    [
        # transformers 5.24.0's meta-device counts (BertForMaskedLM, T5ForConditionalGeneration)
        ("google-bert__bert-base-uncased", 109_514_298),
        ("google-t5__t5-base", 222_903_552),
        ("google__t5-v1_1-base", 222_903_552),
    ],
)
def test_family_traits_alone_are_exact_without_the_family_reader(name: str, total: int) -> None:
    # BERT's token types, post-norm layout and task heads; T5's bias-free RMSNorm layers and
    # always-tied head: traits, so the general reader with them counts what transformers builds.
    config = load(name)
    assert read_config(config).total == total
    assert read_config(config, use_reader=False).total == total
    assert read_config(config, use_family=False).total != total  # the traits are what carries it


# Gemma 4 text, read by the general reader (its family reader is gone): the real 26B-A4B config
# and the same config with one of Gemma 4's layout keys changed, each against transformers
# 5.24.0's meta-device count of Gemma4ForConditionalGeneration (text model + vision tower),
# computed with `test_estimate_oracle.meta_count`.
GEMMA4_VARIANTS: list[tuple[str, dict[str, Any], int]] = [
    ("as published", {}, 25_805_933_872),
    # the last 10 layers reuse earlier K/V (no k/v/k_norm) and have a double-wide MLP
    ("K/V shared", {"num_kv_shared_layers": 10, "use_double_wide_mlp": True}, 25_886_310_704),
    ("per-layer inputs", {"hidden_size_per_layer_input": 256}, 27_884_165_168),
    ("full layers with v_proj", {"attention_k_eq_v": False}, 25_906_859_312),  # 2 KV heads ignored
    ("no MoE block", {"enable_moe_block": False}, 2_956_793_392),
    ("default global head size", {"global_head_dim": None}, 25_805_933_872),  # 512 by default
]


@pytest.mark.parametrize(
    ("change", "total"),
    [(c, t) for _, c, t in GEMMA4_VARIANTS],
    ids=[n for n, _, _ in GEMMA4_VARIANTS],
)
def test_gemma4_text_is_exact_from_the_general_reader(change: dict[str, Any], total: int) -> None:
    config = load("google__gemma-4-26B-A4B")
    text = dict(config["text_config"])
    for key, value in change.items():
        if value is None:
            text.pop(key)
        else:
            text[key] = value
    config = config | {"text_config": text}
    r = read_config(config)
    assert (r.total, r.unknown) == (total, ())
    assert read_config(config, use_reader=False).total == total
    assert read_config(config, use_family=False).total != total  # the gemma4_text traits carry it


def test_gemma4_layers_by_kind() -> None:
    # 25 sliding layers (16 heads of 256, 8 KV heads) and 5 full layers (16 heads of 512, 2 KV
    # heads, K used as V): each layer a dense GeGLU MLP of 2112 beside 128 experts of 704 (top 8).
    r = read_config(load("google__gemma-4-26B-A4B"))
    h = 2816
    sliding = [s for s in r.layers if s.attention == "sliding"]
    full = [s for s in r.layers if s.attention == "gqa"]
    assert (len(sliding), len(full)) == (25, 5)
    assert (sliding[0].q_width, sliding[0].k_width, sliding[0].kv_bytes_per_token) == (
        16 * 256,
        8 * 256,
        2 * 8 * 256 * 2,
    )
    assert (full[0].q_width, full[0].k_width, full[0].kv_bytes_per_token) == (
        16 * 512,
        2 * 512,
        2 * 2 * 512 * 2,
    )
    attention_full = h * 16 * 512 + 2 * 512 + h * 2 * 512 + 16 * 512 * h  # q, q/k norms, k, o
    ffn = (
        3 * h * 2112 + 128 * 3 * h * 704 + h * 128 + h + 128 + 7 * h
    )  # MLP, experts, router, norms
    assert full[0].params == attention_full + ffn
    assert full[0].active_params == attention_full + ffn - 120 * 3 * h * 704
    assert (full[0].ffn, full[0].experts, full[0].top_k, full[0].ffn_width) == (
        "moe",
        128,
        8,
        2112 + 8 * 704,
    )


def test_gated_deltanet_and_mamba2_layers_keep_what_transformers_torch_path_saves() -> None:
    # Per token, bf16 input, chunked scans in fp32 (bench/activations.py measures real-shaped
    # layers against these within 3%): the mixer's part of the layer's activation bytes.
    from tracker.estimate.memory import layer_activation_bytes

    nxt = read_config(load("Qwen__Qwen3-Next-80B-A3B-Thinking"))
    gdn = nxt.layers[0]
    kd, vd, qd, hv = 16 * 128, 32 * 128, 32 * 128, 32  # key / value / repeated-q widths
    assert gdn.attention == "linear"
    assert gdn.mixer_act == 8 * kd + 34 * vd + 32 * qd + 1318 * hv + 4 * hv * 128 * 128 // 64
    assert gdn.mixer_act == 361_664
    nano = read_config(load("nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B-BF16"))
    ssm = nano.layers[0]
    di, gn, nh, n, chunk = 64 * 64, 8 * 128, 64, 128, 128
    assert ssm.attention == "ssm"
    assert ssm.mixer_act == (
        48 * di + 8 * gn + (12 * chunk + 22) * nh + 20 * nh * n + 8 * nh * 64 * n // chunk
    )
    assert ssm.mixer_act == 501_120
    h = 2688
    assert layer_activation_bytes(ssm, nano, 2.0) == 501_120 + (8 * h + 4)  # one RMSNorm
    # Kimi delta attention keeps the general approximation (memory.py says why)
    k3 = read_config(load("moonshotai__Kimi-K3"))
    kda = next(s for s in k3.layers if s.attention == "linear")
    assert kda.mixer_act == 0


# --- towers: audio encoders, projectors and sub-configs the reader does not read ----------------


def _default_config(model_type: str, arch: str) -> dict[str, Any]:
    """transformers' default config of `model_type` (its reference sizes) as config.json data."""
    import warnings

    pytest.importorskip("transformers")
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        data: dict[str, Any] = CONFIG_MAPPING[model_type]().to_dict()
    return data | {"architectures": [arch]}


def test_glmasr_tower_with_grouped_kv_heads_is_exact() -> None:
    # transformers 5.24.0's meta-device count of this variant (4 of 10 k/v heads, 6 layers)
    config = _default_config("glmasr", "GlmAsrForConditionalGeneration")
    config["audio_config"] |= {"num_key_value_heads": 4, "num_hidden_layers": 6}
    config["audio_config"] |= {"hidden_size": 640, "num_attention_heads": 10}
    config["audio_config"] |= {"intermediate_size": 2560}
    assert estimate(config).params.total == 1_518_998_784


@pytest.mark.parametrize(
    ("model_type", "arch", "total", "tower"),
    [
        # transformers 5.24.0's meta-device counts of the default configs (meta_count)
        ("voxtral", "VoxtralForConditionalGeneration", 4_676_271_104, "audio_tower"),
        ("qwen2_audio", "Qwen2AudioForConditionalGeneration", 12_692_062_208, "audio_tower"),
        ("glmasr", "GlmAsrForConditionalGeneration", 2_136_470_528, "audio_tower"),
        ("qwen3_asr", "Qwen3ASRForConditionalGeneration", 2_039_626_880, "audio_tower"),
        ("omniasr", "OmniASRForConditionalGeneration", 1_638_453_760, "audio_tower"),
        # root tie_word_embeddings wins over text_config's; the aligner is two biased linears
        ("deepseek_vl", "DeepseekVLForConditionalGeneration", 6_720_158_976, "vision_tower"),
    ],
)
def test_whisper_audio_towers_and_projectors_are_counted_exactly(
    model_type: str, arch: str, total: int, tower: str
) -> None:
    est = estimate(_default_config(model_type, arch))
    assert est.params.total == total
    assert est.params.by_component[tower] > 0
    assert est.verification.status is VerificationStatus.VERIFIED


@pytest.mark.parametrize(
    ("model_type", "arch", "tower"),
    [
        # transformers 5.24.0 on the meta device, by module: audio_tower 314,328,704 +
        # multi_modal_projector 4,723,200 (Qwen3-ASR); 315,437,568 + 4,198,400 (OmniASR)
        ("qwen3_asr", "Qwen3ASRForConditionalGeneration", 319_051_904),
        ("omniasr", "OmniASRForConditionalGeneration", 319_635_968),
    ],
)
def test_qwen3_asr_and_omniasr_towers_match_transformers_by_module(
    model_type: str, arch: str, tower: int
) -> None:
    est = estimate(_default_config(model_type, arch))
    assert est.params.by_component["audio_tower"] == tower
    assert est.verification.reasons == () and est.verification.unknown_keys == ()


def _qwen3_asr_tower(mel: int, c: int, d: int, f: int, layers: int, out: int) -> int:
    """Qwen3-ASR's tower and projector from its layer shapes: three 3×3 stride-2 convolutions
    (1→c→c→c, biased), a bias-free linear from c × the mel bins left after three halvings to d,
    blocks of biased q/k/v/out, two LayerNorms and a biased fc1/fc2, a final LayerNorm, and the
    projector d→d→out (both biased)."""
    freq = -(-mel // 8)  # three ceil halvings: ceil(ceil(ceil(mel / 2) / 2) / 2) = ceil(mel / 8)
    convs = (9 * c + c) + 2 * (9 * c * c + c) + c * freq * d
    block = 4 * (d * d + d) + 2 * 2 * d + (d * f + f) + (f * d + d)
    return convs + layers * block + 2 * d + (d * d + d) + (d * out + out)


def _omniasr_tower(
    convs: list[tuple[int, int]], bias: bool, d: int, f: int, layers: int, pos: tuple[int, int]
) -> int:
    """OmniASR's wav2vec 2.0 tower without its projector, from its layer shapes: per (channels,
    kernel) a Conv1d from the previous width (1 for the waveform) and an affine LayerNorm; a
    LayerNorm and a biased linear to d; a grouped position Conv1d (kernel, groups), biased;
    blocks as Qwen3-ASR's; a final LayerNorm."""
    total, prev = 0, 1
    for out, k in convs:
        total += prev * k * out + (out if bias else 0) + 2 * out
        prev = out
    total += 2 * prev + prev * d + d
    kernel, groups = pos
    total += d * (d // groups) * kernel + d
    block = 4 * (d * d + d) + 2 * 2 * d + (d * f + f) + (f * d + d)
    return total + layers * block + 2 * d


def test_audio_tower_layer_shape_counts_agree_with_the_reader() -> None:
    # the layer-shape counts above, on the defaults, give transformers' by-module figures
    assert _qwen3_asr_tower(128, 480, 1024, 4096, 24, 3584) == 319_051_904
    default_convs = [(512, 10)] + [(512, 3)] * 4 + [(512, 2)] * 2
    assert _omniasr_tower(default_convs, True, 1024, 4096, 24, (128, 16)) == 315_437_568


@pytest.mark.parametrize(
    ("model_type", "arch", "audio", "text", "total"),
    [
        # transformers 5.24.0's meta-device counts of these variants of the default configs
        (
            "qwen3_asr",
            "Qwen3ASRForConditionalGeneration",
            {"num_mel_bins": 80, "downsample_hidden_size": 256, "encoder_layers": 18}
            | {"d_model": 896, "encoder_attention_heads": 14, "encoder_ffn_dim": 3584}
            | {"output_dim": 2048},
            {},
            1_900_311_936,
        ),
        (  # an odd mel count (ceil halvings), a position table and embedding scale (no params)
            "qwen3_asr",
            "Qwen3ASRForConditionalGeneration",
            {"num_mel_bins": 81, "downsample_hidden_size": 100, "encoder_layers": 3}
            | {"d_model": 512, "encoder_attention_heads": 8, "encoder_ffn_dim": 1000}
            | {"output_dim": 1024, "scale_embedding": True, "max_position_embeddings": 1500},
            {"hidden_size": 1024, "num_attention_heads": 8, "intermediate_size": 3072},
            545_097_608,
        ),
        (  # bias-free convolutions, three of them, a narrower grouped position convolution
            "omniasr",
            "OmniASRForConditionalGeneration",
            {"conv_bias": False, "conv_dim": [256, 384, 512], "conv_kernel": [7, 5, 3]}
            | {"conv_stride": [4, 3, 2], "num_conv_pos_embeddings": 64}
            | {"num_conv_pos_embedding_groups": 8, "hidden_size": 768, "num_attention_heads": 12}
            | {"num_hidden_layers": 6, "intermediate_size": 3000},
            {"hidden_size": 2048, "num_attention_heads": 16, "num_key_value_heads": 16},
            1_111_701_584,
        ),
        (  # text_config asks for a tie: OmniASR's wrapper has no tied-weights keys, untied
            "omniasr",
            "OmniASRForConditionalGeneration",
            {"hidden_size": 1280, "num_hidden_layers": 48, "intermediate_size": 5120}
            | {"num_attention_heads": 20},
            {"vocab_size": 9812, "tie_word_embeddings": True},
            2_268_767_744,
        ),
    ],
)
def test_qwen3_asr_and_omniasr_variants_are_exact(
    model_type: str, arch: str, audio: dict[str, Any], text: dict[str, Any], total: int
) -> None:
    config = _default_config(model_type, arch)
    config["audio_config"] |= audio
    config["text_config"] |= text
    est = estimate(config)
    assert est.params.total == total
    assert est.verification.status is VerificationStatus.VERIFIED


def test_audio_tower_variants_match_the_layer_shape_counts() -> None:
    # transformers 5.24.0 on the meta device, by module (audio_tower + multi_modal_projector):
    # 6,979,976 + 787,968 (Qwen3-ASR variant), 48,064,592 + 3,149,824 (OmniASR variant)
    config = _default_config("qwen3_asr", "Qwen3ASRForConditionalGeneration")
    config["audio_config"] |= {"num_mel_bins": 81, "downsample_hidden_size": 100}
    config["audio_config"] |= {"encoder_layers": 3, "d_model": 512, "encoder_ffn_dim": 1000}
    config["audio_config"] |= {"encoder_attention_heads": 8, "output_dim": 1024}
    est = estimate(config)
    assert est.params.by_component["audio_tower"] == _qwen3_asr_tower(81, 100, 512, 1000, 3, 1024)
    assert est.params.by_component["audio_tower"] == 7_767_944
    config = _default_config("omniasr", "OmniASRForConditionalGeneration")
    config["audio_config"] |= {"conv_bias": False, "conv_dim": [256, 384, 512]}
    config["audio_config"] |= {"conv_kernel": [7, 5, 3], "conv_stride": [4, 3, 2]}
    config["audio_config"] |= {"num_conv_pos_embeddings": 64, "num_conv_pos_embedding_groups": 8}
    config["audio_config"] |= {"hidden_size": 768, "num_hidden_layers": 6}
    config["audio_config"] |= {"num_attention_heads": 12, "intermediate_size": 3000}
    tower = _omniasr_tower([(256, 7), (384, 5), (512, 3)], False, 768, 3000, 6, (64, 8))
    projector = 768 * 4096 + 4096  # to the default text width
    assert estimate(config).params.by_component["audio_tower"] == tower + projector
    assert tower == 48_064_592 and projector == 3_149_824


@pytest.mark.parametrize(
    ("model_type", "arch", "total"),
    [
        # transformers 5.24.0's meta-device counts: these wrappers declare no tied-weights keys
        # and hold a base text model, so tie_word_embeddings=true in text_config ties nothing
        ("voxtral", "VoxtralForConditionalGeneration", 4_676_271_104),
        ("qwen2_audio", "Qwen2AudioForConditionalGeneration", 12_692_062_208),
        ("omniasr", "OmniASRForConditionalGeneration", 1_638_453_760),
    ],
)
def test_audio_wrappers_without_tied_weights_keys_never_tie_their_head(
    model_type: str, arch: str, total: int
) -> None:
    config = _default_config(model_type, arch)
    config["text_config"] |= {"tie_word_embeddings": True}
    est = estimate(config)
    assert est.params.total == total
    assert est.params.by_component["head"] > 0
    assert (
        f"{model_type}'s wrapper in transformers 5.24 never ties its lm_head: counted untied "
        "although the config says tie_word_embeddings=true"
    ) in est.notes


def test_qwen3_asr_token_classifier_replaces_the_lm_head() -> None:
    # The forced aligner's class. transformers 5.24.0 meta-device counts: 2,049,871,880 with 5000
    # biased labels; 2,039,630,976 with its default two labels and an untied text config (no
    # lm_head is built, so the tie does not matter: 2,039,626,880 + 2048 × 2)
    config = _default_config("qwen3_asr", "Qwen3ASRForTokenClassification")
    labels = {"id2label": {str(i): f"T{i}" for i in range(5000)}}
    est = estimate(config | labels | {"token_classification_bias": True})
    assert est.params.total == 2_049_871_880
    assert est.params.by_component["head"] == 2048 * 5000 + 5000
    config["text_config"] |= {"tie_word_embeddings": False}
    est = estimate(config | {"tie_word_embeddings": False})
    assert est.params.total == 2_039_630_976
    assert est.params.by_component["head"] == 2048 * 2


def test_an_audio_tower_not_modelled_makes_the_estimate_unverified() -> None:
    # Stand-in: transformers' default Qwen3-ASR config with its encoder's model_type renamed.
    config = _default_config("qwen3_asr", "Qwen3ASRForConditionalGeneration")
    config["audio_config"] |= {"model_type": "acme_audio_encoder"}
    est = estimate(config)
    v = est.verification
    assert v.status is VerificationStatus.UNVERIFIED and not v.vouched
    assert v.reasons == (
        "audio tower of type 'acme_audio_encoder' in 'qwen3_asr' is not modelled: not counted",
    )
    assert "audio_tower" not in est.params.by_component
    assert est.params.total == 1_720_574_976  # the text model alone


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"conv_dim": [512, "wide"]}, "audio_config.conv_dim must hold positive integers"),
        ({"conv_dim": []}, "audio_config.conv_dim must be a non-empty list of sizes"),
        ({"conv_kernel": [10, 3]}, "audio_config.conv_kernel has 2 entries, conv_dim 7"),
        ({"num_conv_pos_embedding_groups": 3}, "not divisible by num_conv_pos_embedding_groups"),
    ],
)
def test_malformed_omniasr_convolutions_are_rejected_with_the_key(
    change: dict[str, Any], message: str
) -> None:
    from tracker.shared.errors import EstimateError

    config = _default_config("omniasr", "OmniASRForConditionalGeneration")
    config["audio_config"] |= change
    with pytest.raises(EstimateError, match=message):
        estimate(config)


def test_a_sub_config_no_reader_reads_makes_the_estimate_unverified() -> None:
    # Stand-in: Qwen3-0.6B with a speech encoder sub-config added.
    config = load("Qwen__Qwen3-0.6B") | {"speech_config": {"hidden_size": 1024, "num_layers": 12}}
    v = estimate(config).verification
    assert v.status is VerificationStatus.UNVERIFIED
    assert v.unknown_keys == ("speech_config",)
    assert estimate(load("Qwen__Qwen3-0.6B")).verification.status is VerificationStatus.VERIFIED


def test_custom_code_under_another_types_semantics_is_derived_until_a_census_checks_it() -> None:
    k3 = load("moonshotai__Kimi-K3")
    bare = estimate(k3)
    v = bare.verification
    assert v.status is VerificationStatus.DERIVED and v.vouched  # fit verdicts stand
    assert v.reasons == (
        "custom code read under native model_type 'kimi_linear'; no checkpoint census to check "
        "the count against",
    )
    assert not any("not verified" in note for note in bare.notes)  # no "verified" + "not verified"
    assert estimate(k3, _census_of(k3, 1.0)).verification.status is VerificationStatus.VERIFIED
    assert not estimate(k3, _census_of(k3, 1.05)).verification.vouched
    # custom code of a type transformers builds natively is checked against it (oracle test)
    assert estimate(load("deepseek-ai__DeepSeek-V3")).verification.status.value == "verified"


@pytest.mark.parametrize(
    ("changes", "total"),
    [
        # transformers 5.24.0's meta-device counts of MambaForCausalLM (meta_count)
        ({}, 159_308_544),
        (
            {"hidden_size": 2560, "num_hidden_layers": 64, "intermediate_size": 5120}
            | {"tie_word_embeddings": False, "use_bias": True, "time_step_rank": 160},
            2_897_881_600,
        ),
    ],
)
def test_pure_mamba_is_read_exactly(changes: dict[str, Any], total: int) -> None:
    # Was exit 2: "config lacks num_attention_heads / n_head / num_heads / n_heads".
    config = _default_config("mamba", "MambaForCausalLM") | changes
    est = estimate(config)
    assert est.params.total == total
    assert est.verification.status is VerificationStatus.VERIFIED
    assert set(est.params.by_component) == {"embeddings", "ssm", "norms"} | (
        {"head"} if changes else set()
    )
    # no KV cache: each layer keeps its fixed fp32 scan state and bf16 conv window
    d_inner, state, kernel = config["intermediate_size"], config["state_size"], 4
    per_layer = d_inner * state * 4 + d_inner * (kernel - 1) * 2
    assert est.memory.kv_cache == round(config["num_hidden_layers"] * per_layer / 1e9, 3)


@pytest.mark.parametrize(
    ("changes", "total"),
    [
        # transformers 5.24.0's meta-device counts of Mamba2ForCausalLM (meta_count)
        ({}, 7_285_403_648),
        (
            {"hidden_size": 768, "num_heads": 24, "head_dim": 64, "n_groups": 1}
            | {"num_hidden_layers": 24, "vocab_size": 50288}
            | {"tie_word_embeddings": True, "use_bias": True},
            129_088_512,
        ),
    ],
)
def test_pure_mamba2_is_read_exactly(changes: dict[str, Any], total: int) -> None:
    # Was 21,744,328,704 (num_heads read as attention heads beside an MLP), unverified.
    est = estimate(_default_config("mamba2", "Mamba2ForCausalLM") | changes)
    assert est.params.total == total
    assert est.verification.status is VerificationStatus.VERIFIED
    assert "attention" not in est.params.by_component
    assert "dense_mlp" not in est.params.by_component


def test_attention_heads_alias_of_xglm_is_read() -> None:
    # Was exit 2 (no num_attention_heads). XGLM's sinusoidal positions hold no parameters and
    # scale_embedding is a factor: with its traits (issue 25) the count is transformers 5.24.0's
    # meta-device count and verified.
    e = estimate(_default_config("xglm", "XGLMForCausalLM"))
    assert e.verification.status is VerificationStatus.VERIFIED
    assert e.params.total == 564_463_616


def test_llama4_attends_in_full_every_fourth_layer_as_transformers_fills_no_rope_layers() -> None:
    """Neither Llama 4 config in the corpus has `no_rope_layers`: Llama4TextConfig then makes every
    4th layer (3, 7, ..., 47) a NoPE full-attention layer and the other 36 attend through the
    8,192-token chunk. Before, all 48 were read as chunked and the KV cache at 131,072 tokens came
    out 1.611 GB instead of 7.650 GB."""
    for name in (
        "meta-llama__Llama-4-Scout-17B-16E-Instruct",
        "meta-llama__Llama-4-Maverick-17B-128E-Instruct",
    ):
        config = load(name)
        est = estimate(config, settings=EstimateSettings(serve_seq_len=131_072))
        per_token = 2 * 8 * 128 * 2  # K and V, 8 KV heads of 128, bf16
        full, chunked = 12, 36
        expected = full * 131_072 * per_token + chunked * 8_192 * per_token
        assert est.memory.kv_cache == round(expected / 1e9, 3) == 7.650, name
        # a config that lists its NoPE layers decides for itself
        text = dict(config.get("text_config", config))
        text["no_rope_layers"] = [1] * 47 + [0]
        listed = {**config, "text_config": text} if "text_config" in config else text
        est = estimate(listed, settings=EstimateSettings(serve_seq_len=131_072))
        assert est.memory.kv_cache == round((131_072 + 47 * 8_192) * per_token / 1e9, 3), name
