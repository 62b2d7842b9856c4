"""Helpers of the feed tests: the demo's advisories as values, and the JSON Feed 1.1 check.

`demo_advisories()` reads the demo's golden OSV records (tests/demo/golden, what `make demo`
publishes) back into `Advisory` values; `check_json_feed(doc)` validates a JSON Feed against
the spec's rules (tests/feeds/data/jsonfeed-1.1.schema.json) plus the two a schema cannot say:
item ids are unique and every date parses as RFC 3339.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema

from tracker.domain import Advisory, Artifact, RepoId, Severity, Sha, parse_rfc3339

HERE = Path(__file__).resolve().parent
DEMO_GOLDEN = HERE.parent / "demo" / "golden"
SCHEMA = json.loads((HERE / "data" / "jsonfeed-1.1.schema.json").read_text())


def advisory_of(record: dict[str, Any]) -> Advisory:
    extra = record["database_specific"]
    intro = next(
        ev["introduced"]
        for aff in record["affected"]
        for rng in aff["ranges"]
        for ev in rng["events"]
        if "introduced" in ev
    )
    return Advisory(
        id=record["id"],
        repo_id=RepoId(extra["repo"]),
        introduced=Sha(intro),
        group=Artifact(extra["group"]),
        severity=Severity(extra["severity"]),
        record=record,
    )


def demo_advisories() -> list[Advisory]:
    return [advisory_of(json.loads(p.read_text())) for p in sorted(DEMO_GOLDEN.glob("*.json"))]


def check_json_feed(doc: dict[str, Any]) -> None:
    """AssertionError (via jsonschema.ValidationError) unless `doc` is a valid JSON Feed 1.1."""
    jsonschema.Draft202012Validator(SCHEMA).validate(doc)
    ids = [item["id"] for item in doc["items"]]
    assert len(ids) == len(set(ids)), "item ids repeat"
    for item in doc["items"]:
        for key in ("date_published", "date_modified"):
            if key in item:
                parse_rfc3339(item[key])
