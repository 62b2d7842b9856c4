"""Shared values and helpers of the advisory tests (a plain module: `conftest` is not importable by name
when several test folders have one)."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa

from tracker.advisories import service
from tracker.shared.domain import (
    Advisory,
    Artifact,
    Change,
    ChangeKind,
    Commit,
    RepoId,
    Sha,
    Snapshot,
    TreeEntry,
)
from tracker.store import Store
from tracker.store.advisories import AdvisoryStore

NOW = datetime(2026, 11, 30, 9, 30, 0, tzinfo=UTC)
HUB = "http://127.0.0.1:1"

# Real commit ids of deepseek-ai/DeepSeek-R1's tokenizer_config.json history and of
# mistralai/Mixtral-8x7B-v0.1's config.json history (../shared/corpus/histories/*/HISTORY.tsv).
R1 = RepoId("deepseek-ai/DeepSeek-R1")
R1_SHAS = (
    Sha("abf9bba58b8180037a228a50ed7ac547905e415d"),
    Sha("7bae4bacd0f64d020364cc43d9560588893e94cc"),
    Sha("cb48aa8cb28c160ec8d853707278e0402c9ad01a"),
)
MIXTRAL = RepoId("mistralai/Mixtral-8x7B-v0.1")
MIXTRAL_SHAS = (
    Sha("5802963a855a4bbe1c7c0bad462759cc4c0cb1d5"),
    Sha("4dd4b0f2d577d7b74152732d5543a92201481fe2"),
    Sha("c56a162543a9560c9f352687e46c8416e6292da6"),
    Sha("2e54f233da37e9911a9b5a45f83df0b734337bb4"),
)


def commit(sha: Sha, parent: Sha | None = None, title: str = "Update") -> Commit:
    return Commit(sha, (parent,) if parent else (), NOW, title, title, ("tester",))


def ch(
    artifact: Artifact,
    kind: ChangeKind,
    key: str,
    before: object = None,
    after: object = None,
    *,
    file: str = "config.json",
    summary: str = "",
    detail: str = "",
) -> Change:
    return Change(
        artifact,
        kind,
        file,
        key,
        before,
        after,
        summary or f"{key}: {before!r} → {after!r}",
        detail,
    )


def snap(files: dict[str, object], sha: str = "0" * 40) -> Snapshot:
    """A snapshot holding `files` (bytes as given, anything else as its JSON), all fetched."""
    data = {p: v if isinstance(v, bytes) else json.dumps(v).encode() for p, v in files.items()}
    tree = tuple(TreeEntry(p, hashlib.sha1(b).hexdigest(), len(b)) for p, b in sorted(data.items()))
    return Snapshot(RepoId("acme/model"), Sha(sha), tree, data)


def make_store(url: str) -> AdvisoryStore:
    """An advisory store over a real, migrated store at `url`."""
    return AdvisoryStore(Store.open(url).engine)


def ingest(engine: sa.Engine, repo_id: RepoId, revision: Commit, previous: Sha | None) -> None:
    """Store `revision` (empty tree) as the snapshot stage would: advisories belong to stored
    revisions. Idempotent."""
    store = Store(engine)
    store.ensure_repo(repo_id, source_kind="hub", url=None, ref="main")
    store.store_revision(repo_id, revision, [], {}, previous=previous)


def publish(store: AdvisoryStore, **kw: Any) -> list[Advisory]:
    """`tracker.advisories.service.publish` after ingesting its revision (see `ingest`)."""
    ingest(store.engine, kw["repo_id"], kw["commit"], kw["previous"])
    return service.publish(store, **kw)
