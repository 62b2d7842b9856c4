"""The Linear modules transformers builds for each corpus config, on the meta device (no weights).

Writes `tests/preflight/data/meta-modules-<version>.json`: per config file that the pinned
transformers builds natively, its Linear / Conv1D modules grouped as [last name part, in, out,
count], and the output layer. `--check` rebuilds and compares with the file instead (exit 1 on a
difference); `--only NAME...` limits either to those configs. The LoRA resolution test compares
the derivation with this file; `test_the_recorded_module_names_are_what_transformers_builds`
rebuilds all of them live.

The model class is `architectures[0]` where transformers exports that name; where it does not,
the class an Auto mapping registers for the config's `model_type` under the same name but for
underscores (Kimi-K2.5's `KimiK25ForConditionalGeneration` is transformers'
`Kimi_K25ForConditionalGeneration`, in the image-text-to-text mapping of `kimi_k25`). A config
whose `model_type` transformers does not register is remote code only and is left out, with the
reason (`left_out`; printed by every run, and pinned in the test).

    .venv/bin/python -m tests.preflight.metagen [--check] [--only FILE.json ...]
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

CONFIGS = Path(__file__).parents[1] / "data" / "configs"


def native_class(config: dict[str, Any]) -> Any:
    """The class transformers builds the config with natively, or why there is none (a str)."""
    import transformers
    from transformers.models.auto import modeling_auto
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    model_type = config.get("model_type")
    arch = str((config.get("architectures") or [""])[0])
    version = transformers.__version__
    cls = getattr(transformers, arch, None)
    if model_type not in CONFIG_MAPPING:
        # A remote-code model_type whose architectures[0] names a class transformers exports
        # (Kimi-K2-Instruct: kimi_k2, DeepseekV3ForCausalLM) is built with that class and its own
        # config class, as transformers would build the same weights without the remote code.
        if cls is not None:
            return cls
        return f"model_type {model_type!r} is not registered in transformers {version}"
    if cls is not None:
        return cls
    mapped = sorted(
        {
            names[model_type]
            for attr, names in vars(modeling_auto).items()
            if attr.startswith("MODEL_")
            and attr.endswith("_MAPPING_NAMES")
            and isinstance(names, dict)
            and isinstance(names.get(model_type), str)
        }
    )
    same = [n for n in mapped if n.replace("_", "") == arch.replace("_", "")]
    if len(same) == 1 and getattr(transformers, same[0], None) is not None:
        return getattr(transformers, same[0])
    return (
        f"{arch!r} is not a transformers {version} class, and no Auto mapping of "
        f"{model_type!r} registers it under another spelling ({', '.join(mapped) or 'none'})"
    )


def left_out() -> dict[str, str]:
    """Corpus config → why transformers does not build it natively."""
    out = {}
    for path in sorted(CONFIGS.glob("*.json")):
        cls = native_class(json.loads(path.read_text()))
        if isinstance(cls, str):
            out[path.name] = cls
    return out


def meta_modules(config: dict[str, Any]) -> dict[str, Any] | None:
    """{"linears": [[last, in, out, count], ...], "output": [last, in, out] | None}, or None when
    transformers does not build the config natively."""
    import torch
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    from transformers.pytorch_utils import Conv1D

    data = dict(config)
    data.pop("auto_map", None)
    cls = native_class(data)
    if isinstance(cls, str):
        return None
    model_type = data.get("model_type")
    config_class = CONFIG_MAPPING.get(model_type, cls.config_class)
    cfg = config_class.from_dict(data)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with torch.device("meta"):
            model = cls._from_config(cfg)
    head = model.get_output_embeddings()
    counts: Counter[tuple[str, int, int]] = Counter()
    output = None
    for name, m in model.named_modules():
        if isinstance(m, Conv1D):
            i, o = m.weight.shape
        elif isinstance(m, torch.nn.Linear):
            i, o = m.in_features, m.out_features
        else:
            continue
        key = (name.rsplit(".", 1)[-1], int(i), int(o))
        if m is head:
            output = list(key)
        else:
            counts[key] += 1
    return {"linears": [[*k, n] for k, n in sorted(counts.items())], "output": output}


def generate(only: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for path in sorted(CONFIGS.glob("*.json")):
        if only and path.name not in only:
            continue
        built = meta_modules(json.loads(path.read_text()))
        if built is not None:
            out[path.name] = built
    return out


def data_path() -> Path:
    import transformers

    return Path(__file__).parent / "data" / f"meta-modules-{transformers.__version__}.json"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--only", nargs="*", default=[])
    args = parser.parse_args(argv)
    fresh = generate(args.only)
    path = data_path()
    for name, why in left_out().items():
        if not args.only or name in args.only:
            print(f"left out: {name}: {why}")
    if args.check:
        recorded = json.loads(path.read_text())
        wrong = [k for k in fresh if recorded.get(k) != fresh[k]]
        for k in wrong:
            print(f"differs: {k}")
        print(f"checked {len(fresh)} configs against {path.name}: {len(wrong)} differ")
        return 1 if wrong else 0
    if args.only:
        fresh = {**json.loads(path.read_text()), **fresh}
    path.write_text(json.dumps(fresh, indent=1, sort_keys=True) + "\n")
    print(f"wrote {path} ({len(fresh)} configs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
