"""Deltas between two estimates as Changes: counts, memory figures and per-card fit moves."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tracker.domain import Artifact, Change, ChangeKind, Estimate
from tracker.estimate.cards import SETUP_WORDS

PARAM_KEYS = ("total", "active", "embedding")
MEMORY_KEYS = ("full_finetune", "lora", "serve_weights", "kv_cache")


def _setup_words(setup: str, report: Mapping[str, Any]) -> str:
    if setup == "lora":
        rank = report.get("settings", {}).get("lora_rank", 16)
        return f"LoRA r={rank}"
    return SETUP_WORDS.get(setup, setup)


def _fit_words(fit: Mapping[str, Any]) -> str:
    return str(fit.get("summary") or f"batch {fit.get('batch')}")


def estimate_delta(before: Estimate, after: Estimate) -> tuple[Change, ...]:
    """Changes from `before` to `after` (ESTIMATE artifact, file ""); equal estimates → ().

    CHANGED for each parameter count (`params.total`...) and memory figure (`memory_gb.lora`...);
    per card and setup FIT_LOST / FIT_GAINED when batch 1 stops / starts fitting, else CHANGED
    when the batch moves (key `cards.<card>.<setup>`).
    """
    b, a = before.report, after.report
    out: list[Change] = []
    for key in PARAM_KEYS:
        x, y = b.get("params", {}).get(key), a.get("params", {}).get(key)
        if x != y:
            out.append(
                Change(
                    Artifact.ESTIMATE,
                    ChangeKind.CHANGED,
                    "",
                    f"params.{key}",
                    x,
                    y,
                    f"{key} parameters: {_num(x)} → {_num(y)}",
                )
            )
    for key in MEMORY_KEYS:
        x, y = b.get("memory_gb", {}).get(key), a.get("memory_gb", {}).get(key)
        if x != y:
            out.append(
                Change(
                    Artifact.ESTIMATE,
                    ChangeKind.CHANGED,
                    "",
                    f"memory_gb.{key}",
                    x,
                    y,
                    f"{key.replace('_', ' ')}: {x} GB → {y} GB",
                )
            )
    before_cards = {c.get("name"): c for c in b.get("cards", [])}
    for card in a.get("cards", []):
        name = card.get("name")
        old = before_cards.get(name)
        if old is None:
            continue
        for setup in ("full_finetune", "lora", "serve"):
            fo, fn = old.get(setup, {}), card.get(setup, {})
            bo, bn = int(fo.get("batch", 0)), int(fn.get("batch", 0))
            if bo == bn and fo.get("split") == fn.get("split"):
                continue
            words = _setup_words(setup, a)
            key = f"cards.{name}.{setup}"
            if bo >= 1 and bn == 0:
                out.append(
                    Change(
                        Artifact.ESTIMATE,
                        ChangeKind.FIT_LOST,
                        "",
                        key,
                        bo,
                        bn,
                        f"{words} no longer fits {name} at batch 1 (now: {_fit_words(fn)})",
                    )
                )
            elif bo == 0 and bn >= 1:
                out.append(
                    Change(
                        Artifact.ESTIMATE,
                        ChangeKind.FIT_GAINED,
                        "",
                        key,
                        bo,
                        bn,
                        f"{words} now fits {name} at batch {bn}",
                    )
                )
            else:
                out.append(
                    Change(
                        Artifact.ESTIMATE,
                        ChangeKind.CHANGED,
                        "",
                        key,
                        bo,
                        bn,
                        f"{words} on {name}: {_fit_words(fo)} → {_fit_words(fn)}",
                    )
                )
    return tuple(out)


def _num(x: Any) -> str:
    return f"{x:,}" if isinstance(x, int) else str(x)
