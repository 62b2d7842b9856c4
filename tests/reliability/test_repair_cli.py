"""Issue 26, item 1, the repair path: a store written by a release before issue 26, repaired by the
installed `tracker repair`.

The store is made as that release made it: a real ingest of a demo repo
(ibm-granite/granite-3.1-1b-a400m-instruct, its real files and history, through the Hub replica),
except that the first revision to change config.json got a `Content-Length` over the cap on it,
which that release recorded as "could not read config.json: OversizedArtifactError: ..." and
carried on to the revisions after it that keep the same file (written here through the store
API, `Store.replace_file`). Then the installed `tracker poll --once` analyses it and publishes
from it: the store's advisories differ from a clean run's. `tracker verify` names the rows.

`tracker repair`: with the Hub unreachable, exit 1, the reason on stderr, nothing changed; then
exit 0 with every false advisory withdrawn with its reason (state withdrawn, `withdrawn_reason`),
the real ones published, and the store's live advisories, diffs, estimates and file versions equal
to a clean run's; `tracker verify` then says "all match" and a second repair has nothing to do.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from bench.netfaults import by_natural_key, env_for, setting, tracker_run
from bench.storefaults import snapshot
from tracker.replica import Replica

pytestmark = pytest.mark.replica

REPO = "ibm-granite/granite-3.1-1b-a400m-instruct"
_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)")  # as `snapshot`
Setting = tuple[Path, Replica, Path, dict[str, Any]]

# Ingest only (no analysis), then write the old release's false row: stdout is the JSON list of
# the revisions given it, and the reason.
OLD_RELEASE = """
import json, sys
from tracker.app import build
from tracker.shared.domain import RepoId
from tracker.ingest.snapshots import poll_all
from tracker.settings import load_settings
from tracker.store.values import FileVersion

settings = load_settings()
app = build(settings)
watchlist = app.load_watchlist()
[report] = poll_all(app.store, watchlist.repos, app.source_for, limits=settings.limits)
assert report.status.value == "ok", report
rid = RepoId(sys.argv[1])
revs = app.store.revisions(rid)
ids = [{e.path: e.identity for e in app.store.tree(rid, r.commit.sha)}.get("config.json")
       for r in revs]
first = next(i for i in range(1, len(revs)) if ids[i] != ids[i - 1] and ids[i] is not None)
hit = [revs[i].commit.sha for i in range(first, len(revs)) if ids[i] == ids[first]]
hit = hit[: next((n for n in range(1, len(hit)) if hit[n] != revs[first + n].commit.sha),
                 len(hit))]
reason = (
    f"OversizedArtifactError: {rid}@{hit[0]}: config.json is 100,000,000 bytes, over the cap "
    "of 64,000,000 bytes"
)
for sha in hit:
    app.store.replace_file(rid, sha, "config.json", FileVersion.unreadable(reason))
app.close()
print(json.dumps({"shas": hit, "reason": reason}))
"""


@pytest.fixture(scope="module")
def world() -> Iterator[Setting]:
    with setting((REPO,)) as s:
        yield s


def _live(snap: dict[str, Any]) -> dict[str, Any]:
    """`snap` (by natural key) with withdrawn advisories and their versions left out, the id
    counter (the repaired store has used more numbers) dropped, and the reason a rewritten record
    carries (`database_specific.repaired_reason`) taken out of it."""
    out = dict(snap)
    gone = {f"{r[0]}@{r[2]}:{r[3]}" for r in snap["advisories"] if r[5] == "withdrawn"}
    out["advisories"] = []
    for r in snap["advisories"]:
        if r[5] == "withdrawn":
            continue
        record = json.loads(json.dumps(r[6]))
        record.get("database_specific", {}).pop("repaired_reason", None)
        out["advisories"].append([*r[:6], record, *r[7:]])
    out["versions"] = [r for r in snap["versions"] if r[0] not in gone]
    out.pop("counters")
    return out


@contextmanager
def _store(engine: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[str]:
    if engine == "sqlite":
        yield f"sqlite:///{tmp_path / 'old' / 'tracker.db'}"
        return
    pg_database: Callable[[str], AbstractContextManager[str]] = request.getfixturevalue(
        "pg_database"
    )
    with pg_database("repair") as url:
        yield url


# The team of the team-filtered subscription: it follows the repo's head.
TEAM = f"""
teams:
  - name: followers
    repos:
      - id: {REPO}
"""


@pytest.mark.parametrize("engine", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_repair_withdraws_what_a_lying_length_published_and_publishes_the_real_ones(
    world: Setting, tmp_path: Path, engine: str, request: pytest.FixtureRequest
) -> None:
    with _store(engine, tmp_path, request) as url:
        _repair(world, tmp_path, url)


def _repair(world: Setting, tmp_path: Path, url: str) -> None:
    _, hub, plain, reference = world
    watchlist = tmp_path / "watchlist.yaml"
    watchlist.write_text(plain.read_text() + TEAM)
    env = env_for(url, hub.url, watchlist, tmp_path / "state")
    env["TRACKER_WEBHOOK_ALLOW_NETWORKS"] = "127.0.0.0/8"
    made = subprocess.run(
        [sys.executable, "-c", OLD_RELEASE, REPO], env=env, capture_output=True, text=True,
        timeout=600, check=False,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr[-3000:]
    old = json.loads(made.stdout)
    shas, reason = old["shas"], old["reason"]
    polled = tracker_run(env, "poll", "--once", "--json")
    assert polled.returncode == 0, polled.stderr[-3000:]
    before = by_natural_key(snapshot(url))
    want = by_natural_key(reference)
    # what the old release published differs from a clean run's
    assert before["advisories"] != want["advisories"]
    assert before["diffs"] != want["diffs"]

    verify = tracker_run(env, "verify")
    assert verify.returncode == 1
    assert [line.split(": suspect", 1)[0] for line in verify.stdout.splitlines()] == [
        f"{REPO}@{sha[:12]}:config.json" for sha in shas
    ]

    # the Hub unreachable: nothing can be read again, nothing changes, exit 1
    down = tracker_run(env_for(url, "http://127.0.0.1:9", watchlist, tmp_path / "state"), "repair")
    assert down.returncode == 1, down.stderr[-2000:]
    assert down.stdout == ""
    [line] = down.stderr.strip().splitlines()[-1:]
    assert line.startswith(f"{REPO}: not repaired: read again, "), down.stderr
    assert by_natural_key(snapshot(url)) == before

    subscribed = tracker_run(env, "subscribe", "add", "http://127.0.0.1:9/hook")
    assert subscribed.returncode == 0, subscribed.stderr
    teamed = tracker_run(env, "subscribe", "add", "http://127.0.0.1:9/team", "--team", "followers")
    assert teamed.returncode == 0, teamed.stderr
    fixed = tracker_run(env, "repair", "--json")
    assert fixed.returncode == 0, fixed.stderr[-3000:]
    report = json.loads(fixed.stdout)
    [repo] = report["repos"]
    assert (report["ok"], repo["repo"], repo["error"]) == (True, REPO, None)
    assert repo["read_again"] == [f"{REPO}@{sha[:12]}:config.json" for sha in sorted(shas)]
    after = by_natural_key(snapshot(url))

    # every advisory the false row produced is withdrawn, with the reason
    names = {r[1]: f"{r[0]}@{r[2]}:{r[3]}" for r in snapshot(url)["advisories"]}
    live_before = {f"{r[0]}@{r[2]}:{r[3]}" for r in before["advisories"] if r[5] != "withdrawn"}
    live_want = {f"{r[0]}@{r[2]}:{r[3]}" for r in want["advisories"]}
    false = live_before - live_want
    assert false, "the false row published nothing of its own"
    assert {names[w["id"]] for w in repo["withdrawn"]} == false
    expected_reason = (
        "published from a fault of the transport, not from the file's content: config.json at "
        f"{shas[0][:12]} (an answer over the cap for a file its tree says is "
    )
    for w in repo["withdrawn"]:
        assert w["reason"].startswith(expected_reason), w
        assert w["reason"].endswith(
            "`tracker repair` read the file again and its analysis does not publish this"
        )
    withdrawn = {f"{r[0]}@{r[2]}:{r[3]}": r for r in after["advisories"] if r[5] == "withdrawn"}
    assert set(withdrawn) == false
    for row in withdrawn.values():
        assert row[6]["database_specific"]["withdrawn_reason"].startswith(expected_reason)
    # the real ones are published: the live advisories are a clean run's, and so is the rest
    assert {names[i] for i in repo["published"]} == live_want - live_before
    # and those of the same revision and group the false row altered are rewritten, ids kept
    old = {f"{r[0]}@{r[2]}:{r[3]}": r for r in before["advisories"]}
    altered = {
        f"{r[0]}@{r[2]}:{r[3]}"
        for r in want["advisories"]
        if f"{r[0]}@{r[2]}:{r[3]}" in old and old[f"{r[0]}@{r[2]}:{r[3]}"][4:] != r[4:]
    }
    assert altered, "the false row altered no advisory"
    assert {names[i] for i in repo["updated"]} == altered
    # each rewritten record says why it changed
    rewrite_reason = (
        "rewritten by `tracker repair`: the record was published from a fault of the transport, "
        f"not from the file's content: config.json at {shas[0][:12]} (an answer over the cap for "
        "a file its tree says is "
    )
    rewritten = {r[1]: r for r in snapshot(url)["advisories"] if r[1] in repo["updated"]}
    for row in rewritten.values():
        said = row[6]["database_specific"]["repaired_reason"]
        assert said.startswith(rewrite_reason), said
        assert said.endswith("; this is the record the analysis of the file read again publishes")
    assert all(
        "repaired_reason" not in (r[6].get("database_specific") or {})
        for r in snapshot(url)["advisories"]
        if r[1] not in repo["updated"]
    )
    got = _live(after)
    differs = [k for k in _live(want) if got.get(k) != _live(want)[k]]
    assert differs == [], differs
    assert reason not in json.dumps(after["files"])

    # subscribers are told: each withdrawn advisory in its revision's advisory.withdrawn
    # delivery with the reason, each published or rewritten one (the record now) in its
    # revision's revision.advisories delivery; the team-filtered subscription through the same
    # paths, of what affects the team, each with its verdict
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        queued = conn.execute(
            sa.text(
                "SELECT s.url, d.event, d.sha, d.body FROM webhook_deliveries d "
                "JOIN subscriptions s ON s.id = d.subscription_id"
            )
        ).all()
    engine.dispose()
    told: dict[tuple[str, str], set[str]] = {}
    rows = snapshot(url)["advisories"]
    records: dict[str, dict[str, Any]] = {r[1]: r[6] for r in rows}
    introduced = {r[1]: r[2] for r in rows}
    versions: dict[str, list[str]] = {}
    for adv_id, sha, _ in sorted(snapshot(url)["versions"], key=lambda v: v[2]):
        versions.setdefault(adv_id, []).append(sha)
    for hook, event, sha, body in queued:
        data = json.loads(body)["data"]
        ids = {a["id"] for a in data["advisories"]}
        told.setdefault((hook.rsplit("/", 1)[1], event), set()).update(ids)
        assert {introduced[i] for i in ids} == {sha}, (event, sha, ids)
        for a in data["advisories"]:  # the record as it is now (its versions list kept apart)
            sent = json.loads(_TIME.sub("<time>", json.dumps(a)))
            [affected] = sent["affected"]
            assert affected["versions"] == versions[a["id"]], a["id"]
            affected["versions"] = []
            assert sent == records[a["id"]], a["id"]
        if event == "advisory.withdrawn":
            assert data["reason"].startswith(expected_reason), data["reason"]
        if hook.endswith("/team"):
            verdicts = data["team"]["verdicts"]
            assert [v["advisory"] for v in verdicts] == [a["id"] for a in data["advisories"]]
            assert all(v["impact"] and v["reason"] for v in verdicts), verdicts
    live_changed = set(repo["published"]) | set(repo["updated"])
    assert set(told) <= {
        (h, e) for h in ("hook", "team") for e in ("advisory.withdrawn", "revision.advisories")
    }, set(told)
    assert told[("hook", "advisory.withdrawn")] == {w["id"] for w in repo["withdrawn"]}
    assert told[("hook", "revision.advisories")] == live_changed
    # before: the team subscription got nothing of the repair
    assert told.get(("team", "advisory.withdrawn")), told
    assert told.get(("team", "revision.advisories")), told
    assert told[("team", "advisory.withdrawn")] <= told[("hook", "advisory.withdrawn")]
    assert told[("team", "revision.advisories")] <= told[("hook", "revision.advisories")]

    again = tracker_run(env, "verify")
    assert (again.returncode, again.stdout.strip().endswith(": all match")) == (0, True), again
    second = tracker_run(env, "repair")
    assert (second.returncode, second.stdout.strip()) == (
        0, "nothing to repair: no recorded 'could not read' is suspect",
    )  # fmt: skip
