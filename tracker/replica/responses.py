"""HTTP building blocks of the replica: request/response values, Hub-shaped errors, ranges, pagination.

Errors carry `X-Error-Code` and `X-Error-Message` (HUB-PROTOCOL.md §10); pagination links are
absolute (§14.2); ranges follow RFC 9110 §14 (one range served, 416 when unsatisfiable).
"""

from __future__ import annotations

import base64
import binascii
import json
import mimetypes
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlencode


@dataclass
class Response:
    """A response to send: status, headers, and a body (bytes, or chunks with a known length)."""

    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes | Iterable[bytes] = b""
    length: int | None = None

    @property
    def content_length(self) -> int:
        if self.length is not None:
            return self.length
        return len(self.body) if isinstance(self.body, bytes) else 0


class HubError(Exception):
    """An error response in the Hub's shape (`X-Error-Code`, `X-Error-Message`, JSON body)."""

    def __init__(
        self,
        status: int,
        message: str,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.headers = headers or {}

    def response(self) -> Response:
        headers = {"Content-Type": "application/json; charset=utf-8", **self.headers}
        headers["X-Error-Message"] = self.message.encode("ascii", "replace").decode()
        if self.code:
            headers["X-Error-Code"] = self.code
        return Response(self.status, headers, json.dumps({"error": self.message}).encode())


@dataclass(frozen=True)
class Request:
    """What a route needs from the HTTP request."""

    method: str
    path: str  # raw, percent-encoded, without query
    query: dict[str, list[str]]
    headers: dict[str, str]  # lower-case names
    body: bytes
    base_url: str  # scheme://host:port the client used

    def token(self) -> str | None:
        auth = self.headers.get("authorization", "")
        return auth[7:].strip() if auth.lower().startswith("bearer ") else None

    def flag(self, name: str) -> bool:
        return self.query.get(name, [""])[-1].lower() in ("1", "true")


def json_response(data: Any, headers: dict[str, str] | None = None) -> Response:
    """A 200 with `data` as compact JSON (plus `headers`)."""
    body = json.dumps(data, separators=(",", ":")).encode()
    return Response(
        200, {"Content-Type": "application/json; charset=utf-8", **(headers or {})}, body
    )


def ranged(
    req: Request, headers: dict[str, str], size: int, read: Callable[[int, int], Iterator[bytes]]
) -> Response:
    """200 with the whole content, 206 for one satisfiable `Range`, 416 when it cannot be satisfied.

    Multiple or malformed ranges are ignored (RFC 9110 §14.2 allows serving the whole content).
    """
    spec = req.headers.get("range")
    start, end, status = 0, size, 200
    if spec:
        parsed = parse_range(spec, size)
        if isinstance(parsed, str):
            return Response(
                416,
                {**headers, "Content-Range": f"bytes */{size}", "Content-Type": "text/plain"},
                b"Requested Range Not Satisfiable",
            )
        if parsed is not None:
            start, end = parsed
            status = 206
            headers = {**headers, "Content-Range": f"bytes {start}-{end - 1}/{size}"}
    body = b"" if req.method == "HEAD" else read(start, end)
    return Response(status, headers, body, end - start)


def parse_range(spec: str, size: int) -> tuple[int, int] | str | None:
    """`Range: spec` against `size` bytes: (start, stop) half-open, "unsatisfiable", or None to ignore
    it (malformed, multiple ranges, or last < first)."""
    match = re.fullmatch(r"\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*", spec)
    if match is None:
        return None
    first, last = match.groups()
    if not first and not last:
        return None
    if not first:
        suffix = int(last)
        if suffix == 0 or size == 0:
            return "unsatisfiable"
        return max(0, size - suffix), size
    begin = int(first)
    if last and int(last) < begin:
        return None
    if begin >= size:
        return "unsatisfiable"
    stop = min(int(last) + 1, size) if last else size
    return begin, stop


def int_param(req: Request, name: str, default: int, low: int, high: int) -> int:
    """Query parameter `name` as an int in [low, high] (`default` when absent); HubError 400 otherwise."""
    raw = req.query.get(name, [""])[-1]
    if raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise HubError(400, f"Invalid {name}: {raw!r}") from None
    if not low <= value <= high:
        raise HubError(400, f"{name} must be between {low} and {high}")
    return value


def next_link(req: Request, updates: dict[str, str]) -> str:
    """An absolute `Link: <...>; rel="next"` (a relative one breaks the client, §14.2)."""
    query = {k: list(v) for k, v in req.query.items()}
    for key, value in updates.items():
        query[key] = [value]
    return f'<{req.base_url}{req.path}?{urlencode(query, doseq=True)}>; rel="next"'


def encode_cursor(offset: int) -> str:
    """The opaque tree-pagination cursor for `offset`."""
    return base64.urlsafe_b64encode(json.dumps({"o": offset}).encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> int:
    """The offset in an opaque cursor (0 for ""); HubError 400 when it is not one of ours."""
    if not cursor:
        return 0
    try:
        data = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        offset = data["o"]
    except (ValueError, KeyError, TypeError, binascii.Error):
        raise HubError(400, "Invalid cursor") from None
    if not isinstance(offset, int) or offset < 0:
        raise HubError(400, "Invalid cursor")
    return offset


def content_type(path: str) -> str:
    """A Content-Type for `path` by extension (octet-stream when unknown)."""
    guessed, _ = mimetypes.guess_type(path, strict=False)
    if guessed is None:
        return "application/octet-stream"
    return (
        f"{guessed}; charset=utf-8" if guessed.startswith("text/") or "json" in guessed else guessed
    )


def disposition(path: str) -> str:
    """The Hub's `Content-Disposition: inline; filename*=...; filename="..."` for `path`."""
    base = path.rsplit("/", 1)[-1]
    ascii_name = base.encode("ascii", "replace").decode().replace('"', "")
    return f"inline; filename*=UTF-8''{quote(base)}; filename=\"{ascii_name}\";"
