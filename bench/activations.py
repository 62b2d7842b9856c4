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
"""

from __future__ import annotations

import contextlib
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
# (corpus config, layer index to measure, what the layer is)
LAYERS = (
    ("meta-llama__Meta-Llama-3.1-8B", 0, "dense GQA"),
    ("meta-llama__Llama-2-7b-hf", 0, "dense MHA"),
    ("Qwen__Qwen3-0.6B", 0, "dense GQA, q/k norms"),
    ("Qwen__Qwen3-30B-A3B", 0, "MoE (128 → 16 experts, top-8)"),
    ("mistralai__Mixtral-8x7B-v0.1", 0, "MoE (8 experts, top-2)"),
    ("deepseek-ai__DeepSeek-V3", 0, "MLA + dense FFN"),
    ("deepseek-ai__DeepSeek-V3", 3, "MLA + MoE (256 → 16 experts, top-8, shared)"),
)


def _config(name: str, layer: int) -> dict[str, Any]:
    """The corpus config cut to the measured layer's shape (see the module docstring)."""
    data = json.loads((CONFIGS / f"{name}.json").read_text())
    data = {k: v for k, v in data.items() if k not in ("quantization_config", "auto_map")}
    data["vocab_size"] = 256
    for key in ("bos_token_id", "eos_token_id", "pad_token_id"):
        data.pop(key, None)
    data["num_hidden_layers"] = layer + 1
    for key in ("num_local_experts", "num_experts", "n_routed_experts"):
        if key in data:
            data[key] = min(data[key], MAX_EXPERTS)
    if "n_group" in data:
        data["n_group"] = data["topk_group"] = 1
    data["num_nextn_predict_layers"] = 0
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


def measure(data: dict[str, Any], layer: int, tokens: tuple[int, ...]) -> list[float]:
    """Bytes autograd saves per token in decoder layer `layer` of `data`, at each of `tokens`."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    cfg = AutoConfig.for_model(**data)
    cfg._attn_implementation = "sdpa"
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
    decoder = model.model.layers[layer]
    decoder.to_empty(device="cpu")
    with torch.no_grad():
        for p in decoder.parameters():
            p.normal_(0.0, 0.02)
        for b in decoder.buffers():
            b.zero_()
    with torch.device("cpu"):
        rotary = type(model.model.rotary_emb)(config=cfg)
    params = {p.untyped_storage().data_ptr() for p in decoder.parameters()}
    sdpa = torch.nn.functional.scaled_dot_product_attention
    out: list[float] = []
    for t in tokens:
        x = torch.randn(1, t, cfg.hidden_size, dtype=torch.bfloat16, requires_grad=True)
        positions = torch.arange(t).unsqueeze(0)
        cos, sin = rotary(x, positions)
        known = params | {v.untyped_storage().data_ptr() for v in (x, cos, sin)}
        saved: dict[int, int] = {}

        def pack(v: torch.Tensor, known: set[int] = known, saved: dict[int, int] = saved) -> Any:
            storage = v.untyped_storage()
            ptr = storage.data_ptr()
            if ptr not in known:
                saved[ptr] = max(saved.get(ptr, 0), storage.nbytes())
            return v

        torch.nn.functional.scaled_dot_product_attention = _padded_sdpa(sdpa)
        try:
            with torch.autograd.graph.saved_tensors_hooks(pack, lambda v: v):
                y = decoder(x, position_embeddings=(cos, sin), position_ids=positions)
        finally:
            torch.nn.functional.scaled_dot_product_attention = sdpa
        del y
        out.append(sum(saved.values()) / t)
    return out


def estimated(data: dict[str, Any], layer: int) -> float:
    from tracker.estimate.memory import layer_activation_bytes
    from tracker.estimate.params import read_config

    r = read_config(data)
    return layer_activation_bytes(r.layers[layer], r, 2.0)


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
        for name, layer, what in LAYERS:
            data = _config(name, layer)
            ours = estimated(data, layer)
            per = measure(data, layer, TOKENS)
            err = (ours - per[-1]) / per[-1]
            worst = max(worst, abs(err))
            cells = " | ".join(f"{p:,.0f}" for p in per)
            rows.append(
                f"| {name} | {layer} | {what} | {cells} | {ours:,.0f} | {err * 100:+.1f}% |"
            )
    heads = " | ".join(f"T={t}" for t in TOKENS)
    return "\n".join(
        [
            "## Activations (`make bench` / `python -m bench.run activations`)\n",
            "Bytes autograd saves for backward per token in one decoder layer (bf16, SDPA, "
            f"CPU, torch {torch.__version__}), measured with `saved_tensors_hooks` at T tokens, "
            "against the estimate's per-layer formula on the same config (vocabulary cut to "
            f"256, at most {MAX_EXPERTS} experts). Error at the longest T.\n",
            f"| config | layer | kind | {heads} | formula | error |",
            "|---|---|---|" + "---|" * len(TOKENS) + "---|---|",
            *rows,
            f"\n**Worst |error| {worst * 100:.1f}% (target ≤ 10%).**\n",
        ]
    )
