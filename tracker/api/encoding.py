"""Content coding: gzip for the answers that gain from it, when the client asks for it.

What is compressed: a body of at least `MIN_SIZE` bytes whose media type is text (`text/*`,
JSON and `+json`, XML and `+xml`, JavaScript, SVG), when the request's `Accept-Encoding` accepts
gzip (RFC 9110 §12.5.3: `gzip;q=0` refuses it, `*` accepts it unless gzip is listed). Already
compressed or binary types (`application/octet-stream`, images other than SVG, archives) and
small answers (the header costs more than it saves) are left alone.

Two ways an answer is coded:
- A kept answer (`tracker.api.caching.Kept`) carries both forms, made once with the bytes they
  code: the identity body with its ETag, and the gzip body with the same tag suffixed `-gzip`
  inside the quotes (`"abc"` → `"abc-gzip"`, as nginx and Apache mark a coded form), so a cache
  never takes one form's bytes for the other's. `If-None-Match` with either tag is a 304. A page
  asked again is served its kept gzip bytes: nothing is compressed again (`COMPRESSIONS`).
- Any other answer (problem documents, `/openapi.json`, `/metrics`, the stylesheet) is
  compressed on its way out by `Compress`, an ASGI middleware. An answer that already has a
  `Content-Encoding` (a kept one's gzip form), or an `ETag` (a kept answer has made its choice:
  compressing it here would serve one tag for two byte sequences), or that streams, passes
  through untouched.

Every answer that has a gzip form says `Vary: Accept-Encoding` (its identity form and its 304s
too). The gzip bytes are deterministic (no name, mtime 0, level `LEVEL`): two servers over the
same store send the same bytes and the same coded ETag.
"""

from __future__ import annotations

import gzip
from collections import Counter

from starlette.datastructures import Headers, MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

MIN_SIZE = 1024
LEVEL = 6
GZIP = "gzip"
SUFFIX = "-gzip"
_TEXT_TYPES = frozenset(
    {
        "application/json",
        "application/xml",
        "application/javascript",
        "application/x-ndjson",
        "application/openmetrics-text",
        "image/svg+xml",
    }
)

COMPRESSIONS: Counter[str] = Counter()
"""How many bodies this process gzipped: `tagged` (an answer with an ETag, `keep`: its gzip
form made with it, once for a kept answer), `passing` (an answer compressed on its way out by
`Compress`). Served as
`tracker_http_compressions_total` (`tracker.api.ops`)."""


def compressible(media_type: str | None, size: int) -> bool:
    """Whether a body of `size` bytes and `media_type` is worth gzipping."""
    if size < MIN_SIZE or not media_type:
        return False
    mime = media_type.partition(";")[0].strip().lower()
    return mime.startswith("text/") or mime in _TEXT_TYPES or mime.endswith(("+json", "+xml"))


def accepts_gzip(header: str | None) -> bool:
    """Whether an `Accept-Encoding` value accepts gzip (`x-gzip` is gzip; q=0 refuses)."""
    if not header:
        return False
    star: float | None = None
    for part in header.split(","):
        name, _, params = part.partition(";")
        name = name.strip().lower()
        q = 1.0
        for param in params.split(";"):
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    q = float(value.strip())
                except ValueError:
                    q = 0.0
        if name in (GZIP, "x-gzip"):
            return q > 0
        if name == "*":
            star = q
    return star is not None and star > 0


def gzipped(body: bytes) -> bytes:
    """`body` gzipped, the same bytes every time (mtime 0, no file name)."""
    return gzip.compress(body, compresslevel=LEVEL, mtime=0)


def coded_etag(etag: str) -> str:
    """The ETag of the gzip form of the answer tagged `etag` (`"x"` → `"x-gzip"`, `W/` kept)."""
    weak = etag.startswith("W/")
    opaque = etag[2:] if weak else etag
    return ("W/" if weak else "") + opaque[:-1] + SUFFIX + '"'


def add_vary(value: str | None, name: str = "Accept-Encoding") -> str:
    """A `Vary` value with `name` in it (once)."""
    if not value:
        return name
    names = [v.strip() for v in value.split(",") if v.strip()]
    if name.lower() in (n.lower() for n in names) or "*" in names:
        return ", ".join(names)
    return ", ".join([*names, name])


class Compress:
    """ASGI middleware: gzip an answer that has no coding and no ETag yet, when the request
    accepts gzip and the answer is `compressible` (module docstring). Every compressible answer
    says `Vary: Accept-Encoding`, compressed or not."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        wanted = accepts_gzip(Headers(scope=scope).get("accept-encoding"))
        start: Message | None = None

        async def coding(message: Message) -> None:
            nonlocal start
            if message["type"] == "http.response.start":
                headers = Headers(raw=message.get("headers") or [])
                if "content-encoding" in headers or "etag" in headers:
                    await send(message)  # coded already, or a kept answer's own choice
                    return
                start = message  # held until the body says how big it is
                return
            if start is None or message["type"] != "http.response.body":
                await send(message)
                return
            held, start = start, None
            body = message.get("body", b"")
            headers = MutableHeaders(raw=held.setdefault("headers", []))
            if message.get("more_body", False) or held["status"] in (204, 206, 304):
                await send(held)  # a streamed or partial answer goes as it is
                await send(message)
                return
            if compressible(headers.get("content-type"), len(body)):
                headers["Vary"] = add_vary(headers.get("vary"))
                if wanted:
                    body = gzipped(body)
                    COMPRESSIONS["passing"] += 1
                    headers["Content-Encoding"] = GZIP
                    headers["Content-Length"] = str(len(body))
                    message = {**message, "body": body}
            await send(held)
            await send(message)

        await self.app(scope, receive, coding)


__all__ = [
    "COMPRESSIONS",
    "MIN_SIZE",
    "Compress",
    "accepts_gzip",
    "add_vary",
    "coded_etag",
    "compressible",
    "gzipped",
]
