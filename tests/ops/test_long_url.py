"""A request `tracker serve` cannot parse is answered with a problem document (issue 27: "a 70 kB
URL gets a text/plain answer, not a problem document"), under both of uvicorn's HTTP
implementations (`TRACKER_HTTP_PARSER`).

httptools (the default) cannot parse a URL over 65,535 bytes (`httptools.parse_url`'s 16-bit
offsets) and answered a plain-text 400; the installed `tracker serve`, as a process, now answers
414 with `application/problem+json`, and a request line that is not HTTP a 400 problem document.
A URL just under the limit still reaches the app (its 404 problem document).

h11 refused a request head over its 16,384-byte buffer with a plain-text 400 (and parsed a longer
one that arrived in one read); now a request line over 16,384 bytes is a 414 and a head over it a
431, both problem documents, whether the head arrives at once or in pieces that never end it."""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

TRACKER = Path(sys.executable).with_name("tracker")


def _raw(port: int, request: bytes) -> tuple[str, dict[str, str], bytes]:
    """Send `request` as is; (status line, headers, body) of the answer, read to the close."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        conn.sendall(request)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                break
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = dict(line.split(": ", 1) for line in lines[1:])
        want = int(headers.get("content-length", "0"))
        while len(body) < want:
            chunk = conn.recv(65536)
            if not chunk:
                break
            body += chunk
    return lines[0], {k.lower(): v for k, v in headers.items()}, body


@contextmanager
def _serving(tmp_path: Path, **extra: str) -> Iterator[int]:
    """The installed `tracker serve` on a free port (its environment: `extra`), until exit."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (tmp_path / "watchlist.yaml").write_text("repos:\n  - id: mistralai/Mixtral-8x7B-v0.1\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACKER_", "HF_"))}
    env.update(
        TRACKER_STATE_DIR=str(tmp_path / "state"),
        TRACKER_WATCHLIST=str(tmp_path / "watchlist.yaml"),
        **extra,
    )
    # stderr to a file: the access log of a 65 kB URL would fill a pipe no one reads
    log = (tmp_path / "serve.log").open("wb")
    proc = subprocess.Popen(
        [str(TRACKER), "serve", "--port", str(port)],
        env=env, stdout=subprocess.DEVNULL, stderr=log,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                status, _, _ = _raw(port, b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
                if status.startswith("HTTP/1.1 200"):
                    break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                err = (tmp_path / "serve.log").read_text()
                pytest.fail(f"tracker serve did not start: {err[-2000:]}")
            time.sleep(0.2)
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


NOT_HTTP = {
    "type": "about:blank",
    "title": "Bad Request",
    "status": 400,
    "detail": "the request is not valid HTTP/1.1",
}


def test_a_70_kb_url_is_answered_with_a_problem_document(tmp_path: Path) -> None:
    with _serving(tmp_path) as port:
        path = "/v1/vulns/" + "a" * 70_000
        status, headers, body = _raw(
            port, f"GET {path} HTTP/1.1\r\nHost: t\r\nAccept: */*\r\n\r\n".encode()
        )
        assert status == "HTTP/1.1 414 URI Too Long"
        assert headers["content-type"] == "application/problem+json"
        assert headers["connection"] == "close"
        assert json.loads(body) == {
            "type": "urn:tracker:problem:uri-too-long",
            "title": "URI Too Long",
            "status": 414,
            "detail": "the request's URL is 70,010 bytes; this server reads URLs of up to "
            "65,535 bytes",
            "length": 70_010,
            "limit": 65_535,
        }
        # just under the parser's limit, the app answers (an unknown advisory: its 404)
        near = "/v1/vulns/" + "a" * 65_000
        status, headers, body = _raw(port, f"GET {near} HTTP/1.1\r\nHost: t\r\n\r\n".encode())
        assert status == "HTTP/1.1 404 Not Found"
        assert headers["content-type"] == "application/problem+json"
        # not HTTP at all
        status, headers, body = _raw(port, b"HELLO\x00 there\r\n\r\n")
        assert status == "HTTP/1.1 400 Bad Request"
        assert headers["content-type"] == "application/problem+json"
        assert json.loads(body) == NOT_HTTP
        # the server goes on serving
        assert _raw(port, b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")[0] == "HTTP/1.1 200 OK"


def _pieces(port: int, parts: list[bytes]) -> tuple[str, dict[str, str], bytes]:
    """Send `parts` one at a time (each its own read on the server) until the server answers;
    the answer as `_raw` reads it."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        for part in parts:
            # stop sending once the server has answered: bytes sent after its close would
            # reset the connection and could discard the answer unread
            if select.select([conn], [], [], 0.2)[0]:
                break
            try:
                conn.sendall(part)
            except (BrokenPipeError, ConnectionResetError):
                break
        data = b""
        while True:
            chunk = conn.recv(65536)
            if not chunk:
                break
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v for k, v in (line.split(": ", 1) for line in lines[1:])}
    return lines[0], headers, body


def test_h11_heads_over_its_limit_are_answered_with_problem_documents(tmp_path: Path) -> None:
    too_long = {
        "type": "urn:tracker:problem:uri-too-long",
        "title": "URI Too Long",
        "status": 414,
    }
    too_large = {
        "type": "urn:tracker:problem:header-fields-too-large",
        "title": "Request Header Fields Too Large",
        "status": 431,
    }
    with _serving(tmp_path, TRACKER_HTTP_PARSER="h11") as port:
        # a 20 kB URL in one read: its request line is 20,025 bytes
        url = "/v1/vulns/" + "a" * 20_000
        status, headers, body = _raw(port, f"GET {url} HTTP/1.1\r\nHost: t\r\n\r\n".encode())
        assert status == "HTTP/1.1 414 URI Too Long"
        assert (headers["content-type"], headers["connection"]) == (
            "application/problem+json",
            "close",
        )
        assert json.loads(body) == {
            **too_long,
            "detail": "the request line is 20,025 bytes; this server reads request heads of "
            "up to 16,384 bytes",
            "length": 20_025,
            "limit": 16_384,
        }
        # the same line in pieces that never end it: h11's own refusal, its length unknown
        status, headers, body = _pieces(
            port, [b"GET /v1/vulns/"] + [b"a" * 4096] * 8 + [b"a" * 65536]
        )
        assert status == "HTTP/1.1 414 URI Too Long"
        assert headers["content-type"] == "application/problem+json"
        assert json.loads(body) == {
            **too_long,
            "detail": "the request line is over 16,384 bytes; this server reads request heads "
            "of up to 16,384 bytes",
            "limit": 16_384,
        }
        # a short line with a 20 kB header field, at once (parsed by h11, refused here) ...
        field = b"X-Big: " + b"b" * 20_000 + b"\r\n"
        status, headers, body = _raw(
            port, b"GET /healthz HTTP/1.1\r\nHost: t\r\n" + field + b"\r\n"
        )
        assert status == "HTTP/1.1 431 Request Header Fields Too Large"
        assert headers["content-type"] == "application/problem+json"
        # line 23 + Host 9 + the field 20,009 + the final CRLF 2
        assert json.loads(body) == {
            **too_large,
            "detail": "the request head (its request line and header fields) is 20,043 bytes; "
            "this server reads request heads of up to 16,384 bytes",
            "length": 20_043,
            "limit": 16_384,
        }
        # ... and in pieces, never ending the head (h11's own refusal)
        status, headers, body = _pieces(
            port,
            [b"GET /healthz HTTP/1.1\r\nHost: t\r\n"] + [b"X-Slow: " + b"c" * 4000 + b"\r\n"] * 8,
        )
        assert status == "HTTP/1.1 431 Request Header Fields Too Large"
        assert json.loads(body) == {
            **too_large,
            "detail": "the request head (its request line and header fields) is over 16,384 "
            "bytes; this server reads request heads of up to 16,384 bytes",
            "limit": 16_384,
        }
        # a head just under the limit reaches the app (an unknown advisory: its 404)
        near = "/v1/vulns/" + "a" * 16_000
        status, headers, body = _raw(port, f"GET {near} HTTP/1.1\r\nHost: t\r\n\r\n".encode())
        assert status == "HTTP/1.1 404 Not Found"
        assert headers["content-type"] == "application/problem+json"
        # not HTTP at all
        status, headers, body = _raw(port, b"HELLO\x00 there\r\n\r\n")
        assert status == "HTTP/1.1 400 Bad Request"
        assert headers["content-type"] == "application/problem+json"
        assert json.loads(body) == NOT_HTTP
        # the server goes on serving, under h11
        status, headers, _ = _raw(port, b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
        assert status == "HTTP/1.1 200 OK"
