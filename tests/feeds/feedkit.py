"""Helpers of the feed tests: the demo's advisories as values, and the JSON Feed 1.1 check.

`demo_advisories()` reads the demo's golden OSV records (tests/demo/golden, what `make demo`
publishes) back into `Advisory` values; `check_json_feed(doc)` validates a JSON Feed against
the spec's rules (tests/feeds/data/jsonfeed-1.1.schema.json) plus the two a schema cannot say:
item ids are unique and every date parses as RFC 3339. `fit_step(hub, i)` commits step `i` of
acme/fit-moves, a repo on Qwen3-1.7B's real config.json whose second commit doubles the layers
(28 → 56: LoRA r=16 stops fitting an L4 24 GB, full fine-tuning an 80 GB card) and whose third
undoes it.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jsonschema

from tracker.replica.repos import commit, init_repo
from tracker.shared.domain import Advisory, Artifact, RepoId, Severity, Sha, parse_rfc3339

HERE = Path(__file__).resolve().parent
DEMO_GOLDEN = HERE.parent / "demo" / "golden"
SCHEMA = json.loads((HERE / "data" / "jsonfeed-1.1.schema.json").read_text())
CONFIGS = HERE.parent / "data" / "configs"
FIT_REPO = "acme/fit-moves"
FIT_STEPS = ((28, "Upload"), (56, "Double the layers"), (28, "Back to 28 layers"))


def qwen3_config(layers: int) -> bytes:
    config = json.loads((CONFIGS / "Qwen__Qwen3-1.7B.json").read_text())
    return json.dumps(config | {"num_hidden_layers": layers}, indent=2).encode()


def fit_step(hub: Path, i: int) -> str:
    """Commit step `i` (0, 1, 2) of acme/fit-moves under the replica root `hub`; its sha."""
    repo = hub / FIT_REPO
    if i == 0:
        init_repo(hub, FIT_REPO)
    layers, title = FIT_STEPS[i]
    date = datetime(2025, 6, 1 + i, tzinfo=UTC)
    return commit(repo, {"config.json": qwen3_config(layers)}, title, date=date)


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
