"""Browser helpers of the page tests: open a page and check what every page must hold.

`visit` loads a URL, saves a screenshot and returns the console errors since the last visit;
`axe_serious` runs axe-core (npm, tests/web/node_modules) in the page; `phone_overflow` measures
the current page's horizontal overflow at a phone's width; `inert` lists what would let a hostile string act;
`vnu` runs the Nu Html Checker (vnu.jar from npm, on the machine's Java) over saved HTML.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts" / "pages"
NODE_MODULES = Path(__file__).resolve().parent / "node_modules"
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
CONFIGS = ROOT / "tests" / "data" / "configs"

HOSTILE_REPO = "acme-hostile/page-test"
GONE_REPO = "acme-hostile/deleted"
PWN = "window.__pwned=1"
SCRIPT = f"<script>{PWN}</script>"
IMG = f'<img src=x onerror="{PWN}">'
JS_LINK = f"javascript:{PWN}"
LONG = "W" * 3000  # one unbreakable overlong line
HOSTILE_FILE = f"<img src=x onerror={PWN}>.bin"
AXE = NODE_MODULES / "axe-core" / "axe.min.js"
VNU = NODE_MODULES / "vnu-jar" / "build" / "dist" / "vnu.jar"
DESKTOP = (1280, 1000)
PHONE = (375, 800)


def chromium(*extra: str) -> Any:
    """A headless Debian Chromium (selenium over /usr/bin/chromedriver), its console log kept
    (goog:loggingPrefs), with `extra` command-line switches; page and script timeouts 60 s."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1280,1000",
        *extra,
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    driver.set_script_timeout(60)
    return driver


def visit(driver: Any, url: str, shot: str | None = None) -> list[str]:
    """Load `url`; save a full-width screenshot as `shot`.png; the SEVERE console entries."""
    driver.get_log("browser")  # drop what earlier pages logged
    driver.get(url)
    if shot:
        save_shot(driver, shot)
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def save_shot(driver: Any, name: str) -> Path:
    """A screenshot of the whole page (the window stretched to the document's height)."""
    width = driver.execute_script("return window.outerWidth")
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(width, min(max(height, 600), 16000))
    path = ARTIFACTS / f"{name}.png"
    driver.save_screenshot(str(path))
    driver.set_window_size(*DESKTOP)
    return path


def axe_serious(driver: Any) -> list[dict[str, Any]]:
    """axe-core's violations of impact serious or critical on the current page."""
    driver.execute_script(AXE.read_text())
    result = driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "axe.run(document, {resultTypes: ['violations']})"
        ".then(r => done(r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,"
        " nodes: v.nodes.slice(0, 3).map(n => n.html)}))))"
        ".catch(e => done([{id: 'axe-error', impact: 'critical', help: String(e), nodes: []}]));"
    )
    return [v for v in result if v["impact"] in ("serious", "critical")]


def phone_overflow(driver: Any) -> int:
    """How many CSS pixels the current page is wider than a phone's viewport (0: no scrolling):
    the window is narrowed to a phone's size (the page lays out again, its media queries
    apply; no reload), measured, and widened back."""
    driver.set_window_size(*PHONE)
    try:
        return int(
            driver.execute_script(
                "return document.documentElement.scrollWidth - document.documentElement.clientWidth"
            )
        )
    finally:
        driver.set_window_size(*DESKTOP)


def inert(driver: Any) -> dict[str, Any]:
    """What would let injected text act on the current page: script elements, on* attributes,
    javascript: URLs, iframes/objects, and whether an injected script ran (`window.__pwned`)."""
    return driver.execute_script(
        """
        const all = Array.from(document.querySelectorAll('*'));
        const handlers = all.filter(el => Array.from(el.attributes).some(a => a.name.startsWith('on')));
        const jsUrls = all.filter(el => ['href', 'src', 'action', 'formaction', 'xlink:href']
            .some(n => (el.getAttribute(n) || '').trim().toLowerCase().startsWith('javascript:')));
        return {
            scripts: document.querySelectorAll('script').length,
            handlers: handlers.map(el => el.outerHTML.slice(0, 120)),
            js_urls: jsUrls.map(el => el.outerHTML.slice(0, 120)),
            embeds: document.querySelectorAll('iframe, object, embed').length,
            imgs: document.querySelectorAll('img').length,
            pwned: window.__pwned === 1,
        };
        """
    )


def vnu_start(pages: dict[str, str], where: Path) -> subprocess.Popen[str]:
    """Start the Nu Html Checker over `pages` (name → HTML) in the background; `vnu_errors` reads
    its verdict (it runs while the browser checks go on)."""
    where.mkdir(parents=True, exist_ok=True)
    files = []
    for name, html in pages.items():
        path = where / f"{name}.html"
        path.write_text(html)
        files.append(str(path))
    # C1 only and the serial collector: a short run on a small shared machine starts 2x faster
    # (the C2 compiler and GC threads compete for its cores); C1 frames need a deeper stack.
    jvm = ["-Xss4m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"]
    command = ["java", *jvm, "-jar", str(VNU), "--errors-only", "--format", "json", *files]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def vnu_errors(proc: subprocess.Popen[str]) -> list[str]:
    """The checker's errors, one line each (`file:line: message`)."""
    out, err = proc.communicate(timeout=180)
    messages = json.loads(err or out or '{"messages": []}')["messages"]
    return [
        f"{Path(m.get('url', '')).name}:{m.get('lastLine')}: {m.get('message')}"
        for m in messages
        if m.get("type") in ("error", "non-document-error")
    ]


PHONE_390 = (390, 844)
_LAYOUT_JS = r"""
const problems = [];
const name = el => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') +
  (el.closest('table') && el.closest('table').id ? ' in table#' + el.closest('table').id : '');
for (const cell of document.querySelectorAll('td, th')) {
  const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT, {acceptNode: n =>
    n.parentElement.closest('pre') ? NodeFilter.FILTER_REJECT : NodeFilter.FILTER_ACCEPT});
  let node;
  while ((node = walker.nextNode())) {
    const words = /[^\s\-\u2010-\u2014/]+/g;
    let m;
    while ((m = words.exec(node.data))) {
      const range = document.createRange();
      range.setStart(node, m.index);
      range.setEnd(node, m.index + m[0].length);
      const tops = new Set(Array.from(range.getClientRects())
        .filter(r => r.width > 0).map(r => Math.round(r.top)));
      if (tops.size > 1) problems.push('word ' + JSON.stringify(m[0]) + ' breaks in ' + name(cell));
    }
  }
}
const vw = document.documentElement.clientWidth;
for (const table of document.querySelectorAll('table')) {
  const right = table.getBoundingClientRect().right;
  let box = table.parentElement;
  while (box && !['auto', 'scroll'].includes(getComputedStyle(box).overflowX)) box = box.parentElement;
  const limit = box ? box.getBoundingClientRect().right : vw;
  if (right > limit + 1 && !(box && box.scrollWidth > box.clientWidth)) {
    problems.push('table ' + name(table) + ' is cut at ' + Math.round(limit) + 'px');
  }
  if (!box && right > vw + 1) problems.push('table ' + name(table) + ' runs off the page');
}
return problems;
"""


def phone_layout(driver: Any) -> list[str]:
    """At 390×844 (a current phone), what a reader of the current page would find broken: a word
    in a table cell split over two lines (code in `<pre>` aside, which wraps as code does; a
    break after a hyphen or a slash is a line break, not a broken word), or a table wider than
    its box that cannot be scrolled to (a cut column). Measured in the page (text ranges' line
    boxes; element widths against scroll widths); the window is widened back after."""
    driver.set_window_size(*PHONE_390)
    try:
        return [str(p) for p in driver.execute_script(_LAYOUT_JS)]
    finally:
        driver.set_window_size(*DESKTOP)
