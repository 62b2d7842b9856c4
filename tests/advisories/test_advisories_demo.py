"""End to end on the demo histories: poll the demo Hub replica through the pipeline, then check every
advisory against the OSV rules and `/v1/query` against ranges computed from the ingested history.
"""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tracker.advisories.schema import validate_record
from tracker.api import create_app
from tracker.shared.domain import RepoId

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def demo(demo_run):  # type: ignore[no-untyped-def]
    """The session's demo cycle (tests/conftest.py: every repo of watchlist.yaml, clock pinned)."""
    return demo_run


def _demo_repos(demo) -> list[RepoId]:  # type: ignore[no-untyped-def]
    return [r.poll.repo_id for r in demo.first.repos]


def test_every_record_is_valid_and_polling_again_adds_nothing(demo) -> None:  # type: ignore[no-untyped-def]
    store = demo.app.advisories
    advisories = store.list_advisories()
    assert len(advisories) == len(demo.first.advisories) > 0
    assert demo.second.advisories == ()
    assert len(store.list_advisories()) == len(advisories)
    ids = [a.id for a in advisories]
    assert len(set(ids)) == len(ids)
    for a in advisories:
        validate_record(a.record)
        assert a.record["affected"][0]["versions"][0] == a.introduced


def test_no_advisory_for_a_revision_without_changes(demo) -> None:  # type: ignore[no-untyped-def]
    """...except a first ingested revision that is broken as first seen (issue 24): then its one
    advisory is made of its consistency findings alone."""
    analysis = demo.app.analysis
    store = demo.app.advisories
    introduced: dict[tuple[str, str], list[dict]] = {}  # type: ignore[type-arg]
    for a in store.list_advisories():
        introduced.setdefault((a.repo_id, a.introduced), []).append(a.record)
    quiet = first_seen = 0
    for repo in _demo_repos(demo):
        for diff in analysis.diffs_of(RepoId(repo)):
            if not diff.changes:
                quiet += 1
                records = introduced.get((repo, diff.after), [])
                if diff.before is None and records:
                    (record,) = records
                    assert record["database_specific"]["first_seen"] is True
                    assert record["database_specific"]["findings"]
                    first_seen += 1
                else:
                    assert records == []
    assert quiet > 0  # the demo has format-only / first revisions
    assert first_seen == 1  # meta-llama/Llama-2-7b-hf: pad_token_id 32000 = vocab_size


def test_query_by_commit_matches_ranges_from_history(demo) -> None:  # type: ignore[no-untyped-def]
    store = demo.app.advisories
    client = TestClient(create_app(demo.app))
    checked = 0
    for repo in _demo_repos(demo):
        chain = [
            r.commit.sha for r in demo.app.store.revisions(RepoId(repo)) if not r.rewritten_away
        ]
        expected: dict[str, list[str]] = {sha: [] for sha in chain}
        for a in store.list_advisories(repo_id=repo):
            if a.record.get("withdrawn"):
                continue
            events = a.record["affected"][0]["ranges"][0]["events"]
            start = chain.index(events[0]["introduced"])
            fixed = [e["fixed"] for e in events if "fixed" in e]
            end = chain.index(fixed[0]) if fixed else len(chain)
            for sha in chain[start:end]:
                expected[sha].append(a.id)
        for sha, ids in expected.items():
            r = client.post("/v1/query", json={"commit": sha})
            assert r.status_code == 200
            got = [v["id"] for v in r.json()["vulns"]]
            assert got == ids, (repo, sha)
            checked += 1
    assert checked >= 40
