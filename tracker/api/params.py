"""Path and query parameters several routes share, declared with the constraints the handlers
enforce, so the OpenAPI schema says exactly what is accepted (schemathesis checks it)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Path, Query

from tracker.api.problem import Problem
from tracker.shared.domain import RepoId, Severity, parse_repo_id
from tracker.shared.errors import InvalidRepoIdError
from tracker.store.store import REVISION_PATTERN

# A repo id part as `tracker.shared.domain.parse_repo_id` accepts it: 1-96 of [A-Za-z0-9._-], starting
# with a letter or digit, no "..", not ending with "." (written without lookarounds).
REPO_PART = r"^[A-Za-z0-9][A-Za-z0-9_-]*(?:\.[A-Za-z0-9_-]+)*$"

# Declared in the schema only: the handler checks (`parse_repo_id`) and answers its own clear
# problem ("invalid-repo-id") for anything else.
_PART = {"pattern": REPO_PART, "maxLength": 96}
Org = Annotated[str, Path(description="The repo's owner.", json_schema_extra=_PART)]
Name = Annotated[str, Path(description="The repo's name.", json_schema_extra=_PART)]
# A revision name as `Store.resolve` reads it; declared, the handler answers its own 400
# ("invalid-revision") for anything else and a 404 for a name the store does not hold.
REVISION = {"pattern": REVISION_PATTERN}
REVISION_WORDS = "A full or short sha, the ref's name or HEAD, each with an optional ~n."
Rev = Annotated[str, Path(description=REVISION_WORDS, json_schema_extra=REVISION)]
# A list's page cursor (`tracker.api.paging`): opaque, so the schema can only say so.
Cursor = Annotated[
    str | None,
    Query(
        max_length=500,
        description='An opaque cursor: the previous page\'s `next` (or its `Link: rel="next"`), '
        "with the same filters and order. Any other value is a 400 `invalid-cursor`.",
    ),
]


def any_case(words: list[str]) -> str:
    """A JSON Schema pattern matching any of `words` in any letter case (ECMA regexes have no
    inline case-insensitive flag)."""
    alternatives = (
        "".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else c for c in w) for w in words
    )
    return "^(?:" + "|".join(alternatives) + ")$"


SEVERITY_ANY_CASE = any_case([s.value for s in Severity])


def repo_id_of(org: str, name: str) -> RepoId:
    """The repo id of a route's `{org}/{name}`; a 400 problem (`invalid-repo-id`) when it is
    not one (every route that names a repo answers the same)."""
    try:
        return parse_repo_id(f"{org}/{name}")
    except InvalidRepoIdError as exc:
        raise Problem(400, "invalid-repo-id", str(exc)) from None


__all__ = [
    "REPO_PART",
    "REVISION",
    "REVISION_WORDS",
    "SEVERITY_ANY_CASE",
    "Name",
    "Org",
    "Rev",
    "any_case",
    "repo_id_of",
]
