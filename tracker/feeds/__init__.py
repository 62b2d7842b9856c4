"""Feeds: the advisories and card-fit moves as Atom (RFC 4287) and JSON Feed 1.1.

`entries` builds the entries and the bounded, ordered `Feed` from values (pure); `atom` renders
it with feedgen, `jsonfeed` from typed models. The HTTP routes that read the store and serve
them are `tracker.api.feeds`.
"""

from __future__ import annotations

from tracker.feeds.atom import ATOM_TYPE, render_atom
from tracker.feeds.entries import (
    DEFAULT_LIMIT,
    MAX_LIMIT,
    Feed,
    FeedEntry,
    FeedQueryError,
    FitMove,
    advisory_entry,
    at_or_above,
    feed,
    fit_entry,
    parse_floor,
)
from tracker.feeds.jsonfeed import JSON_FEED_TYPE, render_json_feed

__all__ = [
    "ATOM_TYPE",
    "DEFAULT_LIMIT",
    "JSON_FEED_TYPE",
    "MAX_LIMIT",
    "Feed",
    "FeedEntry",
    "FeedQueryError",
    "FitMove",
    "advisory_entry",
    "at_or_above",
    "feed",
    "fit_entry",
    "parse_floor",
    "render_atom",
    "render_json_feed",
]
