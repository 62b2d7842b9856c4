"""The compare page (issue 27: "no page compares two chosen revisions"):
`/repos/ORG/NAME/compare?from=&to=` renders the same diff as `GET /v1/repos/ORG/NAME/diff`, read
in Chromium against the demo's store; the repo page's form chooses the two revisions without
JavaScript; a bad or unknown revision is a page for a browser and a problem document for an API
client. (axe, the Nu checker and the phone layout: tests/web/test_pages_browser.py.)"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from pagekit import visit
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from tracker.shared.domain import RepoId

pytestmark = pytest.mark.slow

LLAMA = RepoId("meta-llama/Llama-2-7b-hf")
GRANITE = RepoId("ibm-granite/granite-3.1-1b-a400m-instruct")

_PAGE_CHANGES = """
return [...document.querySelectorAll('#h-compare ~ .group')].map(g =>
  [...g.querySelectorAll('ul.changes > li[data-kind]')].map(li => [
    g.dataset.artifact, li.dataset.kind, li.dataset.key,
    li.querySelector('code.path') ? li.querySelector('code.path').textContent : '',
    li.firstChild.nextSibling.textContent.trim()]))
  .flat();
"""


def _summary(c: dict[str, Any]) -> str:
    return str(c["summary"]).strip()


def _api_changes(client: httpx.Client, repo: str, a: str, b: str) -> list[list[str]]:
    r = client.get(f"/v1/repos/{repo}/diff", params={"from": a, "to": b})
    assert r.status_code == 200, r.text
    return [
        [c["artifact"], c["kind"], c["key"], c["file"], _summary(c)] for c in r.json()["changes"]
    ]


def _page_changes(browser: Any) -> list[list[str]]:
    """(artifact, kind, key, file, summary) of every change the page lists, in page order."""
    rows = browser.execute_script(_PAGE_CHANGES)
    return [[str(x) for x in row] for row in rows]


def _by_artifact(rows: list[list[str]]) -> dict[str, list[list[str]]]:
    out: dict[str, list[list[str]]] = {}
    for row in rows:
        out.setdefault(row[0], []).append(row)
    return out


def test_the_compare_page_shows_the_api_diff(browser: Any, served_demo: Any) -> None:
    """Every pair of ends a reader can name (full and short shas, HEAD~n, the same revision):
    the page lists exactly the API's changes, in the API's order within each artifact, and
    names both ends."""
    app = served_demo.app
    with httpx.Client(base_url=served_demo.url, timeout=60) as client:
        checked = 0
        for repo in (LLAMA, GRANITE):
            revs = [r.sha for r in app.store.revisions(repo)]
            pairs = [
                (revs[0], revs[-1]),  # full shas, the whole history
                (revs[-2][:7], revs[-1][:7]),  # short shas, the last step
                ("HEAD~2", "HEAD"),
                (revs[-1], revs[0]),  # backwards
                (revs[1], revs[1]),  # the same revision: no change
            ]
            for a, b in pairs:
                want = _api_changes(client, repo, a, b)
                url = f"{served_demo.url}/repos/{repo}/compare?from={a}&to={b}"
                assert visit(browser, url, f"compare-{repo.split('/')[1]}-{checked}") == []
                got = _page_changes(browser)
                assert _by_artifact(got) == _by_artifact(want), (repo, a, b)
                count = browser.find_element(By.ID, "h-compare").text
                assert count == f"{len(want)} change{'s' if len(want) != 1 else ''}"
                ends = [
                    e.text.split(" · ")[0]
                    for e in browser.find_elements(By.CSS_SELECTOR, "#compare-ends dd")
                ]
                assert ends == [app.store.resolve(repo, a), app.store.resolve(repo, b)]
                if not want:
                    assert browser.find_element(By.ID, "no-change").text
                checked += 1
        assert checked == 10
        # the page links the JSON it shows
        visit(browser, f"{served_demo.url}/repos/{LLAMA}/compare?from=HEAD~1&to=HEAD")
        link = browser.find_element(By.CSS_SELECTOR, 'a[type="application/json"]')
        r = client.get(str(link.get_attribute("href")))
        assert r.status_code == 200 and r.json()["count"] == len(_page_changes(browser))


def test_the_repo_page_form_chooses_two_revisions(browser: Any, served_demo: Any) -> None:
    app = served_demo.app
    revs = app.store.revisions(LLAMA)
    visit(browser, f"{served_demo.url}/repos/{LLAMA}")
    form = browser.find_element(By.ID, "compare-form")
    start, end = (
        Select(form.find_element(By.NAME, "from")),
        Select(form.find_element(By.NAME, "to")),
    )
    # offered: every revision read, newest first; chosen: the head and the revision before it
    assert [o.get_attribute("value") for o in end.options] == [r.sha for r in reversed(revs)]
    assert (start.first_selected_option.get_attribute("value"), end.first_selected_option.get_attribute("value")) == (revs[-2].sha, revs[-1].sha)  # fmt: skip
    start.select_by_value(revs[0].sha)
    end.select_by_value(revs[2].sha)
    browser.execute_script("document.getElementById('compare-form').submit()")
    assert browser.current_url == (
        f"{served_demo.url}/repos/{LLAMA}/compare?from={revs[0].sha}&to={revs[2].sha}"
    )
    with httpx.Client(base_url=served_demo.url, timeout=60) as client:
        want = _api_changes(client, LLAMA, revs[0].sha, revs[2].sha)
    assert want and _by_artifact(_page_changes(browser)) == _by_artifact(want)
    # the compare page keeps the choice in its own form
    form = browser.find_element(By.ID, "compare-form")
    chosen = [
        Select(form.find_element(By.NAME, n)).first_selected_option.get_attribute("value")
        for n in ("from", "to")
    ]
    assert chosen == [revs[0].sha, revs[2].sha]
    # an older revision's page offers that revision and the one before it
    visit(browser, f"{served_demo.url}/repos/{LLAMA}?rev={revs[3].sha}")
    form = browser.find_element(By.ID, "compare-form")
    chosen = [
        Select(form.find_element(By.NAME, n)).first_selected_option.get_attribute("value")
        for n in ("from", "to")
    ]
    assert chosen == [revs[2].sha, revs[3].sha]


BAD = {
    # (query, status, problem type, words of the message)
    "unknown sha": ("from=deadbeef&to=HEAD", 404, "urn:tracker:problem:not-found",
                    "no stored revision matches 'deadbeef'"),
    "unknown full sha": (f"from={'0' * 40}&to=HEAD", 404, "urn:tracker:problem:not-found",
                         "0" * 40),
    "too far back": ("from=HEAD~999&to=HEAD", 404, "urn:tracker:problem:not-found",
                     "goes 999 back"),
    "malformed": ("from=..%2Fetc&to=HEAD", 400, "urn:tracker:problem:invalid-request",
                  "..%2Fetc"),
    "missing to": ("from=HEAD", 400, "urn:tracker:problem:invalid-request", "to is missing"),
    "empty from": ("from=&to=HEAD", 400, "urn:tracker:problem:invalid-request",
                   "from is missing"),
}  # fmt: skip


def test_bad_or_unknown_revisions_are_a_page_for_a_browser_and_a_problem_for_a_client(
    browser: Any, served_demo: Any
) -> None:
    base = f"{served_demo.url}/repos/{LLAMA}/compare?"
    with httpx.Client(timeout=60) as client:
        for what, (query, status, kind, words) in BAD.items():
            api = client.get(base + query, headers={"Accept": "application/json"})
            assert api.status_code == status, what
            assert api.headers["content-type"] == "application/problem+json", what
            doc = api.json()
            assert (doc["status"], doc["type"]) == (status, kind), what
            assert words.replace("%2F", "/") in doc["detail"], (what, doc)
            errors = visit(browser, base + query)
            assert len(errors) == 1 and str(status) in errors[0], (what, errors)
            title = browser.find_element(By.TAG_NAME, "h1").text
            assert title == ("Not found" if status == 404 else "Bad comparison"), what
            message = browser.find_element(By.ID, "error-message").text
            assert words.replace("%2F", "/") in message, (what, message)
        unknown_repo = client.get(
            f"{served_demo.url}/repos/acme/none/compare?from=HEAD~1&to=HEAD",
            headers={"Accept": "text/html"},
        )
        assert unknown_repo.status_code == 404
        assert unknown_repo.headers["content-type"] == "text/html; charset=utf-8"
        assert "acme/none has not been ingested" in unknown_repo.text
