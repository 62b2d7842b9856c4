"""Read-side queries over the store that the CLI and the HTTP API share, so both answer the same
JSON: the diff between two ingested revisions (`tracker diff`, `/v1/repos/…/diff`) and a repo's
history (`tracker history`, `/v1/repos/…/history`). The estimate at a revision is
`tracker.cli.estimating.store_report` (the CLI's own, kept import-light for a fast start).
"""

from __future__ import annotations

from typing import Any

from tracker.domain import Artifact, Diff, RepoId
from tracker.settings import Settings
from tracker.store import Store
from tracker.store.values import StoredRevision


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
    from tracker.render_backstop import render_batch

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
