"""Shared by the API tests: a real SQLite store with one published advisory, and the App over it."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from tracker.advisories import service
from tracker.app import App, build
from tracker.settings import load_settings
from tracker.shared.domain import Artifact, Change, ChangeKind, Commit, RepoId, Sha
from tracker.store import Store

NOW = datetime(2026, 11, 30, 9, 30, 0, tzinfo=UTC)
REPO = RepoId("mistralai/Mixtral-8x7B-v0.1")
A = Sha("5802963a855a4bbe1c7c0bad462759cc4c0cb1d5")
B = Sha("4dd4b0f2d577d7b74152732d5543a92201481fe2")
READ = "read-token-0123456789abcdef"
WRITE = "write-token-0123456789abcdef"
ADVISORY = "x_TRACKER-2026-1"


def publish_one(app: App) -> None:
    """Store A and B (B changes model_type) and publish B's advisory: `ADVISORY`."""
    store = Store(app.advisories.engine)
    store.ensure_repo(REPO, source_kind="hub", url=None, ref="main")
    first = Commit(A, (), NOW, "Upload", "Upload", ("tester",))
    second = Commit(B, (A,), NOW, "Update config", "Update config", ("tester",))
    store.store_revision(REPO, first, [], {}, previous=None)
    store.store_revision(REPO, second, [], {}, previous=A)
    change = Change(
        Artifact.CONFIG,
        ChangeKind.CHANGED,
        "config.json",
        "model_type",
        "mistral",
        "mixtral",
        "model_type: 'mistral' → 'mixtral'",
        "",
    )
    service.publish(
        app.advisories,
        repo_id=REPO,
        commit=second,
        previous=A,
        changes=(change,),
        estimate_before=None,
        estimate_after=None,
        repo_url=f"https://huggingface.co/{REPO}",
        overrides=None,
        prefix="TRACKER",
        now=NOW,
    )


def app_with_advisory(state: Path, **settings: object) -> App:
    app = build(load_settings(state_dir=state, **settings))
    publish_one(app)
    return app
