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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from bench.netfaults import by_natural_key, env_for, setting, tracker_run
from bench.storefaults import snapshot
from tracker.replica import Replica

pytestmark = pytest.mark.replica

REPO = "ibm-granite/granite-3.1-1b-a400m-instruct"
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
    """`snap` (by natural key) with withdrawn advisories and their versions left out, and the
    id counter (the repaired store has used more numbers) dropped."""
    out = dict(snap)
    gone = {f"{r[0]}@{r[2]}:{r[3]}" for r in snap["advisories"] if r[5] == "withdrawn"}
    out["advisories"] = [r for r in snap["advisories"] if r[5] != "withdrawn"]
    out["versions"] = [r for r in snap["versions"] if r[0] not in gone]
    out.pop("counters")
    return out


def test_repair_withdraws_what_a_lying_length_published_and_publishes_the_real_ones(
    world: Setting, tmp_path: Path
) -> None:
    _, hub, watchlist, reference = world
    url = f"sqlite:///{tmp_path / 'old' / 'tracker.db'}"
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
    got = _live(after)
    differs = [k for k in _live(want) if got.get(k) != _live(want)[k]]
    assert differs == [], differs
    assert reason not in json.dumps(after["files"])

    # subscribers are told: each withdrawn advisory in its revision's advisory.withdrawn
    # delivery, each published one in its revision's revision.advisories delivery
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        queued = conn.execute(sa.text("SELECT event, sha, body FROM webhook_deliveries")).all()
    engine.dispose()
    told: dict[str, set[str]] = {}
    for event, _, body in queued:
        ids = set(re.findall(r"x_TRACKER-\d{4}-\d+", body))
        told.setdefault(event, set()).update(ids)
    assert told.get("advisory.withdrawn", set()) >= {w["id"] for w in repo["withdrawn"]}
    assert set(told) <= {"advisory.withdrawn", "revision.advisories"}, told
    assert told.get("revision.advisories", set()) == set(repo["published"])

    again = tracker_run(env, "verify")
    assert (again.returncode, again.stdout.strip().endswith(": all match")) == (0, True), again
    second = tracker_run(env, "repair")
    assert (second.returncode, second.stdout.strip()) == (
        0, "nothing to repair: no recorded 'could not read' is suspect",
    )  # fmt: skip
