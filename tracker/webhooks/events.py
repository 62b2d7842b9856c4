"""What a subscriber receives: which advisories of a revision match a subscription, and the body.

One delivery per (subscription, revision): every advisory the revision introduced and every
advisory it fixed that pass the subscription's filters (repo globs, minimum severity, change kinds
i.e. advisory groups), as full OSV records, in one JSON body. Pure: no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from fnmatch import fnmatchcase

from tracker.domain import Advisory, RepoId, Severity, Sha, rfc3339

EVENT = "revision.advisories"
"""The event type of a revision's delivery (the body's `type`)."""

RANK = {Severity.LOW: 0, Severity.MODERATE: 1, Severity.HIGH: 2, Severity.CRITICAL: 3}


@dataclass(frozen=True)
class Filter:
    """A subscription's filters."""

    repos: tuple[str, ...]
    min_severity: Severity
    kinds: tuple[str, ...]

    def wants_repo(self, repo_id: str) -> bool:
        return any(fnmatchcase(repo_id, glob) for glob in self.repos)

    def wants(self, adv: Advisory) -> bool:
        return (
            self.wants_repo(adv.repo_id)
            and RANK[adv.severity] >= RANK[self.min_severity]
            and (not self.kinds or adv.group.value in self.kinds)
        )


@dataclass(frozen=True)
class RevisionEvent:
    """A revision's published advisories: those it introduced and those it fixed."""

    repo_id: RepoId
    repo_url: str
    sha: Sha
    previous: Sha | None
    introduced: tuple[Advisory, ...]
    fixed: tuple[Advisory, ...]
    at: datetime


def body_for(event: RevisionEvent, f: Filter) -> str | None:
    """The JSON body `f`'s subscriber gets for `event`, or None when nothing in it matches."""
    new = [a for a in event.introduced if f.wants(a)]
    fixed = [a for a in event.fixed if f.wants(a)]
    if not new and not fixed:
        return None
    data = {
        "repo": event.repo_id,
        "repo_url": event.repo_url,
        "commit": event.sha,
        "previous": event.previous,
        "advisories": [dict(a.record) for a in new],
        "fixed": [dict(a.record) for a in fixed],
    }
    return encode({"type": EVENT, "timestamp": rfc3339(event.at), "data": data})


def encode(payload: object) -> str:
    """Compact, key-sorted UTF-8 JSON: the exact bytes every attempt sends."""
    return json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def matching(
    subscriptions: Sequence[tuple[int, Filter]], event: RevisionEvent
) -> list[tuple[int, str]]:
    """(subscription id, body) for every subscription with something to receive from `event`."""
    out = []
    for sub_id, f in subscriptions:
        body = body_for(event, f)
        if body is not None:
            out.append((sub_id, body))
    return out
