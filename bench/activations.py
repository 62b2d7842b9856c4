"""What autograd keeps for backward, per token, in one real-shaped decoder layer of each family.

Section of `make bench` (`python -m bench.run activations`). For each measured corpus config, one
decoder layer of the pinned transformers class is built on the CPU in bf16 with SDPA attention
(weights allocated uninitialised and filled with small random values: only the router's choices
depend on them), and run forward on a random bf16 input of T tokens under
`torch.autograd.graph.saved_tensors_hooks`; the bytes of every distinct storage autograd saves,
parameters and the layer's inputs (hidden states, RoPE tables) excluded, divided by T, is the
measured figure. The estimate's formula (`tracker.estimate.memory.layer_activation_bytes`) is
evaluated on the same config. Stand-ins, stated in the table: the vocabulary is cut to 256 (the
layer does not see it), and MoE layers keep their top-k but at most 16 experts so that one layer
stays small (the router's bytes follow the expert count; both sides use the same config).
Gated-DeltaNet and Mamba2 layers run transformers' torch path (its chunked scans in fp32): the
flash-linear-attention and mamba-ssm kernels need a GPU. A vision-language config is measured on
its text model.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import json
import logging
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).parents[1]
CONFIGS = ROOT / "tests" / "data" / "configs"
TOKENS = (128, 512)
MAX_EXPERTS = 16
# (corpus config, layer index to measure, what the layer is[, stack: encoder / decoder of BERT, T5])
LAYERS: tuple[tuple[Any, ...], ...] = (
    ("meta-llama__Meta-Llama-3.1-8B", 0, "dense GQA"),
    ("meta-llama__Llama-2-7b-hf", 0, "dense MHA"),
    ("Qwen__Qwen3-0.6B", 0, "dense GQA, q/k norms"),
    ("Qwen__Qwen3-30B-A3B", 0, "MoE (128 → 16 experts, top-8)"),
    ("mistralai__Mixtral-8x7B-v0.1", 0, "MoE (8 experts, top-2)"),
    ("deepseek-ai__DeepSeek-V3", 0, "MLA + dense FFN"),
    ("deepseek-ai__DeepSeek-V3", 3, "MLA + MoE (256 → 16 experts, top-8, shared)"),
    ("Qwen__Qwen3-Next-80B-A3B-Thinking", 0, "gated DeltaNet + MoE (512 → 16, top-10, shared)"),
    ("Qwen__Qwen3.5-27B", 0, "gated DeltaNet + dense FFN (text model)"),
    ("nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", 0, "Mamba2"),
    ("nvidia__NVIDIA-Nemotron-3-Super-120B-A12B-FP8", 0, "Mamba2"),
    ("Qwen__Qwen2.5-7B", 0, "dense GQA, qkv bias (qwen2)"),
    ("unsloth__codegemma-7b-it", 0, "dense MHA, GeGLU (gemma)"),
    ("google__gemma-3-1b-it", 0, "sliding-window layer, GeGLU, q/k norms (gemma3_text)"),
    ("google__gemma-3-1b-it", 5, "global layer (gemma3_text)"),
    ("google__medgemma-27b-it", 0, "gemma3 text model"),
    ("microsoft__Phi-3-mini-128k-instruct", 0, "fused qkv and gate/up (phi3)"),
    ("ibm-granite__granite-3.1-1b-a400m-instruct", 0, "MoE (32 → 16 experts, top-8, granitemoe)"),
    ("togethercomputer__RedPajama-INCITE-7B-Base", 0, "parallel attention + GELU MLP (gpt_neox)"),
    ("openai-community__gpt2-xl", 0, "fused qkv, tanh-GELU MLP (gpt2)"),
    ("Qwen__Qwen3.5-35B-A3B", 0, "gated DeltaNet + MoE (256 → 16, top-8, qwen3_5_moe)"),
    ("ibm-granite__granite-docling-258M", 0, "idefics3 text model (llama)"),
    ("google__gemma-4-26B-A4B", 0, "sliding layer, MoE (128 → 16, top-8) beside dense MLP"),
    ("google__gemma-4-26B-A4B", 5, "global layer (head 512, K = V), MoE beside dense MLP"),
    ("zai-org__GLM-5", 0, "MLA (V = q/k head size) + DSA indexer + dense FFN (glm_moe_dsa)"),
    ("zai-org__GLM-5", 3, "MLA + DSA indexer + MoE (256 → 16, top-8, shared)"),
    ("deepseek-ai__DeepSeek-V3.2", 0, "MLA + DSA indexer + dense FFN (deepseek_v32)"),
    ("bigscience__bloom-560m", 0, "ALiBi, fused qkv, GELU MLP"),
    ("openai__gpt-oss-20b", 0, "eager attention with sinks, clamped-SwiGLU MoE (32 → 16, top-4)"),
    (
        "meta-llama__Llama-4-Scout-17B-16E-Instruct",
        0,
        "MoE routed densely (all 16 experts on every token), shared expert (llama4)",
    ),
    ("google-bert__bert-base-uncased", 0, "BertLayer: post-norm encoder layer", "encoder"),
    ("google-t5__t5-base", 0, "T5 encoder block 0 (computes the relative bias)", "encoder"),
    ("google-t5__t5-base", 1, "T5 encoder block (bias passed in)", "encoder"),
    ("google-t5__t5-base", 0, "T5 decoder block 0 with cross-attention", "decoder"),
    ("google__t5-v1_1-base", 0, "T5 v1.1 encoder block 0, gated tanh-GELU FFN", "encoder"),
    ("google__t5-v1_1-base", 0, "T5 v1.1 decoder block 0, gated tanh-GELU FFN", "decoder"),
)


KDA_NOTE = (
    "Gated-DeltaNet and Mamba2 rows run transformers' torch path (chunked scans in fp32; the "
    "flash-linear-attention and mamba-ssm kernels need a GPU and keep less). Kimi delta "
    "attention (Kimi-K3's linear layers) is not in the table: transformers' torch path for it "
    "builds a chunk × chunk × head-size decay tensor per head, about 870 bytes per channel per "
    "token on small KimiLinear layers (a real K3 layer, 12,288 channels, would keep over 10 MB "
    "per token), which the fla kernel Kimi's own modelling code requires never builds; the "
    "estimate keeps its a·7h approximation for KDA and for Mamba1 layers (unmeasured).\n\n"
    "Dropout is set to 0 in every config (the estimate assumes none; GPT-2's 0.1 adds a mask "
    "per dropped tensor). Attention is what transformers picks by default on the CPU: SDPA, "
    "except BLOOM (ALiBi in its own attention), which runs eager and keeps the T×T "
    "probabilities (fp32 and a bf16 copy per head): the estimate models that for the families "
    "with no SDPA path (gpt-oss, BLOOM), so its BLOOM figure grows with T. A layer's inputs "
    "(hidden states, masks, RoPE tables, T5's position bias) are left out; LayerNorm and T5 "
    "norms keep their input, so the first norm of those rows keeps a·h the table does not "
    "count (BLOOM, GPT-2, GPT-NeoX, T5 +2–5%). T5's learned relative bias needs grad, so SDPA "
    "runs its fp32 math path there (fp32 Q, K, V and T×T probabilities). "
    "Llama 4's MoE row: transformers' Llama4TextMoe runs every expert on every token (each "
    "scaled by its sigmoid score, 0 where not chosen), so autograd keeps all 16 experts' "
    "activations, not the top-1's; Maverick's MoE layers are the same shape with 128 experts "
    "(the cut to 16 would measure this row again). gpt-oss's experts run transformers' default "
    "grouped_mm path; its clamped SwiGLU keeps seven tensors per routed pair at expert width. "
    "Corpus families without a row: qwen3_vl's text config has no causal-LM class; "
    "falcon-40b's config says model_type RefinedWeb, which 5.24 does not register; qwen, chatglm, internlm, mimo, "
    "nemotron-nas, phi4-siglip and the Kimi configs need the repositories' own code "
    "(Kimi-K2/K2.5 are DeepSeek-V3 layers, measured above).\n"
)


def _config(name: str, experts: int = MAX_EXPERTS) -> dict[str, Any]:
    """The corpus config with the stand-ins of the module docstring (all its layers are built, on
    the meta device: per-layer lists stay whole)."""
    data = json.loads((CONFIGS / f"{name}.json").read_text())
    data = data.get("text_config", data)  # a vision-language config: its text model
    data = {k: v for k, v in data.items() if k not in ("quantization_config", "auto_map")}
    data["vocab_size"] = 256
    for key in ("bos_token_id", "eos_token_id", "pad_token_id"):
        data[key] = None
    top_k = max(data.get(k) or 0 for k in ("num_experts_per_tok", "top_k_experts", "moe_top_k"))
    for key in ("num_local_experts", "num_experts", "n_routed_experts"):
        if key in data:
            data[key] = min(data[key], max(experts, top_k))
    if "n_group" in data:
        data["n_group"] = data["topk_group"] = 1
    data["num_nextn_predict_layers"] = 0
    for key, value in list(data.items()):  # dropout off, as the estimate assumes
        if ("dropout" in key or "pdrop" in key) and isinstance(value, float):
            data[key] = 0.0
    return data


def _padded_sdpa(sdpa: Any) -> Any:
    """SDPA that pads V to the q/k head size when they differ and slices the output back, as
    transformers' flash-attention path does for MLA (CPU SDPA has no fused kernel for unequal
    head sizes: its math path would save fp32 copies and the T×T scores instead)."""
    import torch

    def call(q: Any, k: Any, v: Any, *args: Any, **kwargs: Any) -> Any:
        if v.shape[-1] == q.shape[-1]:
            return sdpa(q, k, v, *args, **kwargs)
        pad = torch.nn.functional.pad(v, [0, q.shape[-1] - v.shape[-1]])
        return sdpa(q, k, pad, *args, **kwargs)[..., : v.shape[-1]]

    return call


def _same_saves(kind: str) -> Any:
    """`torch.bmm` / `grouped_mm` with the autograd record of the original (each operand saved
    where the other needs its gradient, grouped_mm's offsets too) but computed as 2-D matmuls:
    torch 2.13's CPU bf16 bmm runs at under 0.1 GFLOP/s, which made one Llama 4 or gpt-oss
    layer take over a quarter of an hour. The measurement never runs backward."""
    import torch

    def compute(a: Any, b: Any, offs: Any) -> Any:
        # in fp32, one expert at a time, cast back: bf16 matmul on a CPU without AVX-512-BF16
        # runs at under 0.3 GFLOP/s (a Llama 4 MoE layer computes 0.5 TFLOP at T = 128)
        with torch.no_grad():
            if kind == "bmm":
                return torch.stack(
                    [(x.float() @ y.float()).to(a.dtype) for x, y in zip(a, b, strict=True)]
                )
            out = a.new_empty(a.shape[0], b.shape[-1])
            start = 0
            for e, end in enumerate(offs.tolist()):
                if end > start:
                    out[start:end] = (a[start:end].float() @ b[e].float()).to(a.dtype)
                start = end
            return out

    class Saved(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, a: Any, b: Any, offs: Any = None) -> Any:
            ctx.save_for_backward(
                a if ctx.needs_input_grad[1] else None,
                b if ctx.needs_input_grad[0] else None,
                offs,
            )
            return compute(a, b, offs)

        @staticmethod
        def backward(ctx: Any, *grads: Any) -> Any:
            raise NotImplementedError("measurement only")

    if kind == "bmm":
        return lambda a, b, **kw: Saved.apply(a, b)
    return lambda a, b, offs=None, **kw: Saved.apply(a, b, offs)


class _Captured(Exception):
    """Raised by the pre-forward hook once the measured layer's inputs are captured."""


def _layers(model: Any, stack: str = "decoder") -> Any:
    """The model's list of `stack` layers ("decoder", or "encoder" of BERT / T5), whatever the
    family names it."""
    if stack == "encoder":
        paths: tuple[str, ...] = ("encoder.layer", "encoder.block")
        base = model.base_model
    elif getattr(model.config, "is_encoder_decoder", False):
        paths, base = ("decoder.block", "decoder.layers"), model.base_model
    else:
        paths = ("layers", "h", "language_model.layers", "model.layers")
        base = model.base_model
    for path in paths:
        obj = base
        for part in path.split("."):
            obj = getattr(obj, part, None)
        if obj is not None:
            return obj
    raise ValueError(f"no {stack} layer list in {type(model).__name__}")


def _tensors(value: Any) -> Iterator[Any]:
    """Every tensor in a layer's captured arguments (nested tuples, lists and dicts)."""
    import torch

    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (tuple, list)):
        for v in value:
            yield from _tensors(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _tensors(v)


def _model(data: dict[str, Any], layer: int, stack: str) -> tuple[Any, Any]:
    """The model of `data` on the meta device with only the measured layer and the small parts
    around the stack (embeddings of the cut vocabulary, final norm, rotary tables, head)
    materialised on the CPU; the other layers stay on meta and pass their input through."""
    import torch
    from transformers import AutoConfig, AutoModel, AutoModelForCausalLM, AutoModelForSeq2SeqLM

    cfg = AutoConfig.for_model(**copy.deepcopy(data))  # for_model edits nested dicts in place
    # the attention transformers picks by default on the CPU: SDPA where the family has it
    cls = AutoModelForCausalLM
    if getattr(cfg, "is_encoder_decoder", False):
        cls = AutoModelForSeq2SeqLM
    elif stack == "encoder":
        cls = AutoModel
    with torch.device("meta"):
        model = cls.from_config(cfg, dtype=torch.bfloat16)
    layers = _layers(model, stack)
    target = layers[layer]
    # an encoder-decoder (T5) is small and its blocks hand state on (the relative position bias
    # computed in block 0): all of it is built; elsewhere only the measured layer
    small = getattr(cfg, "is_encoder_decoder", False)
    others = {} if small else {i: layers[i] for i in range(len(layers)) if i != layer}
    for i in others:
        layers[i] = torch.nn.Identity()
    model.to_empty(device="cpu")
    for i, mod in others.items():
        layers[i] = mod

        # a layer that hands state on returns a tuple (GLM-5's: its top-k indices, None when
        # the next layer runs its own indexer): the passed-through layer returns the same shape
        returns = str(inspect.signature(type(mod).forward).return_annotation)
        pair = returns.startswith(("tuple", "Tuple", "typing.Tuple"))

        def passthrough(hidden_states: Any, *args: Any, pair: bool = pair, **kwargs: Any) -> Any:
            return (hidden_states, None) if pair else hidden_states

        mod.forward = passthrough
    with torch.no_grad():
        for m in model.modules():
            if all(p.device.type == "cpu" for p in m.parameters(recurse=False)):
                model._init_weights(m)
        for p in target.parameters():
            p.normal_(0.0, 0.02)
    model.train()
    return model, target


def _inputs(model: Any, target: Any, t: int, hidden: int) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The positional and keyword arguments the model's own forward gives the measured layer at
    T tokens (masks, RoPE tables, position bias, encoder states), captured by a pre-forward hook."""
    import torch

    got: dict[str, Any] = {}

    def hook(mod: Any, args: Any, kwargs: Any) -> None:
        got["args"], got["kwargs"] = args, kwargs
        raise _Captured

    handle = target.register_forward_pre_hook(hook, with_kwargs=True)
    x = torch.randn(1, t, hidden, dtype=torch.bfloat16)
    feed: dict[str, Any] = {"inputs_embeds": x}
    if getattr(model.config, "is_encoder_decoder", False):
        feed["decoder_inputs_embeds"] = x.clone()
    if "use_cache" in inspect.signature(model.forward).parameters:
        feed["use_cache"] = False
    try:  # with autograd on: a T5 block's position bias requires grad, as in training
        model(**feed)
    except _Captured:
        pass
    finally:
        handle.remove()
    return got["args"], got["kwargs"]


def measure(
    data: dict[str, Any], layer: int, tokens: tuple[int, ...], stack: str = "decoder"
) -> tuple[list[float], str]:
    """Bytes autograd saves per token in layer `layer` of `data`'s `stack` at each of `tokens`,
    and the attention implementation transformers used."""
    import torch

    model, target = _model(data, layer, stack)
    hidden = model.config.get_text_config().hidden_size
    params = {p.untyped_storage().data_ptr() for p in target.parameters()}
    sdpa = torch.nn.functional.scaled_dot_product_attention
    bmm, grouped_mm = torch.bmm, torch.nn.functional.grouped_mm
    out: list[float] = []
    for t in tokens:
        args, kwargs = _inputs(model, target, t, hidden)
        x = torch.randn(1, t, hidden, dtype=torch.bfloat16, requires_grad=True)
        if args:
            args = (x, *args[1:])
        else:
            kwargs = {**kwargs, "hidden_states": x}
        inputs = [x, *_tensors(args), *_tensors(kwargs)]
        known = params | {v.untyped_storage().data_ptr() for v in inputs}
        saved: dict[int, int] = {}

        def pack(v: torch.Tensor, known: set[int] = known, saved: dict[int, int] = saved) -> Any:
            storage = v.untyped_storage()
            ptr = storage.data_ptr()
            if ptr not in known:
                saved[ptr] = max(saved.get(ptr, 0), storage.nbytes())
            return v

        torch.nn.functional.scaled_dot_product_attention = _padded_sdpa(sdpa)
        torch.bmm, torch.nn.functional.grouped_mm = _same_saves("bmm"), _same_saves("grouped")
        try:
            with torch.autograd.graph.saved_tensors_hooks(pack, lambda v: v):
                y = target(*args, **kwargs)
        finally:
            torch.nn.functional.scaled_dot_product_attention = sdpa
            torch.bmm, torch.nn.functional.grouped_mm = bmm, grouped_mm
        del y
        out.append(sum(saved.values()) / t)
    return out, model.config._attn_implementation


def estimated(data: dict[str, Any], layer: int, stack: str, tokens: int) -> float:
    """The estimate's bytes per token for the layer at `tokens` tokens per sequence (the decoder
    stack of an encoder-decoder follows its encoder layers in the reading)."""
    from tracker.estimate.memory import layer_activation_bytes
    from tracker.estimate.params import read_config

    r = read_config(data)
    index = layer + (r.encoder_layers if stack == "decoder" else 0)
    return layer_activation_bytes(r.layers[index], r, 2.0, tokens)


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    import transformers

    level = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        transformers.logging.set_verbosity(level)


def run() -> str:
    """The Markdown section: measured vs estimated saved bytes per token per layer."""
    import torch

    torch.manual_seed(0)
    rows = []
    worst = 0.0
    with _quiet():
        for name, layer, what, *rest in LAYERS:
            stack = rest[0] if rest else "decoder"
            data = _config(name, *rest[1:])
            ours = estimated(data, layer, stack, TOKENS[-1])
            per, attn = measure(data, layer, TOKENS, stack)
            err = (ours - per[-1]) / per[-1]
            worst = max(worst, abs(err))
            cells = " | ".join(f"{p:,.0f}" for p in per)
            where = (
                f"{stack} {layer}"
                if stack == "encoder" or data.get("is_encoder_decoder")
                else str(layer)
            )
            rows.append(
                f"| {name} | {where} | {what} | {attn} | {cells} | {ours:,.0f} | "
                f"{err * 100:+.1f}% |"
            )
    heads = " | ".join(f"T={t}" for t in TOKENS)
    return "\n".join(
        [
            "## Activations (`make bench` / `python -m bench.run activations`)\n",
            "Bytes autograd saves for backward per token in one layer (bf16, default attention, "
            f"CPU, torch {torch.__version__}), measured with `saved_tensors_hooks` at T tokens, "
            "against the estimate's per-layer formula on the same config (vocabulary cut to "
            f"256, at most {MAX_EXPERTS} experts). Error at the longest T.\n",
            f"| config | layer | kind | attention | {heads} | formula | error |",
            "|---|---|---|---|" + "---|" * len(TOKENS) + "---|---|",
            *rows,
            f"\n**Worst |error| {worst * 100:.1f}% (target ≤ 10%).**\n",
            KDA_NOTE,
        ]
    )


def _mixer_saved_per_token(module: Any, hidden: int, tokens: int) -> float:
    """Bytes autograd saves per token in `module` alone (bf16, parameters and input excluded)."""
    import torch

    module.to(torch.bfloat16)
    with torch.no_grad():
        for p in module.parameters():
            p.normal_(0.0, 0.02)
    x = torch.randn(1, tokens, hidden, dtype=torch.bfloat16, requires_grad=True)
    known = {p.untyped_storage().data_ptr() for p in module.parameters()}
    known.add(x.untyped_storage().data_ptr())
    saved: dict[int, int] = {}

    def pack(v: torch.Tensor) -> Any:
        ptr = v.untyped_storage().data_ptr()
        if ptr not in known:
            saved[ptr] = max(saved.get(ptr, 0), v.untyped_storage().nbytes())
        return v

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda v: v):
        module(x)
    return sum(saved.values()) / tokens


def fit(kind: str, tokens: int = 512, chunk: int = 128) -> dict[str, float]:
    """Least-squares coefficients of a mixer's saved bytes per token over 27–32 small layers of
    transformers' torch path (`kind`: "gdn", "mamba2" or "kda"; `chunk`: Mamba2's chunk size),
    and the largest relative residual: where `tracker/estimate/mixers.py` takes its formulas.
    `python -c "from bench.activations import fit; print(fit('gdn'))"`."""
    import itertools

    import numpy as np
    import transformers

    rows: list[tuple[list[float], float]] = []
    names: list[str]
    with _quiet():
        if kind == "gdn":
            from transformers.models.qwen3_next.modeling_qwen3_next import Qwen3NextGatedDeltaNet

            names = ["key width", "value width", "q width (value heads)", "value heads", "state"]
            for h, hk, dk, r, dv in itertools.product((64, 96), (2, 4), (16, 32), (1, 2), (16, 24)):
                hv = hk * r
                cfg = transformers.Qwen3NextConfig(
                    hidden_size=h,
                    linear_num_key_heads=hk,
                    linear_key_head_dim=dk,
                    linear_num_value_heads=hv,
                    linear_value_head_dim=dv,
                )
                b = _mixer_saved_per_token(Qwen3NextGatedDeltaNet(cfg, 0), h, tokens)
                rows.append(([hk * dk, hv * dv, hv * dk, hv, hv * dk * dv, 1], b))
        elif kind == "mamba2":
            from transformers.models.nemotron_h.modeling_nemotron_h import NemotronHMamba2Mixer

            names = ["inner width", "groups × state", "heads", "heads × state", "states"]
            for h, nh, hd, g, n in itertools.product((64, 96), (4, 8), (16, 32), (1, 2), (16, 32)):
                cfg = transformers.NemotronHConfig(
                    hidden_size=h,
                    mamba_num_heads=nh,
                    mamba_head_dim=hd,
                    n_groups=g,
                    ssm_state_size=n,
                    chunk_size=chunk,
                )
                b = _mixer_saved_per_token(NemotronHMamba2Mixer(cfg, 0), h, tokens)
                rows.append(([nh * hd, g * n, nh, nh * n, nh * hd * n, g, 1], b))
        else:
            from transformers.models.kimi_linear.modeling_kimi_linear import (
                KimiLinearDeltaAttention,
            )

            names = ["hidden", "channels", "heads", "heads × head size²", "head size"]
            for h, nh, hd in itertools.product((64, 96, 128), (2, 4, 8), (16, 32, 48)):
                lac = {"num_heads": nh, "head_dim": hd, "short_conv_kernel_size": 4}
                cfg = transformers.KimiLinearConfig(
                    hidden_size=h,
                    num_hidden_layers=2,
                    linear_attn_config=lac | {"kda_layers": [1], "full_attn_layers": [2]},
                )
                b = _mixer_saved_per_token(KimiLinearDeltaAttention(cfg, 0), h, tokens)
                rows.append(([h, nh * hd, nh, nh * hd * hd, hd, 1], b))
    x = np.array([r[0] for r in rows], dtype=float)
    y = np.array([r[1] for r in rows])
    coef = np.linalg.lstsq(x, y, rcond=None)[0]
    out = {n: round(float(c), 4) for n, c in zip(names, coef, strict=False)}
    out["max relative residual"] = float(np.max(np.abs(x @ coef - y) / y))
    return out
