"""The pages without a browser: advisory Markdown rendered safely, status codes and headers, and
`tracker demo --serve` (the installed executable) printing the home page's URL and serving it."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from tracker.advisories.lifecycle import state_of
from tracker.api import create_app
from tracker.web.markdown import render_markdown

GRANITE = "ibm-granite/granite-3.1-1b-a400m-instruct"


def test_markdown_escapes_html_and_drops_script_urls() -> None:
    html = str(
        render_markdown(
            "**bold** <script>alert(1)</script> <img src=x onerror=alert(1)>\n\n"
            "[a](javascript:alert(1)) [b](JAVASCRIPT:alert(1)) [c](vbscript:x) [d](data:text/html,x)"
            " [ok](https://huggingface.co/acme/x)\n\n"
            "| k | v |\n|---|---|\n| <b>x</b> | `y` |\n\n"
            "```diff\n-old <script>\n+new\n ctx\n```\n"
        )
    )
    assert "<strong>bold</strong>" in html
    assert "<script>" not in html and "<img" not in html and "<b>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    hrefs = re.findall(r'href="([^"]*)"', html)
    assert hrefs == ["https://huggingface.co/acme/x"]
    assert "<td>&lt;b&gt;x&lt;/b&gt;</td>" in html
    assert (
        '<pre tabindex="0" class="diff"><span class="dl del">-old &lt;script&gt;</span>\n'
        '<span class="dl add">+new</span>\n<span class="dl ctx"> ctx</span>\n</pre>'
    ) in html


def test_pages_answer_404_and_503_with_a_page(demo_run: Any) -> None:
    client = TestClient(create_app(demo_run.app))
    home = client.get("/")
    assert home.status_code == 200
    assert home.headers["content-security-policy"].startswith("default-src 'none';")
    assert client.get("/static/style.css").headers["content-type"] == "text/css; charset=utf-8"
    for path, words in (
        ("/repos/acme/none", "acme/none has not been ingested"),
        (f"/repos/{GRANITE}?rev=deadbeef", "no stored revision matches 'deadbeef'"),
        ("/advisories/x_TRACKER-2026-999999", "no advisory 'x_TRACKER-2026-999999'"),
    ):
        r = client.get(path)
        assert r.status_code == 404, path
        assert words in r.text.replace("&#39;", "'"), path
    # a revision by short sha and by HEAD~n resolves to the same page
    revs = demo_run.app.store.revisions(GRANITE)
    short = client.get(f"/repos/{GRANITE}?rev={revs[0].sha[:8]}").text
    back = client.get(f"/repos/{GRANITE}?rev=HEAD~2").text
    assert f'<option value="{revs[0].sha}" selected>' in short
    assert f'<option value="{revs[0].sha}" selected>' in back


def test_demo_serve_prints_the_home_page_url_and_serves_it(demo_run: Any, tmp_path: Path) -> None:
    """`tracker demo --serve --port 0`: the demo's cycle (one repo, over the demo Hub the session
    already built), then the URL of the home page, which answers until Ctrl-C (exit 0)."""
    state = tmp_path / "state"
    state.mkdir()
    (state / "demo-hub").symlink_to(demo_run.root / "hub")  # the same build: not rebuilt
    watchlist = tmp_path / "watchlist.yaml"
    watchlist.write_text(f"repos:\n  - id: {GRANITE}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACKER_", "HF_"))}
    env |= {"TRACKER_STATE_DIR": str(state), "TRACKER_WATCHLIST": str(watchlist)}
    tracker = Path(sys.executable).with_name("tracker")
    proc = subprocess.Popen(
        [str(tracker), "demo", "--serve", "--port", "0"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert proc.stdout is not None
        lines: list[str] = []
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if "serving the results" in line:
                break
        match = re.fullmatch(
            r"serving the results: open (http://127\.0\.0\.1:\d+/) in a browser \(Ctrl-C stops\)\n",
            lines[-1],
        )
        assert match, "".join(lines)
        assert any("ingested 3 revisions" in x for x in lines)
        home = httpx.get(match.group(1), timeout=30)
        assert home.status_code == 200
        assert f'<tr data-repo="{GRANITE}" data-state="ok">' in home.text
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def test_a_repo_page_keeps_its_etag_and_answers_head(demo_run: Any) -> None:
    """Equal data, equal bytes: the charts' SVG ids are fixed per chart (pygal's are random), so
    a repo page's ETag holds and a conditional GET is a 304; HEAD answers as GET without a body."""
    client = TestClient(create_app(demo_run.app))
    first = client.get(f"/repos/{GRANITE}")
    second = client.get(f"/repos/{GRANITE}")
    assert first.status_code == second.status_code == 200
    assert first.content == second.content
    assert 'id="svg-params"' in first.text
    assert re.search(r'id="chart-[0-9a-f]{8}-', first.text) is None  # no uuid left
    etag = first.headers["etag"]
    again = client.get(f"/repos/{GRANITE}", headers={"If-None-Match": etag})
    assert (again.status_code, again.content) == (304, b"")
    for path in (f"/repos/{GRANITE}", "/v1/feeds/advisories.atom", "/v1/advisories", "/"):
        get, head = client.get(path), client.head(path)
        assert (head.status_code, head.content) == (200, b""), path
        assert head.headers["etag"] == get.headers["etag"], path
        assert head.headers["content-length"] == get.headers["content-length"], path
        assert head.headers["content-encoding"] == get.headers["content-encoding"] == "gzip"
    assert client.head("/v1/vulns/x_TRACKER-2026-999999").status_code == 404


def test_the_page_names_which_active_count_the_headline_is(demo_run: Any) -> None:
    """The parameters table gives active per token with the embedding (the headline, as
    `params.active`) and without it, the values of the estimate the API serves."""
    client = TestClient(create_app(demo_run.app))
    est = client.get(f"/v1/repos/{GRANITE}/revisions/HEAD/estimate").json()
    page = client.get(f"/repos/{GRANITE}").text
    p = est["params"]
    assert p["active_headline"] == "with_embedding"
    assert p["active_without_embedding"] == p["active"] - p["embedding"] > 0
    for row, label, value in (
        ("params-active", "active per token (with the embedding)", p["active"]),
        (
            "params-active-without-embedding",
            "active per token, without the embedding",
            p["active_without_embedding"],
        ),
    ):
        m = re.search(
            rf'<tr id="{row}"><th scope="row">([^<]*)</th><td class="num" '
            r'data-value="(\d+)">',
            page,
        )
        assert m is not None and (m.group(1), int(m.group(2))) == (label, value), row


def test_paths_a_browser_meets_answer_pages(demo_run: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """`/advisories` is an index with the API's filters, a page at a time; `/repos` and
    `/repos/` lead home; `/repos/ORG` lists that organisation's repos; any unknown path asked
    for by a browser is a 404 page, while an API client still gets the problem document."""
    from tracker.web import index

    monkeypatch.setattr(index, "PAGE_SIZE", 20)  # the demo's advisories over three pages
    app = demo_run.app
    client = TestClient(create_app(app))
    every = app.advisories.list_advisories()
    html = {"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}

    def listed(text: str) -> list[str]:
        return re.findall(r'<li data-advisory="([^"]+)">', text)

    first = client.get("/advisories", headers=html)
    assert (first.status_code, first.headers["content-type"]) == (200, "text/html; charset=utf-8")
    # the same advisories in the same order as the API's newest-first list
    api_page = client.get("/v1/advisories?order=newest&limit=500").json()["items"]
    expected = [i["id"] for i in api_page]
    assert sorted(expected) == sorted(a.id for a in every)
    pages = [listed(first.text)]
    text = first.text
    while (older := re.search(r'<a href="\?([^"]+)" rel="next"', text)) is not None:
        text = client.get("/advisories?" + older.group(1).replace("&amp;", "&")).text
        pages.append(listed(text))
    assert len(pages) == -(-len(every) // 20) >= 3
    assert [i for p in pages for i in p] == expected

    llama = "meta-llama/Llama-2-7b-hf"
    want = sorted(
        a.id for a in every
        if a.repo_id == llama and a.severity.value == "high"
        and state_of(a.record).value == "open"
    )  # fmt: skip
    got = client.get(f"/advisories?repo={llama}&state=open&severity=HIGH").text
    assert sorted(listed(got)) == want and want
    # the repo page's open-advisory badges link to exactly that list
    assert f'href="/advisories?repo={llama}&amp;state=open&amp;severity=high"' in (
        client.get(f"/repos/{llama}").text
    )
    bad = client.get("/advisories?severity=dire")
    assert bad.status_code == 400 and "must be one of critical, high, moderate, low" in bad.text

    for path in ("/repos", "/repos/"):
        r = client.get(path, follow_redirects=False)
        assert (r.status_code, r.headers["location"]) == (308, "/")
    org = client.get("/repos/meta-llama")
    assert org.status_code == 200 and f'data-repo="{llama}"' in org.text
    assert 'data-repo="mistralai/' not in org.text
    assert client.get("/repos/nobody").status_code == 404

    page = client.get("/no/such/page", headers=html)
    assert (page.status_code, page.headers["content-type"]) == (404, "text/html; charset=utf-8")
    assert "There is no page at /no/such/page." in page.text
    api = client.get("/no/such/page")
    assert (api.status_code, api.headers["content-type"]) == (404, "application/problem+json")
    assert client.get("/v1/nothing", headers=html).headers["content-type"] == (
        "application/problem+json"
    )
