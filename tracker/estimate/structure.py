"""The structure graph (ESTIMATES.md §4): nodes with output shapes at the maximum context.

Input → Embedding → RoPE → per layer (norm → typed attention → add → norm → typed FFN → add)
→ final norm → head → output; shapes exclude the batch dimension. Runs of identical layers are
folded into one entry with a `repeat` count so the graph stays small for 10,000-layer configs.
"""

from __future__ import annotations

from typing import Any

from tracker.estimate.layout import pattern
from tracker.estimate.reading import LayerSpec, Reading
from tracker.shared.estimate_values import LayoutPattern, Structure

ATTENTION_NAMES = {
    "gqa": "grouped-query attention",
    "mha": "multi-head attention",
    "mqa": "multi-query attention",
    "mla": "multi-head latent attention (MLA)",
    "sliding": "local/sliding-window attention",
    "linear": "linear attention",
    "ssm": "Mamba/SSM mixer",
}
FFN_NAMES = {"swiglu": "SwiGLU", "gelu": "GELU MLP", "relu": "ReLU MLP"}


def _layer_nodes(spec: LayerSpec, seq: int, h: int) -> list[dict[str, Any]]:
    nodes: list[dict[str, Any]] = []
    if spec.attention != "none":
        name = ATTENTION_NAMES.get(spec.attention, spec.attention)
        if spec.window:
            name += f" (window {spec.window})"
        nodes += [
            {"node": "norm", "shape": [seq, h]},
            {"node": "attention", "type": name, "shape": [seq, h]},
            {"node": "add", "shape": [seq, h]},
        ]
    if spec.ffn != "none":
        if spec.ffn == "moe":
            name = f"MoE with {spec.experts} experts top-{spec.top_k}"
        else:
            name = FFN_NAMES.get(spec.ffn, spec.ffn)
        nodes += [
            {"node": "norm", "shape": [seq, h]},
            {"node": "ffn", "type": name, "shape": [seq, h]},
            {"node": "add", "shape": [seq, h]},
        ]
    return nodes


def structure(r: Reading) -> Structure:
    """The §5 `structure` object: the folded graph plus the attention-layout facts."""
    seq = r.max_context or 0
    h = r.hidden
    graph: list[dict[str, Any]] = [
        {"node": "input", "shape": [seq]},
        {"node": "embedding", "shape": [seq, h]},
        {"node": "rope", "shape": [seq, h]},
    ]
    run_start = 0
    layers = r.layers
    for i in range(1, len(layers) + 1):
        # readers share one LayerSpec among identical layers: the same object, the same signature
        if i == len(layers) or (
            layers[i] is not layers[run_start]
            and _signature(layers[i]) != _signature(layers[run_start])
        ):
            graph.append(
                {
                    "node": "layers",
                    "first": run_start,
                    "repeat": i - run_start,
                    "kind": layers[run_start].kind,
                    "block": _layer_nodes(layers[run_start], seq, h),
                }
            )
            run_start = i
    graph += [
        {"node": "final norm", "shape": [seq, h]},
        {"node": "head", "shape": [seq, r.vocab], "tied": r.tied},
        {"node": "output", "shape": [seq, r.vocab]},
    ]
    p = pattern(spec.attention for spec in layers)
    return Structure(
        graph=tuple(graph),
        pattern=LayoutPattern(
            hybrid=p.hybrid,
            full_attention_layers=p.full,
            linear_layers=p.linear,
            period=p.period,
            ratio=p.ratio,
            summary=p.describe(),
        ),
    )


def _signature(spec: LayerSpec) -> tuple[object, ...]:
    return (spec.attention, spec.ffn, spec.window, spec.experts, spec.top_k, spec.kind)
