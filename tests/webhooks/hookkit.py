"""Helpers of the webhook tests: revisions published with advisories into a real store, and the
receiver on loopback (`bench.webhook_receiver`, shared with the bench). A plain module, imported
by name."""

from __future__ import annotations

from datetime import UTC, datetime

from bench.webhook_receiver import Received, Receiver
from tracker.advisories import service
from tracker.shared.domain import Advisory, Artifact, Change, ChangeKind, Commit, RepoId, Sha
from tracker.store import Store
from tracker.store.advisories import AdvisoryStore
from tracker.webhooks.events import Audience

__all__ = ["NOW", "REPO", "SHAS", "Received", "Receiver", "change", "ingest", "publish"]

NOW = datetime(2026, 11, 30, 9, 30, 0, tzinfo=UTC)
REPO = RepoId("mistralai/Mixtral-8x7B-v0.1")
# Real commit ids of mistralai/Mixtral-8x7B-v0.1's config.json history
# (../shared/corpus/histories/mistralai__Mixtral-8x7B-v0.1/HISTORY.tsv).
SHAS = (
    Sha("5802963a855a4bbe1c7c0bad462759cc4c0cb1d5"),
    Sha("4dd4b0f2d577d7b74152732d5543a92201481fe2"),
    Sha("c56a162543a9560c9f352687e46c8416e6292da6"),
    Sha("2e54f233da37e9911a9b5a45f83df0b734337bb4"),
)


def change(artifact: Artifact, key: str, before: object, after: object, file: str) -> Change:
    return Change(
        artifact, ChangeKind.CHANGED, file, key, before, after, f"{key}: {before!r} → {after!r}", ""
    )


def ingest(store: Store, sha: Sha, previous: Sha | None, repo: RepoId = REPO) -> Commit:
    """Store a revision (empty tree) as the snapshot stage would: advisories need one."""
    c = Commit(sha, (previous,) if previous else (), NOW, "Update", "Update", ("tester",))
    store.ensure_repo(repo, source_kind="hub", url=None, ref="main")
    store.store_revision(repo, c, [], {}, previous=previous)
    return c


def publish(
    store: Store,
    sha: Sha,
    previous: Sha | None,
    changes: list[Change],
    *,
    repo: RepoId = REPO,
    now: datetime = NOW,
    audience: Audience | None = None,
) -> list[Advisory]:
    """Ingest `sha` and publish its advisories (the pipeline's publish, outbox included;
    `audience`: which advisories affect each team, for team subscriptions)."""
    c = ingest(store, sha, previous, repo)
    return service.publish(
        AdvisoryStore(store.engine),
        repo_id=repo,
        commit=c,
        previous=previous,
        changes=changes,
        estimate_before=None,
        estimate_after=None,
        repo_url=f"https://huggingface.co/{repo}",
        overrides=None,
        prefix="TRACKER",
        now=now,
        audience=audience,
    )
