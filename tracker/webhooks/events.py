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
A subscription filtered to a watchlist team (`Filter.team`) receives, of each event, only the
advisories that affect that team (`Audience`, from `tracker.teams.audience`), each with its
verdict and reason in `data.team`; an event with none of them is not sent.
Every queued event's `data.sequence` counts the events of its repo queued for that subscription
(1, 2, ...; `with_sequence`): deliveries may arrive out of order (a retry waits while a later one
is due), so a receiver orders a repo's events by it and sees a gap as one still to come.
Pure: no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from fnmatch import fnmatchcase
from typing import Any, Protocol

from tracker.shared.domain import Advisory, RepoId, Severity, Sha, rfc3339

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

EVENT_TYPES = (EVENT, WITHDRAWN, REOPENED, RESTORED)
"""The event types a subscription can choose (`Filter.events`); a ping is always sent."""

RANK = {Severity.LOW: 0, Severity.MODERATE: 1, Severity.HIGH: 2, Severity.CRITICAL: 3}


@dataclass(frozen=True)
class Filter:
    """A subscription's filters."""

    repos: tuple[str, ...]
    min_severity: Severity
    kinds: tuple[str, ...]
    events: tuple[str, ...] = ()  # event types; empty: all
    team: str | None = None  # only the advisories that affect this watchlist team

    def wants_event(self, event: str) -> bool:
        return not self.events or event in self.events

    def wants_repo(self, repo_id: str) -> bool:
        return any(fnmatchcase(repo_id, glob) for glob in self.repos)

    def wants(self, adv: Advisory) -> bool:
        return (
            self.wants_repo(adv.repo_id)
            and RANK[adv.severity] >= RANK[self.min_severity]
            and (not self.kinds or adv.group.value in self.kinds)
        )


class Audience(Protocol):
    """Which advisories affect a watchlist team (`tracker.teams.audience.TeamAudience`)."""

    def verdict(self, team: str, adv: Advisory, *, introduced: bool) -> tuple[str, str] | None:
        """(impact, reason) when `adv` affects `team` (`introduced`: it is new in this event;
        else it is fixed, withdrawn, reopened or restored); None when it does not or the team
        is unknown."""


def _for_team(
    f: Filter, audience: Audience | None, groups: Sequence[tuple[Sequence[Advisory], bool]]
) -> tuple[list[list[Advisory]], dict[str, Any] | None]:
    """Each group of `f`'s advisories (with whether it is introduced), less those that do not
    affect `f.team`, and the team's verdicts for `data.team` (None without a team filter). No
    audience while a team filter is set: nothing (a team cannot be judged without one)."""
    if f.team is None:
        return [list(g) for g, _ in groups], None
    kept: list[list[Advisory]] = []
    verdicts: list[dict[str, str]] = []
    for group, introduced in groups:
        out = []
        for a in group:
            said = audience.verdict(f.team, a, introduced=introduced) if audience else None
            if said is not None:
                out.append(a)
                verdicts.append({"advisory": a.id, "impact": said[0], "reason": said[1]})
        kept.append(out)
    return kept, {"name": f.team, "verdicts": verdicts}


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


def body_for(event: RevisionEvent, f: Filter, audience: Audience | None = None) -> str | None:
    """The JSON body `f`'s subscriber gets for `event`, or None when nothing in it matches."""
    if not f.wants_event(EVENT):
        return None
    (new, fixed), team = _for_team(
        f,
        audience,
        (
            ([a for a in event.introduced if f.wants(a)], True),
            ([a for a in event.fixed if f.wants(a)], False),
        ),
    )
    if not new and not fixed:
        return None
    data: dict[str, Any] = {
        "repo": event.repo_id,
        "repo_url": event.repo_url,
        "commit": event.sha,
        "previous": event.previous,
        "advisories": [dict(a.record) for a in new],
        "fixed": [dict(a.record) for a in fixed],
    }
    if team is not None:
        data["team"] = team
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


def lifecycle_body(
    event: LifecycleEvent, f: Filter, audience: Audience | None = None
) -> str | None:
    """The JSON body `f`'s subscriber gets for `event`, or None when nothing in it matches."""
    if not f.wants_event(event.kind):
        return None
    (matched,), team = _for_team(
        f, audience, (([a for a in event.advisories if f.wants(a)], False),)
    )
    if not matched:
        return None
    data: dict[str, Any] = {
        "repo": event.repo_id,
        "repo_url": event.repo_url,
        "commit": event.sha,
        "reason": event.reason,
        "advisories": [dict(a.record) for a in matched],
    }
    if team is not None:
        data["team"] = team
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
    if f.team is not None:
        data["team"] = f.team
    return encode({"type": PING, "timestamp": rfc3339(at), "data": data})


def with_sequence(body: str, sequence: int) -> str:
    """`body` with `data.sequence` set: the how-manieth event of its repo this subscription is
    sent (1, 2, ...; `OutboxTx.enqueue`), so a receiver can order them and see a gap."""
    payload = json.loads(body)
    data = payload.get("data") if isinstance(payload, dict) else None
    if not isinstance(data, dict):
        return body  # not an event body (nothing to number)
    data["sequence"] = sequence
    return encode(payload)


def encode(payload: object) -> str:
    """Compact, key-sorted UTF-8 JSON: the exact bytes every attempt sends."""
    return json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def matching(
    subscriptions: Sequence[tuple[int, Filter]],
    event: RevisionEvent,
    audience: Audience | None = None,
) -> list[tuple[int, str]]:
    """(subscription id, body) for every subscription with something to receive from `event`."""
    out = []
    for sub_id, f in subscriptions:
        body = body_for(event, f, audience)
        if body is not None:
            out.append((sub_id, body))
    return out
