"""The store's bounded reads behind the feeds, over a history polled by the real pipeline through
the Hub replica: `AdvisoryStore.newest` (newest modified first, by severity and repo) and
`AnalysisStore.fit_moves` (revisions whose estimate moved a card-fit verdict), on SQLite and on
PostgreSQL.

The repo is acme/fit-moves (`feedkit.fit_step`): Qwen3-1.7B's real config.json, whose second
commit doubles the layers and whose third undoes it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import feedparser
import pytest
from feedkit import FIT_REPO, fit_step

from tracker.app import App, build
from tracker.replica import Replica
from tracker.settings import load_settings
from tracker.shared.domain import Artifact, ChangeKind, RepoId, Severity

pytestmark = pytest.mark.replica

T0 = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def polled(
    request: pytest.FixtureRequest,
    tmp_path: Path,
) -> Iterator[tuple[App, list[str]]]:
    shas = [fit_step(tmp_path / "hub", i) for i in range(3)]
    (tmp_path / "watchlist.yaml").write_text(f"repos:\n  - id: {FIT_REPO}\n")
    url: str | None = None
    ctx: AbstractContextManager[str] | None = None
    if request.param == "postgres":
        pg: Callable[[str], AbstractContextManager[str]] = request.getfixturevalue("pg_database")
        ctx = pg("feeds")
        url = ctx.__enter__()
    try:
        with Replica(tmp_path / "hub") as hub:
            extra: dict[str, Any] = {"database_url": url} if url else {}
            settings = load_settings(
                state_dir=tmp_path / "state",
                watchlist=tmp_path / "watchlist.yaml",
                hf_endpoint=hub.url,
                hub_public_url="https://huggingface.co",
                **extra,
            )
            ticks = iter(T0 + timedelta(minutes=i) for i in range(1000))
            app = build(settings, clock=lambda: next(ticks))
            try:
                report = app.pipeline.run_cycle()
                assert [len(r.analysed) for r in report.repos] == [3]
                yield app, shas
            finally:
                app.close()
    finally:
        if ctx is not None:
            ctx.__exit__(None, None, None)


def test_fit_moves_are_the_revisions_that_moved_a_verdict(polled: tuple[App, list[str]]) -> None:
    app, shas = polled
    moves = app.analysis.fit_moves(10)
    assert [(m.repo_id, m.sha, m.before, m.title) for m in moves] == [
        (FIT_REPO, shas[2], shas[1], "Back to 28 layers"),
        (FIT_REPO, shas[1], shas[0], "Double the layers"),
    ]
    fits = [[(c.kind, c.summary) for c in m.changes if c.key.startswith("cards.")
             and c.kind is not ChangeKind.CHANGED] for m in moves]  # fmt: skip
    assert fits == [
        [
            (ChangeKind.FIT_GAINED, "LoRA r=16 now fits L4 24 GB at batch 1"),
            (ChangeKind.FIT_GAINED, "full fine-tune now fits A100/H100 80 GB at batch 3"),
        ],
        [
            (ChangeKind.FIT_LOST, "LoRA r=16 no longer fits L4 24 GB at batch 1 (now: 2 cards at batch 1 (31 + 25 layers))"),
            (ChangeKind.FIT_LOST, "full fine-tune no longer fits A100/H100 80 GB at batch 1 (now: 2 cards at batch 1 (27 + 29 layers))"),
        ],
    ]  # fmt: skip
    # fit moves first, then the other estimate changes; nothing but estimate changes
    for m in moves:
        kinds = [c.kind in (ChangeKind.FIT_LOST, ChangeKind.FIT_GAINED) for c in m.changes]
        assert kinds == sorted(kinds, reverse=True) and kinds[:2] == [True, True]
        assert {c.artifact for c in m.changes} == {Artifact.ESTIMATE}
    assert moves[0].at > moves[1].at
    assert [m.sha for m in app.analysis.fit_moves(1)] == [shas[2]]
    assert app.analysis.fit_moves(5, repo_id=RepoId("acme/other")) == []
    reported = app.advisories.introduced_ids([(FIT_REPO, s) for s in shas], Artifact.ESTIMATE)
    # the revert fixes the advisory of the doubling instead of opening one of its own
    assert reported == {(FIT_REPO, shas[1]): "x_TRACKER-2026-2"}


def test_newest_advisories_are_picked_and_ordered_by_the_database(
    polled: tuple[App, list[str]],
) -> None:
    app, _ = polled
    every = app.advisories.list_advisories()
    by_modified = sorted(
        every, key=lambda a: (a.record["modified"], int(a.id.rsplit("-", 1)[1])), reverse=True
    )
    assert len(every) >= 2
    assert [a.id for a in app.advisories.newest(100)] == [a.id for a in by_modified]
    assert [a.id for a in app.advisories.newest(1)] == [by_modified[0].id]
    high = [a.id for a in by_modified if a.severity in (Severity.CRITICAL, Severity.HIGH)]
    got = app.advisories.newest(100, severities=(Severity.CRITICAL, Severity.HIGH))
    assert [a.id for a in got] == high
    assert app.advisories.newest(100, repo_id="acme/other") == []
    assert [a.id for a in app.advisories.newest(100, repo_id=FIT_REPO)] == [
        a.id for a in by_modified
    ]


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_a_commit_with_no_effect_leaves_every_entrys_updated_alone(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Step 1 doubles the layers (advisories open), then a README-only commit grows every open
    advisory's versions list: their OSV `modified` moves (OSV's rule), but the feed entries keep
    their `updated`, so a `min_severity=high` reader sees nothing resurface. The revert then
    fixes the doubling's advisory: its entry's `updated` moves (the title says [fixed])."""
    from fastapi.testclient import TestClient

    from tracker.api import create_app
    from tracker.replica.repos import commit

    hub = tmp_path / "hub"
    fit_step(hub, 0)
    fit_step(hub, 1)
    (tmp_path / "watchlist.yaml").write_text(f"repos:\n  - id: {FIT_REPO}\n")
    url: str | None = None
    ctx: AbstractContextManager[str] | None = None
    if backend == "postgres":
        ctx = request.getfixturevalue("pg_database")("feedsup")
        url = ctx.__enter__()
    try:
        with Replica(hub) as replica:
            extra: dict[str, Any] = {"database_url": url} if url else {}
            settings = load_settings(
                state_dir=tmp_path / "state",
                watchlist=tmp_path / "watchlist.yaml",
                hf_endpoint=replica.url,
                hub_public_url="https://huggingface.co",
                **extra,
            )
            now = [T0]
            app = build(settings, clock=lambda: now[0])
            try:
                with TestClient(create_app(app)) as client:

                    def entries() -> dict[str, tuple[str, str]]:
                        items = client.get("/v1/feeds/advisories.json").json()["items"]
                        return {i["id"]: (i["date_modified"], i["title"]) for i in items}

                    app.pipeline.run_cycle()
                    first = entries()
                    assert first and {t for t, _ in first.values()} == {"2026-12-01T08:00:00Z"}
                    opened = {a.id: a.record["modified"] for a in app.advisories.list_advisories()}

                    now[0] = T0 + timedelta(hours=1)
                    commit(hub / FIT_REPO, {"README.md": b"# fit moves\n"}, "Add a card",
                           date=datetime(2025, 6, 10, tzinfo=UTC))  # fmt: skip
                    app.pipeline.run_cycle()
                    moved = {a.id: a.record["modified"] for a in app.advisories.list_advisories()}
                    grown = [i for i in opened if moved[i] != opened[i]]
                    assert grown, "the README commit grows some open advisory's versions list"
                    assert {moved[i] for i in grown} == {"2026-12-01T09:00:00Z"}
                    second = entries()
                    assert {k: v for k, v in second.items() if k in first} == first

                    now[0] = T0 + timedelta(hours=2)
                    fit_step(hub, 2)
                    app.pipeline.run_cycle()
                    third = entries()
                    fixed = {k: v for k, v in third.items() if v[1].endswith("[fixed]")}
                    assert fixed and {t for t, _ in fixed.values()} == {"2026-12-01T10:00:00Z"}
                    unchanged = {k: v for k, v in third.items() if k in first and k not in fixed}
                    assert unchanged == {k: first[k] for k in unchanged}
            finally:
                app.close()
    finally:
        if ctx is not None:
            ctx.__exit__(None, None, None)


def test_a_feed_with_nothing_to_show_is_dated_when_its_scope_was_last_ingested(
    polled: tuple[App, list[str]],
) -> None:
    """No critical advisory in the store: the critical feed (everything, and the repo's) is
    empty, and says it was updated when tracker last ingested a revision in its scope (the third
    revision's ingestion), not at the epoch (an empty store's feeds still say the epoch)."""
    from fastapi.testclient import TestClient

    from tracker.api import create_app

    app, _ = polled
    newest = app.store.last_ingested_at()
    assert newest is not None and newest > T0
    assert app.store.last_ingested_at(RepoId(FIT_REPO)) == newest
    with TestClient(create_app(app)) as client:
        for url in (
            "/v1/feeds/advisories.atom?min_severity=critical",
            f"/v1/repos/{FIT_REPO}/feed.atom?min_severity=critical",
        ):
            parsed = feedparser.parse(client.get(url).content)
            assert parsed.bozo == 0 and parsed.entries == []
            assert parsed.feed.updated == newest.isoformat()
