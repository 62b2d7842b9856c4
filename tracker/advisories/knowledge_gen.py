"""Generate the checked-in table of transformers' own config knowledge (`transformers-<version>.json`).

    .venv/bin/python -m tracker.advisories.knowledge_gen            # write the table of the installed version
    .venv/bin/python -m tracker.advisories.knowledge_gen --check    # exit 1 if it differs from the checked-in one

Reads, from the installed transformers (the `oracle` extra pins it), every config class that
`AutoConfig` maps a `model_type` to: its name, `attribute_map` (standard name → the class's own
attribute), field defaults and sub-configs; and `GenerationConfig`'s fields and the global defaults
`generate()` applies when a field is unset. torch is made unimportable first: the configuration
modules do not need it, and the table must not depend on it. The classification reads the table
(`tracker.advisories.knowledge`), never transformers itself, so it works without transformers
installed and gives the same answer on every machine.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import re
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent


def table_path(version: str) -> Path:
    """Where the table of transformers `version` is kept (package data)."""
    return HERE / f"transformers-{version}.json"


def _jsonable(value: Any) -> tuple[bool, Any]:
    try:
        return True, json.loads(json.dumps(value))
    except (TypeError, ValueError):
        return False, None


def _defaults(cls: type) -> tuple[list[str], dict[str, Any]]:
    """(fields whose default is not a JSON value or is missing, field → JSON default)."""
    other: list[str] = []
    defaults: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            value = f.default
        elif f.default_factory is not dataclasses.MISSING:
            value = f.default_factory()
        else:
            other.append(f.name)
            continue
        ok, plain = _jsonable(value)
        if ok:
            defaults[f.name] = plain
        else:
            other.append(f.name)
    return sorted(other), defaults


_KWARG = re.compile(r"kwargs\.(?:pop|get)\(\s*[\"']([A-Za-z_0-9]+)[\"']")


_OWN: dict[type, frozenset[str]] = {}


def _own_consumed(klass: type) -> frozenset[str]:
    if klass not in _OWN:  # inspect.getsource parses the module: once per class
        try:
            _OWN[klass] = frozenset(_KWARG.findall(inspect.getsource(klass)))
        except (OSError, TypeError):  # pragma: no cover - classes without source
            _OWN[klass] = frozenset()
    return _OWN[klass]


def _consumed(cls: type) -> set[str]:
    """Keys the class (or a transformers base) takes out of its kwargs: not fields, but read
    (`rope_scaling` → `rope_parameters`, T5's `tie_word_embeddings` → `scale_decoder_outputs`)."""
    out: set[str] = set()
    for klass in cls.__mro__:
        if klass.__module__.startswith("transformers"):
            out |= _own_consumed(klass)
    return out


def extract() -> dict[str, Any]:
    """The table of the installed transformers (imports it, with torch made unimportable)."""
    if "torch" not in sys.modules:
        sys.modules["torch"] = None  # type: ignore[assignment]  # `import torch` now fails: torch-less mode
    import importlib

    import transformers

    auto = importlib.import_module("transformers.models.auto.configuration_auto")
    generation_config: Any = importlib.import_module("transformers").GenerationConfig

    base = auto.CONFIG_MAPPING["llama"].__mro__
    pretrained = next(k for k in base if k.__name__ == "PreTrainedConfig")
    base_consumed = _consumed(pretrained)
    model_types: dict[str, Any] = {}
    for model_type in sorted(auto.CONFIG_MAPPING_NAMES):
        cls = auto.CONFIG_MAPPING[model_type]
        other, defaults = _defaults(cls)
        subs = {
            name: getattr(sub, "model_type", "") or ""
            for name, sub in sorted((getattr(cls, "sub_configs", None) or {}).items())
        }
        model_types[model_type] = {
            "class": cls.__name__,
            "attribute_map": dict(sorted(cls.attribute_map.items())),
            "defaults": defaults,
            "other_fields": other,
            "consumed": sorted(_consumed(cls) - base_consumed),
            "sub_configs": subs,
        }
    fields = sorted(generation_config().to_dict())
    global_defaults = generation_config._get_default_generation_params()
    ok, plain = _jsonable(global_defaults)
    if not ok:  # pragma: no cover - a literal dict of JSON values in every release so far
        raise SystemExit("GenerationConfig's global defaults are not JSON values")
    return {
        "transformers": transformers.__version__,
        "generated_by": "python -m tracker.advisories.knowledge_gen",
        "generation": {"fields": fields, "defaults": dict(sorted(plain.items()))},
        "base_consumed": sorted(base_consumed),
        "model_types": model_types,
    }


def dumps(table: dict[str, Any]) -> str:
    """Stable text of a table: one line per model type, so a new release's diff is readable."""
    head = {k: v for k, v in table.items() if k != "model_types"}
    lines = ["{"]
    for key in sorted(head):
        lines.append(f"{json.dumps(key)}: {json.dumps(head[key], sort_keys=True)},")
    lines.append('"model_types": {')
    items = sorted(table["model_types"].items())
    for i, (name, facts) in enumerate(items):
        comma = "," if i < len(items) - 1 else ""
        lines.append(f"{json.dumps(name)}: {json.dumps(facts, sort_keys=True)}{comma}")
    lines += ["}", "}"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    table = extract()
    if "torch" in sys.modules and sys.modules["torch"] is not None:  # pragma: no cover
        print("torch was imported while reading the config classes", file=sys.stderr)
        return 1
    text = dumps(table)
    path = table_path(table["transformers"])
    if args == ["--check"]:
        if not path.exists() or path.read_text() != text:
            print(f"{path.name} differs from transformers {table['transformers']}", file=sys.stderr)
            return 1
        print(f"{path.name} matches transformers {table['transformers']}")
        return 0
    if args:
        print("usage: python -m tracker.advisories.knowledge_gen [--check]", file=sys.stderr)
        return 2
    path.write_text(text)
    print(f"wrote {path} ({len(table['model_types'])} model types)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
