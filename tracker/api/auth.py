"""Bearer tokens for the HTTP API (issue 8, item 6).

- Writes (`require_write`): always need a token from `TRACKER_API_WRITE_TOKEN`; none configured:
  403 (writes disabled); missing or wrong: 401.
- Reads (`require_read`, and `check_read(request)` for code outside FastAPI's dependencies, such
  as the pages and feeds): open by default; when `TRACKER_API_READ_TOKEN` is set, every read needs
  a bearer token from it or from the write tokens (a writer may read). Missing or wrong: 401.
Several tokens, comma-separated, may be configured during a rotation. Every configured token is
compared in constant time (`hmac.compare_digest`, no early exit); no token is logged or echoed.
A 401 carries `WWW-Authenticate: Bearer realm="tracker"` (RFC 6750; `error="invalid_token"`
when a token was given but is not valid).
"""

from __future__ import annotations

import hmac
from typing import Any, Literal

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from tracker.api.problem import Problem
from tracker.settings import Settings

REALM = 'Bearer realm="tracker"'
READ_SCHEME = "ReadToken"
_read_bearer = HTTPBearer(
    auto_error=False,
    scheme_name=READ_SCHEME,
    description="TRACKER_API_READ_TOKEN or a write token; only when TRACKER_API_READ_TOKEN is "
    "set (reads are open otherwise).",
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


def _presented(request: Request) -> str | None:
    """The bearer token of `Authorization`, or None (no header, another scheme, empty)."""
    scheme, _, value = (request.headers.get("authorization") or "").partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        return None
    return value.strip()


def _check(request: Request, which: Literal["read", "write"], accepted: tuple[str, ...]) -> None:
    verb = "reading" if which == "read" else "writing"
    presented = _presented(request)
    if presented is None:
        raise Problem(
            401,
            "unauthorized",
            f"{verb} needs `Authorization: Bearer <token>`",
            headers={"WWW-Authenticate": REALM},
        )
    if not token_matches(presented, accepted):
        raise Problem(
            401,
            "unauthorized",
            f"{verb}: the bearer token is not valid",
            headers={"WWW-Authenticate": f'{REALM}, error="invalid_token"'},
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
    request: Request, _: HTTPAuthorizationCredentials | None = Depends(_read_bearer)
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
    """Mark the read token optional in an OpenAPI schema (`security: [{}, {ReadToken: []}]`):
    reads are open unless TRACKER_API_READ_TOKEN is set."""
    for item in schema.get("paths", {}).values():
        for op in item.values():
            if isinstance(op, dict) and op.get("security") == [{READ_SCHEME: []}]:
                op["security"] = [{}, {READ_SCHEME: []}]
    return schema


__all__ = [
    "READ_SCHEME",
    "check_read",
    "optional_reads",
    "read_allowed",
    "require_read",
    "require_write",
    "token_matches",
]
