"""`HEAD` wherever `GET` works (RFC 9110 §9.3.2): feed readers and link checkers ask with HEAD.

FastAPI routes declare GET only, so this ASGI middleware runs a HEAD request as the GET it
mirrors and sends that answer's status and headers (Content-Length, ETag, Cache-Control, …
included) without its body. A 304 for a matching `If-None-Match` comes out the same way.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send


class HeadAsGet:
    """Answer `HEAD` as `GET` without the body."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return

        async def bodiless(message: Message) -> None:
            if message["type"] == "http.response.body":
                if message.get("more_body", False):
                    return  # drop the chunks; the last message ends the answer
                message = {"type": "http.response.body", "body": b"", "more_body": False}
            await send(message)

        await self.app({**scope, "method": "GET"}, receive, bodiless)
