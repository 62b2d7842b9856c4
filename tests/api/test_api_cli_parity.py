"""Must-show (issue 8): the diff-store API answers exactly what the installed `tracker diff --json`,
`tracker history --json` and `tracker estimate ORG/NAME@REV --json` print, for the same demo
revisions (the session's demo store, polled from the bundled demo Hub)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tracker.api import create_app

TRACKER = Path(sys.executable).with_name("tracker")
GRANITE = "ibm-granite/granite-3.1-1b-a400m-instruct"


def _cli(demo_run: Any, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACKER_", "HF_"))}
    env["TRACKER_STATE_DIR"] = str(demo_run.root / "state")
    env["TRACKER_WATCHLIST"] = str(demo_run.app.settings.watchlist)
    done = subprocess.run(
        [str(TRACKER), *args], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def client(demo_run: Any) -> Any:
    with TestClient(create_app(demo_run.app)) as c:
        yield c


def test_history_diff_and_estimate_match_the_cli(demo_run: Any, client: Any) -> None:
    """Each answer against the installed CLI's, for full shas, a short sha and HEAD~n (one
    process per CLI answer: six in all, the machine is small)."""
    repo = GRANITE  # chat template, config and generation config changes in its history
    history = client.get(f"/v1/repos/{repo}/history")
    assert history.status_code == 200
    assert history.json() == json.loads(_cli(demo_run, "history", repo, "--json"))
    shas = [r["sha"] for r in history.json()["revisions"]]
    assert len(shas) >= 3
    for a, b, kinds in (
        (shas[0], shas[-1], ()),
        ("HEAD~1", "HEAD", ()),
        (shas[0], shas[-1], ("config",)),
    ):
        params: dict[str, Any] = {"from": a, "to": b}
        if kinds:
            params["kind"] = list(kinds)
        r = client.get(f"/v1/repos/{repo}/diff", params=params)
        assert r.status_code == 200, r.text
        flags = [x for k in kinds for x in ("--kind", k)]
        cli = _cli(demo_run, "diff", repo, a, b, *flags, "--json")
        assert r.content == cli.encode()  # the same bytes, not only the same JSON
        assert json.loads(cli)["count"] > 0
        assert r.headers["cache-control"] == (
            "public, max-age=31536000, immutable" if a != "HEAD~1" else "public, no-cache"
        )
    for rev in (shas[0], shas[-1][:10]):
        r = client.get(f"/v1/repos/{repo}/revisions/{rev}/estimate")
        assert r.status_code == 200, r.text
        assert r.json() == json.loads(_cli(demo_run, "estimate", f"{repo}@{rev}", "--json"))


def test_the_estimate_history_carries_the_stored_estimates_and_their_deltas(
    demo_run: Any, client: Any
) -> None:
    from tracker.estimate.delta import estimate_delta

    moved: dict[str, int] = {}
    for st in demo_run.app.store.repo_states():
        repo = st.repo_id
        items = client.get(f"/v1/repos/{repo}/estimates").json()["items"]
        live = [r for r in demo_run.app.store.revisions(repo) if not r.rewritten_away]
        assert [i["sha"] for i in items] == [r.sha for r in live]
        previous = None
        for item, rev in zip(items, live, strict=True):
            stored = demo_run.app.analysis.estimate(repo, rev.sha)
            est = stored.estimate if stored is not None else None
            assert item["estimate"] == (est.to_json() if est is not None else None)
            if est is None:
                assert (item["compared_to"], item["delta"]) == (None, [])
                continue
            if previous is None:
                assert (item["compared_to"], item["delta"]) == (None, [])
            else:
                expected = [c.to_json() for c in estimate_delta(previous[1], est)]
                assert (item["compared_to"], item["delta"]) == (previous[0], expected)
            previous = (rev.sha, est)
        moved[repo] = sum(1 for i in items if i["delta"])
    assert sum(moved.values()) > 0, moved  # the demo's histories do move estimates
    # the stored estimate is the one the estimate route computes now (same inputs, settings)
    repo = max(moved, key=lambda r: moved[r])
    head = client.get(f"/v1/repos/{repo}/revisions/HEAD/estimate").json()
    head.pop("source")
    assert client.get(f"/v1/repos/{repo}/estimates").json()["items"][-1]["estimate"] == head


def _api_ids(client: Any, params: list[tuple[str, str]]) -> list[tuple[str, str, str, str, str]]:
    """Every advisory of the list for `params` (repeated keys kept), as (id, repo, severity,
    state, kind), following the cursor."""
    out = []
    cursor = None
    while True:
        query = [*params, ("limit", "7"), *([("cursor", cursor)] if cursor else [])]
        r = client.get("/v1/advisories", params=query)
        assert r.status_code == 200, r.text
        out += [
            (i["id"], i["repo"], i["severity"], i["state"], i["kind"]) for i in r.json()["items"]
        ]
        cursor = r.json()["next"]
        if cursor is None:
            return sorted(out)


def test_advisory_filters_match_tracker_advisories_list(demo_run: Any, client: Any) -> None:
    """`/v1/advisories` and the installed `tracker advisories list --json` keep the same
    advisories for the same filters: any letter case, and a filter given several times
    matches any of its values (one CLI process per case)."""
    everything = _api_ids(client, [])
    cases = [
        [("repo", "meta-llama/Llama-2-7b-hf"), ("repo", "mistralai/Mixtral-8x7B-v0.1"),
         ("severity", "HIGH"), ("severity", "Low")],
        [("severity", "moderate"), ("state", "FIXED"), ("state", "open"),
         ("repo", "meta-llama/Llama-2-7b-hf")],
        [("min_severity", "High"), ("min_severity", "CRITICAL"), ("kind", "Config"),
         ("kind", "custom_code")],
        [("state", "fixed"), ("since", "2020-01-01T00:00:00Z"), ("since", "2999-01-01T00:00:00Z")],
    ]  # fmt: skip
    for params in cases:
        api = _api_ids(client, params)
        assert 0 < len(api) < len(everything), params
        flags = [x for k, v in params for x in (f"--{k.replace('_', '-')}", v)]
        cli = json.loads(_cli(demo_run, "advisories", "list", *flags, "--json"))
        assert sorted((r["id"], r["repo"], r["severity"], r["state"], r["group"]) for r in cli) == (
            api
        ), params


def test_since_reads_the_same_in_the_cli_and_the_api(demo_run: Any, client: Any) -> None:
    """One reading of `since` (`tracker.store.queries.parse_since`): RFC 3339, or an ISO date or
    date-time read as UTC, rounded up to the whole second, so that every advisory listed shows
    a `modified` at or after it; the installed CLI and the API keep the same ones."""
    from datetime import UTC, datetime, timedelta

    from tracker.shared.domain import parse_rfc3339

    everything = client.get("/v1/advisories", params={"limit": 500}).json()["items"]
    shown = sorted({parse_rfc3339(i["modified"]) for i in everything})
    mid = shown[len(shown) // 2]
    half = (mid + timedelta(milliseconds=500)).isoformat().replace("+00:00", "Z")
    naive = mid.replace(tzinfo=None).isoformat()
    day = mid.date().isoformat()
    for since in (half, naive, day, mid.isoformat()):
        api = _api_ids(client, [("since", since)])
        cli = json.loads(_cli(demo_run, "advisories", "list", "--since", since, "--json"))
        assert sorted((r["id"], r["repo"], r["severity"], r["state"], r["group"]) for r in cli) == (
            api
        ), since
        bound = datetime.fromisoformat(since.replace("Z", "+00:00"))
        bound = bound if bound.tzinfo else bound.replace(tzinfo=UTC)
        kept = {i["id"] for i in everything if parse_rfc3339(i["modified"]) >= bound}
        assert {a[0] for a in api} == kept, since
    assert {a[0] for a in _api_ids(client, [("since", half)])} == {
        i["id"] for i in everything if parse_rfc3339(i["modified"]) > mid
    }
