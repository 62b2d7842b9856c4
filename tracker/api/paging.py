"""Opaque cursors for the API's lists, and their `Link: <…>; rel="next"` header (RFC 8288).

A cursor is base64url JSON naming the list it belongs to (`scope`: the route, the order and the
filters) and the key of the last item served. A cursor given to another list, another order or
other filters, or one that does not decode, is a 400 problem, never a wrong page.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from fastapi import Request

from tracker.api.problem import Problem

DEFAULT_LIMIT = 50
MAX_LIMIT = 500


def scope_of(kind: str, params: Mapping[str, Any]) -> str:
    """A short fingerprint of a list (`kind`) and the parameters that shape it."""
    text = json.dumps([kind, {k: params[k] for k in sorted(params)}], default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def encode(scope: str, key: list[Any]) -> str:
    raw = json.dumps({"s": scope, "k": key}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode(cursor: str | None, scope: str) -> list[Any] | None:
    """The key a cursor carries (None for no cursor); a 400 problem for one that is not ours."""
    if cursor is None or cursor == "":
        return None
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        data = json.loads(base64.urlsafe_b64decode(padded.encode()))
        if not isinstance(data, dict) or not isinstance(data.get("k"), list):
            raise ValueError(cursor)
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise Problem(400, "invalid-cursor", "cursor: not a cursor this API gave out") from None
    if data.get("s") != scope:
        raise Problem(
            400,
            "invalid-cursor",
            "cursor: it belongs to another list, order or filters; start again without it",
        )
    key: list[Any] = data["k"]
    return key


def next_link(request: Request, cursor: str) -> dict[str, str]:
    """The `Link` header pointing at the next page (the same query with `cursor`)."""
    url = request.url.include_query_params(cursor=cursor)
    return {"Link": f'<{url}>; rel="next"'}


__all__ = ["DEFAULT_LIMIT", "MAX_LIMIT", "decode", "encode", "next_link", "scope_of"]
