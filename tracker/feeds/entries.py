"""Feed entries from values: one per advisory, one per revision that moved a card-fit verdict.

`advisory_entry(advisory)` and `fit_entry(move, severity)` build `FeedEntry` values;
`feed(...)` orders and bounds them into a `Feed` that `tracker.feeds.atom` and
`tracker.feeds.jsonfeed` render. Ids are `tag:` URIs (RFC 4151) built only from the advisory id
or the repo and revision sha, so an entry keeps its id forever; `updated` is the advisory's
`modified`, so a fix or a withdrawal reaches readers as an update of the same entry. Links are
paths (`/advisories/ID`, `/v1/vulns/ID`, `/repos/ORG/NAME?rev=SHA`): the renderers make them
absolute against the server's root URL (`absolute`). Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from tracker.shared.domain import Advisory, Change, ChangeKind, Severity, parse_rfc3339

TAG = "tag:tracker.local,2026:"
"""The ids of a deployment without a public URL start so (RFC 4151: an authority and a date, then
our names); one with `TRACKER_PUBLIC_URL` uses its host (`tracker.api.feeds.tag_prefix`)."""
Html = Callable[[str], str]
"""Renders an entry's Markdown content as HTML for the renderers (the API passes
`tracker.web.markdown.render_markdown`: raw HTML in the text is escaped, never passed through)."""
DEFAULT_LIMIT = 100
MAX_LIMIT = 500
SEVERITY_ORDER = (Severity.CRITICAL, Severity.HIGH, Severity.MODERATE, Severity.LOW)
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
"""A feed with no entries over a store with no revision in its scope says it was last updated at
the epoch (deterministic, never 'now')."""
FIT_KINDS = (ChangeKind.FIT_LOST, ChangeKind.FIT_GAINED)


class FeedQueryError(ValueError):
    """A feed request the feeds refuse (an unknown severity floor); the message is one line."""


def parse_floor(text: str | None) -> Severity | None:
    """The severity floor of `?min_severity=` (case-insensitive; None or '' means no floor)."""
    if text is None or not text.strip():
        return None
    try:
        return Severity(text.strip().lower())
    except ValueError:
        choices = ", ".join(s.value for s in SEVERITY_ORDER)
        raise FeedQueryError(f"min_severity: {text!r} is not one of {choices}") from None


def at_or_above(floor: Severity | None) -> tuple[Severity, ...]:
    """The severities a floor lets through, most severe first (all of them without a floor)."""
    if floor is None:
        return SEVERITY_ORDER
    return SEVERITY_ORDER[: SEVERITY_ORDER.index(floor) + 1]


@dataclass(frozen=True)
class FitMove:
    """A revision whose estimate moved a card-fit verdict against the revision before it: its
    estimate changes (`changes`: the fit moves first, then the figures that moved), when tracker
    analysed it (`at`), its commit title, and the advisory that reports it (None if none)."""

    repo_id: str
    sha: str
    before: str | None
    title: str
    at: datetime
    changes: tuple[Change, ...]
    advisory_id: str | None = None


@dataclass(frozen=True)
class FeedEntry:
    """One entry of a feed, the same in Atom and JSON Feed.

    `url` is the page a person reads (path); `osv_url` the OSV JSON (path; None for a fit entry
    without an advisory); `commit_url` the commit upstream (absolute; None when unknown)."""

    id: str
    kind: Literal["advisory", "fit"]
    title: str
    summary: str
    content: str
    severity: Severity
    state: str
    repo_id: str
    commit: str
    commit_url: str | None
    published: datetime
    updated: datetime
    url: str
    osv_url: str | None
    advisory_id: str | None


@dataclass(frozen=True)
class Feed:
    """A feed: its id and title, the paths it is served at (`self_path` as Atom, `json_path` as
    JSON Feed, `page_path` the HTML page of the same view), its entries (newest first, at most
    the limit) and `updated`: the newest entry's; with none, `checked` (when tracker last
    ingested a revision in the feed's scope and found nothing to show; EPOCH if it never did)."""

    id: str
    title: str
    subtitle: str
    self_path: str
    json_path: str
    page_path: str
    entries: tuple[FeedEntry, ...]
    checked: datetime = EPOCH

    @property
    def updated(self) -> datetime:
        return max((e.updated for e in self.entries), default=self.checked)


# Advisory ids (`x_PREFIX-YEAR-N`, the prefix `[A-Z][A-Z0-9]+`) and repo ids (`[A-Za-z0-9._-]`
# either side of one `/`, `tracker.shared.domain.parse_repo_id`) hold only URL-safe characters.


def advisory_path(advisory_id: str) -> str:
    return "/advisories/" + advisory_id


def osv_path(advisory_id: str) -> str:
    return "/v1/vulns/" + advisory_id


def repo_path(repo_id: str) -> str:
    return "/repos/" + repo_id


def absolute(base: str, path_or_url: str) -> str:
    """`path_or_url` (a path starting with `/`) under the root URL `base`; a URL stays as is."""
    if not path_or_url.startswith("/"):
        return path_or_url
    return base.rstrip("/") + path_or_url


def _state_of(record: Mapping[str, Any]) -> str:
    if record.get("withdrawn"):
        return "withdrawn"
    for aff in record.get("affected") or []:
        for rng in aff.get("ranges") or []:
            if any("fixed" in ev for ev in rng.get("events") or []):
                return "fixed"
    return "open"


def _fixed_in(record: Mapping[str, Any]) -> list[str]:
    return [
        str(ev["fixed"])
        for aff in record.get("affected") or []
        for rng in aff.get("ranges") or []
        for ev in rng.get("events") or []
        if "fixed" in ev
    ]


def _range_repo(record: Mapping[str, Any]) -> str | None:
    for aff in record.get("affected") or []:
        for rng in aff.get("ranges") or []:
            url = rng.get("repo")
            if isinstance(url, str) and url.startswith(("https://", "http://")):
                return url.rstrip("/")
    return None


def _time(record: Mapping[str, Any], key: str) -> datetime:
    value = record.get(key)
    return parse_rfc3339(value) if isinstance(value, str) else EPOCH


def advisory_entry(
    advisory: Advisory, tag: str = TAG, updated: datetime | None = None
) -> FeedEntry:
    """The entry of one advisory: id `tag:...:advisory/ID`, the record's summary, severity, state
    (open, fixed or withdrawn, said in the title too), introducing commit and times. `updated`
    is when what a reader sees of it last changed (the store's `content_modified`), so a commit
    that only grows its versions list does not resurface it; without it, the record's
    `modified`."""
    rec = advisory.record
    state = _state_of(rec)
    summary = str(rec.get("summary") or advisory.id)
    words = {"open": "", "fixed": " [fixed]", "withdrawn": " [withdrawn]"}[state]
    title = f"{advisory.severity.value.upper()}: {summary}{words}"
    lines = [
        summary,
        f"Severity {advisory.severity.value}, {state}; introduced in {advisory.repo_id} at "
        f"commit {advisory.introduced}.",
    ]
    fixed = _fixed_in(rec)
    if fixed:
        lines.append("Fixed at commit " + ", ".join(fixed) + ".")
    if state == "withdrawn":
        lines.append(f"Withdrawn at {rec['withdrawn']}.")
    repo_url = _range_repo(rec)
    return FeedEntry(
        id=f"{tag}advisory/{advisory.id}",
        kind="advisory",
        title=title,
        summary=" ".join(lines),
        content=str(rec.get("details") or summary),
        severity=advisory.severity,
        state=state,
        repo_id=advisory.repo_id,
        commit=advisory.introduced,
        commit_url=f"{repo_url}/commit/{advisory.introduced}" if repo_url else None,
        published=_time(rec, "published"),
        updated=updated if updated is not None else _time(rec, "modified"),
        url=advisory_path(advisory.id),
        osv_url=osv_path(advisory.id),
        advisory_id=advisory.id,
    )


def fit_entry(move: FitMove, severity: Severity, repo_url: str | None, tag: str = TAG) -> FeedEntry:
    """The entry of a revision that moved card-fit verdicts: id `tag:...:fit/ORG/NAME/SHA`, one
    line per verdict ("LoRA r=16 no longer fits L4 24 GB at batch 1 ..."), and the other
    estimate figures that moved. `severity` is what the advisory rules give those moves."""
    fits = [c for c in move.changes if c.kind in FIT_KINDS]
    if not fits:
        raise ValueError(f"{move.repo_id}@{move.sha}: no card-fit verdict moved")
    others = [c for c in move.changes if c.kind not in FIT_KINDS]
    more = f" (and {len(fits) - 1} more)" if len(fits) > 1 else ""
    title = f"{severity.value.upper()}: {move.repo_id}: {fits[0].summary}{more}"
    lines = [f"{move.repo_id} at commit {move.sha} ({move.title}) moved card-fit verdicts:"]
    lines += [f"- {c.summary}" for c in fits]
    if others:
        lines.append("Other estimate figures that moved:")
        lines += [f"- {c.summary}" for c in others]
    page = f"{repo_path(move.repo_id)}?rev={move.sha}"
    return FeedEntry(
        id=f"{tag}fit/{move.repo_id}/{move.sha}",
        kind="fit",
        title=title,
        summary="; ".join(c.summary for c in fits),
        content="\n".join(lines),
        severity=severity,
        state="open",
        repo_id=move.repo_id,
        commit=move.sha,
        commit_url=f"{repo_url}/commit/{move.sha}" if repo_url else None,
        published=move.at,
        updated=move.at,
        url=advisory_path(move.advisory_id) if move.advisory_id else page,
        osv_url=osv_path(move.advisory_id) if move.advisory_id else None,
        advisory_id=move.advisory_id,
    )


def _order_key(entry: FeedEntry) -> tuple[datetime, int, str]:
    """Newest update first; ties: the advisory with the higher number, then the id."""
    tail = entry.advisory_id or ""
    number = tail.rsplit("-", 1)[-1]
    return entry.updated, int(number) if number.isdigit() else -1, entry.id


def newest(entries: Iterable[FeedEntry], limit: int) -> tuple[FeedEntry, ...]:
    """At most `limit` entries, newest `updated` first (a deterministic order for ties)."""
    return tuple(sorted(entries, key=_order_key, reverse=True)[:limit])


def feed(
    *,
    repo_id: str | None,
    floor: Severity | None,
    entries: Sequence[FeedEntry],
    limit: int,
    tag: str = TAG,
    checked: datetime | None = None,
) -> Feed:
    """The feed of everything (`repo_id` None) or of one repo, at a severity floor, holding the
    newest `limit` of `entries` whose severity is at or above the floor."""
    allowed = set(at_or_above(floor))
    kept = newest((e for e in entries if e.severity in allowed), limit)
    if repo_id is None:
        scope, title = "advisories", "tracker: advisories of every watched repo"
        self_path, json_path, page = (
            "/v1/feeds/advisories.atom",
            "/v1/feeds/advisories.json",
            "/",
        )
    else:
        scope, title = f"repo/{repo_id}", f"tracker: {repo_id}"
        base = "/v1" + repo_path(repo_id)
        self_path, json_path, page = f"{base}/feed.atom", f"{base}/feed.json", repo_path(repo_id)
    query = ""
    subtitle = "Advisories and card-fit moves, newest first"
    if floor is not None:
        query = f"?min_severity={floor.value}"
        scope += query
        subtitle += f"; severity {floor.value} and above"
    return Feed(
        id=f"{tag}feed/{scope}",
        title=title,
        subtitle=subtitle,
        self_path=self_path + query,
        json_path=json_path + query,
        page_path=page,
        entries=kept,
        checked=checked or EPOCH,
    )
