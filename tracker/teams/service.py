"""What the doors (CLI, API) show of teams: the JSON forms of a profile, of the verdicts of every
advisory for a team, and of an upgrade report, read from an App's stores."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from tracker.advisories.lifecycle import state_of
from tracker.shared.domain import AdvisoryState
from tracker.store.advisories.values import id_key
from tracker.teams.facts import StoreFacts
from tracker.teams.impact import Verdict, judge
from tracker.teams.profile import Team, TeamRepo
from tracker.teams.upgrade import UpgradeReport, upgrade_report

if TYPE_CHECKING:
    from tracker.store.advisories import AdvisoryStore
    from tracker.store.preflight import PreflightStore
    from tracker.store.store import Store


class App(Protocol):
    """What the team views read of `tracker.app.App`."""

    @property
    def store(self) -> Store: ...

    @property
    def advisories(self) -> AdvisoryStore: ...

    @property
    def preflight(self) -> PreflightStore: ...


def repo_json(r: TeamRepo) -> dict[str, Any]:
    return {
        "repo": r.repo_id,
        "revision": r.revision,
        "follows": r.follows,
        "workloads": None
        if r.workloads is None
        else [
            {
                "kind": w.kind,
                "rank": w.rank,
                "context": w.context,
                "batch": w.batch,
                "sharding": w.sharding,
                "engine": w.engine,
                "tensor_parallel": w.tensor_parallel,
            }
            for w in r.workloads
        ],
        "generation": r.generation if r.generation in (None, "all") else list(r.generation or ()),
        "chat_template": r.chat_template,
        "padding": r.padding,
        "classification_head": r.classification_head,
        "trust_remote_code": r.trust_remote_code,
    }


def team_json(t: Team) -> dict[str, Any]:
    return {
        "name": t.name,
        "description": t.description,
        "cards": None
        if t.cards is None
        else {"name": t.cards.name, "count": t.cards.count, "vram_gb": t.cards.vram_gb},
        "transformers": t.transformers,
        "vllm": t.vllm,
        "repos": [repo_json(r) for r in t.repos],
    }


def verdict_json(v: Verdict, severity: str, summary: str) -> dict[str, Any]:
    return {
        "advisory": v.advisory_id,
        "repo": v.repo_id,
        "team": v.team,
        "severity": severity,
        "summary": summary,
        "impact": v.impact.value,
        "reason": v.reason,
        "missing": list(v.missing),
    }


def affected_rows(app: App, team: Team, *, every: bool) -> list[dict[str, Any]]:
    """Every advisory of the team's repos (`every`: of all repos) judged for `team`."""
    facts = StoreFacts(app.store, app.preflight)
    if True:
        if every:
            advisories = app.advisories.list_advisories()
        else:
            advisories = [
                a for r in team.repos for a in app.advisories.list_advisories(repo_id=r.repo_id)
            ]
        advisories.sort(key=lambda a: id_key(a.id))
        rows = []
        for a in advisories:
            summary = str(a.record.get("summary", "")).removeprefix(f"{a.repo_id}: ")
            rows.append(verdict_json(judge(a, team, facts), a.severity.value, summary))
        return rows


INDEX_IMPACTS = ("affected", "affects your next upgrade", "unknown")
"""The verdicts the teams index counts per team (`index_rows`)."""


def index_rows(app: App, teams: Sequence[Team]) -> list[dict[str, Any]]:
    """Per team: its name, description, repos and how many open advisories of its repos it is
    affected by today, at its next upgrade, or cannot be judged for (the team page's verdicts,
    `affected_rows`, of the advisories whose state is open)."""
    out = []
    for team in teams:
        rows = affected_rows(app, team, every=False)
        open_ids = {
            a.id
            for r in team.repos
            for a in app.advisories.list_advisories(repo_id=r.repo_id)
            if state_of(a.record) is AdvisoryState.OPEN
        }
        counts = {i: 0 for i in INDEX_IMPACTS}
        for row in rows:
            if row["advisory"] in open_ids and row["impact"] in counts:
                counts[row["impact"]] += 1
        out.append(
            {
                "name": team.name,
                "description": team.description,
                "repos": [r.repo_id for r in team.repos],
                "open": counts,
            }
        )
    return out


def report_of(app: App, team: Team, repo_id: str) -> UpgradeReport | str:
    """The upgrade report of `team` on `repo_id`, or why there is none."""
    from tracker.shared.domain import parse_repo_id

    rid = parse_repo_id(repo_id)
    facts = StoreFacts(app.store, app.preflight)
    return upgrade_report(team, rid, app.advisories.list_advisories(repo_id=rid), facts)


def report_json(r: UpgradeReport) -> dict[str, Any]:
    def items(xs: Any) -> list[dict[str, Any]]:
        return [
            {
                "id": i.id,
                "severity": i.severity.value,
                "summary": i.summary,
                "impact": i.verdict.impact.value,
                "reason": i.verdict.reason,
            }
            for i in xs
        ]

    return {
        "team": r.team,
        "repo": r.repo_id,
        "pinned": r.pinned,
        "head": r.head,
        "behind": r.behind,
        "verdict": r.decision.value,
        "why": list(r.why),
        "applies": items(r.applies),
        "unknown": items(r.unknown),
        "fixed_by_upgrade": items(r.fixed),
        "stays": items(r.stays),
        "fits": [
            {
                "workload": f.workload,
                "batch": f.batch,
                "largest_batch_at_pin": f.at_pin,
                "largest_batch_at_head": f.at_head,
                "note": f.note,
            }
            for f in r.fits
        ],
        "remote_code": None
        if r.imports is None
        else {
            "transformers": r.imports.version,
            "imports_at_pin": r.imports.at_pin,
            "imports_at_head": r.imports.at_head,
        },
    }
