"""CLI command `tracker scan PATH`: the model pins in a codebase, matched with the store.

Prints each pin at its file:line:column with what the store says of it (watched or not, how far
behind HEAD, the advisories affecting the pinned revision and those between it and HEAD), and the
transformers/vLLM versions found; `--format json|sarif` for machines, `--fail-on SEVERITY` exits 1
when an advisory at that severity or worse bears on a pin (for CI). Remote-code advisories are
judged on the transformers version the code runs: `--team NAME`'s profile's where it names one,
else the exact versions the requirements and lockfiles pin (`tracker.scan.report.Runtime`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from tracker.shared.errors import ConfigError, NoStoreError

if TYPE_CHECKING:
    from tracker.scan.report import ScanReport

FORMATS = ("text", "json", "sarif")


def _severity(value: str | None) -> Any:
    from tracker.shared.domain import Severity

    if value is None:
        return None
    try:
        return Severity(value.lower())
    except ValueError:
        names = ", ".join(s.value for s in Severity)
        raise ConfigError(f"--fail-on {value!r}: must be one of {names}") from None


def scan_report(path: Path, team: str | None = None) -> tuple[ScanReport, str | None]:
    """Scan `path` and match its pins with the store the settings name (no store: every pin says
    so, and a note explains); remote-code advisories judged on `team`'s transformers version
    where its profile names one, else on the versions the scan found."""
    from tracker.app import build
    from tracker.scan.pins import scan
    from tracker.scan.report import Matcher, match, runtime_of
    from tracker.settings import load_settings
    from tracker.teams.facts import StoreFacts
    from tracker.watchlist import load_watchlist

    settings = load_settings()
    if not path.exists():
        raise ConfigError(f"{path}: no such file or directory")
    found = scan(
        path, max_file_bytes=settings.scan_max_file_bytes, max_files=settings.scan_max_files
    )
    watchlist = load_watchlist(settings.watchlist)
    watched = {r.repo_id: r.ref for r in watchlist.repos}
    profile: dict[str, str | None] = {}
    if team is not None:
        chosen = watchlist.team(team)
        profile = {"transformers": chosen.transformers, "vllm": chosen.vllm}
    runtime = runtime_of(found, team, profile)
    try:
        app = build(settings, read_only=True)
    except NoStoreError as exc:
        return match(found, Matcher(None, None, watched, runtime=runtime)), str(exc)
    try:
        facts = StoreFacts(app.store, app.preflight)
        matcher = Matcher(
            app.store, app.advisories, watched, runtime=runtime, remote_code=facts.remote_code
        )
        return match(found, matcher), None
    finally:
        app.close()


def _hit_json(h: Any) -> dict[str, Any]:
    return {
        "id": h.id,
        "severity": h.severity.value,
        "state": h.state.value,
        "relation": h.relation.value,
        "introduced": h.introduced,
        "summary": h.summary,
        "note": h.note or None,
    }


def as_json(report: ScanReport) -> dict[str, Any]:
    """The report as plain JSON values."""
    return {
        "files": report.found.files,
        "pins": [
            {
                "path": p.pin.location.path,
                "line": p.pin.location.line,
                "column": p.pin.location.column,
                "repo": p.pin.repo_id,
                "revision": p.pin.revision,
                "role": p.pin.role,
                "via": p.pin.via,
                "settings": dict(p.pin.settings),
                "watched": p.watched,
                "state": p.state.value,
                "pinned_sha": p.pinned,
                "head_sha": p.head,
                "behind": p.behind,
                "note": p.note,
                "advisories": [_hit_json(h) for h in p.hits],
                "cleared": [_hit_json(h) for h in p.cleared],
            }
            for p in report.pins
        ],
        "runtime": {
            "transformers": [{"version": v, "source": s} for v, s in report.runtime.transformers],
            "vllm": [{"version": v, "source": s} for v, s in report.runtime.vllm],
        },
        "versions": [
            {
                "path": v.location.path,
                "line": v.location.line,
                "column": v.location.column,
                "package": v.package,
                "spec": v.spec,
                "version": v.version,
                "source": v.source,
            }
            for v in report.found.versions
        ],
        "skipped": [{"path": s.path, "reason": s.reason} for s in report.found.skipped],
    }


def as_text(report: ScanReport) -> list[str]:
    """The report as lines: one block per pin, then the versions and the skipped files."""
    lines: list[str] = []
    for p in report.pins:
        rev = p.pin.revision or "(no revision)"
        lines.append(f"{p.pin.location}  {p.pin.repo_id} @ {rev}  [{p.pin.role}, {p.pin.via}]")
        head = f"; HEAD {p.head[:12]}" if p.head else ""
        lines.append(f"  {'watched' if p.watched else 'not watched'}; {p.note}{head}")
        for h in p.hits:
            lines.append(f"  {h.id} {h.severity.value} ({h.relation.value}): {h.summary}")
            if h.note:
                lines.append(f"    {h.note}")
        for h in p.cleared:
            lines.append(f"  cleared {h.id} {h.severity.value} ({h.relation.value}): {h.summary}")
            lines.append(f"    {h.note}")
    for v in report.found.versions:
        exact = f" (runs {v.version})" if v.version else ""
        lines.append(f"{v.location}  {v.package} {v.spec or '(any version)'}{exact}  [{v.source}]")
    for s in report.found.skipped:
        lines.append(f"skipped {s.path}: {s.reason}")
    for package, versions in (
        ("transformers", report.runtime.transformers),
        ("vllm", report.runtime.vllm),
    ):
        said = ", ".join(f"{v} ({src})" for v, src in versions) or "unknown"
        lines.append(f"runs {package}: {said}")
    repos = len({p.pin.repo_id for p in report.pins})
    hits = sum(len(p.hits) for p in report.pins)
    stale = sum(1 for p in report.pins if p.behind)
    cleared = sum(len(p.cleared) for p in report.pins)
    lines.append(
        f"{len(report.pins)} pins of {repos} repos in {report.found.files} files; {stale} behind "
        f"HEAD; {hits} advisory findings"
        + (f"; {cleared} cleared by the transformers version" if cleared else "")
    )
    return lines


def scan_command(
    path: Annotated[Path, typer.Argument(metavar="PATH", help="A directory or one file.")],
    fmt: Annotated[
        str, typer.Option("--format", help="text, json or sarif (SARIF 2.1.0).")
    ] = "text",
    fail_on: Annotated[
        str | None,
        typer.Option(
            "--fail-on",
            metavar="SEVERITY",
            help="Exit 1 when an advisory of this severity or worse (critical, high, moderate, "
            "low) affects a pin or comes between it and HEAD.",
        ),
    ] = None,
    team: Annotated[
        str | None,
        typer.Option(
            "--team",
            metavar="NAME",
            help="Judge remote-code advisories on this watchlist team's transformers version "
            "(default, or when its profile names none: the versions pinned in the code).",
        ),
    ] = None,
    draft_team: Annotated[
        str | None,
        typer.Option(
            "--draft-team",
            metavar="NAME",
            help="Print a watchlist `teams:` entry drafted from the pins and versions found.",
        ),
    ] = None,
) -> None:
    """Find model pins in a codebase (Python, YAML/JSON/TOML configs, shell scripts,
    Dockerfiles; transformers/vLLM versions from requirements, pyproject and lockfiles) and report
    each against the store: watched, behind HEAD, advisories."""
    if fmt not in FORMATS:
        raise ConfigError(f"--format {fmt!r}: must be one of {', '.join(FORMATS)}")
    threshold = _severity(fail_on)
    report, note = scan_report(path, team)
    if note:
        typer.echo(f"note: {note}", err=True)
    if draft_team is not None:
        from tracker.settings import load_settings
        from tracker.teams.draft import draft_yaml
        from tracker.watchlist import load_watchlist

        teams = load_watchlist(load_settings().watchlist).teams
        existing = next((t for t in teams if t.name == draft_team), None)
        try:
            typer.echo(draft_yaml(draft_team, report, existing), nl=False)
        except ValueError as exc:
            raise ConfigError(f"--draft-team {draft_team}: {exc}") from exc
    elif fmt == "json":
        typer.echo(json.dumps(as_json(report), indent=2, sort_keys=True))
    elif fmt == "sarif":
        from tracker.scan.sarif import to_sarif
        from tracker.settings import load_settings

        public = load_settings().public_url
        url = f"{public.rstrip('/')}/advisories/{{id}}" if public else None
        typer.echo(json.dumps(to_sarif(report, advisory_url=url), indent=2))
    else:
        for line in as_text(report):
            typer.echo(line)
    if threshold is not None:
        over = report.at_or_above(threshold)
        if over:
            ids = sorted({h.id for _, h in over})
            typer.echo(
                f"error: {len(ids)} advisories at {threshold.value} or worse bear on the pins: "
                f"{', '.join(ids)}",
                err=True,
            )
            raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add `tracker scan` to `app`."""
    app.command("scan")(scan_command)
