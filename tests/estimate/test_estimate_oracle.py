"""Oracle: the derived total equals transformers' meta-device parameter count for every corpus
config whose architecture the pinned transformers implements natively."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest

from tracker.estimate import estimate

CONFIGS = sorted((Path(__file__).parents[1] / "data" / "configs").glob("*.json"))


def meta_count(config: dict[str, Any]) -> int:
    """Parameters of the native class for `config`, built on the meta device (tied once)."""
    import torch
    import transformers
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    data = dict(config)
    data.pop("auto_map", None)
    model_type = data.get("model_type")
    if model_type not in CONFIG_MAPPING:
        raise LookupError(f"model_type {model_type!r} is not native to transformers")
    arch = (data.get("architectures") or [""])[0]
    cls = getattr(transformers, arch, None)
    if cls is None:
        raise LookupError(f"architecture {arch!r} is not native to transformers")
    cfg = CONFIG_MAPPING[model_type].from_dict(data)
    with torch.device("meta"):
        model = cls._from_config(cfg)
    return sum(p.numel() for p in model.parameters())


@pytest.mark.slow
def test_oracle_matches_meta_device_count(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    compared = matched = 0
    mismatches: list[str] = []
    skipped: list[str] = []
    for path in CONFIGS:
        config = json.loads(path.read_text())
        derived = estimate(config).to_json()["params"]["total"]  # every config is estimated
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                truth = meta_count(config)
            except LookupError as exc:
                skipped.append(f"{path.name}: {exc}")
                continue
        compared += 1
        if derived == truth:
            matched += 1
        else:
            mismatches.append(
                f"{path.name}: derived {derived:,} vs transformers {truth:,} ({derived - truth:+,})"
            )
    with capsys.disabled():
        print(f"\noracle: compared {compared}, matched {matched}")
        for line in mismatches:
            print("  MISMATCH", line)
        print(f"not built by transformers ({len(skipped)}), estimated anyway:")
        for line in skipped:
            print("  ", line)
    assert compared >= 50
    assert not mismatches, mismatches
