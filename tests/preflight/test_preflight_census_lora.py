"""LoRA targets of remote-code families, read from the checkpoint's tensor names and the code's AST.

Real corpus data: the config.json (tests/data/configs) and weight index
(../shared/corpus/models/<repo>/) of THUDM/chatglm2-6b, Qwen/Qwen-72B, internlm/internlm-20b and
tiiuae/falcon-40b. The corpus lacks their modeling code; `data/remote/` holds stand-ins written
for these tests (see its README). Expected counts are derived here independently of the code
under test: from the layer count in config.json by hand, and again by a regular expression over
the index's `weight_map` keys; adapter parameters are rank × (in + out) computed by hand from
config numbers.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

import pytest

from tracker.estimate.params import read_config
from tracker.preflight import PreflightSettings, run_preflight
from tracker.preflight.census_lora import census_modules, resolve_census
from tracker.preflight.lora import ALL_LINEAR, resolve_targets
from tracker.preflight.safeeval import Unknown, evaluate
from tracker.preflight.settings import DEFAULT_TARGETS
from tracker.shared.domain import SafetensorsHeader, TensorInfo

HERE = Path(__file__).parent
CONFIGS = HERE.parents[0] / "data" / "configs"
CORPUS = HERE.parents[2] / "shared" / "corpus" / "models"
REMOTE = HERE / "data" / "remote"
RANK = 16

# repo dir → (stand-in file, the name auto_map gives it, the corpus index file)
FAMILIES = {
    "THUDM__chatglm2-6b": (
        "chatglm2-6b.modeling_chatglm.py.txt",
        "modeling_chatglm.py",
        "pytorch_model.bin.index.json",
    ),
    "Qwen__Qwen-72B": (
        "Qwen-72B.modeling_qwen.py.txt",
        "modeling_qwen.py",
        "model.safetensors.index.json",
    ),
    "internlm__internlm-20b": (
        "internlm-20b.modeling_internlm.py.txt",
        "modeling_internlm.py",
        "pytorch_model.bin.index.json",
    ),
    "tiiuae__falcon-40b": (
        "falcon-40b.modelling_RW.py.txt",
        "modelling_RW.py",
        "pytorch_model.bin.index.json",
    ),
}


def _config(repo: str) -> dict[str, Any]:
    return json.loads((CONFIGS / f"{repo}.json").read_text())


# the configuration stand-ins (falcon's names `num_hidden_layers` through its attribute_map)
CONFIG_CODE = {
    "tiiuae__falcon-40b": ("falcon-40b.configuration_RW.py.txt", "configuration_RW.py"),
    # config.json has no pre_seq_len: the class default (None) decides the prefix encoder
    "THUDM__chatglm2-6b": ("chatglm2-6b.configuration_chatglm.py.txt", "configuration_chatglm.py"),
}


def _files(repo: str, *, code: bool = True, index: bool = True) -> dict[str, bytes]:
    src, name, index_name = FAMILIES[repo]
    files = {"config.json": (CONFIGS / f"{repo}.json").read_bytes()}
    if index:
        files[index_name] = (CORPUS / repo / index_name).read_bytes()
    if code:
        files[name] = (REMOTE / src).read_bytes()
        if repo in CONFIG_CODE:
            cfg_src, cfg_name = CONFIG_CODE[repo]
            files[cfg_name] = (REMOTE / cfg_src).read_bytes()
    return files


def _index_count(repo: str, leaves: tuple[str, ...]) -> int:
    """How many `weight_map` keys end in `.<leaf>.weight` for one of `leaves`."""
    index = FAMILIES[repo][2]
    keys = json.loads((CORPUS / repo / index).read_text())["weight_map"]
    pattern = re.compile(r"\.(" + "|".join(map(re.escape, leaves)) + r")\.weight$")
    return sum(1 for k in keys if pattern.search(k))


def _resolve(repo: str) -> Any:
    res, why = resolve_census(_files(repo), {}, _config(repo), DEFAULT_TARGETS, RANK)
    assert res is not None, why
    return res


def _by_kind(res: Any, target: str) -> dict[str, int]:
    return {k: v["modules"] for k, v in res.targets[target].items()}


def test_chatglm2_resolves_from_its_index_and_keeps_the_output_layer() -> None:
    """28 layers (config num_layers): query_key_value and dense in self_attention, the two MLP
    projections; chatglm's model class returns nothing from get_output_embeddings and has no
    `lm_head`, so PEFT's all-linear keeps `transformer.output_layer` (4 × 28 + 1)."""
    cfg = _config("THUDM__chatglm2-6b")
    layers, h, ffn = cfg["num_layers"], cfg["hidden_size"], cfg["ffn_hidden_size"]
    assert (layers, h, ffn) == (28, 4096, 13696)
    qkv_out = (
        cfg["kv_channels"] * cfg["num_attention_heads"] + 2 * 128 * cfg["multi_query_group_num"]
    )
    res = _resolve("THUDM__chatglm2-6b")
    for t in DEFAULT_TARGETS[:-1]:  # no module of chatglm carries a Llama-style name
        assert res.modules(t) == 0 == _index_count("THUDM__chatglm2-6b", (t,))
    assert res.modules(ALL_LINEAR) == 4 * layers + 1 == 113
    assert res.modules(ALL_LINEAR) == _index_count(
        "THUDM__chatglm2-6b", ("query_key_value", "dense", "dense_h_to_4h", "dense_4h_to_h")
    ) + _index_count("THUDM__chatglm2-6b", ("output_layer",))
    assert _by_kind(res, ALL_LINEAR) == {"attention.full": 56, "mlp.dense": 56, "other": 1}
    expected = RANK * (
        layers * ((h + qkv_out) + (h + h) + (h + 2 * ffn) + (ffn + h))
        + (h + cfg["padded_vocab_size"])
    )
    assert qkv_out == 4608
    assert res.adapter_params(ALL_LINEAR) == expected == 30_752_768
    assert res.unresolved == {}
    assert any("excludes no output head" in n for n in res.notes)


def test_qwen_v1_splits_c_proj_between_attention_and_mlp() -> None:
    """Qwen v1 names its attention and MLP output projections both `c_proj`: the leaf alone
    cannot size them, the class each parent (`attn`, `mlp`) is built from does."""
    cfg = _config("Qwen__Qwen-72B")
    layers, h, inter = cfg["num_hidden_layers"], cfg["hidden_size"], cfg["intermediate_size"]
    proj = cfg["kv_channels"] * cfg["num_attention_heads"]
    res = _resolve("Qwen__Qwen-72B")
    assert res.modules(ALL_LINEAR) == 5 * layers == 400
    assert res.modules(ALL_LINEAR) == _index_count(
        "Qwen__Qwen-72B", ("c_attn", "c_proj", "w1", "w2")
    )
    assert _by_kind(res, ALL_LINEAR) == {"attention.full": 160, "mlp.dense": 240}
    attn = RANK * layers * ((h + 3 * proj) + (h + proj))
    mlp = RANK * layers * (2 * (h + inter // 2) + (inter // 2 + h))
    assert res.targets[ALL_LINEAR]["attention.full"]["adapter_params"] == attn == 62_914_560
    assert res.targets[ALL_LINEAR]["mlp.dense"]["adapter_params"] == mlp == 125_829_120
    assert any("`lm_head` is the output head" in n for n in res.notes)


def test_internlm_sizes_its_mlp_from_the_call_site_arguments() -> None:
    """internlm's MLP takes hidden_size / intermediate_size as constructor arguments: they are
    evaluated where the decoder layer builds it (`config.intermediate_size`)."""
    cfg = _config("internlm__internlm-20b")
    layers, h, inter = cfg["num_hidden_layers"], cfg["hidden_size"], cfg["intermediate_size"]
    res = _resolve("internlm__internlm-20b")
    for t in DEFAULT_TARGETS[:-1]:
        assert res.modules(t) == layers == _index_count("internlm__internlm-20b", (t,)) == 60
    assert _by_kind(res, "q_proj") == {"attention.full": 60}
    assert _by_kind(res, "gate_proj") == {"mlp.dense": 60}
    assert res.adapter_params("q_proj") == RANK * layers * (h + h) == 9_830_400
    assert res.adapter_params("down_proj") == RANK * layers * (inter + h) == 18_186_240
    assert res.modules(ALL_LINEAR) == 7 * layers
    assert res.adapter_params(ALL_LINEAR) == RANK * layers * (4 * 2 * h + 3 * (h + inter))


def test_falcon_rw_counts_its_own_linear_subclass() -> None:
    """falcon RW builds every projection from its own `class Linear(nn.Linear)`; PEFT matches it
    by isinstance, so it is a Linear. 60 layers (n_layer), grouped-query qkv."""
    cfg = _config("tiiuae__falcon-40b")
    layers, h = cfg["n_layer"], cfg["hidden_size"]
    hd = h // cfg["n_head"]
    qkv_out = (2 * cfg["n_head_kv"] + cfg["n_head"]) * hd
    res = _resolve("tiiuae__falcon-40b")
    assert res.modules(ALL_LINEAR) == 4 * layers == 240
    assert res.modules(ALL_LINEAR) == _index_count(
        "tiiuae__falcon-40b", ("query_key_value", "dense", "dense_h_to_4h", "dense_4h_to_h")
    )
    assert res.targets[ALL_LINEAR]["attention.full"]["adapter_params"] == RANK * layers * (
        (h + qkv_out) + (h + h)
    )
    assert res.targets[ALL_LINEAR]["mlp.dense"]["adapter_params"] == RANK * layers * 2 * (h + 4 * h)


def test_through_run_preflight_and_without_the_code() -> None:
    """The revision's preflight uses the route for a family without a module-name table; without
    the modeling file it gives no resolution and says which file is missing."""
    settings = PreflightSettings()
    pf = run_preflight(
        files=_files("THUDM__chatglm2-6b"), headers={}, tree=[], tables={}, settings=settings
    )
    assert pf.lora_error is None and pf.lora is not None
    assert pf.lora.modules(ALL_LINEAR) == 113
    bare = run_preflight(
        files=_files("THUDM__chatglm2-6b", code=False),
        headers={},
        tree=[],
        tables={},
        settings=settings,
    )
    assert bare.lora is None
    assert bare.lora_error == (
        "model_type 'chatglm' has no module-name table; read as remote code: its modeling code "
        "modeling_chatglm.py is not in this revision or does not parse"
    )


CODE = b"""
import torch
from torch import nn
from transformers import PreTrainedModel
from transformers.pytorch_utils import Conv1D

class Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.wq = nn.Linear(config.hidden_size, self.width(config))
        self.c_fc = Conv1D(4 * config.hidden_size, config.hidden_size)
        self.mystery = make_layer(config)

class Model(PreTrainedModel):
    def __init__(self, config):
        super().__init__(config)
        self.blocks = nn.ModuleList([Block(config) for _ in range(config.n)])
"""


def _tiny(with_header: bool) -> tuple[dict[str, bytes], dict[str, SafetensorsHeader]]:
    config = {"model_type": "tiny", "hidden_size": 8, "n": 2,
              "auto_map": {"AutoModelForCausalLM": "modeling_tiny.Model"}}  # fmt: skip
    names = [f"blocks.{i}.{m}.weight" for i in range(2) for m in ("wq", "c_fc", "mystery")]
    index = {"metadata": {}, "weight_map": dict.fromkeys(names, "model.safetensors")}
    files = {
        "config.json": json.dumps(config).encode(),
        "modeling_tiny.py": CODE,
        "model.safetensors.index.json": json.dumps(index).encode(),
    }
    shapes = {"wq": (24, 8), "c_fc": (8, 32), "mystery": (8,)}
    tensors = {n: TensorInfo("BF16", shapes[n.split(".")[2]], 2) for n in names}
    return files, ({"model.safetensors": SafetensorsHeader(tensors)} if with_header else {})


def test_features_come_from_headers_else_stay_unsized_with_the_expression_named() -> None:
    files, headers = _tiny(with_header=False)
    cfg = json.loads(files["config.json"])
    res, why = resolve_census(files, headers, cfg, ("wq", "c_fc", ALL_LINEAR), RANK)
    assert res is not None, why
    # `mystery` is built by a function no class defines: all-linear cannot be resolved
    assert res.unresolved == {
        ALL_LINEAR: "not understood: `mystery` (built by make_layer(), which the code does not show)"
    }
    assert res.modules("wq") == 2 and res.adapter_params("wq") is None
    assert res.targets["wq"] == {"other": {"modules": 2, "adapter_params": 0, "unsized": 2}}
    assert "`wq`: in/out features unknown (`self.width(config)`)" in res.notes
    # Conv1D(nf=4h, nx=h): in = 8, out = 32
    assert res.adapter_params("c_fc") == 2 * RANK * (8 + 32)
    # with the headers: wq's shape [24, 8] gives in 8, out 24; `mystery` is 1-D, not a Linear;
    # c_fc's Conv1D weight is stored [in, out]
    files, headers = _tiny(with_header=True)
    res, _ = resolve_census(files, headers, cfg, ("wq", "c_fc", ALL_LINEAR), RANK)
    assert res is not None and res.unresolved == {}
    assert res.adapter_params("wq") == 2 * RANK * (8 + 24)
    assert res.adapter_params("c_fc") == 2 * RANK * (8 + 32)
    assert res.modules(ALL_LINEAR) == 4


@pytest.mark.parametrize(
    "expr",
    [
        "__import__('os').system('true')",
        "config.hidden_size ** 2",
        "config.hidden_size / 2",
        "open('/etc/passwd').read()",
        "[x for x in range(10 ** 9)]",
        "config.__class__",
        "lambda: 1",
    ],
)
def test_the_evaluator_runs_nothing_outside_its_whitelist(expr: str) -> None:
    value = evaluate(ast.parse(expr, mode="eval").body, {}, {"hidden_size": 8})
    assert isinstance(value, Unknown)


def test_the_evaluator_reads_config_arithmetic_and_conditionals() -> None:
    cfg = {"hidden_size": 4096, "n_head_kv": 8, "n_head": 128, "multi": True}
    for expr, want in [
        ("(config.n_head_kv * 2 + config.n_head) * (config.hidden_size // config.n_head)", 4608),
        ("3 * config.hidden_size if not config.multi else config.hidden_size - 1", 4095),
        ("getattr(config, 'missing', 7) + -1", 6),
        ("config.n_head_kv is not None and config.n_head_kv > 4", True),
    ]:
        assert evaluate(ast.parse(expr, mode="eval").body, {}, cfg) == want, expr
    missing = evaluate(ast.parse("config.missing", mode="eval").body, {}, cfg)
    assert isinstance(missing, Unknown) and missing.why == "`config.missing` is not in config.json"


NATIVE_INDEXED = [
    "deepseek-ai__DeepSeek-R1-Distill-Qwen-32B",
    "google__medgemma-27b-it",
    "meta-llama__Llama-2-7b-hf",
    "mistralai__Mixtral-8x7B-v0.1",
    "openai__gpt-oss-20b",
    "togethercomputer__RedPajama-INCITE-7B-Base",
    "unsloth__codegemma-7b-it",
]


@pytest.mark.parametrize("repo", NATIVE_INDEXED)
def test_native_derivation_agrees_with_the_checkpoint_names(repo: str) -> None:
    """The config-derived tree of natively built families (`lora`) names exactly the modules the
    checkpoint's index stores, for every named default target (all-linear differs where
    transformers 5 fuses routed experts the checkpoint stores one by one)."""
    names = ("model.safetensors.index.json", "pytorch_model.bin.index.json")
    index = next(CORPUS / repo / n for n in names if (CORPUS / repo / n).exists())
    keys = json.loads(index.read_text())["weight_map"]
    cfg = _config(repo)
    res, why = resolve_targets(read_config(cfg), cfg, DEFAULT_TARGETS, RANK)
    assert res is not None, why
    for t in DEFAULT_TARGETS[:-1]:
        assert res.modules(t) == sum(1 for k in keys if k.endswith(f".{t}.weight")), t


@pytest.mark.parametrize("repo", sorted(FAMILIES))
def test_the_code_walk_builds_the_tree_the_checkpoint_names(repo: str) -> None:
    """Without tensor names the tree is walked from the model class through the code (layer
    counts from config.json: chatglm's `num_layers`, falcon's `num_hidden_layers` through its
    configuration's attribute_map): the same Linear modules, paths and features as the
    checkpoint's names give."""
    cfg = _config(repo)
    from_index = _resolve(repo)
    walked, why = resolve_census(_files(repo, index=False), {}, cfg, DEFAULT_TARGETS, RANK)
    assert walked is not None, why
    assert walked.targets == from_index.targets
    assert walked.unresolved == {}
    assert "no tensor names at this revision" in walked.notes[0]
    found = census_modules(_files(repo), {}, cfg)
    walk = census_modules(_files(repo, index=False), {}, cfg)
    assert not isinstance(found, str) and not isinstance(walk, str)
    assert sorted((m.path, m.features) for m in walk[0]) == sorted(
        (m.path, m.features) for m in found[0]
    )


def test_a_walk_through_code_it_cannot_follow_resolves_nothing_and_says_where() -> None:
    """falcon without its configuration class: `config.num_hidden_layers` is not in config.json
    (it is an alias the configuration defines), so the layer list has no known length."""
    files = _files("tiiuae__falcon-40b", index=False)
    del files["configuration_RW.py"]
    res, _ = resolve_census(files, {}, _config("tiiuae__falcon-40b"), ("q_proj", ALL_LINEAR), RANK)
    assert res is not None
    why = (
        "not understood: `transformer.h` (a list of DecoderLayer of unknown length "
        "(`config.num_hidden_layers` is not in config.json))"
    )
    assert res.unresolved == {"q_proj": why, ALL_LINEAR: why}
    assert res.targets == {}


def test_a_gptq_packed_checkpoint_is_not_resolved_and_says_why() -> None:
    """Qwen-72B's names as a GPTQ upload stores them (`qweight`, `qzeros`, `scales`): the
    quantizer replaces those layers at load, so the code's nn.Linear is not what PEFT meets."""
    files = _files("Qwen__Qwen-72B")
    index = json.loads(files["model.safetensors.index.json"])
    index["weight_map"] = {
        (
            k.removesuffix(".weight") + ".qweight"
            if ".h." in k and k.endswith("_proj.weight")
            else k
        ): v
        for k, v in index["weight_map"].items()
    }
    files["model.safetensors.index.json"] = json.dumps(index).encode()
    res, why = resolve_census(files, {}, _config("Qwen__Qwen-72B"), DEFAULT_TARGETS, RANK)
    assert res is None
    assert why == (
        "the checkpoint stores packed quantized weights (`transformer.h.0.attn.c_proj.qweight`, "
        "160 tensors): their layers are replaced by the quantizer's classes at load, which the "
        "remote code does not show"
    )


def test_internlm_read_as_remote_code_equals_its_llama_conversion() -> None:
    """internlm-20b was later re-published as `model_type: llama` with the same weights: the
    native derivation of that config (checked against transformers' meta-device builds) gives
    exactly what the checkpoint-and-code route gives for the remote-code revision."""
    cfg = _config("internlm__internlm-20b")
    as_llama = {
        **{k: v for k, v in cfg.items() if k != "auto_map"},
        "model_type": "llama",
        "architectures": ["LlamaForCausalLM"],
    }
    native, why = resolve_targets(read_config(as_llama), as_llama, DEFAULT_TARGETS, RANK)
    assert native is not None, why
    assert _resolve("internlm__internlm-20b").targets == native.targets
