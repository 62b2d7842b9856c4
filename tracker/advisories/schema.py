"""Validate OSV records against the official JSON schema (bundled) and OSV's git rules.

The schema is `osv-schema.json` in this package, copied verbatim from ossf/osv-schema
`validation/schema.json` at 51b8156b (2026-07-01); see `osv-schema.SOURCE`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from importlib.resources import files
from typing import Any

import jsonschema

from tracker.shared.domain import JSONValue, is_full_sha
from tracker.shared.errors import AdvisoryError

SCHEMA_VERSION = "1.7.4"
"""The OSV schema version our records declare. The bundled schema file carries no version; 1.7.4 is
the version the spec (docs/schema.md) names for the schema line we copied."""


@cache
def osv_schema() -> Mapping[str, Any]:
    """The bundled official OSV JSON schema."""
    text = files("tracker.advisories").joinpath("osv-schema.json").read_text(encoding="utf-8")
    loaded: Mapping[str, Any] = json.loads(text)
    return loaded


@cache
def _validator() -> jsonschema.protocols.Validator:
    schema = osv_schema()
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    validator: jsonschema.protocols.Validator = cls(schema)
    return validator


def git_rule_problems(record: Mapping[str, JSONValue]) -> list[str]:
    """Problems with OSV's git rules that the JSON schema alone does not catch.

    Every affected entry with a GIT range must have a non-empty `versions` list of full 40-hex
    shas, and its range events must use full shas (the schema also allows "0" and 64-hex; we don't).
    """
    problems: list[str] = []
    for i, aff in enumerate(record.get("affected") or []):
        ranges = aff.get("ranges") or []
        if not any(r.get("type") == "GIT" for r in ranges):
            continue
        versions = aff.get("versions")
        if not versions:
            problems.append(
                f"affected[{i}]: a GIT range needs an explicit, non-empty versions list"
            )
        for v in versions or []:
            if not is_full_sha(str(v)):
                problems.append(f"affected[{i}].versions: {v!r} is not a full 40-hex commit id")
        for j, r in enumerate(ranges):
            for ev in r.get("events") or []:
                for name, sha in ev.items():
                    if not is_full_sha(str(sha)):
                        problems.append(
                            f"affected[{i}].ranges[{j}]: {name} {sha!r} is not a full 40-hex sha"
                        )
    return problems


def validate_record(record: Mapping[str, JSONValue]) -> None:
    """Raise AdvisoryError listing every schema and git-rule violation of `record`; None if valid."""
    problems = [
        f"{'/'.join(str(p) for p in e.absolute_path) or '<root>'}: {e.message}"
        for e in sorted(
            _validator().iter_errors(record), key=lambda e: list(map(str, e.absolute_path))
        )
    ]
    problems += git_rule_problems(record)
    if problems:
        raise AdvisoryError(
            f"OSV record {record.get('id')!r} is invalid:\n"
            + "\n".join(f"  - {p}" for p in problems)
        )
