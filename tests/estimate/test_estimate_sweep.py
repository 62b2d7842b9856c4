"""The estimate across all of transformers 5.24.0 (issue 25): never more than 1% off while vouched.

The sweep (bench/sweep.py) takes every config class of the pinned transformers with a causal-LM
(else base) model class, its default config with `architectures` set to that class, and counts it
on the meta device; the counts are cached in tests/data/estimate/sweep-transformers-5.24.0.jsonl.
Here every row is estimated in-process, a few through the installed `tracker estimate --json`,
and a fixed sample is rebuilt live with transformers to check the cache.
"""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bench.sweep import TABLE, Result, Row, classify, estimate_row, load_table, summary
from tracker.estimate import classes
from tracker.estimate.classes import Role
from tracker.shared.estimate_values import VerificationStatus

TRACKER = Path(sys.executable).with_name("tracker")

ONCE_SILENTLY_WRONG = (
    "bart",
    "marian",
    "mbart",
    "pegasus",
    "whisper",
    "qwen3_vl_text",
    "idefics3",
    "qwen2_audio",
    "voxtral",
    "video_llama_3",
    "omniasr",
)
"""The 11 classes issue 25 found more than 1% off and verified: the count was of the family's
usual class with its head, not of the class `architectures[0]` names."""


@pytest.fixture(scope="module")
def rows() -> list[Row]:
    return load_table()


def _offenders(results: list[Result]) -> list[str]:
    return [
        f"{r.row.model_type} {r.row.architecture}: {r.derived} vs {r.row.count} "
        f"({r.delta_pct}%, {r.status})"
        for r in results
        if r.outcome == "silently-wrong"
    ]


def test_no_class_of_transformers_is_more_than_1pct_off_while_vouched(rows: list[Row]) -> None:
    """Every class in the table, estimated in-process: none is more than 1% off the meta-device
    count unless marked unverified; the outcome counts are at least what issue 25's item 3
    reached: 625 classes, 231 exact and 363 within 1% (64% of the 569 built; the standalone
    vision transformers, speech encoders, ConvNeXts, ResNets, RegNet, Swins, FocalNet, Conformers,
    merger ViTs, Mix Transformers, V-JEPA 2, SegGPT, SAM's image encoder and InternVL read, and more of
    BERT's lineage, EfficientNet, LeViT, CvT, MobileViT V1 and V2, SamModel, YOLOS and
    T5Gemma); causal-LM classes 164 of the 176 built within 1%
    (93%), and only 1 refused; at most 79 classes of all refused (118 before encoders with no
    vocabulary were read as their stack, unverified)."""
    results = [estimate_row(r) for r in rows]
    assert len(results) == 625
    assert _offenders(results) == []
    counts = summary(results)
    within = counts["all"]["exact"] + counts["all"]["within-1%"]
    causal = counts["causal"]["exact"] + counts["causal"]["within-1%"]
    built = sum(n for k, n in counts["causal"].items() if k != "not-built")
    assert counts["all"]["exact"] >= 231, counts
    assert within >= 363 and causal >= 164, counts
    assert counts["all"]["refused"] <= 79, counts
    assert within / (len(results) - counts["all"]["not-built"]) >= 0.60, counts
    assert built == 176 and causal / built >= 0.90, counts
    assert counts["causal"]["refused"] <= 1, counts
    by_type = {r.row.model_type: r for r in results}
    for model_type in ONCE_SILENTLY_WRONG:  # all exact now
        assert (by_type[model_type].outcome, by_type[model_type].status) == ("exact", "verified")


def test_the_named_class_is_counted(rows: list[Row]) -> None:
    """The class `architectures[0]` names decides head, towers and stacks: BartForCausalLM is the
    decoder with its LM head, Qwen2AudioModel has no head; the same config naming the family's
    usual class counts that class (transformers 5.24.0's meta-device counts)."""
    by_type = {r.model_type: r for r in rows}
    bart = by_type["bart"]
    assert (bart.architecture, bart.count) == ("BartForCausalLM", 254_084_096)
    assert estimate_row(bart).derived == 254_084_096
    # BartForConditionalGeneration: both stacks around one shared embedding, the head tied to it
    whole = Row("bart", "BartForConditionalGeneration", {}, 406_291_456, None, "")
    whole.config.update(bart.config, architectures=[whole.architecture])
    assert (estimate_row(whole).derived, estimate_row(whole).status) == (406_291_456, "verified")
    audio = by_type["qwen2_audio"]
    assert (audio.architecture, audio.count) == ("Qwen2AudioModel", 12_069_732_352)
    assert (estimate_row(audio).derived, estimate_row(audio).status) == (12_069_732_352, "verified")
    # Qwen2AudioForConditionalGeneration adds its untied LM head (622,329,856)
    head = Row("qwen2_audio", "Qwen2AudioForConditionalGeneration", {}, 12_692_062_208, None, "")
    head.config.update(audio.config, architectures=[head.architecture])
    assert estimate_row(head).outcome == "exact"
    # VideoLlama3ForConditionalGeneration: its own tower and two-linear projector, and the head
    video = by_type["video_llama_3"]
    full = Row("video_llama_3", "VideoLlama3ForConditionalGeneration", {}, 12_155_424_000, None, "")
    full.config.update(video.config, architectures=[full.architecture])
    assert (estimate_row(full).outcome, estimate_row(full).status) == ("exact", "verified")


def test_a_class_transformers_lacks_is_said_and_unverified(rows: list[Row]) -> None:
    """A class the pinned transformers does not have, with no auto_map: a `class-unknown` finding
    and an unverified estimate whose reason names the class."""
    from tracker.estimate import estimate

    llama = next(r for r in rows if r.model_type == "llama").config
    e = estimate(dict(llama, architectures=["LlamaForTimeTravel"]))
    assert e.verification.status is VerificationStatus.UNVERIFIED
    assert any(
        "'LlamaForTimeTravel' is not in transformers 5.24.0" in x for x in e.verification.reasons
    )
    assert [f.id for f in e.findings if f.id.startswith("class-")] == ["class-unknown"]
    custom = estimate(
        dict(llama, architectures=["LlamaForTimeTravel"], auto_map={"AutoModel": "m.X"})
    )
    assert "class-unknown" not in custom.flags


@pytest.mark.parametrize(
    ("name", "role", "known"),
    [
        ("BartForCausalLM", Role.DECODER, True),
        ("xLSTMForCausalLM", Role.DECODER, True),
        ("Qwen2AudioModel", Role.BASE, True),
        ("Qwen3VLTextModel", Role.BASE, True),
        ("GPT2LMHeadModel", Role.LM, True),
        ("ReformerModelWithLMHead", Role.LM, True),
        ("Qwen3_5ForConditionalGeneration", Role.LM, True),
        ("T5EncoderModel", Role.OTHER, True),
        ("BertForQuestionAnswering", Role.OTHER, True),
        ("VoxtralRealtimeTextModel", Role.BASE, False),  # named by an auto mapping, not exported
        ("LlamaForTimeTravel", Role.OTHER, False),
        ("", Role.LM, False),
    ],
)
def test_class_roles(name: str, role: Role, known: bool) -> None:
    assert (classes.role(name), classes.known(name)) == (role, known)


def test_a_head_the_estimate_does_not_model_is_unverified(rows: list[Row]) -> None:
    """A question-answering head on a causal family: counted as the causal LM, unverified with a
    reason naming the class."""
    from tracker.estimate import estimate

    qwen = next(r for r in rows if r.model_type == "qwen3").config
    e = estimate(dict(qwen, architectures=["Qwen3ForQuestionAnswering"]))
    assert e.verification.status is VerificationStatus.UNVERIFIED
    assert any("'Qwen3ForQuestionAnswering' builds a head" in x for x in e.verification.reasons)


def test_installed_cli_agrees_with_the_oracle(rows: list[Row], tmp_path: Path) -> None:
    """Classes through the installed `tracker estimate --json` process: exact for the
    decoder-only and base-model classes issue 25 found wrong, and for a vision transformer, a
    speech encoder and a Swin built alone (refused or unverified before)."""
    for model_type in ("bart", "whisper", "voxtral", "qwen3_vl_text", "vit", "wav2vec2", "swin"):
        row = next(r for r in rows if r.model_type == model_type)
        path = tmp_path / f"{model_type}.json"
        path.write_text(json.dumps(row.config))
        out = subprocess.run(
            [str(TRACKER), "estimate", str(path), "--json"],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert out.returncode == 0, out.stderr
        e = json.loads(out.stdout)
        result = classify(row, e["params"]["total"], e["verification"]["status"], "")
        assert (result.outcome, e["architecture"]) == ("exact", row.architecture), result
        if model_type == "vit":  # one 224×224 image: 196 patches and [CLS], not 4,096 tokens
            m = e["memory_gb"]
            assert (m["train_tokens"], m["serve_tokens"], m["serve_prefill"]) == (197, 197, 0.003)
            assert m["input"].startswith("one input of 197 tokens")


@pytest.mark.slow
def test_the_cached_table_is_transformers_own() -> None:
    """The table covers exactly the classes the installed transformers 5.24.0 maps, and a fixed
    sample of them (the 11 issue 25 found wrong plus 9 drawn with seed 25) rebuilt live on the
    meta device gives the same config and count as the table."""
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("torch")
    from bench.sweep import (
        CLASSES,
        TRANSFORMERS_VERSION,
        classes,
        model_class_names,
        oracle_row,
        quiet_transformers,
    )

    assert transformers.__version__ == TRANSFORMERS_VERSION
    assert json.loads(CLASSES.read_text())["classes"] == model_class_names()
    table = {r.model_type: r for r in load_table(TABLE)}
    assert [(r.model_type, r.architecture, r.mapping) for r in table.values()] == classes()
    rest = sorted(set(table) - set(ONCE_SILENTLY_WRONG))
    sample = [*ONCE_SILENTLY_WRONG, *random.Random(25).sample(rest, 9)]
    with quiet_transformers():
        for model_type in sample:
            cached = table[model_type]
            live = oracle_row(model_type, cached.architecture, cached.mapping)
            assert live == cached, model_type


READ_RIGHT = {
    # issue 25 item 3: classes once more than 1% off (or refused) that are now exact
    "nemotron_h": "verified",  # layers_block_type with mlp / moe entries: one block per layer
    "t5gemma": "verified",  # two Gemma 2 stacks and cross-attention (refused before)
    "arcee": "verified",  # up/down MLP (ReLU²)
    "apertus": "verified",  # up/down MLP with xIELU's two learned alphas, q/k norms
    "apertus1p5_text": "verified",
    "nanochat": "verified",  # fc1/fc2 MLP, norms without weights
    # BERT's code under other names, and its causal-LM head (transform, tied decoder, bias)
    "bert": "verified",
    "roberta": "verified",
    "camembert": "verified",
    "xlm-roberta": "verified",
    "data2vec-text": "verified",
    "ernie": "verified",
    "afmoe": "verified",  # num_dense_layers, q gate, sandwich norms, expert bias
    "ernie4_5_moe": "verified",  # moe_layer_start/end_index, moe_interval, moe_k, moe_statics
    "electra": "verified",  # embedding_size: narrow embeddings projected up, narrow MLM head
    "rembert": "verified",  # input/output_embedding_size: a decoder of the head's own width
    "xglm": "verified",  # biased q/k/v/o, fc1/fc2, LayerNorms, sinusoidal positions
    "ctrl": "verified",  # dff, biased linears, a tied head with its own bias
    "lfm2": "verified",  # block_auto_adjust_ff_dim, full_attn_idxs, short-conv layers
    "lfm3": "verified",  # conv layer_types, sandwich norms, attention gate
    "doge": "verified",  # is_moe false: no experts; dynamic mask attention, residual scales
    "longcat_flash": "verified",  # paired sublayers, moe_topk, zero experts in the router
    "trocr": "verified",  # a decoder-only config sized by decoder_layers (was refused)
    "xlm": "verified",  # emb_dim, language embeddings, post-norm layers (was refused)
    "rwkv": "verified",  # time- and channel-mixing blocks, no heads (was refused)
    "falcon_h1": "verified",  # attention and Mamba2 side by side, mamba_rms_norm
    "gemma4_unified_text": "verified",  # per_layer_config head sizes, Gemma 4's norms
    "big_bird": "verified",  # BERT's reader with the pooler under its LM head
    "recurrent_gemma": "verified",  # block_types cycled, RG-LRU blocks, local attention
    "xmod": "verified",  # per-language adapters
    "roc_bert": "verified",  # pronunciation and shape embeddings, map_inputs_layer
    "jetmoe": "verified",  # mixture of attention heads and MoE MLP
    "zamba": "verified",  # Mamba and hybrid layers around one shared attention block
    "xlstm": "verified",  # mLSTM blocks sized by their factors, gated FFN rounded up
    "zamba2": "verified",  # shared blocks with per-slot adapters, Mamba2 layers
    "gemma3n_text": "verified",  # per-layer FFN widths, AltUp, LAuReL (was refused)
    "prophetnet": "verified",  # the n-gram decoder alone (was refused)
    "albert": "verified",  # embedding_size projection, layers shared across groups
    "minimax": "verified",  # lightning-attention linear layers
    "xlnet": "verified",  # two-stream relative attention, d_inner, lm_loss bias
    # base models of BERT's code with more embeddings (were unverified at -1.7 … -3.7%)
    "layoutlm": "verified",  # x, y, height and width tables
    "visual_bert": "verified",  # visual token types, positions and projection
    "tapas": "verified",  # seven token-type tables (type_vocab_sizes)
    "yoso": "verified",  # two more positions, no pooler
    "cosmos3_edge_text": "verified",  # fc1/fc2 under relu2 (was unverified at +31.5%)
}

ENCODERS_READ = (
    # standalone vision transformers, no vocabulary (tracker/estimate/vit.py): once refused
    "vit",  # [CLS], position table, pooler
    "deit",  # and the distillation token
    "dpt",
    "ijepa",  # no [CLS]
    "vit_msn",
    "vit_mae",  # its decoder is not in ViTMAEModel
    "vivit",  # tubelets of [frames, height, width]
    "videomae",  # q and v biased, k not; no final norm under mean pooling
    "audio-spectrogram-transformer",  # patches over mel bins × frames, strided per axis
    "dinov2",  # mlp_ratio, layer scales, mask token
    "dinov2_with_registers",  # register tokens
    "tipsv2_vision_model",
    "pixio",  # n_cls_tokens
    "vitdet",  # positions of the pretraining grid
    "beit",  # no position table, layer scales, the mean-pooling norm
    "data2vec-vision",
    "internvl_vision",  # attention_bias, list patch and image sizes
    "qianfan_ocr_vision",
    "clip_vision_model",  # bias-free patch conv, pre-norm
    "chinese_clip_vision_model",
    "mlcd",  # rotary: only the [CLS]'s half-head position
    "mlcd_vision_model",
    "siglip_vision_model",  # attention-pooling head
    "siglip2_vision_model",  # num_patches positions
    "idefics3_vision",
    "smolvlm_vision",
    "aimv2_vision_model",  # RMSNorms, gated MLP, its own pooling head
    "pixtral",  # RMSNorms, gated MLP, no biases
    # standalone towers vision.py counts inside their wrappers
    "qwen3_vl_vision",
    "qwen3_vl_moe_vision",
    "qwen3_5_vision",
    "qwen3_5_moe_vision",
    "qwen4_exp_vision",
    "cohere_compass_vision",
    "gemma4_vision",
    "video_llama_3_vision",
    # the wav2vec 2.0 lineage (tracker/estimate/speech.py): once unverified at -8.8 … -9.9%
    "wav2vec2",  # GroupNorm on the first convolution, weight-normed position convolution
    "hubert",
    "unispeech",
    "unispeech-sat",
    "wavlm",  # gated relative position bias, the bucket table in layer 0
    "data2vec-audio",  # LayerNorm on every convolution, stacked position convolutions
    "wav2vec2-conformer",  # Conformer blocks with relative-position attention
    # audio encoders alone, counted by vision.py's audio tower readers
    "qwen2_audio_encoder",
    "audioflamingo3_encoder",
    "voxtral_encoder",  # was unverified at +42%
    "moss_transcribe_diarize_audio",
    "glmasr_encoder",
    "qwen3_asr_encoder",
    "omniasr_audio",
    # convolutional backbones (tracker/estimate/convnets.py) and Swins (swin.py)
    "convnext",  # stage lists, layer scale
    "convnextv2",  # global response normalisation
    "dinov3_convnext",
    "resnet",  # bottleneck layers with BatchNorms
    "bit",  # pre-activation bottlenecks with GroupNorms
    "swin",  # relative-bias tables per window, patch merging
    "swinv2",  # continuous position-bias MLP, logit scale, merging norm after
    "donut-swin",  # no final norm
    "maskformer-swin",
    # FastConformer encoders (tracker/estimate/conformer.py)
    "parakeet_encoder",  # depthwise-striding subsampling, relative-position attention
    "parakeet_ctc",  # and its 1×1 CTC convolution
    "nemotron_asr_streaming_encoder",  # causal subsampling: one more row per halving
    # merger ViTs (tracker/estimate/merger_vit.py)
    "qwen2_5_vl_vision",
    "glm4v_vision",  # a position table, a strided merge convolution, a gated merger
    "glm4v_moe_vision",
    "timesformer",  # a frame table, divided space-time attention
    "segformer",  # Mix Transformer stages (tracker/estimate/mit.py)
    "glpn",
    "sam_vision_model",  # windowed and global relative positions, the neck (sam.py)
    "sam_hq_vision_model",
    "lasr_encoder",  # LASR's Conformer: rotary, weight-only norms, its own subsampler
    "lasr_ctc",
    "kimi_k25_vision",  # MoonViT alone: a pos_emb_height × pos_emb_width table
    "muse_glimmer_vision",  # a linear patch embedding over patch_temporal frames
    "muse_spark_vision",
    "minicpm_ocr_vision",  # SigLIP and MiniCPM-V's window-merging merger
    "minicpmv4_7_vision",
    "poolformer",  # GroupNorms, pooling, 1×1 convolutions, layer scales
    "mobilenet_v1",  # depthwise separable blocks of a fixed channel plan
    "mobilenet_v2",  # inverted residuals
    "pvt",  # a position table per stage, [CLS] in the last
    "pvt_v2",  # Mix Transformer stages
    "nemotron3_5_transcribe_word_timestamp",  # no token table (was unverified at +147%)
    "focalnet",  # focal modulation: per-level depthwise kernels
    # compact vision backbones (tracker/estimate/mobile.py): refused before
    "efficientnet",  # MBConv blocks, squeeze-and-excitation, width and depth coefficients
    "levit",  # BatchNorm linears, attention biases per grid offset, subsampling attention
    "cvt",  # convolutional q/k/v projections, a class token in the last stage
    "mobilevit",  # inverted residuals and three MobileViT blocks of ViT layers
    "mobilevitv2",  # separable linear attention in 1×1 convolutions, width multiplier
    "sam",  # SAM whole: the image encoder, the prompt encoder and the mask decoder
    "yolos",  # detection tokens, a position table per layer (unverified at -17.6% before)
    "regnet",  # grouped convolutions, squeeze-and-excitation
    "vjepa2",  # a video encoder and its predictor
    "seggpt",  # five learned tokens, relative tables over the whole grid
)

TOWERS_READ = (
    # wrappers whose tower the standalone readers now count (were unverified, -1.1 … -5.5%)
    "qwen3_vl",  # vision_config of type qwen3_vl_vision
    "qwen3_vl_moe",
    "cosmos3_omni",
    "audioflamingo3",  # the Whisper-style encoder and its two-linear projector
    # refused before: vision_config.patch_size is a [height, width] list; now the standalone
    # InternVL tower reader and the pixel-shuffle projector
    "internvl",
    "qianfan_ocr",
)


def test_every_result_off_by_more_than_1pct_names_what_is_not_understood(
    rows: list[Row],
) -> None:
    """Each class more than 1% off (unverified) says which key or value the estimate did not
    understand: config keys by name, a sub-config's or the family's model_type, or a tower's
    type; none is left with "vision tower read approximately" alone."""
    named = re.compile(
        r"did not understand: \S|model_type '[^']+'|of type '[^']+'|class '[^']+'|of '[^']+'"
    )
    results = [estimate_row(r) for r in rows]
    vague = [
        f"{r.row.model_type}: {part}"
        for r in results
        if r.outcome == "unverified"
        for part in r.why.split("; ")
        if not named.search(part)
    ]
    assert vague == []
    assert not [r for r in results if r.outcome == "unverified" and not r.why]


def test_every_refusal_names_the_model_type_and_the_key(rows: list[Row]) -> None:
    """A class refused (no number at all) says in one line which model_type has no reader and
    which key or value the general reader could not size it by; before, the line named only
    the key ("config lacks hidden_size / …"), not that the family itself is not modelled."""
    said = re.compile(
        r"^model_type '[^']+' has no family reader and the general reader cannot size it: "
        r"config (lacks \S|\S+ must )"
    )
    refused = [r for r in map(estimate_row, rows) if r.outcome == "refused"]
    assert len(refused) >= 50
    assert [f"{r.row.model_type}: {r.why}" for r in refused if not said.match(r.why)] == []
    assert all("\n" not in r.why for r in refused)
    by_type = {r.row.model_type: r.why for r in refused}
    assert by_type["sam2"] == (
        "model_type 'sam2' has no family reader and the general reader cannot size it: "
        "config lacks hidden_size / n_embd / d_model / n_embed / dim / model_dim / emb_dim"
    )
    assert by_type["hiera"] == (
        "model_type 'hiera' has no family reader and the general reader cannot size it: "
        "config num_heads must be a number, got list [1, 2, 4, 8]"
    )


def test_siglip2_dual_encoder_counts_its_tower_with_the_standalone_reader(
    rows: list[Row],
) -> None:
    """Siglip2Model's vision tower is the standalone SigLIP 2 reader's exact count (92,930,304)
    with no projector, plus the logit scale and bias: -0.36% (was -3.65%, the tower read as a
    generic ViT); what is left is its text tower, which has no family reader and says so."""
    row = next(r for r in rows if r.model_type == "siglip2")
    result = estimate_row(row)
    assert (row.count, result.derived) == (203_202_050, 202_479_362)
    assert (result.outcome, result.status) == ("within-1%", "unverified")
    assert result.why == (
        "1 config key(s) the reader did not understand: text_config.projection_size; no family "
        "reader for model_type 'siglip2_text_model' and no checkpoint census to check the "
        "general reading against"
    )


@pytest.mark.parametrize("model_type", TOWERS_READ)
def test_wrappers_with_towers_read(rows: list[Row], model_type: str) -> None:
    row = next(r for r in rows if r.model_type == model_type)
    result = estimate_row(row)
    assert (result.derived, result.status) == (row.count, "verified"), result.why


@pytest.mark.parametrize("model_type", ENCODERS_READ)
def test_standalone_encoders_read(rows: list[Row], model_type: str) -> None:
    """Vision and audio models built alone (no vocabulary; all refused before): their
    transformers 5.24.0 default config estimated exactly and verified."""
    row = next(r for r in rows if r.model_type == model_type)
    result = estimate_row(row)
    assert (result.derived, result.status) == (row.count, "verified"), result.why


@pytest.mark.parametrize(
    ("model_type", "architecture", "count"),
    [
        ("roberta", "RobertaModel", 124_644_864),  # with its pooler
        ("electra", "ElectraModel", 13_483_008),  # no pooler
        ("electra", "ElectraForMaskedLM", 13_546_682),
        ("rembert", "RemBertModel", 575_920_384),
        ("ernie", "ErnieForMaskedLM", 109_514_298),
        ("bert", "BertModel", 109_482_240),
        ("prophetnet", "ProphetNetModel", 391_321_600),  # both stacks, no head
    ],
)
def test_other_classes_of_the_families_read(
    rows: list[Row], model_type: str, architecture: str, count: int
) -> None:
    """Other classes of the families read above, on the same default configs (counts from
    transformers 5.24.0 on the meta device): BERT-lineage base models with and without a pooler,
    masked-LM heads, ProphetNet's two stacks without a head."""
    row = next(r for r in rows if r.model_type == model_type)
    other = Row(
        model_type, architecture, dict(row.config, architectures=[architecture]), count, None, ""
    )
    result = estimate_row(other)
    assert (result.outcome, result.status) == ("exact", "verified"), result.why


@pytest.mark.parametrize("model_type", sorted(READ_RIGHT))
def test_families_read_right(rows: list[Row], model_type: str) -> None:
    """Each family issue 25 (item 3) moved into the band: its transformers 5.24.0 default config
    estimated exactly, with the status it has now."""
    row = next(r for r in rows if r.model_type == model_type)
    result = estimate_row(row)
    assert (result.derived, result.status) == (row.count, READ_RIGHT[model_type]), result.why


HOSTILE = (-1, 0, "12", 1e300, True, [], [0], {"a": 1}, None, 10**12)


@pytest.mark.parametrize("model_type", ENCODERS_READ)
def test_standalone_encoders_refuse_hostile_values_in_one_line(
    rows: list[Row], model_type: str
) -> None:
    """Each top-level key of a standalone encoder's config replaced by each hostile value: the
    estimate is made or refused with a one-line EstimateError, never another exception."""
    from tracker.estimate import estimate
    from tracker.shared.errors import EstimateError

    row = next(r for r in rows if r.model_type == model_type)
    for key in row.config:
        if key in ("model_type", "architectures"):
            continue
        for value in HOSTILE:
            try:
                estimate(dict(row.config, **{key: value}))
            except EstimateError as exc:
                assert "\n" not in str(exc), (key, value)


def test_a_siglip2_tower_in_another_wrapper_is_not_read_as_the_dual_encoder() -> None:
    """The standalone SigLIP 2 reader counts Siglip2Model's tower only: Phi-4-reasoning-vision's
    siglip2_vision_model (no num_patches, a projector of its own) stays the generic reading, as
    before, instead of a one-line refusal ("config lacks vision_config.num_patches")."""
    from tracker.estimate import estimate

    path = Path(__file__).resolve().parents[1] / "data" / "configs"
    config = json.loads((path / "microsoft__Phi-4-reasoning-vision-15B.json").read_text())
    result = estimate(config)
    assert any("siglip2_vision_model" in r for r in result.verification.reasons)


@pytest.mark.parametrize(
    ("model_type", "changes", "count"),
    [
        # EfficientNet-B0 and -B4's coefficients and a wider squeeze-and-excitation
        (
            "efficientnet",
            {"width_coefficient": 1.0, "depth_coefficient": 1.0, "hidden_dim": 1280},
            4_007_548,
        ),
        (
            "efficientnet",
            {
                "width_coefficient": 1.4,
                "depth_coefficient": 1.8,
                "hidden_dim": 1792,
                "squeeze_expansion_ratio": 0.5,
            },
            20_667_200,
        ),
        # LeViT-192 at 256 pixels: other key widths, heads and subsampling
        (
            "levit",
            {
                "hidden_sizes": [192, 288, 384],
                "num_attention_heads": [3, 5, 6],
                "key_dim": [32, 32, 32],
                "down_ops": [["Subsample", 32, 6, 4, 2, 2], ["Subsample", 32, 9, 4, 2, 2], [""]],
                "image_size": 256,
            },
            10_177_048,
        ),
        # MobileViT V2 at widths 0.5 and 1.75 (one with a wider FFN and expansion)
        ("mobilevitv2", {"width_multiplier": 0.5}, 1_113_593),
        (
            "mobilevitv2",
            {
                "width_multiplier": 1.75,
                "ffn_multiplier": 3,
                "expand_ratio": 4.0,
                "n_attn_blocks": [1, 2, 5],
            },
            20_546_912,
        ),
        # YOLOS at 800 × 1333: the per-layer table is sized by area // patch², not the grid
        ("yolos", {"image_size": [800, 1333]}, 125_618_688),
        (
            "yolos",
            {
                "use_mid_position_embeddings": False,
                "num_detection_tokens": 10,
                "image_size": [800, 1333],
                "hidden_size": 384,
                "num_attention_heads": 6,
                "intermediate_size": 1536,
            },
            23_339_520,
        ),
        # MobileViT-XS's widths with MobileViT-XXS's expansion, unbiased q/k/v, a wider MLP
        (
            "mobilevit",
            {
                "neck_hidden_sizes": [16, 16, 24, 48, 64, 80, 320],
                "hidden_sizes": [64, 80, 96],
                "expand_ratio": 2.0,
                "qkv_bias": False,
                "mlp_ratio": 3.0,
            },
            1_072_432,
        ),
        # CvT with each q/k/v projection method, class tokens in two stages, one stage unbiased
        (
            "cvt",
            {
                "depth": [1, 4, 16],
                "qkv_projection_method": ["avg", "dw_bn", "linear"],
                "cls_token": [True, False, True],
                "qkv_bias": [False, True, True],
                "mlp_ratio": [4.0, 3.0, 2.5],
            },
            23_649_472,
        ),
    ],
)
def test_compact_backbones_follow_their_stage_lists(
    rows: list[Row], model_type: str, changes: dict[str, object], count: int
) -> None:
    """Other sizes of the compact backbones (and YOLOS) than transformers' defaults: the config built by
    transformers 5.24.0 with `changes` counts `count` on the meta device; the estimate is exact
    and verified."""
    row = next(r for r in rows if r.model_type == model_type)
    other = Row(model_type, row.architecture, dict(row.config, **changes), count, None, "")
    result = estimate_row(other)
    assert (result.outcome, result.status) == ("exact", "verified"), result.why


@pytest.mark.parametrize(
    ("model_type", "derived", "outcome"),
    [
        ("dinov3_vit", 21_275_904, "unverified"),  # its patch embedding and registers not counted
        ("wav2vec2-bert", 402_753_536, "unverified"),
        ("sam3_vit_model", 444_729_344, "within-1%"),
        ("fun_asr_nano_encoder", 220_345_344, "within-1%"),
    ],
)
def test_an_encoder_with_no_vocabulary_and_no_reader_is_counted_unverified(
    rows: list[Row], model_type: str, derived: int, outcome: str
) -> None:
    """A vision or audio encoder of a family with no reader, whose config names no vocabulary
    (refused before: "config lacks padded_vocab_size / vocab_size / n_vocab"): the stack of
    transformer layers its keys size, unverified, the first reason naming vocab_size and what is
    not counted; its layers are encoder layers (no KV cache)."""
    from tracker.estimate.params import read_config

    row = next(r for r in rows if r.model_type == model_type)
    result = estimate_row(row)
    assert (result.derived, result.outcome, result.status) == (derived, outcome, "unverified")
    assert result.why.split(": ", 1)[1].startswith(
        f"vocab_size (absent: model_type '{model_type}' read as a stack of transformer layers "
        "with no token embedding, its input embedding of patches or frames and its heads not "
        "counted)"
    )
    reading = read_config(row.config)
    assert {(s.kind, s.kv_bytes_per_token) for s in reading.layers} == {("encoder", 0)}
    # with a vocabulary named, nothing is assumed: the general reading counts the token table
    named = estimate_row(
        Row(model_type, row.architecture, dict(row.config, vocab_size=1000), None, None, "")
    )
    assert "vocab_size (absent" not in named.why


def test_an_encoder_with_no_vocabulary_that_cannot_be_sized_is_refused_by_its_own_key(
    rows: list[Row],
) -> None:
    """With no vocabulary and no stack the general reader can size (RT-DETR: no attention heads
    at the top level), the refusal names the key the stack lacks, not the vocabulary."""
    row = next(r for r in rows if r.model_type == "rt_detr")
    result = estimate_row(row)
    assert (result.outcome, result.why) == (
        "refused",
        "model_type 'rt_detr' has no family reader and the general reader cannot size it: config "
        "lacks num_attention_heads / n_head / num_heads / n_heads / attention_heads",
    )


def _t5gemma_stack(layers: int, **sizes: object) -> dict[str, object]:
    kinds = ["sliding_attention", "full_attention"] * layers
    return {"num_hidden_layers": layers, "layer_types": kinds[:layers], **sizes}


@pytest.mark.parametrize(
    ("architecture", "root", "encoder", "decoder", "count"),
    [
        ("T5GemmaForConditionalGeneration", {}, {}, {}, 5_596_853_760),  # head tied to the table
        (
            "T5GemmaForConditionalGeneration",
            {"tie_word_embeddings": False},
            {},
            {},
            6_186_677_760,
        ),
        (  # a wider encoder than decoder: cross-attention k/v from the encoder's width, biased
            "T5GemmaForConditionalGeneration",
            {"vocab_size": 32000},
            _t5gemma_stack(
                4,
                hidden_size=1024,
                intermediate_size=4096,
                num_attention_heads=8,
                num_key_value_heads=2,
                head_dim=128,
                vocab_size=32000,
            ),
            _t5gemma_stack(
                3,
                hidden_size=512,
                intermediate_size=2048,
                num_attention_heads=4,
                num_key_value_heads=1,
                head_dim=64,
                vocab_size=32000,
                cross_attention_hidden_size=1024,
                attention_bias=True,
            ),
            121_601_792,
        ),
    ],
)
def test_t5gemma_counts_both_stacks_and_the_cross_attention(
    rows: list[Row],
    architecture: str,
    root: dict[str, object],
    encoder: dict[str, object],
    decoder: dict[str, object],
    count: int,
) -> None:
    """T5Gemma's encoder and decoder sub-configs (refused before: "config lacks hidden_size"),
    each a Gemma 2 stack with its own token table, the decoder's layers with a cross-attention:
    exact and verified against transformers 5.24.0's meta-device counts of the config with these
    changes; the encoder's layers carry no KV cache."""
    from tracker.estimate.params import read_config

    row = next(r for r in rows if r.model_type == "t5gemma")
    config = dict(row.config, **root, architectures=[architecture])
    config["encoder"] = dict(row.config["encoder"], **encoder)
    config["decoder"] = dict(row.config["decoder"], **decoder)
    result = estimate_row(Row("t5gemma", architecture, config, count, None, ""))
    assert (result.outcome, result.status) == ("exact", "verified"), result.why
    reading = read_config(config)
    layers = int(config["encoder"]["num_hidden_layers"])  # type: ignore[call-overload]
    assert {s.kv_bytes_per_token for s in reading.layers[:layers]} == {0}
    assert all(s.kv_bytes_per_token > 0 for s in reading.layers[layers:])


def test_memory_rows_of_an_encoder_follow_its_input(rows: list[Row]) -> None:
    """A ViT built alone: training and serving rows are one image's 197 tokens (224 / 16 = 14,
    14² patches and [CLS]), not the settings' 2,048- and 4,096-token sequences; its prefill
    working set is (2·3,072 FFN + 2·2·768 residual and normed input) bytes × 197 = 3,025,920
    (was × 4,096 = 62,914,560), no KV cache. A speech encoder, whose config fixes no input
    length, keeps the settings' positions and says its rows are not token rows; a language
    model's memory says nothing of an input."""
    from tracker.estimate import estimate
    from tracker.estimate.memory import compute
    from tracker.estimate.params import read_config
    from tracker.estimate.settings import EstimateSettings

    vit = next(r for r in rows if r.model_type == "vit").config
    m = compute(read_config(vit), EstimateSettings())
    assert (m.train_tokens, m.serve_tokens) == (197, 197)
    assert (m.prefill_per_sequence, m.kv_per_sequence) == (3_025_920.0, 0.0)
    assert m.act_per_sample == 58_230_048.0
    assert estimate(vit).memory.input == (
        "one input of 197 tokens (patches from image_size / patch_size and learned tokens), "
        "for training and serving alike"
    )
    speech = estimate(next(r for r in rows if r.model_type == "wav2vec2").config).memory
    assert (speech.train_tokens, speech.serve_tokens) == (2048, 4096)
    assert speech.input == (
        "not applicable: model_type 'wav2vec2' is an encoder whose config fixes no input length "
        "(audio frames or feature-map positions, not tokens); the rows assume 2,048 positions "
        "per training sample and 4,096 served"
    )
    assert estimate(next(r for r in rows if r.model_type == "llama").config).memory.input is None


@pytest.mark.parametrize(
    ("model_type", "derived", "why"),
    [
        # the tower CLIP's reader counts exactly, the two bias-free projections and the logit
        # scale: -0.04% (was -1.39%, the tower read as a generic ViT); the text tower is left
        (
            "owlv2",
            151_144_961,
            "no family reader for model_type 'owlv2_text_model' and no checkpoint census to "
            "check the general reading against",
        ),
        (
            "owlvit",
            151_587_329,
            "no family reader for model_type 'owlvit_text_model' and no checkpoint census to "
            "check the general reading against",
        ),
        # SigLIP v1's tower and its logit scale and bias: no projector (it said "projector from
        # the SigLIP tower to the text model of 'siglip' is not modelled: not counted")
        (
            "siglip",
            202_433_282,
            "1 config key(s) the reader did not understand: text_config.projection_size; no "
            "family reader for model_type 'siglip_text_model' and no checkpoint census to check "
            "the general reading against",
        ),
    ],
)
def test_dual_encoders_count_their_vision_tower_and_what_joins_the_towers(
    rows: list[Row], model_type: str, derived: int, why: str
) -> None:
    """CLIP-style and SigLIP dual encoders: the vision tower by its standalone reader inside the
    wrapper, within 1% of transformers 5.24.0's meta-device count; what stays unverified is the
    text tower, which has no family reader and says so."""
    row = next(r for r in rows if r.model_type == model_type)
    result = estimate_row(row)
    assert (result.derived, result.outcome, result.status) == (derived, "within-1%", "unverified")
    assert result.why == why


@pytest.mark.parametrize(
    ("model_type", "architecture", "count"),
    [("owlv2", "Owlv2VisionModel", 87_418_368), ("owlvit", "OwlViTVisionModel", 87_860_736)],
)
def test_owl_vision_towers_built_alone(
    rows: list[Row], model_type: str, architecture: str, count: int
) -> None:
    """OWL-ViT's and OWLv2's vision tower as transformers 5.24.0 builds it alone (its default
    vision config): CLIP's layout, exact and verified."""
    vision = dict(next(r for r in rows if r.model_type == model_type).config["vision_config"])
    vision["architectures"] = [architecture]
    result = estimate_row(Row(vision["model_type"], architecture, vision, count, None, ""))
    assert (result.outcome, result.status) == ("exact", "verified"), result.why


@pytest.mark.parametrize(
    ("sub_configs", "count"),
    [
        (  # a narrower decoder: more blocks and mask outputs, the final attention at rate 4
            {
                "mask_decoder_config": {
                    "hidden_size": 128,
                    "mlp_dim": 512,
                    "num_hidden_layers": 3,
                    "num_multimask_outputs": 2,
                    "attention_downsample_rate": 4,
                    "iou_head_depth": 4,
                    "iou_head_hidden_dim": 64,
                    "num_attention_heads": 4,
                },
                "prompt_encoder_config": {
                    "hidden_size": 128,
                    "mask_input_channels": 32,
                    "num_point_embeddings": 5,
                },
            },
            90_630_299,
        ),
        (  # a small image encoder with two global layers and a narrower neck
            {
                "vision_config": {
                    "hidden_size": 384,
                    "num_hidden_layers": 4,
                    "num_attention_heads": 6,
                    "mlp_dim": 1536,
                    "global_attn_indexes": [1, 3],
                    "output_channels": 128,
                    "num_pos_feats": 64,
                },
                "mask_decoder_config": {"hidden_size": 128},
                "prompt_encoder_config": {"hidden_size": 128},
            },
            10_818_112,
        ),
    ],
)
def test_sam_counts_its_prompt_encoder_and_mask_decoder(
    rows: list[Row], sub_configs: dict[str, dict[str, object]], count: int
) -> None:
    """SamModel with other sub-config sizes (transformers 5.24.0 meta-device counts of its
    default config with these changes): exact and verified. The two-way blocks' cross-attentions
    stay at half the width whatever attention_downsample_rate says (transformers passes the
    block its default rate); the image encoder is counted once, not again as a tower."""
    row = next(r for r in rows if r.model_type == "sam")
    config = dict(row.config)
    for key, changes in sub_configs.items():
        config[key] = dict(row.config[key], **changes)
    result = estimate_row(Row("sam", "SamModel", config, count, None, ""))
    assert (result.outcome, result.status) == ("exact", "verified"), result.why
