"""Conditional GET for every read route: a strong `ETag` over the exact response bytes,
`If-None-Match` answered by `304 Not Modified`, and a `Cache-Control` chosen by what is served.

The ETag is `"` + base64url(sha256(body)) (no padding) + `"`: equal bytes, equal tag, so two
servers (or two workers) over the same store agree without sharing state. `If-None-Match` is a
list of tags or `*` and uses the weak comparison (RFC 9110 §13.1.2): `W/"x"` matches `"x"`.

Cache-Control, by what a response is addressed by (`cached_response(..., cache_control=...)`):
- `IMMUTABLE` (`public, max-age=31536000, immutable`): content named by full commit shas (a file
  at a sha, a diff between two shas, an estimate at a sha): those bytes can never change.
- `ADVISORY` (`public, no-cache`): one advisory. It is immutable until its `modified` moves (a fix,
  a withdrawal), so caches keep it but revalidate every time: a 304 costs one hash, and a
  withdrawal reaches every reader at once instead of after a max-age.
- `LIST` (`public, no-cache`): lists, and anything named by a ref (`main`, `HEAD~2`) or a short sha.
A compressible answer also has a gzip form, its tag suffixed `-gzip` inside the quotes
(`tracker.api.encoding`); `If-None-Match` with either tag is a 304.
When reads need a token (`TRACKER_API_READ_TOKEN`), `public` becomes `private` (a shared cache
must not hand an authorised answer to anyone) and `Vary: Authorization` is added (the pages, which
also take the token from a cookie: `Vary: Authorization, Cookie`).
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import format_datetime, parsedate_to_datetime
from typing import Any

from fastapi import Request
from starlette.responses import Response

from tracker.api.encoding import (
    COMPRESSIONS,
    GZIP,
    accepts_gzip,
    add_vary,
    coded_etag,
    compressible,
    gzipped,
)

IMMUTABLE = "public, max-age=31536000, immutable"
ADVISORY = "public, no-cache"
LIST = "public, no-cache"
JSON_TYPE = "application/json"
NOT_MODIFIED: dict[int | str, dict[str, Any]] = {
    304: {"description": "Not Modified: If-None-Match matched the ETag (no body)"}
}
"""The `responses=` entry every cached GET route declares."""


def etag_of(body: bytes) -> str:
    """The strong entity tag of `body` (quoted). Not remembered here (that would pin the bodies):
    a `Kept` answer carries its tag."""
    digest = hashlib.sha256(body).digest()
    return '"' + base64.urlsafe_b64encode(digest).decode().rstrip("=") + '"'


def _opaque(tag: str) -> str:
    tag = tag.strip()
    return tag[2:] if tag.startswith("W/") else tag


def none_match(header: str | None, etag: str) -> bool:
    """Whether an `If-None-Match` value matches `etag` (weak comparison, `*` matches any).
    A value that is not a list of quoted tags matches nothing."""
    if header is None:
        return False
    value = header.strip()
    if value == "*":
        return True
    mine = _opaque(etag)
    return any(_opaque(part) == mine for part in value.split(",") if part.strip())


def _gated(request: Request) -> bool:
    app = getattr(request.app.state, "app", None)
    settings = getattr(app, "settings", None)
    return bool(settings is not None and settings.api_tokens("read"))


@dataclass(frozen=True)
class Form:
    """One coding of a kept answer: its body, ETag and the raw header lists of its 200 and its
    bodiless 304."""

    body: bytes
    etag: str
    ok_headers: tuple[tuple[bytes, bytes], ...]
    not_modified_headers: tuple[tuple[bytes, bytes], ...]


@dataclass(frozen=True)
class Kept:
    """A 200 answer made once and served as often as asked: its identity form (body, ETag, the
    raw header lists of its 200 and 304) and, for a compressible answer, its gzip form made with
    it (`tracker.api.encoding`), served to a request that accepts gzip. `route` is the route that
    made it (the metrics label its hits with it). `access` is who may be served it
    (`tracker.api.memo.MemoHits` asks it before serving a kept answer; None: the API's rule,
    `tracker.api.auth.read_allowed`). `last_modified`: when its content last changed, where the
    route knows it (`Last-Modified`, and `If-Modified-Since` when no `If-None-Match` is sent);
    `modified_shared`: another content had the same `Last-Modified` second (a page made from a
    store state first seen in the second the previous one was, `tracker.api.memo.Seen`), so an
    `If-Modified-Since` naming exactly that second is answered in full."""

    body: bytes
    etag: str
    ok_headers: tuple[tuple[bytes, bytes], ...]
    not_modified_headers: tuple[tuple[bytes, bytes], ...]
    route: Any = None
    access: Callable[[Request], bool] | None = None
    gzip: Form | None = None
    last_modified: datetime | None = None
    modified_shared: bool = False

    @property
    def identity(self) -> Form:
        return Form(self.body, self.etag, self.ok_headers, self.not_modified_headers)

    def answer(
        self,
        if_none_match: str | None,
        accept_encoding: str | None = None,
        if_modified_since: str | None = None,
    ) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        """Status, headers and body for a request sending these headers: the gzip form when
        the request accepts it; a 304 when `If-None-Match` names either form's tag (with the
        tag it named), or, without `If-None-Match`, when `If-Modified-Since` is not before
        `last_modified` (after it, when that second is `modified_shared`)."""
        chosen = self.identity
        if self.gzip is not None and accepts_gzip(accept_encoding):
            chosen = self.gzip
        if if_none_match is not None:
            forms = [chosen, *(f for f in (self.identity, self.gzip) if f and f is not chosen)]
            for form in forms:
                if none_match(if_none_match, form.etag):
                    return 304, list(form.not_modified_headers), b""
        elif if_modified_since is not None and self.last_modified is not None:
            since = _http_date(if_modified_since)
            modified = self.last_modified.replace(microsecond=0)
            if since is not None and (
                modified < since or (modified == since and not self.modified_shared)
            ):
                return 304, list(chosen.not_modified_headers), b""
        return 200, list(chosen.ok_headers), chosen.body

    def response(self, request: Request) -> Response:
        h = request.headers
        status, headers, body = self.answer(
            h.get("if-none-match"), h.get("accept-encoding"), h.get("if-modified-since")
        )
        return _Raw(status, headers, body)


def _http_date(value: str) -> datetime | None:
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


class _Raw(Response):
    """A response whose headers are already made (a `Kept` one's)."""

    def __init__(self, status: int, raw_headers: list[tuple[bytes, bytes]], body: bytes) -> None:
        self.status_code = status
        self.body = body
        self.background = None
        self.raw_headers = raw_headers


def _form(
    body: bytes, etag: str, media_type: str, headers: Mapping[str, str], coding: str | None = None
) -> Form:
    out = {"ETag": etag, **headers}
    coded = {**out, "Content-Encoding": coding} if coding else out
    ok = Response(body, media_type=media_type, headers=coded).raw_headers
    not_modified = Response(status_code=304, headers=out).raw_headers  # no body: no coding
    return Form(body, etag, tuple(ok), tuple(not_modified))


def keep(
    request: Request,
    body: bytes,
    media_type: str,
    cache_control: str,
    *,
    headers: Mapping[str, str] | None = None,
    vary: str = "Authorization",
    access: Callable[[Request], bool] | None = None,
    last_modified: datetime | None = None,
    modified_shared: bool = False,
) -> Kept:
    """`body` with its ETag and `cache_control` (and `headers`, e.g. `Link`, digests, on both
    forms), made into a `Kept` answer served to whom `access` allows, with its gzip form when
    it is `compressible` (both forms, whoever asks: either tag is a 304 to any client). When
    reads need a token the answer is private and varies by `vary` (the request headers a token
    comes in). `last_modified` and `modified_shared`: as `Kept`'s."""
    etag = etag_of(body)
    out = {"Cache-Control": cache_control, **(headers or {})}
    if last_modified is not None:
        out["Last-Modified"] = format_datetime(last_modified.astimezone(UTC), usegmt=True)
    if _gated(request):
        out["Cache-Control"] = cache_control.replace("public", "private")
        out["Vary"] = vary
    gz: Form | None = None
    if compressible(media_type, len(body)):
        out["Vary"] = add_vary(out.get("Vary"))
        COMPRESSIONS["tagged"] += 1
        gz = _form(gzipped(body), coded_etag(etag), media_type, out, GZIP)
    plain = _form(body, etag, media_type, out)
    route = request.scope.get("route")
    return Kept(
        body,
        etag,
        plain.ok_headers,
        plain.not_modified_headers,
        route,
        access,
        gz,
        last_modified,
        modified_shared,
    )


def cached_response(
    request: Request,
    body: bytes,
    media_type: str,
    cache_control: str,
    *,
    headers: Mapping[str, str] | None = None,
) -> Response:
    """`body` with its ETag and `cache_control`, or a bodiless 304 when the request's
    `If-None-Match` matches. `headers` go on both (e.g. `Link`, digests). Gzipped when the
    request accepts it and the body is worth it (`tracker.api.encoding`)."""
    return keep(request, body, media_type, cache_control, headers=headers).response(request)


def json_bytes(data: Any) -> bytes:
    """The bytes a JSON answer is served as (UTF-8, compact, key order kept)."""
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode()


def cached_json(
    request: Request,
    data: Any,
    cache_control: str,
    *,
    headers: Mapping[str, str] | None = None,
) -> Response:
    """`data` as JSON through `cached_response`."""
    return cached_response(request, json_bytes(data), JSON_TYPE, cache_control, headers=headers)


__all__ = [
    "ADVISORY",
    "IMMUTABLE",
    "LIST",
    "NOT_MODIFIED",
    "Form",
    "Kept",
    "cached_json",
    "cached_response",
    "etag_of",
    "json_bytes",
    "keep",
    "none_match",
]
