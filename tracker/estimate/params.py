"""Parameter count under transformers semantics: dispatch a config to its family and tally.

`read_config(config)` returns a `Reading` (total, active, embedding, by-component counts and the
per-layer specs memory and structure use). Nested multimodal configs count their text model
plus the vision/audio towers; unknown architectures get a flagged generic Llama-layout reading.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tracker.errors import EstimateError
from tracker.estimate import irregular, others, vision
from tracker.estimate.decoder import build_decoder
from tracker.estimate.families import READERS, Notes, base
from tracker.estimate.reading import ConfigView, LayerSpec, Reading, Tally

NATIVE_ALIASES = {
    "kimi_k2": "deepseek_v3",
    "mimo": "qwen2",
    "internlm": "llama",
    "qwen": "qwen2",
    "chatglm": "glm",
    "RefinedWeb": "falcon",
    "RefinedWebModel": "falcon",
    "nemotron-nas": "llama",
}
"""Custom-code model types and the native model_type whose semantics we read them under."""

TEXT_KEYS = ("text_config", "llm_config", "language_config")


def read_config(config: Mapping[str, Any]) -> Reading:
    """Read `config` (a parsed config.json) into a Reading; EstimateError if it cannot be read."""
    if not isinstance(config, Mapping):
        raise EstimateError(f"config must be a JSON object, got {type(config).__name__}")
    root = ConfigView(config)
    notes = Notes()
    archs = root.list("architectures") or []
    architecture = str(archs[0]) if archs and isinstance(archs[0], str) else ""
    model_type = root.str("model_type")
    custom = root.has("auto_map")
    if custom:
        native = NATIVE_ALIASES.get(model_type, model_type)
        notes.flag(
            "custom-code",
            f"custom code (auto_map): read under the semantics of native model_type {native!r}; "
            "the count is derived, not verified",
        )
    tally = Tally()
    text = root
    text_key = next((k for k in TEXT_KEYS if isinstance(config.get(k), Mapping)), None)
    if text_key is not None:
        sub = root.sub(text_key)
        assert sub is not None
        data = dict(sub.data)
        if "tie_word_embeddings" not in data and root.has("tie_word_embeddings"):
            data["tie_word_embeddings"] = root.raw("tie_word_embeddings")
        text = ConfigView(data, text_key)
    text_type = text.str("model_type") if text is not root else model_type
    text_type = _text_type(model_type, text_type)
    layers, dims = _read_text(text, text_type, tally, notes, root)
    extra = vision.count_towers(root, model_type, tally, notes, dims)
    return _finish(
        root, architecture, model_type, text_type, custom, tally, layers, dims, notes, extra
    )


def _text_type(model_type: str, text_type: str) -> str:
    if text_type:
        return text_type
    return {
        "gemma3": "gemma3_text",
        "llama4": "llama4_text",
        "qwen3_vl": "qwen3",
        "idefics3": "llama",
    }.get(model_type, model_type)


def _read_text(
    c: ConfigView, text_type: str, t: Tally, n: Notes, root: ConfigView
) -> tuple[list[LayerSpec], dict[str, Any]]:
    """Count the language model; return its layer specs and the dims memory needs."""
    custom = others.READERS.get(text_type) or irregular.READERS.get(text_type)
    if custom is not None:
        return custom(c, t, n)
    reader = READERS.get(text_type)
    if reader is None:
        key = text_type.removesuffix("_text")
        reader = READERS.get(key)
    if reader is None:
        n.flag(
            "unknown-architecture",
            f"model_type {text_type!r} is not a known family: best-effort generic reading "
            "(Llama layout: q/k/v/o, SwiGLU MLP, RMSNorm)",
        )
        reader = base
    d = reader(c, n)
    specs = build_decoder(d, t)
    dims = {
        "hidden": d.hidden,
        "vocab": d.vocab,
        "heads": d.heads,
        "kv_heads": d.kv_heads,
        "head_dim": d.head_dim,
        "intermediate": d.intermediate,
        "tied": d.tied,
        "head_params": 0 if d.tied else d.vocab * d.hidden,
        "pre_params": d.vocab * d.hidden + d.learned_positions * d.hidden,
        "embedding": d.vocab * d.hidden + d.learned_positions * d.hidden,
        "max_context": c.opt_int("max_position_embeddings", "n_positions", "seq_length"),
    }
    return specs, dims


def _finish(
    root: ConfigView,
    architecture: str,
    model_type: str,
    family: str,
    custom: bool,
    t: Tally,
    layers: list[LayerSpec],
    dims: dict[str, Any],
    n: Notes,
    extra: int,
) -> Reading:
    total = t.total
    if total <= 0:
        raise EstimateError("config describes a model with no parameters")
    return Reading(
        architecture=architecture,
        model_type=model_type,
        family=family,
        custom_code=custom,
        total=total,
        active=t.active,
        embedding=t.by_component.get("embeddings", 0),
        by_component=dict(t.by_component),
        layers=tuple(layers),
        hidden=dims["hidden"],
        vocab=dims["vocab"],
        max_context=dims.get("max_context"),
        num_heads=dims["heads"],
        kv_heads=dims["kv_heads"],
        head_dim=dims["head_dim"],
        intermediate=dims["intermediate"],
        tied=dims["tied"],
        head_params=dims["head_params"],
        pre_params=dims["pre_params"] + extra,
        flags=tuple(n.flags),
        notes=tuple(n.notes),
        extra_params=extra,
        encoder_layers=dims.get("encoder_layers", 0),
    )
