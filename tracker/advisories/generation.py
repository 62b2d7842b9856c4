"""The generation defaults `generate()` uses at one revision, by transformers' precedence (pure).

transformers 5 builds a model's `GenerationConfig` from generation_config.json when that file can
be read (config.json's generation keys are then ignored entirely); only when it is missing or
unreadable from config.json (`GenerationConfig.from_model_config`: the top-level keys whose value
is not null, then, for what those leave at the class default, the keys of the first of `decoder`,
`generator`, `text_config`). A field neither file sets takes the global default `generate()`
applies (`GenerationConfig._get_default_generation_params`, recorded in the knowledge table).
"""

from __future__ import annotations

from collections.abc import Mapping

from tracker.advisories.knowledge import Knowledge
from tracker.diff import SideState, load_json_object, read_side
from tracker.shared.domain import JSONValue, Snapshot

CONFIG_FILE = "config.json"
GENERATION_FILE = "generation_config.json"
DECODER_CONFIG_KEYS = ("decoder", "generator", "text_config")

Generation = Mapping[str, JSONValue]
"""Every `GenerationConfig` field with the value `generate()` uses (None: no value and no global
default; transformers then leaves the feature off)."""


def effective_generation(snap: Snapshot | None, knowledge: Knowledge) -> Generation | None:
    """The effective generation defaults of `snap` (field → value), or None when they cannot be
    known: generation_config.json is in the tree but was not fetched, or it is missing or
    unreadable and config.json cannot be read either. Private fields (`_from_model_config`) and
    `transformers_version` are left out: they steer no generation."""
    if snap is None:
        return None
    gen = read_side(snap, GENERATION_FILE, load_json_object)
    if gen.state is SideState.UNTRACKED:
        return None
    source: dict[str, JSONValue] = {}
    if gen.state is SideState.OK and gen.value is not None:
        source = {k: v for k, v in gen.value.items() if v is not None}
    else:
        conf = read_side(snap, CONFIG_FILE, load_json_object)
        if conf.state in (SideState.UNTRACKED, SideState.UNREADABLE):
            return None
        value = conf.value if conf.state is SideState.OK and conf.value is not None else {}
        source = {k: v for k, v in value.items() if v is not None}
        sub = next(
            (value[k] for k in DECODER_CONFIG_KEYS if isinstance(value.get(k), Mapping)), None
        )
        if isinstance(sub, Mapping):
            for key, v in sub.items():
                if key not in source:  # unset at the top level: the class default
                    source[key] = v
    out: dict[str, JSONValue] = {}
    for name in sorted(knowledge.generation_fields):
        if name.startswith("_") or name == "transformers_version":
            continue
        value = source.get(name)
        out[name] = value if value is not None else knowledge.generation_defaults.get(name)
    return out
