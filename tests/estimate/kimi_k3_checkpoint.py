"""Kimi-K3's checkpoint as shipped, headers only: built from its real config.json (the corpus's
copy, tests/data/configs/moonshotai__Kimi-K3.json).

The corpus holds no `model.safetensors.index.json` of Kimi-K3, so the tensor set is derived from
the config, as the repo's remote code (auto_map: `modeling_kimi_linear`, Kimi-Linear's naming)
lays it out: MLA layers at `linear_attn_config.full_attn_layers` and Kimi delta attention at
`kda_layers` (both 1-indexed), a dense MLP in layer 0 (`first_k_dense_replace`), then latent MoE
blocks: a router with its correction bias, the latent projections to
`routed_expert_hidden_size`, 896 routed experts (w1/w2/w3) and the shared experts. Its
`quantization_config` (compressed-tensors `mxfp4-pack-quantized`, group 32, U8 scales; ignoring
attention, shared experts, the dense MLP, the head and the vision tower) makes every routed
expert's weight a U8 `weight_packed` (two 4-bit values per byte) plus a U8 `weight_scale` per 32
values; everything else is BF16 (F32 for the KDA gate's A_log and dt_bias and the router's
correction bias). The latent projections are taken as BF16, as the census of
tests/preflight/test_preflight_capacity.py counts them (whether the quantizer reaches them is not
in the config). The vision tower and projector are stand-ins of the
right size (27 blocks at `vt_hidden_size` / `vt_intermediate_size`): the config gives their
widths, not their tensor names. The shards are split evenly (the real split is unknown); each
file is its header followed by a hole of its data's size (a sparse file: no weights written).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tracker.replica.stgen import Tensor, build_shards, index_json, shard_evenly

CONFIG = Path(__file__).parents[1] / "data" / "configs" / "moonshotai__Kimi-K3.json"


def _mxfp4(name: str, out_f: int, in_f: int, group: int) -> list[Tensor]:
    return [
        Tensor(f"{name}.weight_packed", "U8", (out_f, in_f // 2)),
        Tensor(f"{name}.weight_scale", "U8", (out_f, in_f // group)),
    ]


def _bf16(name: str, *shape: int) -> Tensor:
    return Tensor(name, "BF16", tuple(shape))


def tensors(config: dict[str, Any]) -> list[Tensor]:
    """Every tensor of the checkpoint, in state-dict order."""
    t = config["text_config"]
    v = config["vision_config"]
    group = t["quantization_config"]["config_groups"]["group_0"]["weights"]["group_size"]
    h, vocab = t["hidden_size"], t["vocab_size"]
    heads = t["num_attention_heads"]
    q_lora, kv_lora = t["q_lora_rank"], t["kv_lora_rank"]
    nope, rope, vd = t["qk_nope_head_dim"], t["qk_rope_head_dim"], t["v_head_dim"]
    lin = t["linear_attn_config"]
    kh, kd, conv = lin["num_heads"], lin["head_dim"], lin["short_conv_kernel_size"]
    full = {i - 1 for i in lin["full_attn_layers"]}
    experts, mi = t["num_experts"], t["moe_intermediate_size"]
    latent = t["routed_expert_hidden_size"]
    shared = t["num_shared_experts"] * mi
    lm = "language_model.model"
    out = [_bf16(f"{lm}.embed_tokens.weight", vocab, h)]
    for i in range(t["num_hidden_layers"]):
        p = f"{lm}.layers.{i}"
        out += [
            _bf16(f"{p}.input_layernorm.weight", h),
            _bf16(f"{p}.post_attention_layernorm.weight", h),
        ]
        for res in ("self_attention_res", "mlp_res"):
            out += [_bf16(f"{p}.{res}.proj.weight", 1, h), _bf16(f"{p}.{res}.norm.weight", h)]
        a = f"{p}.self_attn"
        if i in full:
            out += [
                _bf16(f"{a}.q_a_proj.weight", q_lora, h),
                _bf16(f"{a}.q_a_layernorm.weight", q_lora),
                _bf16(f"{a}.q_b_proj.weight", heads * (nope + rope), q_lora),
                _bf16(f"{a}.kv_a_proj_with_mqa.weight", kv_lora + rope, h),
                _bf16(f"{a}.kv_a_layernorm.weight", kv_lora),
                _bf16(f"{a}.kv_b_proj.weight", heads * (nope + vd), kv_lora),
                _bf16(f"{a}.g_proj.weight", heads * vd, h),
                _bf16(f"{a}.o_proj.weight", h, heads * vd),
            ]
        else:
            width = kh * kd
            out += [_bf16(f"{a}.{x}_proj.weight", width, h) for x in ("q", "k", "v")]
            out += [_bf16(f"{a}.{x}_conv1d.weight", width, 1, conv) for x in ("q", "k", "v")]
            out += [
                Tensor(f"{a}.A_log", "F32", (1, 1, kh, 1)),
                Tensor(f"{a}.dt_bias", "F32", (width,)),
                # use_full_rank_gate: the forget gate is one full-rank projection
                _bf16(f"{a}.f_proj.weight", width, h),
                _bf16(f"{a}.b_proj.weight", kh, h),
                _bf16(f"{a}.g_a_proj.weight", kd, h),
                _bf16(f"{a}.g_b_proj.weight", width, kd),
                _bf16(f"{a}.o_norm.weight", kd),
                _bf16(f"{a}.o_proj.weight", h, width),
            ]
        if i < t["first_k_dense_replace"]:
            inter = t["intermediate_size"]
            out += [
                _bf16(f"{p}.mlp.gate_proj.weight", inter, h),
                _bf16(f"{p}.mlp.up_proj.weight", inter, h),
                _bf16(f"{p}.mlp.down_proj.weight", h, inter),
            ]
            continue
        m = f"{p}.block_sparse_moe"
        out += [
            _bf16(f"{m}.gate.weight", experts, h),
            Tensor(f"{m}.gate.e_score_correction_bias", "F32", (experts,)),
            _bf16(f"{m}.latent_norm.weight", latent),
        ]
        out += [
            _bf16(f"{m}.fc1_latent_proj.weight", latent, h),
            _bf16(f"{m}.fc2_latent_proj.weight", h, latent),
        ]
        for j in range(experts):
            e = f"{m}.experts.{j}"
            out += _mxfp4(f"{e}.w1", mi, latent, group)
            out += _mxfp4(f"{e}.w2", latent, mi, group)
            out += _mxfp4(f"{e}.w3", mi, latent, group)
        out += [
            _bf16(f"{m}.shared_experts.gate_proj.weight", shared, h),
            _bf16(f"{m}.shared_experts.up_proj.weight", shared, h),
            _bf16(f"{m}.shared_experts.down_proj.weight", h, shared),
        ]
    out += [_bf16(f"{lm}.norm.weight", h), _bf16("language_model.lm_head.weight", vocab, h)]
    vh, vi = v["vt_hidden_size"], v["vt_intermediate_size"]
    patch = v["patch_size"]
    out.append(_bf16("vision_tower.patch_embed.proj.weight", vh, 3, patch, patch))
    out.append(_bf16("vision_tower.patch_embed.pos_emb.weight", 64, 64, vh))
    for k in range(v["vt_num_hidden_layers"]):
        b = f"vision_tower.encoder.blocks.{k}"
        out += [
            _bf16(f"{b}.norm0.weight", vh),
            _bf16(f"{b}.wqkv.weight", 3 * vh, vh),
            _bf16(f"{b}.wo.weight", vh, vh),
            _bf16(f"{b}.norm1.weight", vh),
            _bf16(f"{b}.mlp.fc0.weight", vi, vh),
            _bf16(f"{b}.mlp.fc1.weight", vh, vi),
        ]
    merged = vh * v["merge_kernel_size"][0] * v["merge_kernel_size"][1]
    out += [
        _bf16("mm_projector.pre_norm.weight", vh),
        _bf16("mm_projector.proj.0.weight", merged, merged),
        _bf16("mm_projector.proj.2.weight", t["hidden_size"], merged),
    ]
    return out


def write_checkpoint(root: Path, shards: int = 64, drop: int | None = None) -> dict[str, Any]:
    """Write config.json, model.safetensors.index.json and `shards` header-only shard files into
    `root` (leaving out shard number `drop`, 1-based, when given). Returns the config."""
    config = json.loads(CONFIG.read_text())
    layout = shard_evenly(tensors(config), shards)
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.json").write_text(json.dumps(config, indent=2))
    (root / "model.safetensors.index.json").write_bytes(index_json(layout))
    for k, shard in enumerate(build_shards(layout), start=1):
        if k == drop:
            continue
        with (root / shard.path).open("wb") as fh:
            fh.write(shard.head)
            fh.truncate(shard.size)
    return config
