"""Whether an estimate can be vouched for (ESTIMATES.md §1 self-check, issue 9).

An estimate is **unverified** when the reader met keys it did not understand, when our count and
the checkpoint census disagree by more than `TOLERANCE_PCT`, when no family reader exists for
the model type (or transformers has no class of the name `architectures[0]` gives and the repo
ships no code for it) and there is no census to check the reading against, or when the named
class builds a head the estimate does not model; its numbers are still shown, but no fit verdict
is published from it. With no such reason it is **verified** (a family reader whose reading is
checked by the oracle or published counts), **checked** (the general reader, or a class unknown
to transformers, confirmed by the checkpoint census within tolerance) or **derived** (custom code read
under the semantics of another, native model_type, with no census to check that reading: fit
verdicts stand, but nothing has verified the count).
"""

from __future__ import annotations

from tracker.estimate.params import NATIVE_ALIASES
from tracker.estimate.reading import Reading
from tracker.shared.estimate_values import CheckpointCensus, Verification, VerificationStatus

TOLERANCE_PCT = 1.0
"""How far our count may sit from the checkpoint census (stored parameters, bookkeeping out)."""

TOWER_SHARE = 0.01
"""A vision tower read only approximately matters once it holds more than this share."""


def verify(r: Reading, ck: CheckpointCensus | None) -> Verification:
    """The verification of reading `r` against census `ck` (None without safetensors headers)."""
    reasons: list[str] = []
    if r.unknown:
        reasons.append(
            f"{len(r.unknown)} config key(s) the reader did not understand: {', '.join(r.unknown)}"
        )
    delta = ck.delta_pct if ck is not None else None
    if delta is not None and abs(delta) > TOLERANCE_PCT:
        reasons.append(
            f"our count differs from the checkpoint census by {delta:+.2f}% "
            f"(tolerance ±{TOLERANCE_PCT:g}%)"
        )
    if not r.known_family and delta is None:
        reasons.append(
            f"no family reader for model_type {r.family!r} and no checkpoint census to check "
            "the general reading against"
        )
    tower = r.by_component.get("vision_tower", 0)
    if "vision-tower-approximate" in r.flags and tower > TOWER_SHARE * r.total and delta is None:
        note = r.flag_notes.get("vision-tower-approximate", "vision tower read approximately")
        reasons.append(f"{note} ({tower / r.total:.1%} of the count)")
    for flag in r.flags:  # a tower, projector or sub-config left out; a class not modelled
        if flag.endswith("-not-counted") or flag == "class-not-modelled":
            reasons.append(r.flag_notes.get(flag, flag.replace("-", " ")))
    unknown_class = "class-unknown" in r.flags
    if unknown_class and delta is None:  # nothing says what the repo's unknown class builds
        reasons.append(r.flag_notes["class-unknown"] + "; no checkpoint census to check it")
    reader = "family" if r.known_family else "general"
    if reasons:
        status = VerificationStatus.UNVERIFIED
    elif r.custom_code and r.model_type in NATIVE_ALIASES and delta is None:
        status = VerificationStatus.DERIVED
        reasons.append(
            f"custom code read under native model_type {NATIVE_ALIASES[r.model_type]!r}; no "
            "checkpoint census to check the count against"
        )
    elif r.known_family and not unknown_class:
        status = VerificationStatus.VERIFIED
    else:
        status = VerificationStatus.CHECKED
    return Verification(
        status=status,
        reader=reader,
        reasons=tuple(reasons),
        unknown_keys=r.unknown,
        census_delta_pct=delta,
        tolerance_pct=TOLERANCE_PCT,
    )
