"""A team profile drafted from a code scan (`tracker scan --draft-team NAME`): the repos the code
pins (with the revision), the workloads its engine flags and LoRA configs show, whether it runs
remote code, and the transformers/vLLM versions it pins exactly. What a scan cannot see (cards,
the generation settings it passes, chat template, padding, classification head) is left out, so
it stays unknown until someone says it; the YAML's comment names it."""

from __future__ import annotations

from typing import Any

import yaml

from tracker.scan.pins import Pin
from tracker.scan.report import ScanReport
from tracker.teams.profile import CARD_NAMES, Team, TeamFields

ENGINES = ("vllm serve", "LLM", "AsyncLLMEngine", "LLMEngine", "EngineArgs", "AsyncEngineArgs")
UNSEEN = "cards, generation, chat_template, padding, classification_head"


def _engine(pin: Pin) -> bool:
    return pin.via in ENGINES or pin.via.startswith("vllm.entrypoints")


def draft(name: str, report: ScanReport) -> tuple[dict[str, Any], list[str]]:
    """The `teams:` item for `name`, and notes (conflicting pins, where things came from)."""
    notes: list[str] = []
    repos: dict[str, dict[str, Any]] = {}
    for p in report.pins:
        if p.pin.role != "model":
            continue
        pin = p.pin
        entry = repos.setdefault(pin.repo_id, {"id": pin.repo_id})
        if pin.revision is not None:
            if "revision" not in entry:
                entry["revision"] = pin.revision
                notes.append(f"{pin.repo_id}: revision {pin.revision} from {pin.location}")
            elif entry["revision"] != pin.revision:
                notes.append(
                    f"{pin.repo_id}: {pin.location} pins {pin.revision}, another pin "
                    f"{entry['revision']}: check which one runs"
                )
        settings = dict(pin.settings)
        workloads: list[dict[str, Any]] = entry.setdefault("workloads", [])
        if _engine(pin):
            serve: dict[str, Any] = {"kind": "serve", "engine": "vllm"}
            if "context" in settings:
                serve["context"] = int(settings["context"])
            if "tensor_parallel" in settings:
                serve["tensor_parallel"] = int(settings["tensor_parallel"])
            if serve not in workloads:
                workloads.append(serve)
        if "lora_rank" in settings:
            lora = {"kind": "lora", "rank": int(settings["lora_rank"])}
            if lora not in workloads:
                workloads.append(lora)
        if settings.get("trust_remote_code") == "true":
            entry["trust_remote_code"] = True
    for entry in repos.values():
        if not entry["workloads"]:
            del entry["workloads"]
    team: dict[str, Any] = {"name": name}
    for package in ("transformers", "vllm"):
        exact = sorted(
            {v.version for v in report.found.versions if v.package == package and v.version}
        )
        if len(exact) == 1:
            team[package] = exact[0]
            where = next(v.location for v in report.found.versions if v.version == exact[0])
            notes.append(f"{package} {exact[0]} from {where}")
        elif len(exact) > 1:
            notes.append(f"{package}: several versions pinned ({', '.join(exact)}): say which runs")
    team["repos"] = list(repos.values())
    return team, notes


def fields_of(team: Team) -> dict[str, Any]:
    """A team profile as the watchlist writes it (unknown fields left out)."""
    out: dict[str, Any] = {"name": team.name}
    if team.description:
        out["description"] = team.description
    if team.cards is not None:
        cards: dict[str, Any] = {"name": team.cards.name, "count": team.cards.count}
        if team.cards.name not in CARD_NAMES:
            cards["vram_gb"] = team.cards.vram_gb
        out["cards"] = cards
    for key in ("transformers", "vllm"):
        if getattr(team, key) is not None:
            out[key] = getattr(team, key)
    repos = []
    for r in team.repos:
        entry: dict[str, Any] = {"id": r.repo_id}
        for key in ("revision", "follows"):
            if getattr(r, key) is not None:
                entry[key] = getattr(r, key)
        if r.workloads is not None:
            entry["workloads"] = [
                {
                    k: v
                    for k, v in vars(w).items()
                    if v is not None and not (k == "batch" and v == 1)
                }
                for w in r.workloads
            ]
        if r.generation is not None:
            entry["generation"] = r.generation if r.generation == "all" else list(r.generation)
        for key in ("chat_template", "padding", "classification_head", "trust_remote_code"):
            if getattr(r, key) is not None:
                entry[key] = getattr(r, key)
        repos.append(entry)
    out["repos"] = repos
    return out


def update(existing: Team, found: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """`existing` updated from a drafted entry: revisions and exact versions from the code, repos
    the code pins that the profile lacks added; what the profile says otherwise kept."""
    out = fields_of(existing)
    notes: list[str] = []
    for key in ("transformers", "vllm"):
        if key in found and out.get(key) != found[key]:
            notes.append(f"{key}: {out.get(key, 'unknown')} → {found[key]}")
            out[key] = found[key]
    by_id = {r["id"]: r for r in out["repos"]}
    for repo in found["repos"]:
        mine = by_id.get(repo["id"])
        if mine is None:
            out["repos"].append(repo)
            notes.append(f"{repo['id']}: added (pinned in the code, not in the profile)")
            continue
        if "revision" in repo and mine.get("revision") != repo["revision"]:
            was = mine.get("revision") or mine.get("follows") or "the watched ref"
            notes.append(f"{repo['id']}: revision {was} → {repo['revision']}")
            mine.pop("follows", None)
            mine["revision"] = repo["revision"]
        for key in ("workloads", "trust_remote_code"):
            if key in repo and key not in mine:
                mine[key] = repo[key]
                notes.append(f"{repo['id']}: {key} from the code")
    in_code = {r["id"] for r in found["repos"]}
    for rid in by_id:
        if rid not in in_code:
            notes.append(f"{rid}: in the profile, not pinned in the code scanned (kept)")
    return out, notes


def draft_yaml(name: str, report: ScanReport, existing: Team | None = None) -> str:
    """The drafted `teams:` block as YAML (or `existing` updated from the code), validated as the
    watchlist validates it, with comments saying where each value came from and what a scan
    cannot see."""
    team, notes = draft(name, report)
    if not team["repos"]:
        raise ValueError("no model pins found: nothing to draft a team from")
    if existing is not None:
        team, changes = update(existing, team)
        TeamFields.model_validate(team)
        head = [f"# team {name}, updated by `tracker scan` from the pins found:"]
        head += [f"#   {n}" for n in changes or ["nothing to change"]]
        conflicts = [n for n in notes if n.endswith(("check which one runs", "say which runs"))]
        head += [f"#   {n}" for n in conflicts]
        body = yaml.safe_dump({"teams": [team]}, sort_keys=False, allow_unicode=True)
        return "\n".join(head) + "\n" + body
    TeamFields.model_validate(team)
    head = [f"# team {name}, drafted by `tracker scan` from the pins found:"]
    head += [f"#   {n}" for n in notes]
    head.append(f"# not seen in code (unknown until you add them): {UNSEEN}")
    body = yaml.safe_dump({"teams": [team]}, sort_keys=False, allow_unicode=True)
    return "\n".join(head) + "\n" + body
