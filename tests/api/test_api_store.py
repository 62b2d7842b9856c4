"""The /v1 read API over a real SQLite store seeded by hand: repos and their state, revision pages,
a file at a revision with its hashes, advisory filters (exact ids) and pages that lose and repeat
nothing while advisories keep arriving, ETag/304 and problem documents."""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient

from tracker.api import create_app
from tracker.api.repos import media_type_of
from tracker.app import App, build
from tracker.settings import load_settings
from tracker.shared.domain import (
    Advisory,
    AdvisoryState,
    Artifact,
    Commit,
    RepoId,
    Severity,
    Sha,
    TreeEntry,
    WithdrawnBy,
    rfc3339,
)
from tracker.store.values import FileVersion, RepoStatus

T0 = datetime(2026, 11, 1, 12, 0, 0, tzinfo=UTC)
A = RepoId("acme/alpha")
B = RepoId("acme/beta")
UNPOLLED = RepoId("acme/gamma")
SEVERITIES = [Severity.LOW, Severity.MODERATE, Severity.HIGH, Severity.CRITICAL]
KINDS = [a for a in Artifact if a is not Artifact.ESTIMATE]  # ten advisory groups


def sha(n: int) -> Sha:
    return Sha(hashlib.sha1(str(n).encode()).hexdigest())


CONFIG_1 = b'{"hidden_size": 4096}\n'
CONFIG_2 = b'{"hidden_size": 8192}\n'


@dataclass(frozen=True)
class Seeded:
    id: str
    repo: RepoId
    severity: Severity
    kind: Artifact
    state: AdvisoryState
    published: datetime
    modified: datetime


class Seeder:
    """Advisories inserted straight into the store (the API reads them; how they were classified
    is not its business), with the facts the expected answers are computed from."""

    def __init__(self, app: App) -> None:
        self.app = app
        self.made: list[Seeded] = []
        self.n = 0
        self.per_repo: dict[RepoId, int] = {}

    def add(
        self,
        repo: RepoId,
        *,
        published: datetime,
        state: AdvisoryState = AdvisoryState.OPEN,
        modified: datetime | None = None,
    ) -> Seeded:
        i = self.n
        self.n += 1
        k = self.per_repo.get(repo, 0)
        self.per_repo[repo] = k + 1
        # (repo, introduced, group) is unique: ten groups per revision, then the next revision
        severity, kind = SEVERITIES[i % 4], KINDS[k % 10]
        aid = f"x_TEST-2026-{i + 1}"
        intro = sha(1 + k // 10) if repo == A else sha(100 + k // 10)
        modified = modified or published
        record = {
            "schema_version": "1.6.0",
            "id": aid,
            "published": rfc3339(published),
            "modified": rfc3339(modified),
            "summary": f"change {i + 1}",
            "affected": [{"package": {"name": repo, "ecosystem": "GIT"}, "versions": [intro]}],
        }
        adv = Advisory(aid, repo, intro, kind, severity, record)
        with self.app.advisories.transaction() as tx:
            tx.insert(adv, package_name=f"https://huggingface.co/{repo}", pending=[])
            if state is not AdvisoryState.OPEN:
                by = WithdrawnBy.REWRITE if state is AdvisoryState.WITHDRAWN else None
                tx.update(adv, state=state, pending=[], expect=AdvisoryState.OPEN, withdrawn_by=by)
        made = Seeded(aid, repo, severity, kind, state, published, modified)
        self.made.append(made)
        return made


def _commit(n: int, parent: int | None) -> Commit:
    return Commit(sha(n), (sha(parent),) if parent else (), T0, f"commit {n}", "", ("tester",))


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[TestClient, App, Seeder]]:
    (tmp_path / "watchlist.yaml").write_text(f"repos:\n  - id: {A}\n  - id: {UNPOLLED}\n")
    app = build(load_settings(state_dir=tmp_path / "state", watchlist=tmp_path / "watchlist.yaml"))
    store = app.store
    store.ensure_repo(A, source_kind="hub", url=None, ref="main")
    store.ensure_repo(B, source_kind="hub", url=None, ref="main")
    previous = None
    for n in range(1, 6):  # A: five revisions; config.json changes at 3
        data = CONFIG_1 if n < 3 else CONFIG_2
        blob = hashlib.sha1(b"blob %d\x00" % len(data) + data).hexdigest()
        tree = [TreeEntry("config.json", blob, len(data)), TreeEntry("README.md", "f" * 40, 3)]
        store.store_revision(
            A, _commit(n, previous), tree, {"config.json": FileVersion.content(data)},
            previous=sha(previous) if previous else None,
        )  # fmt: skip
        previous = n
    for n in (100, 101, 102):
        store.store_revision(
            B, _commit(n, n - 1 if n > 100 else None), [], {},
            previous=sha(n - 1) if n > 100 else None,
        )  # fmt: skip
    store.record_poll(A, status=RepoStatus.OK, error=None, now=T0)
    store.record_poll(B, status=RepoStatus.FAILING, error="hub: 503 Service Unavailable", now=T0)
    seeder = Seeder(app)
    for i in range(24):  # two advisories per published second: ties are ordered by id
        repo = A if i % 3 else B
        state = {5: AdvisoryState.FIXED, 9: AdvisoryState.WITHDRAWN}.get(i, AdvisoryState.OPEN)
        published = T0 + timedelta(seconds=i // 2)
        seeder.add(repo, published=published, state=state,
                   modified=published + timedelta(hours=i % 4))  # fmt: skip
    with TestClient(create_app(app), raise_server_exceptions=False) as client:
        yield client, app, seeder
    app.close()


def test_repos_show_their_ingestion_state(served: tuple[TestClient, App, Seeder]) -> None:
    client, _, seeder = served
    r = client.get("/v1/repos")
    assert (r.status_code, r.headers["cache-control"]) == (200, "public, no-cache")
    by = {x["repo"]: x for x in r.json()["repos"]}
    assert list(by) == [A, B, UNPOLLED]
    count = {
        repo: {s.value: sum(1 for m in seeder.made if m.repo == repo and m.state is s)
               for s in AdvisoryState}
        for repo in (A, B)
    }  # fmt: skip
    assert by[A] == {
        "repo": A, "watched": True, "state": "ok", "source_kind": "hub", "url": None,
        "ref": "main", "head": sha(5), "last_poll_at": "2026-11-01T12:00:00Z",
        "last_success_at": "2026-11-01T12:00:00Z", "consecutive_failures": 0,
        "last_error": None, "revisions": 5, "could_not_analyse": [], "advisories": count[A],
        "links": {
            "self": f"/v1/repos/{A}", "revisions": f"/v1/repos/{A}/revisions",
            "history": f"/v1/repos/{A}/history", "estimates": f"/v1/repos/{A}/estimates",
            "advisories": f"/v1/advisories?repo={A}",
        },
    }  # fmt: skip
    assert count == {
        A: {"open": 15, "fixed": 1, "withdrawn": 0},
        B: {"open": 7, "fixed": 0, "withdrawn": 1},
    }
    assert by[B]["advisories"] == count[B]
    assert (by[B]["state"], by[B]["watched"], by[B]["last_error"]) == (
        "failing", False, "hub: 503 Service Unavailable",
    )  # fmt: skip
    assert (by[UNPOLLED]["state"], by[UNPOLLED]["head"], by[UNPOLLED]["revisions"]) == (
        "new", None, 0,
    )  # fmt: skip
    one = client.get(f"/v1/repos/{B}")
    assert one.json() == by[B]
    missing = client.get("/v1/repos/acme/nothing")
    assert (missing.status_code, missing.json()["detail"]) == (
        404, "acme/nothing is neither watched nor stored",
    )  # fmt: skip
    bad = client.get("/v1/repos/acme/bad..name")
    assert (bad.status_code, bad.json()["type"]) == (400, "urn:tracker:problem:invalid-repo-id")


def _pages(client: TestClient, url: str, **params: Any) -> list[dict[str, Any]]:
    """Every page of a list, following `next` (and checking Link agrees with it)."""
    pages = []
    cursor = None
    while True:
        r = client.get(url, params={**params, **({"cursor": cursor} if cursor else {})})
        assert r.status_code == 200, r.text
        pages.append(r.json())
        cursor = r.json()["next"]
        if cursor is None:
            assert "link" not in r.headers
            return pages
        assert r.headers["link"].endswith(f'cursor={cursor}>; rel="next"')


def test_revisions_page_oldest_and_newest_first(served: tuple[TestClient, App, Seeder]) -> None:
    client, _, _ = served
    url = f"/v1/repos/{A}/revisions"
    oldest = _pages(client, url, limit=2)
    assert [[i["sha"] for i in p["items"]] for p in oldest] == [
        [sha(1), sha(2)], [sha(3), sha(4)], [sha(5)],
    ]  # fmt: skip
    newest = _pages(client, url, limit=3, order="newest")
    assert [[i["seq"] for i in p["items"]] for p in newest] == [[5, 4, 3], [2, 1]]
    assert newest[0]["items"][0] == {
        "seq": 5, "sha": sha(5), "date": "2026-11-01T12:00:00+00:00", "title": "commit 5",
        "authors": ["tester"], "previous": sha(4), "analysed": False, "rewritten_away": False,
        "could_not_analyse": None,
    }  # fmt: skip
    other_order = client.get(url, params={"cursor": oldest[0]["next"], "order": "newest"})
    assert (other_order.status_code, other_order.json()["type"]) == (
        400, "urn:tracker:problem:invalid-cursor",
    )  # fmt: skip
    junk = client.get(url, params={"cursor": "!!!"})
    assert junk.status_code == 400
    # forged cursors with the right scope (it is a hash of public parameters): never a 500, a 503
    # or a silent first page
    from tracker.api import paging

    scope = paging.scope_of("revisions", {"repo": A, "order": "oldest"})
    for key in ([10**30], [2**63], [True], [-5], [None], [], [1, 2], ["3"]):
        forged = client.get(url, params={"cursor": paging.encode(scope, key)})
        assert (forged.status_code, forged.json()["type"]) == (
            400, "urn:tracker:problem:invalid-cursor",
        ), key  # fmt: skip
    assert (
        client.get(url, params={"cursor": paging.encode(scope, [2])}).json()["items"][0]["seq"] == 3
    )
    for since in ("0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00"):
        r = client.get("/v1/advisories", params={"since": since})
        assert (r.status_code, r.json()["type"]) == (400, "urn:tracker:problem:invalid-request")
    assert client.get(url, params={"limit": 0}).status_code == 400
    assert client.get(url, params={"order": "sideways"}).json()["errors"][0]["location"] == (
        "query.order"
    )


def test_a_file_at_a_revision_with_its_hashes(served: tuple[TestClient, App, Seeder]) -> None:
    client, _, _ = served
    url = f"/v1/repos/{A}/revisions/{sha(3)}/files/config.json"
    r = client.get(url)
    assert (r.status_code, r.content) == (200, CONFIG_2)
    assert r.headers["content-type"] == "application/json"  # was application/octet-stream
    digest = hashlib.sha256(CONFIG_2)
    import base64

    assert r.headers["repr-digest"] == f"sha-256=:{base64.b64encode(digest.digest()).decode()}:"
    assert r.headers["x-content-sha256"] == digest.hexdigest()
    blob = hashlib.sha1(b"blob %d\x00" % len(CONFIG_2) + CONFIG_2).hexdigest()
    assert (r.headers["x-git-blob-id"], r.headers["x-revision"]) == (blob, sha(3))
    assert r.headers["cache-control"] == "public, max-age=31536000, immutable"
    again = client.get(url, headers={"If-None-Match": r.headers["etag"]})
    assert (again.status_code, again.content, again.headers["x-content-sha256"]) == (
        304, b"", digest.hexdigest(),
    )  # fmt: skip
    head = client.get(f"/v1/repos/{A}/revisions/HEAD~4/files/config.json")
    assert (head.content, head.headers["cache-control"]) == (CONFIG_1, "public, no-cache")
    untracked = client.get(f"/v1/repos/{A}/revisions/{sha(3)}/files/README.md")
    assert (untracked.status_code, untracked.json()["detail"]) == (
        404, f"{A}@{sha(3)}: README.md is in the tree but not tracked; nothing stored",
    )  # fmt: skip
    nowhere = client.get(f"/v1/repos/{A}/revisions/{sha(3)}/files/no/such.json")
    assert nowhere.status_code == 404
    assert nowhere.headers["content-type"] == "application/problem+json"
    unknown_rev = client.get(f"/v1/repos/{A}/revisions/HEAD~9/files/config.json")
    assert (unknown_rev.status_code, unknown_rev.json()["type"]) == (
        404, "urn:tracker:problem:not-found",
    )  # fmt: skip


def test_stored_files_are_served_with_their_media_type() -> None:
    """A README is Markdown, a config JSON, remote code Python; bytes that are not UTF-8, or a
    name of no text kind, stay application/octet-stream."""
    cases = {
        ("README.md", b"# Llama"): "text/markdown; charset=utf-8",
        ("config.json", b"{}"): "application/json",
        ("chat_template.jinja", b"{{ x }}"): "text/plain; charset=utf-8",
        ("modeling_x.py", b"import torch"): "text/x-python; charset=utf-8",
        ("additional_chat_templates/tool.JINJA", b"{{ x }}"): "text/plain; charset=utf-8",
        ("README.md", b"\xff\xfe# not utf-8"): "application/octet-stream",
        ("tokenizer.model", b"\x0a\x0b"): "application/octet-stream",
        ("merges", b"a b"): "application/octet-stream",
    }
    assert {k: media_type_of(*k) for k in cases} == cases


def _ids(client: TestClient, **params: Any) -> list[str]:
    return [i["id"] for p in _pages(client, "/v1/advisories", **params) for i in p["items"]]


def _by_published(made: list[Seeded], newest: bool = False) -> list[str]:
    return [m.id for m in sorted(made, key=lambda m: (m.published, m.id), reverse=newest)]


def test_advisory_filters_give_exact_ids(served: tuple[TestClient, App, Seeder]) -> None:
    client, _, seeder = served
    made = seeder.made
    assert _ids(client, limit=500) == _by_published(made)
    assert _ids(client, repo=B, limit=4) == _by_published([m for m in made if m.repo == B])
    assert _ids(client, repo=B) == ["x_TEST-2026-1", "x_TEST-2026-4", "x_TEST-2026-7",
                                    "x_TEST-2026-10", "x_TEST-2026-13", "x_TEST-2026-16",
                                    "x_TEST-2026-19", "x_TEST-2026-22"]  # fmt: skip
    assert _ids(client, severity="high") == _by_published(
        [m for m in made if m.severity is Severity.HIGH]
    )
    assert _ids(client, min_severity="high", limit=3) == _by_published(
        [m for m in made if m.severity in (Severity.HIGH, Severity.CRITICAL)]
    )
    assert _ids(client, kind="tokenizer", repo=A) == _by_published(
        [m for m in made if m.kind is Artifact.TOKENIZER and m.repo == A]
    )
    assert _ids(client, kind="tokenizer") == ["x_TEST-2026-5", "x_TEST-2026-7",
                                              "x_TEST-2026-20"]  # fmt: skip
    assert _ids(client, state="fixed") == ["x_TEST-2026-6"]
    assert _ids(client, state="withdrawn") == ["x_TEST-2026-10"]
    since = T0 + timedelta(hours=3)
    assert _ids(client, since=rfc3339(since)) == _by_published(
        [m for m in made if m.modified >= since]
    )
    assert _ids(client, since=rfc3339(since)) == ["x_TEST-2026-4", "x_TEST-2026-8",
        "x_TEST-2026-12", "x_TEST-2026-16", "x_TEST-2026-20", "x_TEST-2026-24"]  # fmt: skip
    assert _ids(client, severity="low", min_severity="high") == []
    newest = _ids(client, order="newest", limit=5)
    assert newest == _by_published(made, newest=True)
    first = client.get("/v1/advisories", params={"limit": 1}).json()["items"][0]
    assert first == {
        "id": "x_TEST-2026-1", "repo": B, "introduced": sha(100), "kind": "config",
        "severity": "low", "state": "open", "published": "2026-11-01T12:00:00Z",
        "modified": "2026-11-01T12:00:00Z", "summary": "change 1",
        "link": "/v1/vulns/x_TEST-2026-1",
    }  # fmt: skip
    assert client.get(first["link"]).json()["id"] == "x_TEST-2026-1"
    bad_since = client.get("/v1/advisories", params={"since": "yesterday"})
    assert (bad_since.status_code, bad_since.json()["detail"]) == (
        400,
        "since: 'yesterday' is not a time: RFC 3339 (2026-11-30T09:30:00Z), or an ISO date or "
        "date-time read as UTC (2026-11-30, 2026-11-30T09:30)",
    )
    bad_severity = client.get("/v1/advisories", params={"severity": "dire"})
    assert (bad_severity.status_code, bad_severity.json()["errors"][0]["location"]) == (
        400, "query.severity",
    )  # fmt: skip
    page = client.get("/v1/advisories", params={"limit": 2}).json()
    other_filter = client.get("/v1/advisories", params={"cursor": page["next"], "repo": A})
    assert other_filter.status_code == 400


@pytest.mark.parametrize("order", ["oldest", "newest"])
def test_paging_while_advisories_arrive_loses_and_repeats_nothing(
    served: tuple[TestClient, App, Seeder], order: str
) -> None:
    client, _, seeder = served
    before = _by_published(seeder.made, newest=order == "newest")
    seen: list[str] = []
    arrived: list[str] = []
    cursor = None
    clock = itertools.count(1)
    while True:
        params: dict[str, Any] = {"limit": 5, "order": order}
        if cursor:
            params["cursor"] = cursor
        page = client.get("/v1/advisories", params=params).json()
        seen += [i["id"] for i in page["items"]]
        for _ in range(2):  # new advisories published between two page reads
            when = T0 + timedelta(minutes=next(clock))
            arrived.append(seeder.add(A if len(arrived) % 2 else B, published=when).id)
        cursor = page["next"]
        if cursor is None:
            break
    assert len(seen) == len(set(seen))  # nothing repeated
    if order == "oldest":  # everything: what was there, then what arrived while paging
        assert seen[: len(before)] == before
        assert set(seen[len(before) :]) <= set(arrived) and len(seen) > len(before)
        assert seen == _by_published([m for m in seeder.made if m.id in set(seen)])
    else:  # what was there when paging started, newest first; arrivals sort before page 1
        assert seen == before


def test_lists_answer_304_until_they_change(served: tuple[TestClient, App, Seeder]) -> None:
    client, _, seeder = served
    first = client.get("/v1/advisories", params={"repo": A})
    etag = first.headers["etag"]
    same = client.get("/v1/advisories", params={"repo": A}, headers={"If-None-Match": etag})
    assert (same.status_code, same.content, same.headers["etag"]) == (304, b"", etag)
    seeder.add(A, published=T0)
    changed = client.get("/v1/advisories", params={"repo": A}, headers={"If-None-Match": etag})
    assert changed.status_code == 200 and changed.headers["etag"] != etag
    repos = client.get("/v1/repos")
    assert (
        client.get("/v1/repos", headers={"If-None-Match": repos.headers["etag"]}).status_code == 304
    )


def test_a_page_reads_one_bounded_query(served: tuple[TestClient, App, Seeder]) -> None:
    """A page of the advisory list is one SELECT with a LIMIT of the page size + 1 (to know
    whether more follow): the store never loads every advisory to serve a page."""
    import sqlalchemy as sa

    client, app, _ = served
    seen: list[tuple[str, Any]] = []

    def record(conn: Any, cursor: Any, statement: str, params: Any, *rest: Any) -> None:
        if "FROM advisories" in statement:
            seen.append((statement, params))

    sa.event.listen(app.store.engine, "before_cursor_execute", record)
    try:
        r = client.get("/v1/advisories", params={"limit": 3, "min_severity": "moderate"})
    finally:
        sa.event.remove(app.store.engine, "before_cursor_execute", record)
    assert len(r.json()["items"]) == 3
    assert len(seen) == 1
    statement, params = seen[0]
    assert "LIMIT" in statement and params[-2:] == (4, 0)


class _Reads:
    """Counts the SQL statements the store runs (a kept answer served again runs none)."""

    def __init__(self, app: App) -> None:
        import sqlalchemy as sa

        self.engine = app.store.engine
        self.n = 0
        self._sa = sa
        sa.event.listen(self.engine, "before_cursor_execute", self._count)

    def _count(self, *args: Any) -> None:
        self.n += 1

    def since(self, mark: int) -> int:
        return self.n - mark

    def close(self) -> None:
        self._sa.event.remove(self.engine, "before_cursor_execute", self._count)


def test_kept_answers_change_on_the_next_request_after_the_store_does(
    served: tuple[TestClient, App, Seeder],
) -> None:
    """The advisory list, the Atom feed and a diff named by a ref are served again without a
    store read (`tracker.api.memo`) until the store changes: a new advisory, a fix, a withdrawal
    and a new revision each show on the very next request."""
    client, app, seeder = served
    reads = _Reads(app)
    try:
        params = {"repo": A, "order": "newest", "limit": 3}
        first = client.get("/v1/advisories", params=params)
        mark = reads.n
        again = client.get("/v1/advisories", params=params)
        assert (again.content, again.headers["etag"]) == (first.content, first.headers["etag"])
        assert reads.since(mark) == 0  # served from what was kept
        head = client.head("/v1/advisories", params=params)
        assert (head.status_code, head.content, head.headers["etag"]) == (
            200, b"", first.headers["etag"],
        )  # fmt: skip
        assert head.headers["content-length"] == str(len(first.content))
        not_modified = client.get(
            "/v1/advisories", params=params, headers={"If-None-Match": first.headers["etag"]}
        )
        assert (not_modified.status_code, not_modified.content) == (304, b"")
        assert reads.since(mark) == 0

        new = seeder.add(A, published=T0 + timedelta(days=1))
        items = client.get("/v1/advisories", params=params).json()["items"]
        assert (items[0]["id"], items[0]["state"]) == (new.id, "open")
        adv = app.advisories.get(new.id)
        with app.advisories.transaction() as tx:
            tx.update(adv, state=AdvisoryState.FIXED, pending=[], expect=AdvisoryState.OPEN)
        items = client.get("/v1/advisories", params=params).json()["items"]
        assert (items[0]["id"], items[0]["state"]) == (new.id, "fixed")
        with app.advisories.transaction() as tx:
            tx.update(
                adv,
                state=AdvisoryState.WITHDRAWN,
                pending=[],
                expect=AdvisoryState.FIXED,
                withdrawn_by=WithdrawnBy.REWRITE,
            )
        items = client.get("/v1/advisories", params=params).json()["items"]
        assert (items[0]["id"], items[0]["state"]) == (new.id, "withdrawn")

        feed = client.get("/v1/feeds/advisories.json", params={"limit": 1})
        assert feed.json()["items"][0]["id"].endswith(new.id)
        mark = reads.n
        assert client.get("/v1/feeds/advisories.json", params={"limit": 1}).content == feed.content
        assert reads.since(mark) == 0
        newer = seeder.add(B, published=T0 + timedelta(days=2))
        moved = client.get("/v1/feeds/advisories.json", params={"limit": 1})
        assert moved.json()["items"][0]["id"].endswith(newer.id)

        url = f"/v1/repos/{A}/diff"
        span = {"from": "HEAD~1", "to": "main"}
        diff = client.get(url, params=span).json()
        assert (diff["before"], diff["after"]) == (sha(4), sha(5))
        mark = reads.n
        assert client.get(url, params=span).json() == diff
        assert reads.since(mark) == 0  # the names are not resolved again
        app.store.store_revision(A, _commit(6, 5), [], {}, previous=sha(5))
        diff = client.get(url, params=span).json()
        assert (diff["before"], diff["after"]) == (sha(5), sha(6))
    finally:
        reads.close()


def test_a_kept_answer_is_never_served_to_a_request_that_may_not_read(tmp_path: Path) -> None:
    app = build(load_settings(state_dir=tmp_path / "state", api_read_token="r" * 24))
    try:
        with TestClient(create_app(app)) as client:
            ok = {"Authorization": "Bearer " + "r" * 24}
            url = "/v1/feeds/advisories.atom"
            assert client.get(url, headers=ok).status_code == 200
            assert client.get(url, headers=ok).status_code == 200  # kept now
            for headers in ({}, {"Authorization": "Bearer " + "x" * 24}):
                refused = client.get(url, headers=headers)
                assert (refused.status_code, refused.headers["content-type"]) == (
                    401, "application/problem+json",
                )  # fmt: skip
            kept = client.get(url, headers=ok)
            assert (kept.headers["cache-control"], kept.headers["vary"]) == (
                "private, no-cache", "Authorization, Origin",
            )  # fmt: skip
            metrics = client.get("/metrics", headers=ok).text
            line = 'tracker_http_requests_total{method="GET",route="/v1/feeds/advisories.atom",'
            assert f'{line}status="200"}} 3.0' in metrics
            assert f'{line}status="401"}} 2.0' in metrics
    finally:
        app.close()


def test_a_watchlist_edit_renders_the_feed_again(
    served: tuple[TestClient, App, Seeder], tmp_path: Path
) -> None:
    """A feed classifies fit moves by the watchlist's overrides: a kept feed is not served once
    the watchlist file changed."""
    client, app, _ = served
    reads = _Reads(app)
    try:
        url = f"/v1/repos/{A}/feed.atom"
        first = client.get(url)
        mark = reads.n
        assert client.get(url).content == first.content
        assert reads.since(mark) == 0
        watchlist = tmp_path / "watchlist.yaml"
        watchlist.write_text(watchlist.read_text() + f"  - id: {B}\n")
        assert client.get(url).content == first.content
        assert reads.since(mark) > 0
    finally:
        reads.close()


@pytest.mark.postgres
def test_kept_answers_follow_a_postgresql_store(
    pg_database: Callable[[str], AbstractContextManager[str]], tmp_path: Path
) -> None:
    """On PostgreSQL the generation is a query (run off the event loop): a kept list is served
    until an advisory is published, then shows it. (Whether the second read was served from what
    was kept depends on the rest of the cluster: any transaction there moves the snapshot.)"""
    with pg_database("memo") as url:
        app = build(load_settings(state_dir=tmp_path / "state", database_url=url))
        try:
            app.store.ensure_repo(A, source_kind="hub", url=None, ref="main")
            app.store.store_revision(A, _commit(1, None), [], {}, previous=None)
            seeder = Seeder(app)
            first = seeder.add(A, published=T0)
            with TestClient(create_app(app)) as client:
                assert _ids(client) == [first.id]
                assert _ids(client) == [first.id]  # kept (unless another client wrote)
                second = seeder.add(A, published=T0 + timedelta(seconds=1))
                assert _ids(client) == [first.id, second.id]
        finally:
            app.close()


def test_filters_take_any_case_and_repeated_values_match_any(
    served: tuple[TestClient, App, Seeder],
) -> None:
    """As `tracker advisories list`: severities, kinds and states in any letter case; a filter
    given several times matches any of its values; different filters all hold."""
    client, _, seeder = served
    made = seeder.made

    def ids(*params: tuple[str, str]) -> list[str]:
        out: list[str] = []
        cursor = None
        while True:
            query = [*params, ("limit", "5"), *([("cursor", cursor)] if cursor else [])]
            r = client.get("/v1/advisories", params=query)
            assert r.status_code == 200, r.text
            out += [i["id"] for i in r.json()["items"]]
            cursor = r.json()["next"]
            if cursor is None:
                return out

    high = _by_published([m for m in made if m.severity is Severity.HIGH])
    assert ids(("severity", "HIGH")) == ids(("severity", "High")) == high
    assert ids(("min_severity", "CRITICAL")) == _by_published(
        [m for m in made if m.severity is Severity.CRITICAL]
    )
    assert ids(("state", "Fixed"), ("kind", "CONFIG"), ("kind", "weights")) == []
    assert ids(("state", "FIXED"), ("state", "withdrawn")) == ["x_TEST-2026-6", "x_TEST-2026-10"]
    assert ids(("repo", A), ("repo", B)) == _by_published(made)
    assert ids(("severity", "low"), ("severity", "Critical"), ("repo", B)) == _by_published(
        [m for m in made if m.severity in (Severity.LOW, Severity.CRITICAL) and m.repo == B]
    )
    assert ids(("kind", "config"), ("kind", "Tokenizer")) == _by_published(
        [m for m in made if m.kind in (Artifact.CONFIG, Artifact.TOKENIZER)]
    )
    # floors: the lowest counts; with severities: both hold
    assert ids(("min_severity", "critical"), ("min_severity", "high")) == _by_published(
        [m for m in made if m.severity in (Severity.HIGH, Severity.CRITICAL)]
    )
    assert ids(("min_severity", "high"), ("severity", "low"), ("severity", "high")) == high
    later, earlier = T0 + timedelta(hours=3), T0 + timedelta(hours=2)
    assert ids(("since", rfc3339(later)), ("since", rfc3339(earlier))) == _by_published(
        [m for m in made if m.modified >= earlier]
    )
    # a cursor belongs to the list, however its filters were spelled
    first = client.get("/v1/advisories", params=[("severity", "HIGH"), ("limit", "2")]).json()
    same = client.get(
        "/v1/advisories", params=[("severity", "high"), ("limit", "2"), ("cursor", first["next"])]
    )
    assert [i["id"] for i in same.json()["items"]] == high[2:4]
    bad = client.get("/v1/advisories", params=[("severity", "high"), ("severity", "dire")])
    assert (bad.status_code, bad.json()["detail"], bad.json()["errors"]) == (
        400,
        "severity: 'dire' must be one of critical, high, moderate, low",
        [{"location": "query.severity",
          "message": "'dire' must be one of critical, high, moderate, low"}],
    )  # fmt: skip
    bad_repo = client.get("/v1/advisories", params=[("repo", A), ("repo", "no-slash")])
    assert (bad_repo.status_code, bad_repo.json()["type"]) == (
        400, "urn:tracker:problem:invalid-repo-id",
    )  # fmt: skip


@pytest.mark.parametrize(
    "route", ["/v1/repos/{}/feed.atom", "/v1/repos/{}/feed.json", "/v1/repos/{}/revisions"]
)
def test_an_invalid_repo_id_is_a_400_on_feeds_as_elsewhere(
    served: tuple[TestClient, App, Seeder], route: str
) -> None:
    client, _, _ = served
    for repo in ("acme/bad..name", "acme/-dash", "acme/trailing."):
        r = client.get(route.format(repo))
        assert (r.status_code, r.headers["content-type"], r.json()["type"]) == (
            400, "application/problem+json", "urn:tracker:problem:invalid-repo-id",
        ), repo  # fmt: skip
    unknown = client.get(route.format("acme/nowhere"))
    assert unknown.status_code == 404


def test_an_unparseable_revision_is_a_400_and_an_unknown_one_a_404(
    served: tuple[TestClient, App, Seeder],
) -> None:
    client, _, _ = served
    routes = [
        f"/v1/repos/{A}/revisions/{{}}/files/config.json",
        f"/v1/repos/{A}/revisions/{{}}/estimate",
        f"/v1/repos/{A}/revisions/{{}}/preflight",
        f"/v1/repos/{A}/diff?from=HEAD&to={{}}",
        f"/v1/repos/{A}/diff?from={{}}&to=HEAD",
    ]
    for route in routes:
        for rev in (
            "HEAD~x",
            "a~b~c",
            "main..dev",
            "x:y",
            "HEAD^",
            "@{1}",
            ".hidden",
            "a b",
            "v1.",
            "v1.lock",
            "@",
        ):
            r = client.get(route.format(quote(rev, safe="")))
            assert (r.status_code, r.json()["type"]) == (
                400, "urn:tracker:problem:invalid-revision",
            ), (route, rev)  # fmt: skip
            assert r.json()["detail"] == (
                f"{A}: cannot parse revision {rev!r}: not a sha, a ref name or HEAD, each with "
                "an optional ~n"
            )
        # well-formed, not in the store
        for rev in (
            "HEAD~9",
            "dev",
            "abcdef1",
            "f" * 40,
            "v1.locks",
            "feature.x-2",
            "release@2024",
        ):
            r = client.get(route.format(rev))
            assert (r.status_code, r.json()["type"]) == (
                404, "urn:tracker:problem:not-found",
            ), (route, rev)  # fmt: skip


def test_a_store_that_cannot_say_its_generation_leaves_the_answer_to_the_routes(
    served: tuple[TestClient, App, Seeder], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only a request something is kept for reads the generation: /healthz reads nothing, and
    when the store cannot be read a kept list is a 503 problem, never a 500 or a stale answer."""
    from tracker.shared.errors import StoreError

    client, _, _ = served
    assert client.get("/v1/advisories").status_code == 200  # kept now
    memo = client.app.state.memo  # type: ignore[attr-defined]

    def unreadable() -> str:
        raise StoreError("advisory store failed: disk I/O error")

    monkeypatch.setattr(memo.generation, "current", unreadable)
    assert client.get("/healthz").json() == {"status": "ok"}
    assert client.get(f"/v1/repos/{A}/revisions", params={"limit": 1}).status_code == 200
    down = client.get("/v1/advisories")
    assert (down.status_code, down.headers["content-type"]) == (503, "application/problem+json")
    assert down.json()["type"] == "urn:tracker:problem:store-unavailable"


def _no_change_polls(app: App, n: int = 3) -> None:
    """What a polling daemon commits for repos that did not change: the poll recorded (its
    counters, state and histogram), and the bench's raw counter bump."""
    import sqlalchemy as sa

    for _ in range(n):
        app.store.record_poll(A, status=RepoStatus.OK, error=None, seconds=0.05)
        with app.store.engine.begin() as conn:
            conn.execute(sa.text("UPDATE ingestion_state SET polls = polls + 1"))


def _kept_across_polls_then_changed(
    client: TestClient, app: App, seeder: Seeder, reads: Any
) -> None:
    from tracker.shared.domain import Diff
    from tracker.store.analysis import StoredEstimate

    urls = [
        ("/v1/advisories", {"repo": A, "limit": 3, "order": "newest"}),
        ("/v1/feeds/advisories.atom", {}),
        (f"/v1/repos/{A}/feed.json", {}),
        (f"/v1/repos/{A}/diff", {"from": "HEAD~1", "to": "main"}),
    ]
    first = [client.get(u, params=p) for u, p in urls]
    assert [r.status_code for r in first] == [200] * 4
    _no_change_polls(app)
    mark = reads.n
    again = [client.get(u, params=p) for u, p in urls]
    assert [r.content for r in again] == [r.content for r in first]
    assert reads.since(mark) == 0  # every answer still kept: nothing rendered, nothing read

    def rendered_again() -> int:
        mark = reads.n
        for u, p in urls:
            assert client.get(u, params=p).status_code == 200
        _no_change_polls(app, 1)
        n = reads.since(mark)
        mark = reads.n
        for u, p in urls:
            client.get(u, params=p)
        assert reads.since(mark) == 0  # kept again, polls or not
        return n

    new = seeder.add(A, published=T0 + timedelta(days=3))
    assert client.get(*urls[0][:1], params=urls[0][1]).json()["items"][0]["id"] == new.id
    assert rendered_again() > 0
    adv = app.advisories.get(new.id)
    with app.advisories.transaction() as tx:
        tx.update(adv, state=AdvisoryState.FIXED, pending=[], expect=AdvisoryState.OPEN)
    assert client.get(urls[0][0], params=urls[0][1]).json()["items"][0]["state"] == "fixed"
    with app.advisories.transaction() as tx:
        tx.update(
            adv,
            state=AdvisoryState.WITHDRAWN,
            pending=[],
            expect=AdvisoryState.FIXED,
            withdrawn_by=WithdrawnBy.REWRITE,
        )
    assert client.get(urls[0][0], params=urls[0][1]).json()["items"][0]["state"] == "withdrawn"
    assert rendered_again() > 0
    app.analysis.save(
        Diff(A, sha(4), sha(5), ()), StoredEstimate(A, sha(5), None, "no estimate"), T0
    )
    assert rendered_again() > 0  # a new analysis: the feeds' fit entries read it again
    app.store.store_revision(A, _commit(6, 5), [], {}, previous=sha(5))
    diff = client.get(urls[3][0], params=urls[3][1]).json()
    assert (diff["before"], diff["after"]) == (sha(5), sha(6))


def test_a_no_change_poll_keeps_every_kept_answer(served: tuple[TestClient, App, Seeder]) -> None:
    """Polls that find nothing new commit (ingestion_state's counters): the kept list, feeds
    and diff are still served without a read; a new advisory, a fix, a withdrawal, a new
    analysis and a new revision each still show on the very next request."""
    client, app, seeder = served
    reads = _Reads(app)
    try:
        _kept_across_polls_then_changed(client, app, seeder, reads)
    finally:
        reads.close()


class _ReadsButGeneration(_Reads):
    """`_Reads` without the generation's own query (PostgreSQL reads it through the engine)."""

    def _count(self, *args: Any) -> None:
        if "store_generations" not in str(args[2]):
            self.n += 1


@pytest.mark.postgres
def test_kept_answers_on_postgresql_follow_every_change_across_no_change_polls(
    pg_database: Callable[[str], AbstractContextManager[str]], tmp_path: Path
) -> None:
    """PostgreSQL's generation is the lock-free snapshot (migration 0013 dropped the counter
    triggers, which deadlocked concurrent pollers): any commit in the cluster may re-render, so
    this checks what must hold whatever else writes: answers equal across no-change polls, and a
    new or fixed advisory seen by the very next request."""
    with pg_database("memo_polls") as url:
        app = build(load_settings(state_dir=tmp_path / "state", database_url=url))
        try:
            app.store.ensure_repo(A, source_kind="hub", url=None, ref="main")
            for n in range(1, 6):
                app.store.store_revision(
                    A, _commit(n, n - 1 if n > 1 else None), [], {},
                    previous=sha(n - 1) if n > 1 else None,
                )  # fmt: skip
            app.store.record_poll(A, status=RepoStatus.OK, error=None, now=T0)
            seeder = Seeder(app)
            seeder.add(A, published=T0)
            with TestClient(create_app(app)) as client:
                urls = [
                    ("/v1/advisories", {"repo": A, "limit": 3, "order": "newest"}),
                    ("/v1/feeds/advisories.atom", {}),
                    (f"/v1/repos/{A}/diff", {"from": "HEAD~1", "to": "main"}),
                ]
                first = [client.get(u, params=p) for u, p in urls]
                assert [r.status_code for r in first] == [200] * 3
                _no_change_polls(app)
                again = [client.get(u, params=p) for u, p in urls]
                assert [r.content for r in again] == [r.content for r in first]
                new = seeder.add(A, published=T0 + timedelta(days=3))
                listed = client.get(urls[0][0], params=urls[0][1]).json()
                assert listed["items"][0]["id"] == new.id
                adv = app.advisories.get(new.id)
                with app.advisories.transaction() as tx:
                    tx.update(adv, state=AdvisoryState.FIXED, pending=[], expect=AdvisoryState.OPEN)
                listed = client.get(urls[0][0], params=urls[0][1]).json()
                assert listed["items"][0]["state"] == "fixed"
        finally:
            app.close()


def test_one_render_per_key_while_many_ask(served: tuple[TestClient, App, Seeder]) -> None:
    """Single flight: eight threads asking for the same stale key make one render."""
    import threading
    import time

    from tracker.api.memo import Memo
    from tracker.store.generation import StoreGeneration

    _, app, _ = served
    memo = Memo(StoreGeneration(app.store.engine))
    started = threading.Barrier(8)
    made: list[int] = []

    def make() -> bytes:
        made.append(1)
        time.sleep(0.2)
        return b"x" * 10

    def ask() -> None:
        started.wait()
        assert memo.get_or_make("k", make) == b"x" * 10

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert (len(made), memo.renders) == (1, 1)


def test_the_memo_is_bounded_in_bytes(served: tuple[TestClient, App, Seeder]) -> None:
    from tracker.api.memo import Memo
    from tracker.store.generation import StoreGeneration

    _, app, _ = served
    memo = Memo(StoreGeneration(app.store.engine), max_bytes=8000)
    for i in range(10):
        memo.get_or_make(i, lambda: b"y" * 900)
    assert memo.kept_bytes == 8 * 900  # the two oldest went
    assert [memo.holds(i) for i in range(10)] == [False] * 2 + [True] * 8
    memo.get_or_make("huge", lambda: b"z" * 1001)  # over an eighth: not kept
    assert (memo.holds("huge"), memo.kept_bytes) == (False, 8 * 900)


def test_a_ref_with_an_at_sign_resolves_everywhere(tmp_path: Path) -> None:
    """git allows `@` in a ref name (not `@{`, not a lone `@`), and so does the watchlist: the
    store resolves such a ref and the API takes it in paths and queries."""
    from tracker.watchlist import load_watchlist

    ref = "release@2024"
    (tmp_path / "watchlist.yaml").write_text(f"repos:\n  - id: {A}\n    ref: {ref}\n")
    assert load_watchlist(tmp_path / "watchlist.yaml").repos[0].ref == ref
    app = build(load_settings(state_dir=tmp_path / "state", watchlist=tmp_path / "watchlist.yaml"))
    try:
        app.store.ensure_repo(A, source_kind="hub", url=None, ref=ref)
        app.store.store_revision(A, _commit(1, None), [], {}, previous=None)
        app.store.store_revision(A, _commit(2, 1), [], {}, previous=sha(1))
        app.store.record_poll(A, status=RepoStatus.OK, error=None, now=T0)
        assert app.store.resolve(A, ref) == sha(2)
        assert app.store.resolve(A, ref + "~1") == sha(1)
        with TestClient(create_app(app), raise_server_exceptions=False) as client:
            diff = client.get(f"/v1/repos/{A}/diff", params={"from": ref + "~1", "to": ref})
            assert (diff.status_code, diff.json()["before"], diff.json()["after"]) == (
                200, sha(1), sha(2),
            )  # fmt: skip
            estimate = client.get(f"/v1/repos/{A}/revisions/{quote(ref)}/estimate")
            assert (estimate.status_code, estimate.json()["type"]) == (
                404,
                "urn:tracker:problem:no-estimate",
            )  # fmt: skip  (resolved: nothing analysed there yet)
            bad = client.get(f"/v1/repos/{A}/revisions/{quote('release@{1}')}/estimate")
            assert bad.status_code == 400
    finally:
        app.close()


def test_feeds_read_min_severity_as_the_advisory_list_does(
    served: tuple[TestClient, App, Seeder],
) -> None:
    """Feeds share /v1/advisories' filter: several floors mean the lowest, in any order and any
    case; an empty or unknown one is the same 400 problem on both."""
    client, _, _ = served
    url = "/v1/feeds/advisories.json"

    def ids(*floors: str) -> list[str]:
        r = client.get(url, params=[("min_severity", f) for f in floors])
        assert r.status_code == 200, r.text
        return [i["id"] for i in r.json()["items"]]

    low, high = ids("low"), ids("HIGH")
    assert len(low) > len(high) > 0
    assert ids("high", "low") == ids("Low", "high") == low
    assert ids("critical", "high") == high
    for bad in ("", "severe"):
        feed = client.get(url, params={"min_severity": bad})
        listed = client.get("/v1/advisories", params={"min_severity": bad})
        assert (feed.status_code, listed.status_code) == (400, 400)
        assert feed.json()["detail"] == listed.json()["detail"]
        assert feed.json()["errors"] == listed.json()["errors"]


def test_the_diff_kind_takes_any_case(served: tuple[TestClient, App, Seeder]) -> None:
    """`kind` on the diff is read as the advisory filters read it: CONFIG is config."""
    client, _, _ = served
    url = f"/v1/repos/{A}/diff"
    span = {"from": sha(2), "to": sha(3)}
    lower = client.get(url, params={**span, "kind": "config"})
    upper = client.get(url, params={**span, "kind": "CONFIG"})
    assert (lower.status_code, upper.status_code) == (200, 200)
    assert upper.json() == lower.json()
    assert lower.json()["count"] > 0
    assert {c["artifact"] for c in lower.json()["changes"]} == {"config"}
    bad = client.get(url, params={**span, "kind": "Estimate"})
    assert (bad.status_code, bad.json()["detail"]) == (400, "kind: estimate is not a diff kind")
    unknown = client.get(url, params={**span, "kind": "confog"})
    assert (unknown.status_code, unknown.json()["errors"][0]["location"]) == (400, "query.kind")
