"""Request bodies limited while they stream in (issue 10, items 6 and 8): an ASGI middleware in
front of every route.

- A declared `Content-Length` over `max_bytes` is refused with 413 before a byte is read.
- A body without one (chunked) is read chunk by chunk and refused with 413 as soon as it passes
  `max_bytes`: a 100 MB chunked body costs at most `max_bytes` plus one chunk of memory.
- A JSON body nested deeper than `max_depth` is refused with 400 before any route parses it
  (`tracker.shared.bounded.json_depth`, iterative), so no handler can hit Python's recursion limit.
Answers are problem documents (`tracker.api.problem`), with OSV's `code` and `message` on the
OSV routes. The body, once read, is replayed to the route unchanged.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from tracker.api.problem import PROBLEM_TYPE, body_of, document, is_osv_path
from tracker.shared.bounded import json_depth

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

MAX_BODY = 1_000_000
MAX_JSON_DEPTH = 64


async def _answer(send: Send, scope: Scope, status: int, message: str) -> None:
    slug = "too-large" if status == 413 else "invalid-request"
    path = str(scope.get("path", ""))
    doc = document(status, slug, message, path)
    if is_osv_path(path):
        doc["code"] = 3
    body = body_of(doc)
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", PROBLEM_TYPE.encode()),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class BodyLimit:
    """ASGI middleware: see the module docstring."""

    def __init__(
        self, app: ASGIApp, *, max_bytes: int = MAX_BODY, max_depth: int = MAX_JSON_DEPTH
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.max_depth = max_depth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        too_big = f"request body over {self.max_bytes:,} bytes"
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length", b"").strip()
        if declared.isdigit() and int(declared) > self.max_bytes:
            await _answer(send, scope, 413, too_big)
            return
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await _answer(send, scope, 413, too_big)
                return
            chunks.append(chunk)
            more = bool(message.get("more_body", False))
        body = b"".join(chunks)
        if body and json_depth(body, self.max_depth) > self.max_depth:
            await _answer(
                send, scope, 400, f"request body is JSON nested deeper than {self.max_depth} levels"
            )
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


__all__ = ["MAX_BODY", "MAX_JSON_DEPTH", "BodyLimit"]
