"""The upgrade report of one team and one repo: from the revision it pins to HEAD, the advisories
that apply to its profile, the fit of its own workloads on its own cards at both ends, the remote
code's import on the transformers version it runs at both ends, and a verdict (safe / upgrade with
these changes / do not upgrade yet) with the reasons. Pure: the store's facts come through
`tracker.teams.impact.Facts`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from tracker.shared.domain import Advisory, RepoId, Severity, Sha
from tracker.shared.errors import EstimateError, NotWatchedError
from tracker.teams.impact import Facts, Impact, Verdict, judge, largest_batch, versions_of
from tracker.teams.profile import Team


class Decision(StrEnum):
    SAFE = "safe"
    WITH_CHANGES = "upgrade with these changes"
    NOT_YET = "do not upgrade yet"


@dataclass(frozen=True)
class Applied:
    """An advisory with its severity and what it means for the team."""

    id: str
    severity: Severity
    summary: str
    verdict: Verdict


@dataclass(frozen=True)
class FitDelta:
    """One workload's largest batch on the team's cards at the pin and at HEAD (None: no
    estimate, with why)."""

    workload: str
    batch: int
    at_pin: int | None
    at_head: int | None
    note: str | None = None


@dataclass(frozen=True)
class ImportDelta:
    """Whether the remote code imports on the team's transformers version at the pin and at
    HEAD (None: not checked)."""

    version: str
    at_pin: bool | None
    at_head: bool | None


@dataclass(frozen=True)
class UpgradeReport:
    team: str
    repo_id: RepoId
    pinned: Sha
    head: Sha
    behind: int
    applies: tuple[Applied, ...]
    unknown: tuple[Applied, ...]
    fixed: tuple[Applied, ...]
    stays: tuple[Applied, ...]
    fits: tuple[FitDelta, ...]
    imports: ImportDelta | None
    decision: Decision
    why: tuple[str, ...]


def _summary(a: Advisory) -> str:
    return str(a.record.get("summary", "")).removeprefix(f"{a.repo_id}: ")


def upgrade_report(
    team: Team, repo_id: RepoId, advisories: Sequence[Advisory], facts: Facts
) -> UpgradeReport | str:
    """The report, or why there is none (the team's place in the history is unknown)."""
    use = team.repo(repo_id)
    if use is None:
        raise NotWatchedError(f"team {team.name} does not use {repo_id}")
    pos = facts.position(repo_id, use.revision or use.follows)
    if isinstance(pos, str):
        return pos
    pin_seq, head_seq = pos.seq(pos.pinned), pos.seq(pos.head)
    assert pin_seq is not None and head_seq is not None
    applies: list[Applied] = []
    unknown: list[Applied] = []
    fixed: list[Applied] = []
    stays: list[Applied] = []
    for a in advisories:
        if a.repo_id != repo_id:
            continue
        v = judge(a, team, facts)
        item = Applied(a.id, a.severity, _summary(a), v)
        versions = versions_of(a)
        if pos.pinned in versions:
            if v.impact is Impact.AFFECTED:
                (stays if pos.head in versions else fixed).append(item)
            continue
        intro = pos.seq(a.introduced)
        if intro is None or intro <= pin_seq:
            continue
        if v.impact is Impact.NEXT_UPGRADE:
            applies.append(item)
        elif v.impact is Impact.UNKNOWN:
            unknown.append(item)
    fits: list[FitDelta] = []
    if team.cards is not None and use.workloads:
        pin_cfg, head_cfg = facts.config(repo_id, pos.pinned), facts.config(repo_id, pos.head)
        for w in use.workloads:
            try:
                b = largest_batch(pin_cfg, team, w) if pin_cfg is not None else None
                h = largest_batch(head_cfg, team, w) if head_cfg is not None else None
                fits.append(FitDelta(f"{w} on {team.cards}", w.batch, b, h))
            except EstimateError as exc:
                fits.append(FitDelta(f"{w} on {team.cards}", w.batch, None, None, str(exc)))
    imports = None
    if use.trust_remote_code and team.transformers:
        pin_rc, head_rc = (
            facts.remote_code(repo_id, pos.pinned),
            facts.remote_code(repo_id, pos.head),
        )
        imports = ImportDelta(
            team.transformers,
            pin_rc.importable(team.transformers) if pin_rc else None,
            head_rc.importable(team.transformers) if head_rc else None,
        )
    why: list[str] = []
    for f in fits:
        if f.at_pin is not None and f.at_head is not None and f.at_pin >= f.batch > f.at_head:
            why.append(f"{f.workload}: no longer fits at HEAD (largest batch {f.at_head})")
    if imports and imports.at_pin is not False and imports.at_head is False:
        why.append(f"the remote code at HEAD does not import on transformers {imports.version}")
    for item in applies:
        if item.severity is Severity.CRITICAL:
            why.append(f"{item.id} (critical) applies: {item.verdict.reason}")
    if why:
        decision = Decision.NOT_YET
    elif applies or unknown:
        decision = Decision.WITH_CHANGES
        why = [f"{i.id} ({i.severity.value}): {i.verdict.reason}" for i in applies]
        why += [f"{i.id} ({i.severity.value}) unknown: {i.verdict.reason}" for i in unknown]
    else:
        decision = Decision.SAFE
        why = [
            "no advisory between the pin and HEAD applies to this profile"
            if head_seq > pin_seq
            else "the team is at HEAD"
        ]
    return UpgradeReport(
        team=team.name,
        repo_id=repo_id,
        pinned=pos.pinned,
        head=pos.head,
        behind=head_seq - pin_seq,
        applies=tuple(applies),
        unknown=tuple(unknown),
        fixed=tuple(fixed),
        stays=tuple(stays),
        fits=tuple(fits),
        imports=imports,
        decision=decision,
        why=tuple(why),
    )
