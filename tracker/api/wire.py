"""What `tracker serve` answers to a request that never reaches the app: a problem document
(`application/problem+json`, RFC 9457), as every other error, not uvicorn's `text/plain`
"Invalid HTTP request received.", under either of uvicorn's HTTP implementations
(`TRACKER_HTTP_PARSER`).

httptools (the default): uvicorn parses a request's target with `httptools.parse_url`, whose
offsets are 16-bit: a URL over 65,535 bytes cannot be parsed, and the connection was answered
with a plain 400. Here such a URL is answered 414 URI Too Long (`urn:tracker:problem:uri-too-long`,
with its length and the limit).

h11: h11 buffers at most `h11_max_incomplete_event_size` bytes (16,384 by default, uvicorn's
`--h11-max-incomplete-event-size`) of a request head it has not seen the end of, and refused more
with a plain 400. h11 enforces that only while the head is incomplete (a longer head that arrives
in one read is parsed), so here the same limit holds for every head: a request line over it is
answered 414, a head (request line and header fields) over it 431 Request Header Fields Too Large
(`urn:tracker:problem:header-fields-too-large`), each with the limit and, where the whole line or
head was read, its length.

Any other request either parser refuses is answered 400 (`about:blank`); every one of these answers
closes the connection, as uvicorn's own does.
"""

from __future__ import annotations

import json
from typing import Any

import h11
from h11._connection import DEFAULT_MAX_INCOMPLETE_EVENT_SIZE
from uvicorn.config import Config
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from tracker.api.problem import PROBLEM_TYPE, TYPE_PREFIX

MAX_URL_BYTES = 65_535
"""The longest request target the HTTP parser reads (`httptools.parse_url`'s 16-bit offsets)."""

Problem = tuple[int, str, dict[str, object]]
"""(status, reason phrase, problem document) of an answer written before the app."""


def not_http() -> Problem:
    """The 400 of a request the parser refuses for any other reason than its size."""
    problem: dict[str, object] = {
        "type": "about:blank",
        "title": "Bad Request",
        "status": 400,
        "detail": "the request is not valid HTTP/1.1",
    }
    return 400, "Bad Request", problem


def answer_bytes(problem: Problem, default_headers: list[tuple[bytes, bytes]]) -> bytes:
    """The whole HTTP/1.1 answer carrying `problem`, with the server's default headers
    (date, server), `connection: close`."""
    status, reason, document = problem
    body = json.dumps(document, separators=(",", ":")).encode()
    content = [f"HTTP/1.1 {status} {reason}\r\n".encode("ascii")]
    for name, value in default_headers:
        content.extend([name, b": ", value, b"\r\n"])
    content.extend(
        [
            f"content-type: {PROBLEM_TYPE}\r\n".encode("ascii"),
            b"content-length: " + str(len(body)).encode("ascii") + b"\r\n",
            b"connection: close\r\n",
            b"\r\n",
            body,
        ]
    )
    return b"".join(content)


class ProblemHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, answering the requests it cannot parse with a problem
    document (`tracker serve` passes it as uvicorn's `http`)."""

    def send_400_response(self, msg: str) -> None:
        if len(self.url) > MAX_URL_BYTES:
            status, reason = 414, "URI Too Long"
            problem: Problem = (
                status,
                reason,
                {
                    "type": f"{TYPE_PREFIX}uri-too-long",
                    "title": reason,
                    "status": status,
                    "detail": f"the request's URL is {len(self.url):,} bytes; this server reads "
                    f"URLs of up to {MAX_URL_BYTES:,} bytes",
                    "length": len(self.url),
                    "limit": MAX_URL_BYTES,
                },
            )
        else:
            problem = not_http()
        self.transport.write(answer_bytes(problem, self.server_state.default_headers))
        self.transport.close()


def head_too_long(status: int, limit: int, length: int | None) -> Problem:
    """The 414 (`status` 414: the request line) or 431 (the head) of a request head over
    `limit` bytes; `length` the line's or head's bytes where the whole of it was read."""
    if status == 414:
        reason, slug, what = "URI Too Long", "uri-too-long", "request line"
    else:
        reason, slug, what = (
            "Request Header Fields Too Large",
            "header-fields-too-large",
            "request head (its request line and header fields)",
        )
    size = f"{length:,} bytes" if length is not None else f"over {limit:,} bytes"
    problem: dict[str, object] = {
        "type": f"{TYPE_PREFIX}{slug}",
        "title": reason,
        "status": status,
        "detail": f"the {what} is {size}; this server reads request heads of up to {limit:,} bytes",
    }
    if length is not None:
        problem["length"] = length
    problem["limit"] = limit
    return status, reason, problem


class HeadLimitConnection(h11.Connection):
    """h11's server side with its head limit held for every request head: a `Request` whose
    line or head is over `limit` bytes (counted as h11 read them: `METHOD SP target SP HTTP/x.y
    CRLF`, each field `name: value CRLF` without the whitespace around its value, the final
    CRLF) raises h11's RemoteProtocolError, as an
    incomplete head over it does; `refused` keeps the answer the last refusal gets."""

    def __init__(self, limit: int) -> None:
        super().__init__(h11.SERVER, max_incomplete_event_size=limit)
        self.limit = limit
        self.refused: Problem | None = None

    def next_event(self) -> Any:
        try:
            event = super().next_event()
        except h11.RemoteProtocolError as exc:
            self.refused = self._too_long(exc) or not_http()
            raise
        if isinstance(event, h11.Request):
            line = len(event.method) + len(event.target) + len(event.http_version) + 9
            head = line + sum(len(n) + len(v) + 4 for n, v in event.headers.raw_items()) + 2
            if line > self.limit or head > self.limit:
                self.refused = head_too_long(
                    414 if line > self.limit else 431,
                    self.limit,
                    line if line > self.limit else head,
                )
                raise h11.RemoteProtocolError("request head too long", error_status_hint=431)
        return event

    def _too_long(self, exc: h11.RemoteProtocolError) -> Problem | None:
        """The 414 or 431 of h11's own refusal of an incomplete head over the limit (its
        431 hint, with more than `limit` bytes held): 414 while the request line has not
        ended within the bytes held."""
        held, _ = self.trailing_data
        if exc.error_status_hint != 431 or len(held) <= self.limit:
            return None
        line_ended = b"\n" in held.lstrip(b"\r\n")[: self.limit + 2]
        return head_too_long(431 if line_ended else 414, self.limit, None)


class ProblemH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with `HeadLimitConnection`, answering the requests it refuses
    with a problem document (`tracker serve` with TRACKER_HTTP_PARSER=h11)."""

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: Any = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        limit = config.h11_max_incomplete_event_size
        self.conn = HeadLimitConnection(
            DEFAULT_MAX_INCOMPLETE_EVENT_SIZE if limit is None else limit
        )

    def send_400_response(self, msg: str) -> None:
        conn = self.conn
        problem = conn.refused if isinstance(conn, HeadLimitConnection) else None
        self.transport.write(answer_bytes(problem or not_http(), self.server_state.default_headers))
        self.transport.close()
