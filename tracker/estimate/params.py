"""Parameter count under transformers semantics: read a config and tally where parameters live.

`read_config(config)` returns a `Reading` (total, active, embedding, by-component counts, the
per-layer specs memory and structure use, and what the reader could not interpret). A few
families with layouts no general rule describes have their own reader (`irregular.py`); every
other config, whatever its model_type, is read by the general reader (`general.py`,
`encdec.py`) with the family's traits (`traits.py`) where the family is known. Nested
multimodal configs count their text model plus the vision/audio towers (`vision.py`).
`use_family=False` reads with the general reader alone (no family reader, no traits): the
leave-one-family-out benchmark measures how far the config alone carries; `use_reader=False`
leaves out only the family reader (the general reader with the family's traits).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from tracker.estimate import (
    classes,
    conformer,
    convnets,
    focalnet,
    irregular,
    jepa,
    merger_vit,
    mit,
    mobile,
    sam,
    speech,
    swin,
    t5gemma,
    vision,
    vit,
)
from tracker.estimate.classes import Role
from tracker.estimate.decoder import Dec, build_decoder
from tracker.estimate.encdec import is_encoder_decoder, read_encdec
from tracker.estimate.general import CONTEXT, VOCAB, read_decoder
from tracker.estimate.reading import ConfigView, LayerSpec, Notes, Reading, Tally
from tracker.estimate.traits import GENERAL, LLAMA, TRAITS, Traits
from tracker.estimate.unread import unread_keys
from tracker.shared.errors import EstimateError

NATIVE_ALIASES = {
    "kimi_k2": "deepseek_v3",
    "mimo": "qwen2",
    "internlm": "llama",
    "qwen": "qwen2",
    "chatglm": "glm",
    "RefinedWeb": "falcon",
    "RefinedWebModel": "falcon",
    "nemotron-nas": "llama",
    "kimi_k3": "kimi_linear",
}
"""Custom-code model types and the native model_type whose semantics we read them under."""

UNTIED_WRAPPERS = frozenset({"voxtral", "qwen2_audio", "omniasr"})
"""Wrapper model types whose ForConditionalGeneration class in transformers 5.24 declares no
tied-weights keys and holds a base text model (no lm_head of its own to tie): the wrapper's
lm_head is its own matrix whatever `tie_word_embeddings` says. (Llama 4's wrapper declares none
either, but its language model is a Llama4ForCausalLM that ties by the text config.)"""

ENCODERS = {
    **vit.READERS,
    **speech.READERS,
    **convnets.READERS,
    **swin.READERS,
    **conformer.READERS,
    **merger_vit.READERS,
    **mit.READERS,
    **sam.READERS,
    **focalnet.READERS,
    **jepa.READERS,
    **mobile.READERS,
}
"""Readers of vision and speech models built alone (no vocabulary), per model_type."""

TEXT_KEYS = ("text_config", "llm_config", "language_config")

FAMILY_READERS = {**irregular.READERS, **t5gemma.READERS}
"""Readers of language-model families no general rule describes, per model_type."""

VERIFIED_FAMILIES = frozenset(
    {
        *TRAITS,
        *FAMILY_READERS,
        *ENCODERS,
        "llama",
        "phi3",
        "granitemoe",
        "deepseek_v2",
        "deepseek_v3",
        "deepseek_v32",
        "glm_moe_dsa",
        "kimi_k2",
        "kimi_linear",
        "mistral",
    }
)
"""Model types whose reading is checked (transformers' meta-device count or published counts)."""


def read_config(
    config: Mapping[str, Any], *, use_family: bool = True, use_reader: bool = True
) -> Reading:
    """Read `config` (a parsed config.json) into a Reading; EstimateError if it cannot be read."""
    if not isinstance(config, Mapping):
        raise EstimateError(f"config must be a JSON object, got {type(config).__name__}")
    root = ConfigView(config)
    notes = Notes()
    archs = root.list("architectures") or []
    architecture = str(archs[0]) if archs and isinstance(archs[0], str) else ""
    model_type = root.str("model_type")
    custom = root.has("auto_map")
    root.mark("auto_map", "transformers_version", "torch_dtype", "dtype")
    if custom:
        native = NATIVE_ALIASES.get(model_type, model_type)
        notes.flag(
            "custom-code",
            f"custom code (auto_map): read under the semantics of native model_type {native!r}; "
            "the verification says whether a checkpoint census confirmed the count",
        )
    cls_role = _class_role(architecture, model_type, custom, notes)
    tally = Tally()
    text = root
    text_key = next((k for k in TEXT_KEYS if isinstance(config.get(k), Mapping)), None)
    score = None
    if text_key is not None:
        sub = root.sub(text_key)
        assert sub is not None
        data = dict(sub.data)
        # transformers 5 ties the wrapper's lm_head by the wrapper's own config: its value wins
        # over the text config's (DeepSeek-VL: true at the root, false in text_config → tied).
        if root.has("tie_word_embeddings"):
            data["tie_word_embeddings"] = root.raw("tie_word_embeddings")
        if model_type in UNTIED_WRAPPERS:
            if data.get("tie_word_embeddings"):
                notes.note(
                    f"{model_type}'s wrapper in transformers 5.24 never ties its lm_head: "
                    "counted untied although the config says tie_word_embeddings=true"
                )
            data["tie_word_embeddings"] = False
        score = _token_classifier(root, model_type, architecture)
        if score is not None:  # no lm_head: GenericForTokenClassification's score replaces it
            data["tie_word_embeddings"] = True
        text = root.view(data, text_key)
        text.mark("model_type", "architectures", "auto_map", "transformers_version", "dtype")
        # A wrapper may repeat the text model's sizes at its root; the text config's win.
        root.mark("tie_word_embeddings", "vocab_size", "hidden_size", "pad_token_id")
    text_type = _text_type(model_type, text.str("model_type") if text is not root else model_type)
    layers, dims, family_known = _read_text(
        text, text_type, tally, notes, use_family, use_reader and use_family, cls_role
    )
    traits = family_traits(text_type)[0] if use_family else GENERAL
    if cls_role is Role.DECODER and text_key is not None:
        extra = 0  # a composite config's …ForCausalLM is the text model alone: no towers
        notes.note(f"{architecture} builds the text model alone: towers not counted")
    else:
        wrapped = {**vit.WRAPPED, **sam.WRAPPED}
        extra = vision.count_towers(root, model_type, tally, notes, dims, wrapped)
    if cls_role is Role.BASE and not traits.task_heads and text_type != "bert":
        _drop_lm_head(tally, dims, architecture, notes)
    elif cls_role is Role.OTHER and not _head_modelled(architecture, model_type, traits):
        notes.flag(
            "class-not-modelled",
            f"class {architecture!r} builds a head the estimate does not model: counted as "
            f"model_type {model_type!r} with its LM head",
        )
    if score is not None:
        labels, bias = score
        dims["head_params"] = labels * int(dims["hidden"]) + (labels if bias else 0)
        tally.add("head", dims["head_params"])
    unknown = list(notes.unknowns)
    unknown += unread_keys(config, root.used)
    if text_key is not None:
        unknown += unread_keys(text.data, root.used, text_key)
    return _finish(
        architecture,
        model_type,
        text_type,
        custom,
        tally,
        layers,
        dims,
        notes,
        extra,
        family_known,
        tuple(unknown),
    )


def _token_classifier(root: ConfigView, model_type: str, arch: str) -> tuple[int, bool] | None:
    """(labels, bias) of Qwen3-ASR's token classifier (the forced aligner,
    `Qwen3ASRForTokenClassification`): transformers' GenericForTokenClassification puts a Linear
    from the text width to the labels (the length of `id2label`, else `num_labels`, else 2),
    biased per the root's `token_classification_bias`, on the base model in
    place of the lm_head.
    None for every other architecture."""
    root.mark("token_classification_bias")
    if model_type != "qwen3_asr" or arch != "Qwen3ASRForTokenClassification":
        return None
    id2label = root.raw("id2label", {})
    if isinstance(id2label, Mapping) and id2label:
        labels = len(id2label)
    else:
        labels = root.int("num_labels", default=2)
    return labels, root.bool("token_classification_bias", False)


def _class_role(architecture: str, model_type: str, custom: bool, n: Notes) -> Role:
    """The Role of the named class; custom code (auto_map) defines its own classes, which are read
    as the family's model with its head (ChatGLM's `ChatGLMModel` holds its output layer). A class
    the pinned transformers lacks, with no code in the repo, is flagged `class-unknown`."""
    if custom:
        return Role.LM
    if architecture and not classes.known(architecture):
        n.flag(
            "class-unknown",
            f"class {architecture!r} is not in transformers {classes.PINNED} and the config has "
            f"no auto_map (no code in the repo): counted as model_type {model_type!r} with its LM "
            "head",
        )
        return Role.LM
    return classes.role(architecture)


def _drop_lm_head(t: Tally, dims: dict[str, Any], architecture: str, n: Notes) -> None:
    """A base `…Model` class builds no LM head: take the reader's (untied) head out of `t`."""
    lm = int(dims["head_params"])
    if lm:
        t.add("head", -lm)
        n.note(f"{architecture} is the base model: no LM head ({lm:,} parameters not counted)")
    dims["head_params"] = 0


def _head_modelled(architecture: str, model_type: str, traits: Traits) -> bool:
    """Whether a family reader counts the head of `architecture` (role OTHER) exactly: BERT-style
    masked-LM, pre-training and sequence-classification heads, Qwen3-ASR's token classifier."""
    if traits.task_heads or model_type == "bert" or model_type in irregular.BERT_LINEAGE:
        return architecture.endswith(("ForMaskedLM", "ForPreTraining", "ForSequenceClassification"))
    if model_type in ENCODERS:  # a standalone tower: the class is the encoder, no head
        return True
    return model_type == "qwen3_asr" and architecture == "Qwen3ASRForTokenClassification"


def _text_type(model_type: str, text_type: str) -> str:
    if text_type:
        return text_type
    return {
        "gemma3": "gemma3_text",
        "llama4": "llama4_text",
        "qwen3_vl": "qwen3",
        "idefics3": "llama",
    }.get(model_type, model_type)


def family_traits(text_type: str) -> tuple[Traits, bool]:
    """(traits, verified) of a text model_type, through the custom-code aliases."""
    for name in (text_type, NATIVE_ALIASES.get(text_type, text_type)):
        for key in (name, name.removesuffix("_text")):
            if key in TRAITS:
                return TRAITS[key], True
            if key in VERIFIED_FAMILIES:
                return LLAMA, True
    return GENERAL, False


def _read_text(
    c: ConfigView,
    text_type: str,
    t: Tally,
    n: Notes,
    use_family: bool,
    use_reader: bool,
    cls_role: Role = Role.LM,
) -> tuple[list[LayerSpec], dict[str, Any], bool]:
    """Count the language model (an encoder-decoder's decoder alone for Role.DECODER); return its
    layer specs, the dims memory needs, and whether the family is one whose reading is
    verified."""
    reader = FAMILY_READERS.get(text_type) if use_reader else None
    if use_reader and text_type in ENCODERS:
        reader = ENCODERS[text_type]
    if reader is not None:
        specs, dims = reader(c, t, n)
        return specs, dims, True
    traits, known = family_traits(text_type) if use_family else (GENERAL, False)
    if not known:
        n.flag(
            "unknown-architecture",
            f"model_type {text_type!r} has no family reader: read by the general reader from "
            "what its config says",
        )
    # a decoder stack alone, sized by the seq2seq keys (TrOCR's `decoder_layers`)
    alone = cls_role is Role.DECODER and c.has("decoder_layers") and not c.has("encoder_layers")
    try:
        if is_encoder_decoder(c) or alone:
            specs, dims = read_encdec(c, traits, t, n, decoder_only=cls_role is Role.DECODER)
            return specs, dims, known
        d = read_decoder(c, traits, n)
    except EstimateError as e:
        if known:
            raise
        d = _stack_without_vocabulary(c, text_type, traits, n, e)
    specs = build_decoder(d, t)
    if d.vocab == 0:  # an encoder stack: no KV cache, no sampling
        encoders: dict[int, LayerSpec] = {}
        specs = [
            encoders.setdefault(id(s), replace(s, kind="encoder", kv_bytes_per_token=0))
            for s in specs
        ]
    emb = (d.vocab + d.learned_positions + d.token_types) * d.hidden
    dims = {
        "hidden": d.hidden,
        "vocab": d.vocab,
        "heads": d.heads,
        "kv_heads": d.kv_heads,
        "head_dim": d.head_dim,
        "intermediate": d.intermediate,
        "tied": d.tied,
        "head_params": (0 if d.tied else d.vocab * d.hidden) + (d.vocab if d.head_bias else 0),
        "pre_params": emb,
        "embedding": emb,
        "max_context": c.opt_int(*CONTEXT),
    }
    return specs, dims, known


def _stack_without_vocabulary(
    c: ConfigView, text_type: str, traits: Traits, n: Notes, error: EstimateError
) -> Dec:
    """The general reading of a config that names no vocabulary, of a family with no reader (a
    vision or audio encoder, most often): the stack of transformer layers its keys size, with no
    token embedding and no LM head, unverified, the reason naming the absent key and what is left
    uncounted (its input embedding of patches or frames, its heads). Where a vocabulary is named,
    or the stack cannot be sized either, the one-line refusal naming `error`: with no count of
    the stack no number can be given honestly."""
    if c.first_key(*VOCAB) is None:
        try:
            d = read_decoder(c, traits, n, vocab=0)
        except EstimateError as e:  # the key the stack itself cannot be sized by
            error = e
        else:
            n.unknown(
                f"vocab_size (absent: model_type {text_type!r} read as a stack of transformer "
                "layers with no token embedding, its input embedding of patches or frames and "
                "its heads not counted)"
            )
            return d
    raise EstimateError(
        f"model_type {text_type!r} has no family reader and the general reader cannot size it: "
        f"{error}"
    ) from error


def _finish(
    architecture: str,
    model_type: str,
    family: str,
    custom: bool,
    t: Tally,
    layers: list[LayerSpec],
    dims: dict[str, Any],
    n: Notes,
    extra: int,
    known: bool,
    unknown: tuple[str, ...],
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
        known_family=known,
        unknown=unknown,
        flag_notes=dict(n.flag_notes),
        input_tokens=int(dims.get("input_tokens") or 0),
    )
