"""What `tracker serve` answers to a request that never reaches the app: a problem document
(`application/problem+json`, RFC 9457), as every other error, not uvicorn's `text/plain`
"Invalid HTTP request received.".

uvicorn's httptools protocol parses a request's target with `httptools.parse_url`, whose offsets
are 16-bit: a URL over 65,535 bytes cannot be parsed, and the connection was answered with a plain
400. Here such a URL is answered 414 URI Too Long (`urn:tracker:problem:uri-too-long`, with its
length and the limit), and any other request the parser refuses 400 (`about:blank`); both close
the connection, as uvicorn's own answer does.
"""

from __future__ import annotations

import json

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from tracker.api.problem import PROBLEM_TYPE, TYPE_PREFIX

MAX_URL_BYTES = 65_535
"""The longest request target the HTTP parser reads (`httptools.parse_url`'s 16-bit offsets)."""


class ProblemHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, answering the requests it cannot parse with a problem
    document (`tracker serve` passes it as uvicorn's `http`)."""

    def send_400_response(self, msg: str) -> None:
        if len(self.url) > MAX_URL_BYTES:
            status, reason = 414, "URI Too Long"
            problem: dict[str, object] = {
                "type": f"{TYPE_PREFIX}uri-too-long",
                "title": reason,
                "status": status,
                "detail": f"the request's URL is {len(self.url):,} bytes; this server reads "
                f"URLs of up to {MAX_URL_BYTES:,} bytes",
                "length": len(self.url),
                "limit": MAX_URL_BYTES,
            }
        else:
            status, reason = 400, "Bad Request"
            problem = {
                "type": "about:blank",
                "title": reason,
                "status": status,
                "detail": "the request is not valid HTTP/1.1",
            }
        body = json.dumps(problem, separators=(",", ":")).encode()
        content = [f"HTTP/1.1 {status} {reason}\r\n".encode("ascii")]
        for name, value in self.server_state.default_headers:
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
        self.transport.write(b"".join(content))
        self.transport.close()
