"""The model pages in a real browser: Debian's headless Chromium driven by selenium, against the API
app served on loopback over the demo's store (`make demo`'s poll cycle) and a hostile repo's.

Each page is checked for its content against the stores (the fit table against the revision's
estimate JSON, the timeline against the ingested revisions, the chat-template fix's removed
duplicate system prompt), for console errors, for axe-core's serious and critical violations, for
horizontal scrolling at a phone's width, with JavaScript off, and with the Nu Html Checker.
Screenshots land in test-artifacts/pages/.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from pagekit import (
    ARTIFACTS,
    DESKTOP,
    GONE_REPO,
    HOSTILE_FILE,
    HOSTILE_REPO,
    IMG,
    JS_LINK,
    LONG,
    PHONE,
    SCRIPT,
    axe_serious,
    inert,
    phone_layout,
    phone_overflow,
    visit,
    vnu_errors,
    vnu_start,
)
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

from tracker.advisories.lifecycle import state_of
from tracker.shared.domain import Artifact, RepoId
from tracker.web.views import gb_text

pytestmark = pytest.mark.slow

GRANITE = RepoId("ibm-granite/granite-3.1-1b-a400m-instruct")
DUPLICATE_SYSTEM = (
    "-<|start_of_role|>system<|end_of_role|>You are a helpful assistant.<|end_of_text|>"
)
SETUPS = ("full_finetune", "lora", "serve")


def _text(driver: Any, css: str) -> str:
    return str(driver.find_element(By.CSS_SELECTOR, css).text)


def _texts(driver: Any, css: str) -> list[str]:
    return [str(e.text) for e in driver.find_elements(By.CSS_SELECTOR, css)]


def _attr(driver: Any, css: str, name: str) -> list[str]:
    return [str(e.get_attribute(name)) for e in driver.find_elements(By.CSS_SELECTOR, css)]


def _chat_advisory(app: Any) -> Any:
    (adv,) = [
        a
        for a in app.advisories.list_advisories(repo_id=GRANITE)
        if a.group is Artifact.CHAT_TEMPLATE
    ]
    return adv


def test_home_lists_every_watched_repo_with_its_state_and_open_advisories(
    browser: Any, served_demo: Any
) -> None:
    app = served_demo.app
    errors = visit(browser, served_demo.url + "/", "home")
    assert errors == []
    watched = [r.repo_id for r in app.load_watchlist().repos]
    assert _attr(browser, "#repos tbody tr", "data-repo") == watched
    states = {s.repo_id: s for s in app.store.repo_states()}
    assert _attr(browser, "#repos tbody tr", "data-state") == [
        states[RepoId(r)].status.value for r in watched
    ]
    # open advisories by severity, as the store counts them
    row = f'#repos tr[data-repo="{GRANITE}"]'
    open_granite = Counter(
        a.severity.value
        for a in app.advisories.list_advisories(repo_id=GRANITE)
        if state_of(a.record) == "open"
    )
    order = ("critical", "high", "moderate", "low")
    assert _texts(browser, f"{row} td.counts .badge") == [
        f"{open_granite[s]} {s}" for s in order if open_granite[s]
    ]
    head = app.store.revision(GRANITE, states[GRANITE].cursor)
    assert head.commit.title in _text(browser, f"{row} td:nth-of-type(2)")
    # the latest advisories, newest id first (all published at the pinned clock)
    ids = _attr(browser, "ul.advisories li", "data-advisory")
    everything = sorted(
        (a.id for a in app.advisories.list_advisories()), key=lambda i: int(i.split("-")[-1])
    )
    assert ids == list(reversed(everything))[: len(ids)] and len(ids) == 20
    # the feeds of everything: discoverable (<link rel="alternate">) and visible
    feeds = [
        served_demo.url + "/v1/feeds/advisories.atom",
        served_demo.url + "/v1/feeds/advisories.json",
    ]
    assert _attr(browser, 'link[rel="alternate"]', "href") == feeds
    assert _attr(browser, 'link[rel="alternate"]', "type") == [
        "application/atom+xml",
        "application/feed+json",
    ]
    assert _attr(browser, "#subscribe a", "href") == feeds
    # following the repo link opens its page
    browser.find_element(By.LINK_TEXT, GRANITE).click()
    assert urlsplit(browser.current_url).path == f"/repos/{GRANITE}"
    assert _text(browser, "h1") == GRANITE


def test_granite_page_shows_the_estimate_timeline_fix_and_charts(
    browser: Any, served_demo: Any
) -> None:
    app = served_demo.app
    errors = visit(browser, f"{served_demo.url}/repos/{GRANITE}", "repo-granite")
    assert errors == []
    state = app.store.repo_state(GRANITE)
    estimate = app.analysis.estimate(GRANITE, state.cursor).estimate
    report = estimate.to_json()

    # the fit table: one row per card of the estimate (5), each cell the estimate's own fit
    rows = browser.find_elements(By.CSS_SELECTOR, "#fit tbody tr")
    assert [r.get_attribute("data-card") for r in rows] == [c["name"] for c in report["cards"]]
    assert len(rows) == 5
    for row, card in zip(rows, report["cards"], strict=True):
        cells = row.find_elements(By.CSS_SELECTOR, "td")
        assert [c.get_attribute("data-setup") for c in cells] == list(SETUPS)
        for cell, setup in zip(cells, SETUPS, strict=True):
            fit = card[setup]
            split = fit["split"]
            assert cell.get_attribute("data-batch") == str(fit["batch"])
            assert cell.get_attribute("data-borderline") == str(fit["borderline"]).lower()
            want_split = (
                ""
                if split is None
                else f"{split['cards']}:" + ",".join(str(n) for n in split["layers"])
            )
            assert cell.get_attribute("data-split") == want_split
            assert fit["summary"] in cell.text
    # the headline sentence, with the estimate's numbers
    m = report["memory_gb"]
    headline = _text(browser, "#headline")
    assert (
        f"Fine-tuning {GRANITE} at batch 1 and {m['train_tokens']:,} tokens takes about "
        f"{gb_text(m['full_finetune'])} ({gb_text(m['full_finetune_states'])} of it weights, "
        f"gradients and AdamW state), and {gb_text(m['lora'])} with LoRA r=16"
    ) in headline
    # one unit per magnitude: the headline writes each figure as the Memory table does
    per_sequence = (
        f"{gb_text(m['kv_cache'])} of KV cache and a {gb_text(m['serve_prefill'])} prefill "
        "working set per 4,096-token sequence"
    )
    assert per_sequence in headline
    assert _text(browser, "#kv-cache") == gb_text(m["kv_cache"])
    assert _text(browser, "#serve-prefill") == gb_text(m["serve_prefill"])
    # parameters against the checkpoint census
    total = browser.find_elements(By.CSS_SELECTOR, "#params-total td")
    assert total[0].get_attribute("data-value") == str(report["params"]["total"])
    assert total[1].get_attribute("data-value") == str(report["checkpoint"]["params"])
    assert total[2].text == f"{report['checkpoint']['delta_pct']:+.3f}%"
    assert browser.find_elements(By.ID, "unverified") == []  # verified: no banner
    assert browser.find_elements(By.ID, "custom-code") == []  # no auto_map in granite

    # the timeline: every ingested revision, newest first, with its commit link
    revisions = app.store.revisions(GRANITE)
    entries = browser.find_elements(By.CSS_SELECTOR, "#timeline > li")
    assert [e.get_attribute("data-sha") for e in entries] == [r.sha for r in reversed(revisions)]
    assert [e.get_attribute("data-seq") for e in entries] == ["3", "2", "1"]
    assert [e.find_element(By.CSS_SELECTOR, ".title").text for e in entries] == [
        "Added bf16 tensors",
        "Updated chat template",
        "Model upload",
    ]
    hub = f"https://huggingface.co/{GRANITE}/commit/"
    assert _attr(browser, "#timeline > li h3 a.sha", "href") == [
        hub + r.sha for r in reversed(revisions)
    ]
    # the chat-template fix: the rendered output lost the duplicated system prompt
    fix = _chat_advisory(app)
    entry = browser.find_element(By.ID, f"rev-{fix.introduced}")
    group = entry.find_element(By.CSS_SELECTOR, '.group[data-artifact="chat_template"]')
    removed = _texts(group, 'li[data-kind="rendered"] pre.diff .del')
    assert removed == [DUPLICATE_SYSTEM, DUPLICATE_SYSTEM]  # system_user and generation_prompt
    # ... shown side by side: the removed line in the Before column faces a blank After cell,
    # the lines both renderings share face each other
    tables = group.find_elements(By.CSS_SELECTOR, 'li[data-kind="rendered"] table.sbs')
    assert len(tables) == 2
    for table in tables:
        assert _texts(table, "thead th") == ["Before", "After"]
        rows = table.find_elements(By.CSS_SELECTOR, "tbody tr:not(.hunk)")
        first = rows[0].find_elements(By.CSS_SELECTOR, "td")
        assert [c.get_attribute("data-side") for c in first] == ["before", "after"]
        assert (first[0].text, first[1].text) == (DUPLICATE_SYSTEM, "")
        for row in rows[1:]:
            before, after = (c.text for c in row.find_elements(By.CSS_SELECTOR, "td"))
            assert before == after and before.startswith(" <|start_of_role|>")
        top = [c.rect["y"] for c in rows[1].find_elements(By.CSS_SELECTOR, "td")]
        assert top[0] == top[1]  # side by side on a desktop
    # on a phone the columns stack: each row's before line, then its after line (a blank cell,
    # and an after line equal to its before line, are not repeated)
    browser.set_window_size(*PHONE)
    try:
        for table in tables:
            shown = browser.execute_script(
                "return [...arguments[0].querySelectorAll('tbody td')]"
                ".filter(td => getComputedStyle(td).display !== 'none')"
                ".map(td => [td.dataset.side || 'hunk', getComputedStyle(td).display, td.innerText])",
                table,
            )
            rows = table.find_elements(By.CSS_SELECTOR, "tbody tr")
            assert [(side, shown_as) for side, shown_as, _ in shown] == [("hunk", "block")] + [
                ("before", "block")
            ] * (len(rows) - 1)
            assert shown[1][2].endswith(DUPLICATE_SYSTEM)
    finally:
        browser.set_window_size(*DESKTOP)
    # the repo's feeds: discoverable and visible
    repo_feeds = [f"{served_demo.url}/v1/repos/{GRANITE}/feed.atom",
                  f"{served_demo.url}/v1/repos/{GRANITE}/feed.json"]  # fmt: skip
    assert _attr(browser, 'link[rel="alternate"]', "href") == repo_feeds
    assert _attr(browser, "#subscribe a", "href") == repo_feeds
    assert _attr(entry, "ul.advisories li", "data-advisory") == [fix.id]

    # charts: inline SVG per series, with the same values in a table
    figures = browser.find_elements(By.CSS_SELECTOR, "figure.chart")
    assert [f.get_attribute("id") for f in figures] == [
        "chart-params",
        "chart-memory",
        "chart-batch-full_finetune",
        "chart-batch-lora",
        "chart-batch-serve",
    ]
    for f in figures:
        assert f.find_elements(By.CSS_SELECTOR, "svg .series")
    memory_rows = _texts(browser, "#chart-memory table.chart-data tbody tr")
    serve = m["serve_weights"] + m["kv_cache"]
    assert memory_rows[-1] == (
        f"3: {state.cursor[:7]} {m['full_finetune']:,.2f} GB {m['lora']:,.2f} GB {serve:,.2f} GB"
    )
    assert len(memory_rows) == 3

    # the revision selector works as a plain form; the page then shows that revision
    Select(browser.find_element(By.ID, "rev")).select_by_value(revisions[0].sha)
    browser.find_element(By.CSS_SELECTOR, "form.revsel button").click()
    # the click returns once the form is submitted, not once the next page has loaded
    WebDriverWait(browser, 30).until(lambda d: d.current_url.endswith(f"?rev={revisions[0].sha}"))
    assert revisions[0].sha in _text(browser, "#at-revision")
    assert "not the head" in _text(browser, "#at-revision")
    # and the advisory link opens the advisory page
    visit(browser, f"{served_demo.url}/repos/{GRANITE}")
    browser.find_element(By.CSS_SELECTOR, f'#rev-{fix.introduced} a[href$="{fix.id}"]').click()
    assert _text(browser, "#advisory-id") == fix.id


def test_advisory_page_renders_the_record_for_a_person(browser: Any, served_demo: Any) -> None:
    fix = _chat_advisory(served_demo.app)
    errors = visit(browser, f"{served_demo.url}/advisories/{fix.id}", "advisory-chat-template")
    assert errors == []
    assert _text(browser, "#summary") == fix.record["summary"]
    assert _text(browser, "#severity") == "high" and _text(browser, "#state") == "open"
    events = _texts(browser, "#events li")
    assert events[0].startswith(f"introduced in {fix.introduced}")
    assert events[1] == "not fixed: every later revision read so far is affected"
    # the details Markdown rendered: headings, the changes table and the diff with its removed line
    # (every `## ` heading of the record's Markdown, in order, and one table per Markdown table)
    details = fix.record["details"].splitlines()
    headings = [line[3:].strip() for line in details if line.startswith("## ")]
    assert headings[0] == "What changed" and headings[-1] == "What to do"
    assert _texts(browser, "#details h2") == headings
    tables = sum(1 for line in details if re.fullmatch(r"\|(\s*:?-{3,}:?\s*\|)+", line.strip()))
    assert tables >= 1
    assert len(browser.find_elements(By.CSS_SELECTOR, "#details table")) == tables
    assert DUPLICATE_SYSTEM in _texts(browser, "#details pre.diff .del")
    # the raw JSON, linked from the page and as the alternate of the page
    alternate = browser.find_element(By.CSS_SELECTOR, 'link[rel="alternate"]')
    assert alternate.get_attribute("href") == f"{served_demo.url}/v1/vulns/{fix.id}"
    assert _attr(browser, 'link[rel="alternate"]', "href")[1:] == [
        f"{served_demo.url}/v1/repos/{GRANITE}/feed.atom",
        f"{served_demo.url}/v1/repos/{GRANITE}/feed.json",
    ]
    browser.find_element(By.LINK_TEXT, "OSV JSON").click()
    assert f'"id":"{fix.id}"' in browser.find_element(By.TAG_NAME, "body").text.replace(" ", "")


def test_custom_code_repo_shows_the_notice(browser: Any, served_demo: Any) -> None:
    repo = RepoId("THUDM/chatglm2-6b")
    state = served_demo.app.store.repo_state(repo)
    estimate = served_demo.app.analysis.estimate(repo, state.cursor).estimate
    assert estimate.custom_code
    assert visit(browser, f"{served_demo.url}/repos/{repo}", "repo-chatglm2") == []
    notice = _text(browser, "#custom-code")
    assert notice.startswith("Custom code. This repo's config names its own modelling code")
    assert f"nearest native model type, {estimate.model_type};" in notice
    unverified = browser.find_elements(By.ID, "unverified")
    assert bool(unverified) == (not estimate.verification.vouched)
    # no census compared: "derived", as the legend on the page says, and no fit colours
    assert estimate.verification.census_delta_pct is None
    assert _text(browser, "#estimate-word") == "derived"
    legend = browser.find_element(By.ID, "estimate-legend")
    assert legend.is_displayed()
    assert [d.text for d in legend.find_elements(By.CSS_SELECTOR, "dt")] == [
        "verified", "checked", "derived", "unverified",
    ]  # fmt: skip
    current = legend.find_element(By.CSS_SELECTOR, "div.current")
    assert current.find_element(By.CSS_SELECTOR, "dd").text.startswith("the count follows")
    cells = browser.find_elements(By.CSS_SELECTOR, "#fit td")
    assert cells and all(c.get_attribute("class") == "" for c in cells)
    drawn = {
        browser.execute_script("return getComputedStyle(arguments[0]).backgroundImage", c)
        for c in cells
    }
    assert len(drawn) == 1 and next(iter(drawn)).startswith("repeating-linear-gradient")
    assert "for reference, not a verdict" in _text(browser, "#fit caption")


def test_pages_read_with_javascript_off(browser: Any, served_demo: Any) -> None:
    fix = _chat_advisory(served_demo.app)
    browser.execute_cdp_cmd("Emulation.setScriptExecutionDisabled", {"value": True})
    try:
        browser.get(f"{served_demo.url}/repos/{GRANITE}")
        assert browser.execute_script("return 1") == 1  # the driver still reads the page
        assert len(browser.find_elements(By.CSS_SELECTOR, "#fit tbody tr")) == 5
        assert browser.find_element(By.ID, "headline").is_displayed()
        assert DUPLICATE_SYSTEM in _texts(browser, "#timeline pre.diff .del")
        assert DUPLICATE_SYSTEM in _texts(browser, "#timeline table.sbs td.before")
        browser.get(f"{served_demo.url}/advisories/{fix.id}")
        assert _text(browser, "#summary") == fix.record["summary"]
    finally:
        browser.execute_cdp_cmd("Emulation.setScriptExecutionDisabled", {"value": False})


def test_hostile_upstream_text_is_inert_on_every_page(browser: Any, hostile: Any) -> None:
    base = hostile.url
    ids = [a.id for a in hostile.app.advisories.list_advisories()]
    assert len(ids) == 4  # config, chat template, pickle file, model card
    visit(browser, base + "/")
    assert _attr(browser, "#repos tbody tr", "data-state") == ["ok", "gone"]
    gone = _text(browser, f'#repos tr[data-repo="{GONE_REPO}"] td.state')
    assert gone.startswith("gone\n1 failed poll: ") and GONE_REPO in gone
    pages = {
        "hostile-home": "/",
        "hostile-repo": f"/repos/{HOSTILE_REPO}",
        "hostile-missing-rev": f"/repos/{HOSTILE_REPO}?rev={SCRIPT}",
        **{f"hostile-{i}": f"/advisories/{i}" for i in ids},
    }
    shots = ("hostile-repo", f"hostile-{ids[0]}")  # every kind of page once (home: the demo's)
    for shot, path in pages.items():
        errors = visit(browser, base + path, shot if shot in shots else None)
        if shot == "hostile-missing-rev":  # a 404 page: its own status is the one console entry
            assert len(errors) == 1 and "status of 404" in errors[0], errors
            assert "no stored revision" in _text(browser, "#error-message") or "unknown" in _text(
                browser, "#error-message"
            )
        else:
            assert errors == [], (path, errors)
        found = inert(browser)
        assert found == {
            "scripts": 0,
            "handlers": [],
            "js_urls": [],
            "embeds": 0,
            "imgs": 0,
            "pwned": False,
        }, path
        body = browser.find_element(By.TAG_NAME, "body").text
        assert SCRIPT in body or HOSTILE_FILE in body, path  # shown as text
        assert phone_overflow(browser) == 0, path
    # each place upstream controls reached the pages as text
    visit(browser, base + f"/repos/{HOSTILE_REPO}")
    body = browser.find_element(By.TAG_NAME, "body").text
    assert IMG in body and HOSTILE_FILE in body
    assert LONG in browser.page_source  # the overlong title, whole under "Commit message"
    # an estimate tracker cannot vouch for says so, and gives no card-fit verdict
    assert "Unverified estimate." in _text(browser, "#unverified")
    assert "No card-fit verdict" in _text(browser, "#headline")
    assert "Unverified: for reference, not a verdict." in _text(browser, "#fit caption")
    assert f"[click]({JS_LINK})" in _text(browser, "#timeline > li .title")
    model_card = next(
        i for i in ids if "model card" in hostile.app.advisories.get(i).record["summary"]
    )
    visit(browser, base + f"/advisories/{model_card}")
    assert browser.find_elements(By.CSS_SELECTOR, "#details a[href^='javascript']") == []


def test_every_page_passes_axe_phone_width_and_the_html_checker(
    browser: Any, served_demo: Any, hostile: Any
) -> None:
    fix = _chat_advisory(served_demo.app)
    pages = {
        "home": served_demo.url + "/",
        "repo": f"{served_demo.url}/repos/{GRANITE}",
        "repo-old-revision": f"{served_demo.url}/repos/{GRANITE}?rev=HEAD~2",
        "advisory": f"{served_demo.url}/advisories/{fix.id}",
        "advisory-index": f"{served_demo.url}/advisories?severity=high&state=open",
        "org": f"{served_demo.url}/repos/meta-llama",
        "compare": f"{served_demo.url}/repos/{GRANITE}/compare?from=HEAD~2&to=HEAD",
        "missing": f"{served_demo.url}/advisories/x_NOPE-1",
        "hostile-repo": f"{hostile.url}/repos/{HOSTILE_REPO}",
    }
    html: dict[str, str] = {}
    with httpx.Client(timeout=30) as client:
        for name, url in pages.items():
            r = client.get(url)
            assert r.status_code == (404 if name == "missing" else 200), name
            assert r.headers["content-type"] == "text/html; charset=utf-8"
            assert "script-src" not in r.headers["content-security-policy"]  # default-src 'none'
            html[name] = r.text
    checker = vnu_start(html, ARTIFACTS / "html")
    try:
        for name, url in pages.items():
            errors = visit(browser, url)
            if name == "missing":  # the document's own 404 is the one console entry
                assert len(errors) == 1 and "404" in errors[0], errors
            else:
                assert errors == [], (name, errors)
            assert axe_serious(browser) == [], name
            assert phone_overflow(browser) == 0, name
        assert vnu_errors(checker) == []
    finally:
        if checker.poll() is None:
            checker.kill()
            checker.communicate()


def test_on_a_phone_no_table_cell_breaks_a_word_and_no_column_is_cut(
    browser: Any, served_demo: Any
) -> None:
    """At 390×844, on every page kind and every demo repo (Llama-2's page was 27,883 px tall,
    its tables one letter per line: `overflow-wrap: anywhere` on body), measured in the page:
    every word in a table cell stays on one line, and a table wider than the phone scrolls in
    its box instead of losing columns at the edge."""
    app = served_demo.app
    fix = _chat_advisory(app)
    # every page kind: home, advisory, advisory index (filtered too), org, repo (an older
    # revision too), compare, and the error page (teams: tests/web/test_pages_teams.py)
    pages = [
        "/",
        f"/advisories/{fix.id}",
        "/advisories",
        "/advisories?severity=high&state=open",
        "/repos/meta-llama",
        "/advisories/x_NOPE-1",
    ]
    for st in app.store.repo_states():
        pages += [f"/repos/{st.repo_id}", f"/repos/{st.repo_id}?rev=HEAD~1"]
        first = app.store.revisions(st.repo_id)[0].sha
        pages.append(f"/repos/{st.repo_id}/compare?from={first}&to=HEAD")
    pages.append(f"/advisories/{app.advisories.list_advisories()[0].id}")
    found = {}
    for path in pages:
        visit(browser, served_demo.url + path)
        problems = phone_layout(browser)
        if problems:
            found[path] = problems[:5]
    assert found == {}
    browser.set_window_size(390, 844)
    try:
        visit(browser, f"{served_demo.url}/repos/meta-llama/Llama-2-7b-hf")
        height = browser.execute_script("return document.documentElement.scrollHeight")
        assert height < 20000, height  # 27,883 px before
    finally:
        browser.set_window_size(*DESKTOP)


def _luminance(rgb: str) -> float:
    r, g, b = (int(x) / 255 for x in re.findall(r"\d+", rgb)[:3])
    lin = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in (r, g, b)]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def test_the_focus_ring_has_3_to_1_contrast_with_the_page(browser: Any, served_demo: Any) -> None:
    """WCAG 1.4.11: the keyboard focus indicator of a link, read from the browser's computed
    style after a Tab, contrasts at least 3:1 with the background behind it (the yellow ring
    was 1.6:1 on white)."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    visit(browser, served_demo.url + "/")
    ActionChains(browser).send_keys(Keys.TAB).perform()
    found = browser.execute_script(
        "const e = document.activeElement; const s = getComputedStyle(e);"
        "let b = e; let bg = 'rgba(0, 0, 0, 0)';"
        "while (b && (bg = getComputedStyle(b).backgroundColor) === 'rgba(0, 0, 0, 0)')"
        " b = b.parentElement;"
        "return [e.tagName, s.outlineStyle, s.outlineWidth, s.outlineColor,"
        " b ? bg : 'rgb(255, 255, 255)'];"
    )
    tag, style, width, color, background = found
    assert (tag, style) == ("A", "solid")
    assert float(width.removesuffix("px")) >= 2
    light, dark = sorted((_luminance(color), _luminance(background)), reverse=True)
    assert (light + 0.05) / (dark + 0.05) >= 3, found


def test_latest_changes_are_within_two_screens_and_every_jump_lands(
    browser: Any, served_demo: Any
) -> None:
    """On every repo page at 1366×900, the "Latest changes" summary (linking to What changed
    upstream) starts within the first two screens (it was 9.5 screens down, after the charts);
    every link of the page's table of contents and of the summary lands on an element of the
    page; an advisory page links to its revision's entry on the repo page."""
    app = served_demo.app
    browser.set_window_size(1366, 900)
    try:
        for st in app.store.repo_states():
            visit(browser, f"{served_demo.url}/repos/{st.repo_id}")
            top = browser.execute_script(
                "const e = document.getElementById('latest-changes');"
                "return e ? e.getBoundingClientRect().top + window.scrollY : null"
            )
            assert top is not None and top < 2 * 900, (st.repo_id, top)
            missing = browser.execute_script(
                "return [...document.querySelectorAll('#toc a, #latest-changes a[href^=\"#\"]')]"
                ".map(a => a.getAttribute('href'))"
                ".filter(h => !document.getElementById(decodeURIComponent(h.slice(1))))"
            )
            assert missing == [], (st.repo_id, missing)
            assert browser.find_elements(By.CSS_SELECTOR, "#latest-changes a[href='#h-upstream']")
    finally:
        browser.set_window_size(*DESKTOP)
    fix = _chat_advisory(app)
    visit(browser, f"{served_demo.url}/advisories/{fix.id}")
    hrefs = _attr(browser, "#events a[href*='#rev-']", "href")
    assert hrefs and all(urlsplit(h).fragment == "rev-" + urlsplit(h).query[4:] for h in hrefs)
    browser.get(hrefs[0])
    target = browser.execute_script("return document.getElementById(location.hash.slice(1))")
    assert target is not None
