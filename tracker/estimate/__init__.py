"""The estimate stage: parameters, memory, card fit, cost, structure and findings from config.json.

Pure: no torch, network, clock or logging. `estimate(config, headers, settings)` → Estimate
(typed; `Estimate.to_json()` is the ESTIMATES.md §5 JSON); `estimate_delta(before, after)` →
Changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from tracker.estimate.params import read_config
from tracker.estimate.report import build_report
from tracker.estimate.settings import DEFAULT_SETTINGS, Card, EstimateSettings
from tracker.estimate.tokens import TOKENIZER_FILES, highest_token_id, highest_token_id_from_files
from tracker.shared.bounded import DOCUMENT, BoundsError, load_json
from tracker.shared.errors import EstimateError
from tracker.shared.estimate_values import Estimate, SafetensorsHeader

if TYPE_CHECKING:
    from tracker.shared.domain import Change

__all__ = [
    "TOKENIZER_FILES",
    "Card",
    "EstimateSettings",
    "estimate",
    "estimate_delta",
    "highest_token_id",
    "highest_token_id_from_files",
    "parse_config",
]

MAX_CONFIG_BYTES = 16 * 1024 * 1024


def parse_config(data: bytes | str) -> Mapping[str, Any]:
    """Parse config.json bytes within `tracker.shared.bounded.DOCUMENT` (size, depth, values); EstimateError
    (one line) if oversized, nested too deeply, not JSON or not an object. NaN, Infinity and
    -Infinity are accepted, as transformers accepts them (a reader rejects them where it needs a
    number)."""
    if len(data) > MAX_CONFIG_BYTES:
        raise EstimateError(f"config is {len(data):,} bytes, over the {MAX_CONFIG_BYTES:,} cap")
    try:
        value = load_json(data, "config", DOCUMENT, nonfinite=True)
    except BoundsError as exc:
        why = str(exc).removeprefix("could not read config: ")
        raise EstimateError(f"config is not valid JSON: {why}") from exc
    if not isinstance(value, dict):
        raise EstimateError(f"config must be a JSON object, got {type(value).__name__}")
    return value


def estimate(
    config: Mapping[str, Any],
    headers: Mapping[str, SafetensorsHeader] | None = None,
    settings: EstimateSettings | None = None,
    *,
    max_token_id: int | None = None,
    total_size: int | None = None,
) -> Estimate:
    """The estimate of `config` (with safetensors `headers` when given) under `settings`.

    `max_token_id`, the tokenizer's highest token id when the caller knows it, enables the
    `vocab-too-small` finding; `total_size`, the weight index's `metadata.total_size`
    (`checkpoint.index_total_size`), is the checkpoint's bytes as shipped (serving holds them).
    Raises EstimateError (one line) on an unreadable config.
    """
    s = settings or DEFAULT_SETTINGS
    try:
        reading = read_config(config)
        return build_report(
            config, reading, headers, s, max_token_id=max_token_id, total_size=total_size
        )
    except RecursionError as exc:
        raise EstimateError("config is nested too deeply (cyclic?)") from exc


def estimate_delta(before: Estimate, after: Estimate) -> tuple[Change, ...]:
    """The Changes between two estimates (tracker/estimate/delta.py). Imported on first use: the
    change values live in tracker.shared.domain, which a one-off estimate does not load."""
    from tracker.estimate.delta import estimate_delta as delta

    return delta(before, after)
