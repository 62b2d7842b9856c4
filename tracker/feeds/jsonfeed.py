"""A `Feed` as JSON Feed 1.1 (https://www.jsonfeed.org/version/1.1/), from typed models.

feedgen writes Atom and RSS only, so the JSON Feed is the pydantic models below serialised.
Each item carries the spec's `id`, `url` (the page), `external_url` (the commit upstream),
`title`, `summary`, `content_text` (the advisory's Markdown) and `content_html` (rendered, when
the door passes a renderer), `date_published`, `date_modified` (RFC 3339) and `tags`, and
our extension object `_tracker` (the spec lets publishers add keys starting with an underscore)
with the kind, severity, state, repo, commit, advisory id and the OSV JSON's URL (the last two
left out for a fit entry no advisory reports).
"""

from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from tracker.feeds.entries import Feed, FeedEntry, Html, absolute
from tracker.shared.domain import rfc3339

JSON_FEED_TYPE = "application/feed+json"
VERSION: Literal["https://jsonfeed.org/version/1.1"] = "https://jsonfeed.org/version/1.1"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class Author(_Model):
    name: str


class TrackerItemExtension(_Model):
    """`_tracker` on an item: what a program filters on without parsing the text."""

    kind: Literal["advisory", "fit"]
    severity: str
    state: str
    repo: str
    commit: str
    advisory_id: str | None = None
    osv_url: str | None = None


class Item(_Model):
    id: str
    url: str
    external_url: str | None = None
    title: str
    summary: str
    content_html: str | None = None
    content_text: str
    date_published: str
    date_modified: str
    tags: list[str]
    tracker: TrackerItemExtension = Field(alias="_tracker")


class JsonFeed(_Model):
    version: Literal["https://jsonfeed.org/version/1.1"] = VERSION
    title: str
    description: str
    home_page_url: str
    feed_url: str
    authors: list[Author]
    items: list[Item]


def _item(e: FeedEntry, base: str, html: Html | None) -> Item:
    osv = absolute(base, e.osv_url) if e.osv_url is not None else None
    return Item(
        id=e.id,
        url=absolute(base, e.url),
        external_url=e.commit_url,
        title=e.title,
        summary=e.summary,
        content_html=html(e.content) if html is not None else None,
        content_text=e.content,
        date_published=rfc3339(e.published),
        date_modified=rfc3339(e.updated),
        tags=[e.severity.value, e.state, e.repo_id],
        _tracker=TrackerItemExtension(
            kind=e.kind,
            severity=e.severity.value,
            state=e.state,
            repo=e.repo_id,
            commit=e.commit,
            advisory_id=e.advisory_id,
            osv_url=osv,
        ),
    )


def json_feed(feed: Feed, base: str, html: Html | None = None) -> JsonFeed:
    """The JSON Feed model of `feed`, links absolute against `base`; each item's Markdown
    content as `content_text` and, with `html`, rendered as `content_html` too."""
    return JsonFeed(
        title=feed.title,
        description=feed.subtitle,
        home_page_url=absolute(base, feed.page_path),
        feed_url=absolute(base, feed.json_path),
        authors=[Author(name="tracker")],
        items=[_item(e, base, html) for e in feed.entries],
    )


def render_json_feed(feed: Feed, base: str, html: Html | None = None) -> bytes:
    """The JSON Feed document of `feed` (UTF-8 JSON; `external_url` left out when unknown).
    Deterministic: equal feeds give equal bytes."""
    data = json_feed(feed, base, html).model_dump(by_alias=True, exclude_none=True, mode="json")
    return json.dumps(data, ensure_ascii=False, indent=1).encode()
