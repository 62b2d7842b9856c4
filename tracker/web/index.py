"""The pages that list: the advisory index (`/advisories`, filtered like `/v1/advisories` and a
page at a time, newest published first) and an organisation's repos (`/repos/ORG`).

Pure reads of the App's stores into view values; the routes live in `tracker.web.mount`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import urlencode

from tracker.advisories.details import GROUP_LABELS
from tracker.shared.domain import AdvisoryState, Artifact, Severity
from tracker.shared.errors import InvalidRepoIdError
from tracker.store.advisories.listing import AdvisorySummary, advisory_page
from tracker.store.queries import FilterError, advisory_filter
from tracker.web.views import AdvisoryRow, HomeView, PagesApp

PAGE_SIZE = 50
SEVERITIES = tuple(
    s.value for s in (Severity.CRITICAL, Severity.HIGH, Severity.MODERATE, Severity.LOW)
)
STATES = tuple(s.value for s in AdvisoryState)
KINDS = tuple(a.value for a in Artifact)


class BadQuery(ValueError):
    """A filter or page key the index cannot read; the message is one line for the 400 page."""


@dataclass(frozen=True)
class IndexView:
    """One page of the advisory index: its rows, the filters as given (for the form and the
    links), the repos to pick from, and the query of the next (older) page, or None."""

    rows: tuple[AdvisoryRow, ...]
    repo: tuple[str, ...]
    severity: tuple[str, ...]
    state: tuple[str, ...]
    kind: tuple[str, ...]
    repos: tuple[str, ...]
    older: str | None
    first_page: bool


def _row(a: AdvisorySummary) -> AdvisoryRow:
    return AdvisoryRow(
        id=a.id,
        repo_id=a.repo_id,
        introduced=a.introduced,
        group=GROUP_LABELS.get(a.group, a.group.value),
        severity=a.severity.value,
        state=a.state.value,
        summary=a.summary,
        modified=a.modified,
        fixed=(),
    )


def _before(text: str | None) -> tuple[datetime, str] | None:
    """The `before=SECONDS.ID` key of an older page (the last row of the page before)."""
    if not text:
        return None
    seconds, _, advisory_id = text.partition(".")
    try:
        return datetime.fromtimestamp(int(seconds), UTC), advisory_id
    except (ValueError, OverflowError, OSError):
        raise BadQuery(f"before: {text!r} is not a page this index links to") from None


def advisory_index(
    app: PagesApp,
    *,
    repo: Sequence[str],
    severity: Sequence[str],
    state: Sequence[str],
    kind: Sequence[str],
    before: str | None,
) -> IndexView:
    """The newest `PAGE_SIZE` advisories published before `before` that pass the filters
    (`tracker.store.queries.advisory_filter`: each filter given must hold, one given several times
    matches any of its values). BadQuery for a value that is not one of its choices."""
    try:
        where = advisory_filter(repos=repo, severities=severity, states=state, kinds=kind)
    except (FilterError, InvalidRepoIdError) as exc:
        raise BadQuery(str(exc).splitlines()[0]) from None
    after = _before(before)
    page = advisory_page(
        app.store.engine, where, newest_first=True, after=after, limit=PAGE_SIZE + 1
    )
    older = None
    if len(page) > PAGE_SIZE:
        page = page[:PAGE_SIZE]
        last = page[-1]
        query = [("repo", r) for r in repo] + [("severity", s) for s in severity]
        query += [("state", s) for s in state] + [("kind", k) for k in kind]
        query.append(("before", f"{int(last.published.timestamp())}.{last.id}"))
        older = urlencode(query)
    return IndexView(
        rows=tuple(_row(a) for a in page),
        repo=tuple(repo),
        severity=tuple(s.lower() for s in severity),
        state=tuple(s.lower() for s in state),
        kind=tuple(k.lower() for k in kind),
        repos=tuple(sorted(st.repo_id for st in app.store.repo_states())),
        older=older,
        first_page=after is None,
    )


def org_view(home: HomeView, org: str) -> HomeView:
    """The home view's repos and latest advisories of one organisation (`org/…`)."""
    prefix = org + "/"
    repos = tuple(r for r in home.repos if r.repo_id.startswith(prefix))
    latest = tuple(a for a in home.latest if a.repo_id.startswith(prefix))
    total = sum(n for r in repos for _, n in r.open_by_severity)
    return HomeView(repos, latest, home.watchlist_error, total)
