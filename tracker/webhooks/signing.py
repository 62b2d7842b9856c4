"""Standard Webhooks signing (https://www.standardwebhooks.com/, spec `standard-webhooks.md`).

A secret is `whsec_` + base64 of 24 to 64 random bytes; the HMAC key is the decoded bytes. A
delivery carries `webhook-id` (the message id, the same on every attempt), `webhook-timestamp`
(Unix seconds of the attempt) and `webhook-signature`: space-separated `v1,<base64 HMAC-SHA256 of
"{id}.{timestamp}.{body}">`, one per secret in use (several while a secret is being rotated).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from collections.abc import Sequence

PREFIX = "whsec_"
_MIN_KEY, _MAX_KEY = 24, 64


def new_secret() -> str:
    """A fresh secret: `whsec_` + base64 of 32 random bytes."""
    return PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()


def secret_key(secret: str) -> bytes:
    """The HMAC key of a `whsec_` secret; ValueError (naming the rule, never the secret) otherwise."""
    if not secret.startswith(PREFIX):
        raise ValueError("a webhook secret starts with 'whsec_'")
    try:
        key = base64.b64decode(secret[len(PREFIX) :], validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("a webhook secret is 'whsec_' + base64") from None
    if not _MIN_KEY <= len(key) <= _MAX_KEY:
        raise ValueError(f"a webhook secret's key is {_MIN_KEY} to {_MAX_KEY} bytes")
    return key


def signature(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """`v1,` + base64 HMAC-SHA256 of `{msg_id}.{timestamp}.{body}` under `secret`."""
    signed = f"{msg_id}.{timestamp}.".encode() + body
    digest = hmac.new(secret_key(secret), signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def headers(msg_id: str, timestamp: int, body: bytes, secrets_: Sequence[str]) -> dict[str, str]:
    """The three Standard Webhooks headers for one attempt, signed with every secret given."""
    if not secrets_:
        raise ValueError("no secret to sign with")
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": " ".join(signature(s, msg_id, timestamp, body) for s in secrets_),
    }
