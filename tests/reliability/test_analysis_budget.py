"""Issue 10, Build item "an analysis-wide memory and time budget per revision", as operators meet
it: the installed `tracker poll --once` against the replica.

A revision whose analysis needs more than `TRACKER_ANALYSIS_MEMORY_MIB` (a valid tokenizer.json
of 33 MB, within its reader's bounds) is recorded as "could not analyse" (kind `memory`, with the
limit), publishes nothing, and the run goes on with the next revision and the other repo, whose
advisory is published; the run exits 1 with one line (the README's exit-code table). The record
is shown by `tracker watch list` (table and `--json`), `tracker history --json` and the HTTP API.
The next run does not try it again under the same budget (exit 0); a run with the limit raised
analyses it and the record goes. A time budget too small for any analysis records kind `time`.
The daemon (`tracker poll`) records the overrun once, keeps polling both repos (the hostile one
is not retried, nor counted as failing) and ingests the other repo's new commit.

Before: there was no budget (the settings were unknown `TRACKER_*` variables): the hostile
revision was analysed in the poller's own process, whatever it cost, and the run exited 0.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from workkit import Daemon, commit_eos, env_for, run, status, until

from tracker.api import create_app
from tracker.app import build
from tracker.replica import Replica
from tracker.replica.repos import commit, init_repo
from tracker.settings import load_settings

pytestmark = pytest.mark.replica


def _big_tokenizer() -> bytes:
    """A valid tokenizer.json of 33 MB: 1.5 million vocabulary entries, 3 million JSON values,
    within its reader's bounds (4 million values; the 64 MB file cap)."""
    vocab = {f"tok{i:07d}": i for i in range(1_500_000)}
    model = {"type": "BPE", "vocab": vocab, "merges": []}
    return json.dumps({"version": "1.0", "added_tokens": [], "model": model}).encode()


def _watch_list(env: dict[str, str]) -> dict[str, dict[str, object]]:
    done = run(env, "watch", "list", "--json")
    assert done.returncode == 0, done.stderr
    return {r["repo"]: r for r in json.loads(done.stdout)}


def test_a_revision_over_the_memory_budget_is_recorded_and_the_rest_goes_on(
    tmp_path: Path,
) -> None:
    root = tmp_path / "hub"
    hostile = init_repo(root, "acme/hostile")
    first = commit_eos(hostile, 2)
    bomb = commit(hostile, {"tokenizer.json": _big_tokenizer()}, "a 33 MB tokenizer")
    plain = init_repo(root, "acme/plain")
    commit_eos(plain, 2)
    (tmp_path / "watchlist.yaml").write_text("repos:\n  - id: acme/hostile\n  - id: acme/plain\n")
    with Replica(root) as hub:
        env = env_for(
            tmp_path,
            hub.url,
            TRACKER_EFFECTS_CACHE_DIR=str(tmp_path / "effects"),
            TRACKER_ANALYSIS_MEMORY_MIB="64",
        )
        done = run(env, "poll", "--once")
        assert done.returncode == 1, done.stdout + done.stderr
        assert done.stdout.splitlines()[-2:] == [
            f"acme/hostile: could not analyse {bomb[:12]}: analysis needed over 64 MiB (the "
            "memory budget) (recorded; tried again once the limit is raised)",
            "analysed 2 revisions, published 0 advisories",
        ]
        assert done.stderr.splitlines()[-1] == (
            "error: 1 of 2 repos did not poll cleanly: acme/hostile (could not analyse 1 revision)"
        )
        rows = _watch_list(env)
        [record] = rows["acme/hostile"]["could_not_analyse"]  # type: ignore[misc]
        assert (record["sha"], record["kind"], record["reason"], record["limits"]) == (
            bomb, "memory", "analysis needed over 64 MiB (the memory budget)",
            {"timeout_s": 300.0, "memory_mib": 64},
        )  # fmt: skip
        assert (rows["acme/hostile"]["status"], rows["acme/plain"]["could_not_analyse"]) == (
            "ok", [],
        )  # fmt: skip
        table = run(env, "watch", "list").stdout
        assert "could not analyse" in table and bomb[:12] in table

        history = json.loads(run(env, "history", "acme/hostile", "--json").stdout)
        by_sha = {r["sha"]: r for r in history["revisions"]}
        assert (by_sha[first]["analysed"], by_sha[first]["could_not_analyse"]) == (True, None)
        assert by_sha[bomb]["analysed"] is False
        assert by_sha[bomb]["could_not_analyse"] == {k: record[k] for k in ("kind", "reason", "limits", "at")}  # fmt: skip

        # Nothing was published for it; the other repo's second commit was analysed after it.
        advisories = json.loads(run(env, "advisories", "list", "--json").stdout)
        assert [a["repo"] for a in advisories] == []
        commit_eos(plain, 7)
        again = run(env, "poll", "--once")  # same budget: not tried again
        assert (again.returncode, again.stderr.count("revision.could_not_analyse")) == (0, 0)
        advisories = json.loads(run(env, "advisories", "list", "--json").stdout)
        assert {a["repo"] for a in advisories} == {"acme/plain"}
        assert _watch_list(env)["acme/hostile"]["could_not_analyse"] == [record]

        settings = load_settings(
            state_dir=tmp_path / "state", watchlist=tmp_path / "watchlist.yaml"
        )
        app = build(settings, read_only=True)
        try:
            with TestClient(create_app(app)) as client:
                repo = client.get("/v1/repos/acme/hostile").json()
                assert repo["could_not_analyse"] == [record]
                page = client.get("/v1/repos/acme/hostile/revisions").json()
                assert [r["could_not_analyse"] for r in page["items"]] == [
                    None, by_sha[bomb]["could_not_analyse"],
                ]  # fmt: skip
                metrics = client.get("/metrics").text
                assert 'tracker_revisions_could_not_analyse{repo="acme/hostile"} 1.0' in metrics
                assert 'tracker_revisions_could_not_analyse{repo="acme/plain"} 0.0' in metrics
        finally:
            app.close()

        # Raised over what it overran: analysed now, the record goes.
        raised = env_for(
            tmp_path,
            hub.url,
            TRACKER_EFFECTS_CACHE_DIR=str(tmp_path / "effects"),
            TRACKER_ANALYSIS_MEMORY_MIB="4096",
        )
        done = run(raised, "poll", "--once")
        assert done.returncode == 0, done.stderr
        assert _watch_list(raised)["acme/hostile"]["could_not_analyse"] == []
        history = json.loads(run(raised, "history", "acme/hostile", "--json").stdout)
        assert [(r["analysed"], r["could_not_analyse"]) for r in history["revisions"]] == [
            (True, None), (True, None),
        ]  # fmt: skip


def test_a_time_budget_too_small_for_any_analysis_records_kind_time(tmp_path: Path) -> None:
    root = tmp_path / "hub"
    repo = init_repo(root, "acme/plain")
    commit_eos(repo, 2)
    (tmp_path / "watchlist.yaml").write_text("repos:\n  - id: acme/plain\n")
    with Replica(root) as hub:
        assert (
            run(
                env_for(tmp_path, hub.url, TRACKER_EFFECTS_CACHE_DIR=str(tmp_path / "effects")),
                "poll",
                "--once",
            ).returncode
            == 0
        )
        # A chat template that changed is rendered before and after (the render worker starts
        # first: tens of ms), so no machine analyses it within 1 ms. A first revision alone can
        # be (nothing to diff), which made this test pass or fail by the machine's load.
        template = '{% for m in messages %}<|{{ m["role"] }}|>{{ m["content"] }}{% endfor %}'
        head = commit(
            repo, {"tokenizer_config.json": json.dumps({"chat_template": template}).encode()}, "t"
        )
        env = env_for(
            tmp_path,
            hub.url,
            TRACKER_EFFECTS_CACHE_DIR=str(tmp_path / "effects"),
            TRACKER_ANALYSIS_TIMEOUT_S="0.001",
        )
        done = run(env, "poll", "--once")
        assert done.returncode == 1, done.stdout + done.stderr
        assert done.stderr.splitlines()[-1] == (
            "error: 1 of 1 repos did not poll cleanly: acme/plain (could not analyse 1 revision)"
        )
        [record] = _watch_list(env)["acme/plain"]["could_not_analyse"]  # type: ignore[misc]
        assert (record["sha"], record["kind"], record["reason"]) == (
            head, "time", "analysis still running after 0.001 s (the time budget)",
        )  # fmt: skip


def test_the_daemon_records_the_overrun_once_and_goes_on(tmp_path: Path) -> None:
    root = tmp_path / "hub"
    hostile = init_repo(root, "acme/hostile")
    commit_eos(hostile, 2)
    bomb = commit(hostile, {"tokenizer.json": _big_tokenizer()}, "a 33 MB tokenizer")
    plain = init_repo(root, "acme/plain")
    commit_eos(plain, 2)
    (tmp_path / "watchlist.yaml").write_text(
        "repos:\n"
        + "".join(f"  - id: acme/{n}\n    poll_interval: 2s\n" for n in ("hostile", "plain"))
    )
    with Replica(root) as hub:
        env = env_for(
            tmp_path,
            hub.url,
            TRACKER_EFFECTS_CACHE_DIR=str(tmp_path / "effects"),
            TRACKER_ANALYSIS_MEMORY_MIB="64",
            TRACKER_WATCHLIST_SYNC_S="3600",
        )
        daemon = Daemon(env)
        try:
            until(lambda: daemon.of("revision.could_not_analyse", sha=bomb), timeout=90)
            later = commit_eos(plain, 7)
            until(lambda: daemon.of("revision.analysed", sha=later), timeout=30)
            polled = len(daemon.of("repo.polled", repo="acme/hostile"))
            until(lambda: len(daemon.of("repo.polled", repo="acme/hostile")) >= polled + 2)
            st = status(env)
            assert daemon.stop() == 0
        finally:
            if daemon.proc.poll() is None:
                daemon.kill()
    [(_, event)] = daemon.of("revision.could_not_analyse")  # recorded once, not retried
    assert (event["sha"], event["kind"]) == (bomb, "memory")
    assert not daemon.of("poll.crashed")
    rows = {r["repo"]: r for r in st["repos"]}
    assert (rows["acme/hostile"]["consecutive_failures"], rows["acme/hostile"]["last_error"]) == (
        0, None,
    )  # fmt: skip
    assert rows["acme/plain"]["last_revision"] == later
