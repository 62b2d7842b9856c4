"""What a subscriber receives: which advisories of a revision match a subscription, and the body.

Two events, each one delivery per (subscription, revision) carrying every matching advisory
(filters: repo globs, minimum severity, change kinds i.e. advisory groups) as full OSV records:
- `revision.advisories` (`EVENT`): a revision was published: the advisories it introduced
  (`advisories`) and those it fixed (`fixed`).
- `advisory.withdrawn` (`WITHDRAWN`): a history rewrite (force-push) removed the revision that
  introduced them: the advisories, now withdrawn (`withdrawn` set in each record), and why;
  `advisory.reopened` (`REOPENED`): it removed the revision that fixed them; `advisory.restored`
  (`RESTORED`): a later push brought their introducing revision back (`LifecycleEvent`).
- `webhook.ping` (`PING`): a test event on request, sent at once outside the outbox.
Pure: no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from fnmatch import fnmatchcase

from tracker.domain import Advisory, RepoId, Severity, Sha, rfc3339

EVENT = "revision.advisories"
"""The event type of a revision's publication (the body's `type`)."""
WITHDRAWN = "advisory.withdrawn"
"""A history rewrite dropped the revision that introduced these advisories: now withdrawn."""
REOPENED = "advisory.reopened"
"""A history rewrite dropped the revision that fixed these advisories: open again."""
RESTORED = "advisory.restored"
"""The revision that introduced these withdrawn advisories is on the ref again: live again."""

PING = "webhook.ping"
"""A test event sent on request (`tracker subscribe ping`), outside the outbox: no advisory."""

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


@dataclass(frozen=True)
class LifecycleEvent:
    """Advisories of one repo whose state changed together, for one reason, outside a
    publication: `kind` is `WITHDRAWN` (a rewrite dropped `sha`, which introduced them),
    `REOPENED` (a rewrite dropped `sha`, which had fixed them) or `RESTORED` (`sha`, which
    introduced them, is on the ref again)."""

    kind: str
    repo_id: RepoId
    repo_url: str
    sha: Sha
    advisories: tuple[Advisory, ...]
    reason: str
    at: datetime


def lifecycle_body(event: LifecycleEvent, f: Filter) -> str | None:
    """The JSON body `f`'s subscriber gets for `event`, or None when nothing in it matches."""
    matched = [a for a in event.advisories if f.wants(a)]
    if not matched:
        return None
    data = {
        "repo": event.repo_id,
        "repo_url": event.repo_url,
        "commit": event.sha,
        "reason": event.reason,
        "advisories": [dict(a.record) for a in matched],
    }
    return encode({"type": event.kind, "timestamp": rfc3339(event.at), "data": data})


def ping_body(subscription_id: int, f: Filter, at: datetime) -> str:
    """The body of a ping: which subscription it tests and what it would receive."""
    data = {
        "subscription": subscription_id,
        "repos": list(f.repos),
        "min_severity": f.min_severity.value,
        "kinds": list(f.kinds),
        "note": "a test event: no advisory changed",
    }
    return encode({"type": PING, "timestamp": rfc3339(at), "data": data})


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
