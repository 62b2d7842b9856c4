"""Deltas between two estimates as Changes: counts, memory figures, per-card fit moves, and
whether the estimate can still be vouched for.

A fit verdict ("no longer fits", "now fits", a batch that moved) is only published when both
estimates are vouched for (not unverified): a number we cannot vouch for never says a card fits.
"""

from __future__ import annotations

from tracker.estimate.cards import SETUP_WORDS, SETUPS
from tracker.shared.domain import Artifact, Change, ChangeKind, Estimate, Fit

PARAM_KEYS = ("total", "active", "embedding")
MEMORY_KEYS = ("full_finetune", "lora", "serve_weights", "kv_cache")


def _setup_words(setup: str, est: Estimate) -> str:
    if setup == "lora":
        rank = est.settings.get("lora_rank", 16)
        return f"LoRA r={rank}"
    return SETUP_WORDS.get(setup, setup)


def _change(kind: ChangeKind, key: str, before: object, after: object, summary: str) -> Change:
    return Change(Artifact.ESTIMATE, kind, "", key, before, after, summary)


def estimate_delta(before: Estimate, after: Estimate) -> tuple[Change, ...]:
    """Changes from `before` to `after` (ESTIMATE artifact, file ""); equal estimates → ().

    CHANGED for each parameter count (`params.total`...) and memory figure (`memory_gb.lora`...);
    CHANGED `verification.status` when the estimate becomes (or stops being) unverified; per card
    and setup, only when both estimates are vouched for, FIT_LOST / FIT_GAINED when batch 1 stops
    / starts fitting, else CHANGED when the batch moves (key `cards.<card>.<setup>`).
    """
    out: list[Change] = []
    for key in PARAM_KEYS:
        x, y = getattr(before.params, key), getattr(after.params, key)
        if x != y:
            out.append(
                _change(
                    ChangeKind.CHANGED, f"params.{key}", x, y, f"{key} parameters: {x:,} → {y:,}"
                )
            )
    for key in MEMORY_KEYS:
        gx, gy = getattr(before.memory, key), getattr(after.memory, key)
        if gx != gy:
            words = f"{key.replace('_', ' ')}: {gx} GB → {gy} GB"
            out.append(_change(ChangeKind.CHANGED, f"memory_gb.{key}", gx, gy, words))
    vb, va = before.verification, after.verification
    if vb.status is not va.status:
        why = "; ".join(va.reasons) if va.reasons else "nothing left unexplained"
        out.append(
            _change(
                ChangeKind.CHANGED,
                "verification.status",
                vb.status.value,
                va.status.value,
                f"estimate {vb.status.value} → {va.status.value} ({why})",
            )
        )
    if not (vb.vouched and va.vouched):
        return tuple(out)
    for card in after.cards:
        old = before.card(card.name)
        if old is None:
            continue
        for setup in SETUPS:
            out += _fit_change(card.name, setup, old.fit(setup), card.fit(setup), after)
    return tuple(out)


def _fit_change(name: str, setup: str, fo: Fit, fn: Fit, after: Estimate) -> list[Change]:
    if fo.batch == fn.batch and fo.split == fn.split:
        return []
    words = _setup_words(setup, after)
    key = f"cards.{name}.{setup}"
    if fo.batch >= 1 and fn.batch == 0:
        summary = f"{words} no longer fits {name} at batch 1 (now: {fn.summary})"
        return [_change(ChangeKind.FIT_LOST, key, fo.batch, fn.batch, summary)]
    if fo.batch == 0 and fn.batch >= 1:
        summary = f"{words} now fits {name} at batch {fn.batch}"
        return [_change(ChangeKind.FIT_GAINED, key, fo.batch, fn.batch, summary)]
    summary = f"{words} on {name}: {fo.summary} → {fn.summary}"
    return [_change(ChangeKind.CHANGED, key, fo.batch, fn.batch, summary)]
