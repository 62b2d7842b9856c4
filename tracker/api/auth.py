"""Tokens for the HTTP API (issue 8, item 6).

- Writes (`require_write`): always need a bearer token from `TRACKER_API_WRITE_TOKEN`; none
  configured: 403 (writes disabled); missing or wrong: 401; a valid read token, which may only
  read: 403 `insufficient-scope` (RFC 6750 `error="insufficient_scope"`).
- Reads (`require_read`, and `check_read(request)` for code outside FastAPI's dependencies, such
  as the pages and feeds): open by default; when `TRACKER_API_READ_TOKEN` is set, every read needs
  a token from it or from the write tokens (a writer may read), sent as `Authorization: Bearer
  TOKEN` or, for clients that can only do HTTP Basic (feed readers: `https://feed:TOKEN@host/…`),
  as the password of `Authorization: Basic` (the user name is not checked). Missing or wrong: 401.
Several tokens, comma-separated, may be configured during a rotation. Every configured token is
compared in constant time (`hmac.compare_digest`, no early exit); no token is logged or echoed,
and none is accepted in a URL's query (access logs record those).
A read's 401 carries `WWW-Authenticate: Basic realm="tracker", charset="UTF-8", Bearer
realm="tracker"` (RFC 7617 and RFC 6750; `error="invalid_token"` on the Bearer challenge when
a token was given but is not valid), Basic first for feed readers, so a client that answers
challenges (urllib's `HTTPBasicAuthHandler`) sends its credentials; a write's only the Bearer
one.
"""

from __future__ import annotations

import base64
import hmac
from typing import Any, Literal

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from fastapi.security.http import HTTPBase

from tracker.api.problem import Problem
from tracker.settings import Settings

REALM = 'Bearer realm="tracker"'
BASIC = 'Basic realm="tracker", charset="UTF-8"'
READ_SCHEME = "ReadToken"
_read_bearer = HTTPBearer(
    auto_error=False,
    scheme_name=READ_SCHEME,
    description="TRACKER_API_READ_TOKEN or a write token; only when TRACKER_API_READ_TOKEN is "
    "set (reads are open otherwise).",
)
BASIC_SCHEME = "ReadTokenBasic"
# Declares HTTP Basic in the OpenAPI schema (the check itself is `check_read`'s): it never refuses.
_read_basic = HTTPBase(
    scheme="basic",
    scheme_name=BASIC_SCHEME,
    description="The read token (or a write token) as the password, any user name: for feed "
    "readers; only when TRACKER_API_READ_TOKEN is set.",
    auto_error=False,
)
_write_bearer = HTTPBearer(
    auto_error=False, scheme_name="WriteToken", description="TRACKER_API_WRITE_TOKEN."
)


def _settings(request: Request) -> Settings:
    settings: Settings = request.app.state.app.settings
    return settings


def token_matches(presented: str, accepted: tuple[str, ...]) -> bool:
    """Whether `presented` equals one of `accepted`; every one is compared, in constant time."""
    given = presented.encode()
    found = False
    for token in accepted:
        found |= hmac.compare_digest(given, token.encode())
    return found


def _presented(request: Request, *, basic: bool) -> str | None:
    """The token of `Authorization`: a bearer token, or (`basic`) the password of HTTP Basic
    credentials; None when there is none (no header, another scheme, empty). Basic credentials
    that do not decode present "" (never a valid token)."""
    scheme, _, value = (request.headers.get("authorization") or "").partition(" ")
    value = value.strip()
    if not value:
        return None
    if scheme.lower() == "bearer":
        return value
    if basic and scheme.lower() == "basic":
        try:
            decoded = base64.b64decode(value, validate=True).decode("utf-8")
        except ValueError:  # not base64 (binascii.Error), not ASCII, not UTF-8 underneath
            return ""
        return decoded.partition(":")[2]
    return None


def _check(request: Request, which: Literal["read", "write"], accepted: tuple[str, ...]) -> None:
    reading = which == "read"
    verb = "reading" if reading else "writing"
    presented = _presented(request, basic=reading)
    # Basic first: feed readers read the first challenge (feedparser answers a 401 to its Basic
    # credentials by trying the first scheme named, and fails on any but Basic and Digest).
    challenges = f"{BASIC}, {REALM}" if reading else REALM
    if presented is None:
        needs = "`Authorization: Bearer <token>` (or the token as the Basic password)"
        raise Problem(
            401,
            "unauthorized",
            f"{verb} needs {needs if reading else '`Authorization: Bearer <token>`'}",
            headers={"WWW-Authenticate": challenges},
        )
    if not token_matches(presented, accepted):
        if not reading and token_matches(presented, _settings(request).api_tokens("read")):
            raise Problem(
                403,
                "insufficient-scope",
                "writing: this token may only read (insufficient_scope); writes need a token "
                "from TRACKER_API_WRITE_TOKEN",
                headers={"WWW-Authenticate": f'{REALM}, error="insufficient_scope"'},
            )
        invalid = f'{REALM}, error="invalid_token"'
        raise Problem(
            401,
            "unauthorized",
            f"{verb}: the {'token' if reading else 'bearer token'} is not valid",
            headers={"WWW-Authenticate": f"{BASIC}, {invalid}" if reading else invalid},
        )


def check_read(request: Request) -> None:
    """Raise a 401 `Problem` unless `request` may read (always, when no read token is set)."""
    accepted = _settings(request).api_tokens("read")
    if accepted:
        _check(request, "read", accepted)


def read_allowed(request: Request) -> bool:
    """Whether `request` may read (for the pages and feeds, which answer their own 401)."""
    try:
        check_read(request)
    except Problem:
        return False
    return True


def require_read(
    request: Request,
    _: HTTPAuthorizationCredentials | None = Depends(_read_bearer),
    __: HTTPAuthorizationCredentials | None = Depends(_read_basic),
) -> None:
    """FastAPI dependency of every read route: see `check_read`."""
    check_read(request)


def require_write(
    request: Request, _: HTTPAuthorizationCredentials | None = Depends(_write_bearer)
) -> None:
    """FastAPI dependency of every write route: a write token, always (403 when none is set)."""
    accepted = _settings(request).api_tokens("write")
    if not accepted:
        raise Problem(
            403,
            "writes-disabled",
            "writes are disabled: set TRACKER_API_WRITE_TOKEN to enable them",
        )
    _check(request, "write", accepted)


def optional_reads(schema: dict[str, Any]) -> dict[str, Any]:
    """Mark the read token optional in an OpenAPI schema (`security: [{}, {ReadToken: []},
    {ReadTokenBasic: []}]`): reads are open unless TRACKER_API_READ_TOKEN is set."""
    reads: list[dict[str, list[str]]] = [{READ_SCHEME: []}, {BASIC_SCHEME: []}]
    for item in schema.get("paths", {}).values():
        for op in item.values():
            if isinstance(op, dict) and op.get("security") == reads:
                op["security"] = [{}, *reads]
    return schema


__all__ = [
    "BASIC_SCHEME",
    "READ_SCHEME",
    "check_read",
    "optional_reads",
    "read_allowed",
    "require_read",
    "require_write",
    "token_matches",
]
