"""Rewrites and hostile content through the whole pipeline: squashes are diffed, bad repos are isolated."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tracker.app import App, build
from tracker.replica import Replica
from tracker.replica.repos import commit, init_repo, set_ref
from tracker.settings import load_settings
from tracker.store import RepoStatus

DATA = Path(__file__).resolve().parents[1] / "data" / "configs"
CONFIG = (DATA / "meta-llama__Llama-2-7b-hf.json").read_bytes()
DAY = datetime(2024, 3, 1, tzinfo=UTC)


@contextmanager
def _tracker(tmp_path: Path, watchlist: Path) -> Iterator[App]:
    """The app over a fresh state dir, reading the repos under tmp_path/hub through the replica."""
    with Replica(tmp_path / "hub") as hub:
        app = build(
            load_settings(state_dir=tmp_path / "s", watchlist=watchlist, hf_endpoint=hub.url)
        )
        try:
            yield app
        finally:
            app.close()


def _gen(eos: int) -> bytes:
    return json.dumps({"bos_token_id": 1, "eos_token_id": eos}).encode()


@pytest.mark.replica
def test_squashed_history_is_diffed_against_the_last_known_head(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "hub", "acme/llama")
    commit(repo, {"config.json": CONFIG, "generation_config.json": _gen(2)}, "A", date=DAY)
    b = commit(repo, {"README.md": b"hello\n"}, "B", date=DAY.replace(day=2))
    (tmp_path / "w.yaml").write_text("repos:\n  - id: acme/llama\n")
    with _tracker(tmp_path, tmp_path / "w.yaml") as app:
        app.pipeline.run_cycle()
        squash = commit(
            repo,
            {"config.json": CONFIG, "generation_config.json": _gen(32000), "README.md": b"hello\n"},
            "Super-squash branch 'main'", date=DAY.replace(day=3), ref="squashed",
        )  # fmt: skip
        set_ref(repo, "main", squash)  # a new root: no ingested revision survives
        report = app.pipeline.run_cycle()
        assert report.repos[0].poll.rewritten == 2
        assert app.store.revision(app.load_watchlist().repos[0].repo_id, squash).previous == b
        (adv,) = [a for a in app.advisories.list_advisories() if a.introduced == squash]
        assert adv.group == "special_tokens" and adv.severity.value == "high"
        assert "eos_token_id" in adv.record["summary"]


@pytest.mark.replica
def test_deeply_nested_json_is_unreadable_and_other_repos_go_on(tmp_path: Path) -> None:
    bad = init_repo(tmp_path / "hub", "acme/bad")
    good = init_repo(tmp_path / "hub", "acme/good")
    commit(bad, {"config.json": CONFIG}, "ok first", date=DAY)
    commit(bad, {"config.json": b"[" * 200_000}, "hostile", date=DAY.replace(day=2))
    commit(good, {"config.json": CONFIG}, "upload", date=DAY)
    (tmp_path / "w.yaml").write_text("repos:\n  - id: acme/bad\n  - id: acme/good\n")
    with _tracker(tmp_path, tmp_path / "w.yaml") as app:
        report = app.pipeline.run_cycle()
        bad_r, good_r = report.repos
        assert (bad_r.poll.status, good_r.poll.status) == (RepoStatus.OK, RepoStatus.OK)
        assert bad_r.error is None and len(bad_r.analysed) == 2
        assert bad_r.analysed[1].estimate_error is not None
        (adv,) = app.advisories.list_advisories(repo_id="acme/bad")
        assert adv.severity.value == "high" and "config.json" in adv.record["summary"]


@pytest.mark.replica
def test_a_rewrite_that_drops_the_fixing_commit_reopens_the_advisory(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "hub", "acme/llama")
    commit(repo, {"config.json": CONFIG, "generation_config.json": _gen(2)}, "A", date=DAY)
    b = commit(repo, {"generation_config.json": _gen(32000)}, "B", date=DAY.replace(day=2))
    c = commit(repo, {"generation_config.json": _gen(2)}, "C restores", date=DAY.replace(day=3))
    (tmp_path / "w.yaml").write_text("repos:\n  - id: acme/llama\n")
    with _tracker(tmp_path, tmp_path / "w.yaml") as app:
        app.pipeline.run_cycle()
        advisories = app.advisories
        (adv,) = advisories.list_advisories()
        events = adv.record["affected"][0]["ranges"][0]["events"]
        assert events == [{"introduced": b}, {"fixed": c}]
        set_ref(repo, "main", b)  # drop the fix
        c2 = commit(repo, {"README.md": b"hi\n"}, "C2", date=DAY.replace(day=4))
        app.pipeline.run_cycle()
        reopened = advisories.get(adv.id)
        assert reopened is not None and not reopened.record.get("withdrawn")
        assert reopened.record["affected"][0]["ranges"][0]["events"] == [{"introduced": b}]
        assert reopened.record["affected"][0]["versions"] == [b, c2]
        assert "fixed" not in reopened.record["database_specific"]
        assert adv.id in [a.id for a in advisories.affecting_commit(c2)]


@pytest.mark.replica
def test_following_another_ref_is_not_a_rewrite(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "hub", "acme/llama")
    a = commit(repo, {"config.json": CONFIG, "generation_config.json": _gen(2)}, "A", date=DAY)
    commit(repo, {"generation_config.json": _gen(9)}, "B", date=DAY.replace(day=2))
    set_ref(repo, "dev", a)  # dev branches off A
    d = commit(repo, {"README.md": b"dev\n"}, "D", date=DAY.replace(day=3), ref="dev")
    wl = tmp_path / "w.yaml"
    wl.write_text("repos:\n  - id: acme/llama\n")
    with _tracker(tmp_path, wl) as app:
        app.pipeline.run_cycle()
        wl.write_text("repos:\n  - id: acme/llama\n    ref: dev\n")
        report = app.pipeline.run_cycle()
        assert report.repos[0].poll.rewritten == 0 and report.repos[0].withdrawn == ()
        rid = app.load_watchlist().repos[0].repo_id
        assert not any(r.rewritten_away for r in app.store.revisions(rid))
        assert app.store.revision(rid, d).previous == a  # diffed from the common ancestor
        assert [e.kind.value for e in app.store.events(rid)] == ["ref_changed"]
        assert all(not a.record.get("withdrawn") for a in app.advisories.list_advisories())


@pytest.mark.replica
def test_a_push_that_brings_dropped_commits_back_restores_their_advisories(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "hub", "acme/llama")
    a = commit(repo, {"config.json": CONFIG, "generation_config.json": _gen(2)}, "A", date=DAY)
    b = commit(repo, {"generation_config.json": _gen(32000)}, "B", date=DAY.replace(day=2))
    (tmp_path / "w.yaml").write_text("repos:\n  - id: acme/llama\n")
    with _tracker(tmp_path, tmp_path / "w.yaml") as app:
        app.pipeline.run_cycle()
        advisories = app.advisories
        (adv,) = advisories.list_advisories()
        set_ref(repo, "main", a)
        assert app.pipeline.run_cycle().repos[0].withdrawn == (adv.id,)
        withdrawn = advisories.get(adv.id)
        assert withdrawn is not None and withdrawn.record.get("withdrawn")
        set_ref(repo, "main", b)  # B is back
        app.pipeline.run_cycle()
        restored = advisories.get(adv.id)
        assert restored is not None and not restored.record.get("withdrawn")
        assert [x.id for x in advisories.affecting_commit(b)] == [adv.id]
        assert len(advisories.list_advisories()) == 1  # restored, not duplicated
        app.pipeline.run_cycle()  # and it stays restored
        again = advisories.get(adv.id)
        assert again is not None and not again.record.get("withdrawn")
