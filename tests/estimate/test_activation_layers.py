"""The per-layer activation formula on the families `bench/activations.py` measures beyond the
Llama / DeepSeek-V3 rows of test_estimate_settings.py: each expected value is written out from
the layer's shapes, and the comment gives what autograd saved per token in the measurement
(bf16, CPU, torch 2.13, transformers 5.24; `python -m bench.run activations`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tracker.estimate.memory import layer_activation_bytes
from tracker.estimate.params import read_config

CONFIGS = Path(__file__).parents[1] / "data" / "configs"


def load(name: str) -> dict[str, Any]:
    return json.loads((CONFIGS / f"{name}.json").read_text())


def per_token(name: str, layer: int, tokens: int, decoder_of_encdec: bool = False) -> float:
    r = read_config(load(name))
    index = layer + (r.encoder_layers if decoder_of_encdec else 0)
    return layer_activation_bytes(r.layers[index], r, 2.0, tokens)


def test_mla_whose_v_is_not_padded_keeps_kv_b_output_and_the_dsa_mask() -> None:
    # GLM-5 layer 0 (measured 406,032 at T = 128): V's head (256) equals q/k's, so V is a view
    # of kv_b_proj's output (64 heads × (192 nope + 256 v)), all of which SDPA keeps; o_proj's
    # input is a copy; the DSA indexer's top-k reaches SDPA as a bf16 T × T mask (2·T).
    h, heads, q, v, kv_b, t = 6144, 64, 64 * 256, 64 * 256, 64 * 448, 128
    expected = 2 * (8 * h + 4) + 8 * (2048 + 512) + 2 * (q + q + kv_b + 2 * v) + 4 * heads
    expected += 2 * t + 2 * 4 * 12288
    assert expected == 406_024
    assert per_token("zai-org__GLM-5", 0, t) == expected
    # DeepSeek-V3.2 layer 0 (measured 508,688 at T = 128): DeepSeek-V3's MLA (508,424) plus the
    # mask
    assert per_token("deepseek-ai__DeepSeek-V3.2", 0, t) == 508_424 + 2 * t


def test_gemma_norms_in_fp32_and_gemma4_moe_beside_the_dense_mlp() -> None:
    # Gemma's RMSNorm multiplies by (1 + w) in fp32: the fp32 input copy and the fp32 product,
    # 8·h, two fp32 scalars, and the bf16 output where a linear reads it. Gemma 3 1B layer 5
    # (measured 112,220 at T = 512): input and pre-FFN norms read, the two post-norms not;
    # q/k norms in fp32 (8 per element, 8 per head), Q/K/V/O as SDPA gets them, log-sum-exp.
    h, q, k, heads, kvh, inter = 1152, 1024, 256, 4, 1, 6912
    expected = 2 * (10 * h + 8) + 2 * (8 * h + 8) + 2 * (q + k + k + q) + 4 * heads
    expected += 8 * (q + k) + 8 * (heads + kvh) + 2 * 4 * inter
    assert expected == 112_216
    assert per_token("google__gemma-3-1b-it", 5, 512) == expected
    # Gemma 4 26B-A4B layer 0, a sliding layer (measured 426,925 at T = 128 with 16 of its 128
    # experts): two read norms, five unread (post-attention, the dense branch's post-norm, the
    # MoE branch's pre- and post-norm, the final post-norm); fp32 q/k norms, a weightless V norm
    # (4·v, 8 per KV head); the dense gated MLP (2112) beside the experts; the router's
    # normalized, scaled input; per routed pair (8) the gathered input, output and expert FFN
    # (704); fp32 router probabilities over 128 experts.
    h, q, kv, heads, kvh = 2816, 16 * 256, 8 * 256, 16, 8
    attention = 2 * (q + kv + kv + q) + 4 * heads
    attention += 8 * (q + kv) + 8 * (heads + kvh) + 4 * kv + 8 * kvh
    norms = 2 * (10 * h + 8) + 5 * (8 * h + 8)
    moe = 4 * 128 + 8 * (2 * 2 * h + 2 * 4 * 704 + 28) + 8 + 2 * 4 * 2112 + (8 * h + 8)
    assert per_token("google__gemma-4-26B-A4B", 0, 128) == norms + attention + moe == 426_600
    # layer 5, global (measured 487,798 at T = 512 with 16 experts): heads 512 wide, so
    # transformers' SDPA path repeats K and V to all 16 heads (k = v = q in SDPA)
    q, kv, kvh = 16 * 512, 2 * 512, 2
    attention = 2 * 4 * q + 4 * heads + 8 * (q + kv) + 8 * (heads + kvh) + 4 * kv + 8 * kvh
    assert per_token("google__gemma-4-26B-A4B", 5, 512) == norms + attention + moe


def test_eager_attention_of_families_without_sdpa() -> None:
    # BLOOM-560m layer 0 (eager: no SDPA path in transformers 5.24; measured 43,016 at T = 128
    # and 79,880 at T = 512): LayerNorms (input and output, mean and rstd), the fused qkv
    # output, the fp32 softmax output and its bf16 copy per head over T keys, the merged output,
    # the GELU MLP's input and output. The first norm's input is the layer's input, which the
    # measurement leaves out (+2,048).
    h, heads = 1024, 16
    for t, measured in ((128, 43_016), (512, 79_880)):
        expected = 2 * (4 * h + 4) + 2 * 4 * h + 6 * heads * t + 2 * 2 * 4096
        assert per_token("bigscience__bloom-560m", 0, t) == expected == measured + 2 * h


def test_encoder_and_encoder_decoder_layers() -> None:
    # BertLayer (post-norm, measured 23,096 per token at T = 128 and 512): Q, K, V, the SDPA
    # output (o's input is a view), log-sum-exp; the first LayerNorm keeps its input and output
    # (the MLP reads it), the second only its input (its output leaves the layer); GELU MLP.
    h, heads, inter = 768, 12, 3072
    expected = 2 * 4 * h + 4 * heads + (4 * h + 4) + (2 * h + 4) + 2 * 2 * inter
    assert expected == 23_096
    assert per_token("google-bert__bert-base-uncased", 0, 128) == expected
    assert per_token("google-bert__bert-base-uncased", 0, 512) == expected
    # T5-base encoder block 0 (measured 37,896 at T = 128): T5LayerNorm keeps its bf16 input
    # too, (4 + 3a)·h + 4; the learned relative bias needs grad, so SDPA takes its fp32 math
    # path (fp32 Q, K, V, fp32 T × T probabilities) and block 0 keeps the int64 bucket
    # indices, 8·T; ReLU keeps only its output. The first norm's input is the layer's input
    # (left out by the measurement: +1,536).
    t = 128
    norm = 10 * h + 4
    self_attn = 4 * 3 * h + 4 * heads * t + 2 * h
    enc0 = 2 * norm + self_attn + 8 * t + 2 * inter
    assert per_token("google-t5__t5-base", 0, t) == enc0 == 37_896 + 2 * h
    assert per_token("google-t5__t5-base", 1, t) == enc0 - 8 * t
    # decoder block 0 (measured 54,972 at T = 128): a causal bool mask (T) in self-attention;
    # cross-attention on flash SDPA with the zero bias as a bf16 mask (2·heads·T): Q, encoder
    # K and V, output, log-sum-exp; three norms.
    cross = 2 * 4 * h + 4 * heads + 2 * heads * t
    dec0 = 3 * norm + self_attn + 8 * t + t + cross + 2 * inter
    assert per_token("google-t5__t5-base", 0, t, decoder_of_encdec=True) == dec0 == 54_972 + 2 * h


def test_gpt_oss_clamped_swiglu_experts_and_top_k_router() -> None:
    # gpt-oss-20b layer 0 (measured 314,937 at T = 128 and 364,088 at T = 512, 16 of its 32
    # experts; an earlier run with 4 experts gave 314,936 at T = 128): fp32-product RMSNorms;
    # eager attention with a sink per head (Q, K, the softmax over T + 1 in bf16, int64 row
    # maxima, V, output); per routed pair (top-4) the gathered input and expert output (2·h),
    # the clamped SwiGLU's 7 tensors at expert width (gate_up 2·I, clamped gate, sigmoid,
    # up + 1, glu, product), int64 top-k index, permutation, bias index and inverse
    # permutation, the bf16 top-k softmax and its sorted copy; no fp32 router probabilities.
    h, q, heads, inter, k = 2880, 64 * 64, 64, 2880, 4
    for t in (128, 512):
        norms = 2 * (10 * h + 8)
        attention = 2 * 4 * q + 2 * heads * (t + 1) + 8 * heads
        moe = k * (2 * 2 * h + 7 * 2 * inter + 40 + 2 * 2)
        assert per_token("openai__gpt-oss-20b", 0, t) == norms + attention + moe
    assert per_token("openai__gpt-oss-20b", 0, 128) == 314_944


def test_llama4_routes_every_token_through_every_expert() -> None:
    # Llama 4 Scout layer 0 (measured 1,573,328 at T = 128 and at T = 512; 16 experts,
    # top-1): Llama4TextMoe repeats the input once per expert and scales it by the expert's
    # sigmoid score (0 where not chosen), so all 16 experts keep the repeated and the scaled
    # input (2·h), their SwiGLU (4·I) and the transposed score (1); fp32 sigmoid scores over E,
    # the top-1's int64 index; the shared expert (intermediate_size wide) as a SwiGLU.
    # Not counted (-1.6%): the parameter-free L2 q/k norm keeps fp32 q and k and its rsqrt,
    # 4·(q + k) + 4·(heads + KV heads) = 24,768 on this layer.
    h, q, kv, heads, inter, e = 5120, 40 * 128, 8 * 128, 40, 8192, 16
    norms = 2 * (8 * h + 4)
    attention = 2 * (q + kv + kv + q) + 4 * heads
    moe = 4 * e + e * (2 * 2 * h + 4 * 2 * inter + 2) + 8 + 2 * 4 * inter
    assert (
        per_token("meta-llama__Llama-4-Scout-17B-16E-Instruct", 0, 128) == norms + attention + moe
    )
    # Maverick's MoE layers (odd indices) have 128 experts, all of them kept for every token
    maverick = norms + attention + 4 * 128 + 128 * (2 * 2 * h + 4 * 2 * inter + 2) + 8
    maverick += 2 * 4 * inter
    assert per_token("meta-llama__Llama-4-Maverick-17B-128E-Instruct", 1, 128) == maverick


def test_t5_v1_1_gated_gelu_keeps_seven_tensors_at_its_width() -> None:
    # T5 v1.1 ("gated-gelu": T5Config makes it the Python tanh GELU, NewGELUActivation). Encoder
    # block 0 of google/t5-v1_1-base, measured 60,424 per token at T = 128: the FFN keeps wi_0's
    # output, tanh, 1 + tanh, x/2, the GELU's output, wi_1's output and the product (wo's
    # input), 7 tensors of d_ff = 2,048 (before: 2, the formula gave 41,480, -31%). Decoder
    # block 0 measured 77,500. Both + 1,536: the first norm's input, left out by the measurement.
    h, heads, ff, t = 768, 12, 2048, 128
    norm = 10 * h + 4
    self_attn = 4 * 3 * h + 4 * heads * t + 2 * h
    enc0 = 2 * norm + self_attn + 8 * t + 7 * 2 * ff
    assert per_token("google__t5-v1_1-base", 0, t) == enc0 == 60_424 + 2 * h
    cross = 2 * 4 * h + 4 * heads + 2 * heads * t
    dec0 = 3 * norm + self_attn + 8 * t + t + cross + 7 * 2 * ff
    assert per_token("google__t5-v1_1-base", 0, t, decoder_of_encdec=True) == dec0 == 77_500 + 2 * h
