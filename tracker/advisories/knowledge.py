"""transformers' own knowledge of config keys, read from the checked-in table of the pinned release (pure).

The table (`transformers-<version>.json`, written by `python -m tracker.advisories.knowledge_gen` from
the installed transformers) holds, per `model_type`, the config class's `attribute_map` (standard
name → the class's attribute), its field defaults and sub-configs, and `GenerationConfig`'s fields
with the global defaults `generate()` applies. Loaded once per version and cached; classification
uses the pinned version, so every worker gives the same answer with or without transformers installed.

Aliases: every pair of an `attribute_map` joins two names of one fact (`n_layer` and
`num_hidden_layers`); the union over all classes gives each name the set of names of its fact, so a
rule written for one name applies under every other. The union can join names that one class
holds side by side (`num_key_value_heads` and `num_attention_heads`: Whisper and BART map each onto
`encoder_attention_heads`, Llama holds both), so text calls two names one fact only where no class
holds both (`Knowledge.same_fact`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from tracker.shared.domain import JSONValue

PINNED = "5.24.0"
"""The transformers release the checked-in table was generated from (the `oracle` extra pins it)."""

_HERE = Path(__file__).parent
_MISSING = object()


@dataclass(frozen=True)
class ConfigClass:
    """One transformers config class as the table records it."""

    model_type: str
    name: str
    attribute_map: Mapping[str, str]
    defaults: Mapping[str, JSONValue]
    sub_configs: Mapping[str, str]
    reads: frozenset[str] = frozenset()
    """Every key the class reads: its fields, both names of its aliases, and the keys it (or a
    transformers base class) takes out of its kwargs."""

    def attribute(self, key: str) -> str:
        """The class's own attribute for `key` (`num_attention_heads` → T5's `num_heads`)."""
        return self.attribute_map.get(key, key)

    def default(self, key: str) -> object:
        """The class default of `key` (or of the attribute it aliases), else the `MISSING` marker."""
        return self.defaults.get(self.attribute(key), _MISSING)


MISSING = _MISSING
"""What `ConfigClass.default` returns for a key without a recorded default."""


@dataclass(frozen=True)
class Knowledge:
    """The table of one transformers version, with alias groups computed."""

    version: str
    classes: Mapping[str, ConfigClass]
    generation_fields: frozenset[str]
    generation_defaults: Mapping[str, JSONValue]
    groups: Mapping[str, frozenset[str]]
    apart: Mapping[frozenset[str], str] = field(default_factory=dict)
    """For two names of one `groups` entry, a config class that holds both as attributes of its
    own (the first by model type), where one does."""

    def names_of(self, name: str) -> frozenset[str]:
        """Every name of the fact `name` is a name of (itself included): the union of every
        class's `attribute_map` pairs, which rules match on."""
        return self.groups.get(name, frozenset({name}))

    def same_fact(self, a: str, b: str) -> bool:
        """Whether `a` and `b` are names of one fact: joined by `attribute_map` pairs, and no
        config class holds the two as attributes of its own. The union joins
        `num_key_value_heads` (Whisper's alias of `encoder_attention_heads`) and
        `num_attention_heads` (BART's), but Llama holds both: K/V heads and query heads."""
        return a == b or (b in self.names_of(a) and self.held_apart(a, b) is None)

    def held_apart(self, a: str, b: str) -> str | None:
        """A config class (its name) that holds both `a` and `b` as attributes of its own."""
        return self.apart.get(frozenset({a, b}))

    def alias_pairs(self) -> tuple[tuple[str, str, str], ...]:
        """(model_type, standard name, class attribute) for every attribute_map entry, sorted."""
        return tuple(
            sorted(
                (mt, std, attr)
                for mt, cls in self.classes.items()
                for std, attr in cls.attribute_map.items()
                if std != attr
            )
        )

    def class_at(
        self, config: Mapping[str, JSONValue], path: tuple[str, ...]
    ) -> ConfigClass | None:
        """The config class that reads the object at `path` inside `config` (None: unknown).

        Top level: the class of `model_type`, unless `auto_map` names a remote `AutoConfig` (then
        the repo's own code decides and nothing is known). A nested object is read by the
        sub-config class its parent declares for that key (saved sub-configs often repeat the
        parent's `model_type`), else, for an AutoConfig sub-config, by its own `model_type`.
        """
        auto_map = config.get("auto_map")
        if isinstance(auto_map, Mapping) and "AutoConfig" in auto_map:
            return None
        cls = self.classes.get(str(config.get("model_type", "")))
        node: JSONValue = config
        for part in path:
            if not isinstance(node, Mapping):
                return None
            node = node.get(part)
            if not isinstance(node, Mapping):
                return None
            declared = cls.sub_configs.get(part) if cls is not None else None
            if declared:  # the parent's sub-config class reads it, whatever the object says
                cls = self.classes.get(declared)
            else:  # AutoConfig (or no declaration): the object's own model_type decides
                cls = self.classes.get(str(node.get("model_type", "")))
        return cls


def _groups(classes: Mapping[str, ConfigClass]) -> dict[str, frozenset[str]]:
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for cls in classes.values():
        for std, attr in cls.attribute_map.items():
            a, b = find(std), find(attr)
            if a != b:
                parent[max(a, b)] = min(a, b)
    members: dict[str, set[str]] = {}
    for name in parent:
        members.setdefault(find(name), set()).add(name)
    return {name: frozenset(members[find(name)]) for name in parent}


def _apart(
    classes: Mapping[str, ConfigClass], groups: Mapping[str, frozenset[str]]
) -> dict[frozenset[str], str]:
    out: dict[frozenset[str], str] = {}
    # Llama's class first: the one most readers know, and most decoder configs copy
    for mt in sorted(classes, key=lambda mt: (mt != "llama", mt.lower())):
        own = sorted(set(classes[mt].defaults) & groups.keys())
        for i, a in enumerate(own):
            for b in own[i + 1 :]:
                if b in groups[a]:
                    out.setdefault(frozenset({a, b}), classes[mt].name)
    return out


def load(version: str = PINNED) -> Knowledge:
    """The knowledge of transformers `version` from its checked-in table (cached per version).

    Raises FileNotFoundError when no table was generated for `version`.
    """
    return _load(version)


@lru_cache(maxsize=4)
def _load(version: str) -> Knowledge:
    raw = json.loads((_HERE / f"transformers-{version}.json").read_text())
    base = frozenset(raw["base_consumed"])
    classes = {
        mt: ConfigClass(
            model_type=mt,
            name=facts["class"],
            attribute_map=dict(facts["attribute_map"]),
            defaults=dict(facts["defaults"]),
            sub_configs=dict(facts["sub_configs"]),
            reads=base
            | frozenset(facts["defaults"])
            | frozenset(facts["other_fields"])
            | frozenset(facts["consumed"])
            | frozenset(facts["attribute_map"])
            | frozenset(facts["attribute_map"].values())
            | frozenset(facts["sub_configs"]),
        )
        for mt, facts in raw["model_types"].items()
    }
    generation = raw["generation"]
    return Knowledge(
        version=raw["transformers"],
        classes=classes,
        generation_fields=frozenset(generation["fields"]),
        generation_defaults=dict(generation["defaults"]),
        groups=(groups := _groups(classes)),
        apart=_apart(classes, groups),
    )
