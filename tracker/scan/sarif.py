"""A scan report as SARIF 2.1.0, the format code-scanning UIs read (as osv-scanner and pip-audit
write it): one rule per advisory (its level and `security-severity` from the advisory's
severity), one result per advisory × pin at the pin's line, and notes for pins behind HEAD and for
repos tracker does not watch."""

from __future__ import annotations

from typing import Any

from tracker import __version__
from tracker.scan.report import PinReport, PinState, ScanReport
from tracker.shared.domain import Severity

SCHEMA_URI = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)
LEVEL = {
    Severity.CRITICAL: "error",
    Severity.HIGH: "error",
    Severity.MODERATE: "warning",
    Severity.LOW: "note",
}
SECURITY_SEVERITY = {
    Severity.CRITICAL: "9.5",
    Severity.HIGH: "8.0",
    Severity.MODERATE: "5.5",
    Severity.LOW: "2.0",
}
"""The numbers code-scanning UIs bucket into critical/high/medium/low (9.0+, 7.0+, 4.0+, else)."""
STALE_RULE = "tracker/stale-pin"
UNWATCHED_RULE = "tracker/unwatched-pin"


def _location(p: PinReport) -> dict[str, Any]:
    where = p.pin.location
    return {
        "physicalLocation": {
            "artifactLocation": {"uri": where.path, "uriBaseId": "%SRCROOT%"},
            "region": {"startLine": where.line, "startColumn": where.column},
        }
    }


def _pinned(p: PinReport) -> str:
    rev = p.pin.revision or "its default branch"
    return f"{p.pin.repo_id} pinned at {rev}"


def to_sarif(report: ScanReport, *, advisory_url: str | None) -> dict[str, Any]:
    """The SARIF log of `report`; `advisory_url` (when tracker's pages have a public URL) is
    formatted with an advisory id for its rule's help link."""
    rules: dict[str, dict[str, Any]] = {}
    results: list[dict[str, Any]] = []
    for p in report.pins:
        for h in p.hits:
            if h.id not in rules:
                rules[h.id] = {
                    "id": h.id,
                    "name": "ModelAdvisory",
                    "shortDescription": {"text": f"{p.pin.repo_id}: {h.summary}"},
                    "help": {"text": f"{h.id} ({h.severity.value}): {h.summary}"},
                    "defaultConfiguration": {"level": LEVEL[h.severity]},
                    "properties": {
                        "security-severity": SECURITY_SEVERITY[h.severity],
                        "tags": ["model", h.severity.value],
                    },
                }
                if advisory_url is not None:
                    rules[h.id]["helpUri"] = advisory_url.format(id=h.id)
            results.append(
                {
                    "ruleId": h.id,
                    "level": LEVEL[h.severity],
                    "message": {
                        "text": f"{_pinned(p)}: {h.id} ({h.severity.value}, {h.relation.value}): "
                        f"{h.summary}" + (f"; {h.note}" if h.note else "")
                    },
                    "locations": [_location(p)],
                    "partialFingerprints": {
                        "pin/v1": f"{p.pin.repo_id}@{p.pinned or ''}#{h.id}",
                    },
                }
            )
        if p.state is PinState.STALE:
            results.append(
                {
                    "ruleId": STALE_RULE,
                    "level": "note",
                    "message": {"text": f"{_pinned(p)}: {p.note}"},
                    "locations": [_location(p)],
                }
            )
        elif p.state is PinState.NOT_WATCHED:
            results.append(
                {
                    "ruleId": UNWATCHED_RULE,
                    "level": "note",
                    "message": {"text": f"{_pinned(p)}: {p.note}"},
                    "locations": [_location(p)],
                }
            )
    fixed_rules = [
        {
            "id": STALE_RULE,
            "name": "StalePin",
            "shortDescription": {"text": "A pinned model revision is behind the repo's HEAD"},
            "defaultConfiguration": {"level": "note"},
        },
        {
            "id": UNWATCHED_RULE,
            "name": "UnwatchedPin",
            "shortDescription": {"text": "tracker does not watch the pinned repo"},
            "defaultConfiguration": {"level": "note"},
        },
    ]
    return {
        "$schema": SCHEMA_URI,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "tracker",
                        "version": __version__,
                        "rules": [*fixed_rules, *rules.values()],
                    }
                },
                "results": results,
            }
        ],
    }
