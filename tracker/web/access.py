"""The pages and the read token (`TRACKER_API_READ_TOKEN`): when one is set, a page needs it.

A program sends it as the API does (`Authorization: Bearer TOKEN`). A browser cannot, so a page
asked for without it answers `401` with a small form (no JavaScript): the token is POSTed to
`/session` (in the body, which no access log records, never in the URL), checked in constant
time (`tracker.api.auth.token_matches`), and kept in a cookie (`tracker_read`: HttpOnly,
SameSite=Strict, Secure over https, the browser session only) that later pages are checked
against. A wrong token answers the form again, 401. The token is never logged or echoed.
"""

from __future__ import annotations

from urllib.parse import parse_qs

from fastapi import Request

from tracker.api.auth import read_allowed, token_matches
from tracker.settings import Settings

COOKIE = "tracker_read"
MAX_FORM = 4096


def allowed(request: Request, settings: Settings) -> bool:
    """Whether `request` may read the pages: no read token set, a valid bearer token, or the
    cookie of a valid token."""
    accepted = settings.api_tokens("read")
    if not accepted or read_allowed(request):
        return True
    cookie = request.cookies.get(COOKIE)
    return bool(cookie) and token_matches(str(cookie), accepted)


def safe_next(value: str | None) -> str:
    """`value` when it is a path on this server (`/...`, not `//host`), else `/`: the form never
    sends a browser elsewhere."""
    if not value or not value.startswith("/") or value.startswith("//") or "\\" in value:
        return "/"
    return value


async def form(request: Request) -> dict[str, str]:
    """The urlencoded form of a POST (first value of each field; a body over 4 KB: empty)."""
    body = await request.body()
    if len(body) > MAX_FORM:
        return {}
    fields = parse_qs(body.decode("utf-8", "replace"), max_num_fields=8)
    return {k: v[0] for k, v in fields.items() if v}


def token_ok(token: str, settings: Settings) -> bool:
    accepted = settings.api_tokens("read")
    return bool(token) and bool(accepted) and token_matches(token, accepted)
