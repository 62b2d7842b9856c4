"""A `Feed` as Atom (RFC 4287), written by feedgen.

Every entry has its `tag:` id, title, `published` and `updated`, a text summary and content, a
`rel="alternate"` link to the page a person reads, `rel="related"` links to the OSV JSON and to
the commit upstream, and categories in our schemes for severity, state, repo and commit
(`urn:tracker:severity`, ...). Text from upstream may hold characters XML 1.0 cannot carry
(control characters in a commit message): they become U+FFFD, never an error.
"""

from __future__ import annotations

import re
from typing import Any

from feedgen.entry import FeedEntry as _FeedgenEntry
from feedgen.feed import FeedGenerator

from tracker.feeds.entries import Feed, FeedEntry, Html, absolute

ATOM_TYPE = "application/atom+xml"
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_text(text: str) -> str:
    """`text` with every character XML 1.0 cannot hold replaced by U+FFFD."""
    return _NOT_XML.sub("\ufffd", text)


class _Entry(_FeedgenEntry):  # type: ignore[misc]
    """feedgen 1.0.0 writes an entry's `<link>` without its rel, type and title: its
    `FeedEntry.atom_entry` reads them back from the new XML element instead of the link's data
    (the loop variable `link` is rebound). This puts them back, link by link, in order."""

    def atom_entry(self, extensions: bool = True) -> Any:
        entry = super().atom_entry(extensions)
        elements = [child for child in entry if str(child.tag).endswith("link")]
        for element, data in zip(elements, self.link() or [], strict=True):
            for key in ("rel", "type", "hreflang", "title", "length"):
                if data.get(key):
                    element.set(key, str(data[key]))
        return entry


def _entry(fg: FeedGenerator, e: FeedEntry, base: str, html: Html | None) -> None:
    fe = fg.add_entry(_Entry(), order="append")
    fe.id(e.id)
    fe.title(xml_text(e.title))
    fe.published(e.published)
    fe.updated(e.updated)
    fe.summary(xml_text(e.summary))
    if html is None:
        fe.content(xml_text(e.content), type="text")
    else:  # readers show the advisory's tables and lists, not its Markdown's pipes and stars
        fe.content(xml_text(html(e.content)), type="html")
    fe.link(href=absolute(base, e.url), rel="alternate", type="text/html")
    if e.osv_url is not None:
        fe.link(href=absolute(base, e.osv_url), rel="related", type="application/json",
                title="OSV JSON")  # fmt: skip
    if e.commit_url is not None:
        fe.link(href=e.commit_url, rel="related", type="text/html", title=f"commit {e.commit}")
    for scheme, term in (
        ("severity", e.severity.value),
        ("state", e.state),
        ("repo", e.repo_id),
        ("commit", e.commit),
        ("kind", e.kind),
    ):
        fe.category(term=xml_text(term), scheme=f"urn:tracker:{scheme}")


def render_atom(feed: Feed, base: str, html: Html | None = None) -> bytes:
    """The Atom document of `feed` (UTF-8), links made absolute against `base` (the server's
    root URL, e.g. `http://127.0.0.1:8080/`); entry content as HTML made by `html` from its
    Markdown (`type="html"`), or the Markdown as `type="text"` without it. Deterministic: equal
    feeds give equal bytes."""
    fg = FeedGenerator()
    fg.id(feed.id)
    fg.title(xml_text(feed.title))
    fg.subtitle(xml_text(feed.subtitle))
    fg.updated(feed.updated)
    fg.author(name="tracker")
    fg.generator("tracker")
    fg.link(href=absolute(base, feed.self_path), rel="self", type=ATOM_TYPE)
    fg.link(href=absolute(base, feed.page_path), rel="alternate", type="text/html")
    fg.link(href=absolute(base, feed.json_path), rel="alternate", type="application/feed+json")
    for e in feed.entries:
        _entry(fg, e, base, html)
    out: bytes = fg.atom_str(pretty=True)
    return out
