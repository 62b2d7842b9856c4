"""The team page and the upgrade-report page (issue 29, items 1, 2, 3 and 5's page door), over the
demo's store and its three teams (watchlist.yaml's `teams:`): every advisory id, verdict, reason
and missing profile field on `/teams/NAME` is the installed `tracker team affected NAME --json`'s,
every report page's pin, HEAD, verdict and advisory ids are `tracker team report NAME REPO
--json`'s; an unknown team or a repo the team does not use is the 404 page; the pages pass axe,
the Nu checker, and the phone layout checks at 390×844."""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
from pagekit import (
    ARTIFACTS,
    axe_serious,
    phone_layout,
    phone_overflow,
    visit,
    vnu_errors,
    vnu_start,
)

ROOT = Path(__file__).resolve().parents[2]
TEAMS = ("support-bot", "research", "eval")


def _cli(demo_run: Any, *args: str) -> Any:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACKER_", "HF_"))}
    env.update(
        TRACKER_STATE_DIR=str(demo_run.root / "state"),
        TRACKER_WATCHLIST=str(ROOT / "watchlist.yaml"),
    )
    done = subprocess.run(
        [str(Path(sys.executable).with_name("tracker")), "team", *args, "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done.returncode, json.loads(done.stdout) if done.returncode == 0 else done.stderr


def _states(demo_run: Any) -> dict[str, str]:
    """Every advisory's state, from the installed `tracker advisories list --json`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACKER_", "HF_"))}
    env.update(
        TRACKER_STATE_DIR=str(demo_run.root / "state"),
        TRACKER_WATCHLIST=str(ROOT / "watchlist.yaml"),
    )
    done = subprocess.run(
        [str(Path(sys.executable).with_name("tracker")), "advisories", "list", "--json"],
        env=env, capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    return {a["id"]: a["state"] for a in json.loads(done.stdout)}


def _items(page: str) -> list[tuple[str, str, str]]:
    """(advisory id, impact, the item's text) of every verdict on a page, in order."""
    found = re.findall(r'<li data-advisory="([^"]+)" data-impact="([^"]+)">(.*?)</li>', page, re.S)
    return [(html.unescape(a), html.unescape(i), html.unescape(t)) for a, i, t in found]


def test_team_and_report_pages_say_what_the_cli_says(demo_run: Any, served_demo: Any) -> None:
    reports = 0
    with httpx.Client(base_url=served_demo.url, timeout=60) as client:
        for team in TEAMS:
            rc, rows = _cli(demo_run, "affected", team)
            assert rc == 0, rows
            page = client.get(f"/teams/{team}")
            assert page.status_code == 200, team
            items = _items(page.text)
            assert [(a, i) for a, i, _ in items] == sorted(
                ((r["advisory"], r["impact"]) for r in rows),
                key=lambda ai: (
                    ("affected", "affects your next upgrade", "unknown", "not affected").index(
                        ai[1]
                    ),
                    [r["advisory"] for r in rows].index(ai[0]),
                ),
            ), team
            by_id = {r["advisory"]: r for r in rows}
            for advisory, _, text in items:
                r = by_id[advisory]
                assert f'href="/advisories/{advisory}"' in page.text
                assert r["reason"] in text, (team, advisory)
                lacks = f"The profile does not say: {', '.join(r['missing'])}."
                assert (lacks in text) == bool(r["missing"]), (team, advisory)
            counts = html.unescape(re.search(r'<p id="counts">(.*?)</p>', page.text, re.S)[1])
            for impact in ("affected", "affects your next upgrade", "unknown", "not affected"):
                n = sum(r["impact"] == impact for r in rows)
                assert f'<span data-impact="{impact}">{n} {impact}</span>' in counts, team
            for feed in ("feed.atom", "feed.json"):
                assert f'href="/v1/teams/{team}/{feed}"' in page.text
            for repo in re.findall(r'<li data-repo="([^"]+)">', page.text):
                rc, report = _cli(demo_run, "report", team, repo)
                got = client.get(f"/teams/{team}/report/{repo}")
                if rc != 0:  # no place in the history: the 404 page says the CLI's reason
                    assert got.status_code == 404, (team, repo)
                    said = html.unescape(got.text)
                    assert report.strip().removeprefix("error: ") in said, (report, said)
                    continue
                assert got.status_code == 200, (team, repo, got.text[:300])
                text = html.unescape(got.text)
                assert f'<span class="sha" id="pinned">{report["pinned"]}</span>' in text
                assert f'<span class="sha" id="head">{report["head"]}</span>' in text
                assert f'<strong id="verdict">{report["verdict"]}</strong>' in text
                for why in report["why"]:
                    assert f"<li>{why}</li>" in text, (team, repo, why)
                shown = [(a, i) for a, i, _ in _items(got.text)]
                listed = [
                    (x["id"], x["impact"])
                    for key in ("applies", "unknown", "fixed_by_upgrade", "stays")
                    for x in report[key]
                ]
                assert shown == listed, (team, repo)
                reports += 1
        assert reports >= 3
        home = client.get("/").text
        links = re.search(r'<ul id="team-links">(.*?)</ul>', home, re.S)
        assert links is not None
        assert re.findall(r'<a href="/teams/([^"]+)">', links[1]) == list(TEAMS)
        assert '<a href="/teams" id="all-teams">' in home
        # x-22 (granite's weights, 223 changed keys) names five and counts the rest
        research = client.get("/teams/research").text
        [x22] = [t for a, _, t in _items(research) if a == "x_TRACKER-2026-22"]
        assert "`model.embed_tokens.weight` and 218 more tensors changed" in x22
        assert len(x22) < 700, len(x22)
        # the teams index: each team's repos and its counts of the open advisories that affect
        # it (today, at its next upgrade) or are unknown for it, as the CLI judges them
        index = client.get("/teams")
        assert index.status_code == 200
        found = re.findall(r'<tr data-team="([^"]+)">(.*?)</tr>', index.text, re.S)
        assert [name for name, _ in found] == list(TEAMS)
        states = _states(demo_run)
        for name, row in found:
            _, rows = _cli(demo_run, "affected", name)
            _, profile = _cli(demo_run, "show", name)
            assert f'<a href="/teams/{name}">{name}</a>' in row
            repos = re.findall(r'<li><a href="/repos/([^"]+)">', row)
            assert repos == [r["repo"] for r in profile["repos"]], name
            counts = dict(re.findall(r'<td class="num" data-impact="([^"]+)">(\d+)</td>', row))
            assert counts == {
                i: str(sum(r["impact"] == i and states[r["advisory"]] == "open" for r in rows))
                for i in ("affected", "affects your next upgrade", "unknown")
            }, name
        assert dict(re.findall(
            r'<tr data-team="([^"]+)">.*?data-impact="affected">(\d+)<', index.text, re.S
        )) == {"support-bot": "1", "research": "6", "eval": "2"}  # fmt: skip
        gone = client.get("/teams/nobody", headers={"Accept": "text/html"})
        assert gone.status_code == 404
        assert "text/html" in gone.headers["content-type"]
        assert "nobody" in html.unescape(gone.text) and "<h1>Not found</h1>" in gone.text
        unused = client.get("/teams/eval/report/THUDM/chatglm2-6b")
        assert unused.status_code == 404 and "text/html" in unused.headers["content-type"]


def test_team_pages_pass_axe_the_html_checker_and_a_phone(browser: Any, served_demo: Any) -> None:
    pages = {"home": "/", "teams": "/teams", **{f"team-{t}": f"/teams/{t}" for t in TEAMS}}
    pages["report-support-bot-llama"] = "/teams/support-bot/report/meta-llama/Llama-2-7b-hf"
    pages["report-research-chatglm2"] = "/teams/research/report/THUDM/chatglm2-6b"
    texts = {}
    with httpx.Client(base_url=served_demo.url, timeout=60) as client:
        for name, path in pages.items():
            r = client.get(path)
            assert r.status_code == 200, (name, r.text[:300])
            texts[name] = r.text
    checker = vnu_start(texts, ARTIFACTS / "html")
    try:
        for name, path in pages.items():
            assert visit(browser, served_demo.url + path, shot=name) == [], name
            assert axe_serious(browser) == [], name
            assert phone_overflow(browser) == 0, name
            assert phone_layout(browser) == [], name
        assert vnu_errors(checker) == []
    finally:
        if checker.poll() is None:
            checker.kill()
            checker.communicate()
