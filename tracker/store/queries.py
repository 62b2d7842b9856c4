"""Read-side queries over the store that the CLI and the HTTP API share, so both answer the same
JSON: the diff between two ingested revisions (`tracker diff`, `/v1/repos/…/diff`), a repo's
history (`tracker history`, `/v1/repos/…/history`), and the advisory filters (`tracker
advisories list`, `/v1/advisories`: `advisory_filter`). The estimate at a revision is
`tracker.cli.estimating.store_report` (the CLI's own, kept import-light for a fast start).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from enum import Enum
from typing import TYPE_CHECKING, Any, TypeVar

from tracker.settings import Settings
from tracker.shared.domain import AdvisoryState, Artifact, Diff, RepoId, Severity, parse_repo_id
from tracker.store import Store
from tracker.store.values import StoredRevision

if TYPE_CHECKING:
    from tracker.store.advisories.listing import AdvisoryFilter

E = TypeVar("E", bound=Enum)
SEVERITY_ORDER = (Severity.LOW, Severity.MODERATE, Severity.HIGH, Severity.CRITICAL)


class FilterError(ValueError):
    """A filter value that is not one of its choices; `name` is the filter as the caller spells
    it (`--severity`, `severity`)."""

    def __init__(self, name: str, reason: str) -> None:
        super().__init__(f"{name} {reason}")
        self.name = name
        self.reason = reason


def choice(enum: type[E], value: str, name: str) -> E:
    """`value` as a member of `enum`, in any letter case (surrounding blanks ignored);
    FilterError naming the choices."""
    try:
        return enum(value.strip().lower())
    except ValueError:
        choices = ", ".join(str(m.value) for m in enum)
        raise FilterError(name, f"{value!r} must be one of {choices}") from None


def parse_since(text: str, name: str = "since") -> datetime:
    """The lower bound of a `since` filter (`tracker advisories list --since`, `/v1/advisories
    ?since=`, one reading for both): an RFC 3339 time (`Z` or an offset), or an ISO date or
    date-time without an offset, read as UTC (a date is its midnight). Advisories show `modified`
    to the whole second, so the bound is rounded up to the whole second: an advisory is listed
    exactly when its `modified` as shown is at or after `text` (05:50:10.5Z lists 05:50:11 and
    later, not 05:50:10). FilterError naming `name` otherwise."""
    try:
        when = datetime.fromisoformat(text.strip().replace("z", "Z").replace("Z", "+00:00"))
        when = (when if when.tzinfo else when.replace(tzinfo=UTC)).astimezone(UTC)
        if when.microsecond:
            when = when.replace(microsecond=0) + timedelta(seconds=1)
        return when
    except (ValueError, OverflowError):
        raise FilterError(
            name,
            f"{text!r} is not a time: RFC 3339 (2026-11-30T09:30:00Z), or an ISO date or "
            "date-time read as UTC (2026-11-30, 2026-11-30T09:30)",
        ) from None


def advisory_filter(
    *,
    repos: Iterable[str] = (),
    severities: Iterable[str] = (),
    min_severities: Iterable[str] = (),
    kinds: Iterable[str] = (),
    states: Iterable[str] = (),
    since: Iterable[str] = (),
    name: Callable[[str], str] = str,
) -> AdvisoryFilter:
    """The advisory filter `tracker advisories list` and `/v1/advisories` both apply.

    Filters combine with AND; a filter given several times matches any of its values (OR): any
    of the repos, severities, kinds and states; at or above the lowest floor (`min_severities`);
    modified (as shown, to the second) at or after the earliest `since` (`parse_since`).
    Severities, kinds and states are read in any
    letter case. `name(filter)` is how the caller spells a filter in its errors (FilterError;
    InvalidRepoIdError for a repo that is not ORG/NAME).
    """
    from tracker.store.advisories.listing import AdvisoryFilter

    repo_ids = frozenset(parse_repo_id(r) for r in repos)
    wanted = frozenset(choice(Severity, v, name("severity")) for v in severities)
    floors = [choice(Severity, v, name("min_severity")) for v in min_severities]
    allowed: frozenset[Severity] | None = wanted or None
    if floors:
        lowest = min(SEVERITY_ORDER.index(f) for f in floors)
        above = frozenset(SEVERITY_ORDER[lowest:])
        allowed = above if allowed is None else allowed & above
    groups = frozenset(choice(Artifact, v, name("kind")) for v in kinds)
    wanted_states = frozenset(choice(AdvisoryState, v, name("state")) for v in states)
    bounds = [parse_since(t, name("since")) for t in since]
    return AdvisoryFilter(
        repo_ids=repo_ids or None,
        severities=allowed,
        groups=groups or None,
        states=wanted_states or None,
        since=min(bounds) if bounds else None,
    )


def diff_revisions(
    store: Store,
    settings: Settings,
    repo_id: RepoId,
    a: str,
    b: str,
    kinds: frozenset[Artifact] | None = None,
) -> Diff:
    """The semantic diff from revision `a` to `b` (each a sha, short sha, ref or `HEAD~n`, as
    `Store.resolve` reads them), computed from the stored snapshots with chat templates rendered
    in the backstop worker; StoreNotFoundError for a revision the store does not hold."""
    from tracker.diff import diff_snapshots
    from tracker.pipeline import render_limits
    from tracker.sandbox.render_backstop import render_batch

    sha_a = store.resolve(repo_id, a)
    sha_b = store.resolve(repo_id, b)
    before = store.snapshot(repo_id, sha_a)
    after = store.snapshot(repo_id, sha_b)
    changes = diff_snapshots(
        before, after, kinds=kinds, render_limits=render_limits(settings), renderer=render_batch
    )
    return Diff(repo_id, sha_a, sha_b, changes)


def revision_json(r: StoredRevision) -> dict[str, Any]:
    """One ingested revision as `tracker history --json` and the API's revision pages give it."""
    return {
        "seq": r.seq,
        "sha": r.sha,
        "date": r.commit.date.isoformat(),
        "title": r.commit.title,
        "authors": list(r.commit.authors),
        "previous": r.previous,
        "analysed": r.analysed,
        "rewritten_away": r.rewritten_away,
        "could_not_analyse": r.could_not_analyse.as_json() if r.could_not_analyse else None,
    }


def history_json(store: Store, repo_id: RepoId) -> dict[str, Any]:
    """`tracker history --json`: every ingested revision, oldest first, and the repo's events."""
    revisions = store.revisions(repo_id)
    events = store.events(repo_id)
    return {
        "repo": repo_id,
        "revisions": [revision_json(r) for r in revisions],
        "events": [
            {"at": e.at.isoformat(), "kind": e.kind.value, "details": e.details} for e in events
        ],
    }
