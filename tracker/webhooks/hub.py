"""The Hub's webhooks, read as a hint to poll (push mode).

The Hub POSTs a version-3 payload (`../shared/HUB-PROTOCOL.md` §11) with the webhook's secret in
`X-Webhook-Secret`. Only `repo.content` events of model repos say that refs moved; anything else
is acknowledged and ignored. The payload is never trusted beyond naming a repo: what changed is
read from the Hub by the normal poll, so a forged or replayed hook can at most cause a poll (and
poll requests of a repo coalesce: see `WebhookStore.request_poll`).
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jsonschema import Draft202012Validator

from tracker.shared.domain import RepoId, parse_repo_id
from tracker.shared.errors import InvalidRepoIdError

CONTENT_SCOPE = "repo.content"

HUB_PAYLOAD: dict[str, Any] = {
    "type": "object",
    "required": ["event", "repo"],
    "description": "The Hub's webhook payload (the fields read; others are ignored). A "
    "repo.name that is not a watchable ORG/NAME id is acknowledged and ignored, as any "
    "repo that is not watched.",
    "properties": {
        "event": {
            "type": "object",
            "required": ["scope"],
            "properties": {"scope": {"type": "string"}, "action": {"type": "string"}},
        },
        "repo": {
            "type": "object",
            "required": ["name"],
            "properties": {
                "name": {"type": "string"},
                "type": {"type": "string"},
                # the sha of main; null where main is gone (the Hub replica sends that)
                "headSha": {"type": ["string", "null"]},
            },
        },
        "updatedRefs": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "ref": {"type": "string"},
                    "oldSha": {"type": ["string", "null"]},
                    "newSha": {"type": ["string", "null"]},
                },
            },
        },
    },
}
"""The payload's shape (`../shared/HUB-PROTOCOL.md` §11), as the API's schema declares it: a
payload that breaks it is refused (`read_event`), whatever its scope."""

_VALIDATOR = Draft202012Validator(HUB_PAYLOAD)


@dataclass(frozen=True)
class HubEvent:
    """What a Hub payload says: the repo, whether it is a content change, and why not if not."""

    repo_id: RepoId | None
    content: bool
    ignored_because: str | None = None
    refs: tuple[tuple[str, str | None], ...] = ()  # (ref, new sha or None when deleted)

    def moves(self, ref: str) -> tuple[bool, str | None]:
        """Whether the event moves the branch or tag `ref` (`main`, `refs/heads/main`), and to
        which sha (None: deleted). An event without `updatedRefs` may move anything."""
        if not self.refs:
            return True, None
        names = {ref} if ref.startswith("refs/") else {f"refs/heads/{ref}", f"refs/tags/{ref}"}
        for name, sha in self.refs:
            if name in names:
                return True, sha
        return False, None


class BadHubPayload(ValueError):
    """A payload that is not the Hub's webhook JSON (the message says what is wrong)."""


def secret_matches(given: str | None, expected: str) -> bool:
    """Constant-time comparison of the `X-Webhook-Secret` header with the configured secret."""
    if given is None:
        return False
    return hmac.compare_digest(given.encode("latin-1", "replace"), expected.encode("latin-1"))


def _kind(types: object) -> str:
    """What the schema asked for, in words ("a string", "a string or null")."""
    names = {"string": "a string", "object": "an object", "array": "an array", "null": "null"}
    listed = types if isinstance(types, list) else [types]
    return " or ".join(names.get(str(t), str(t)) for t in listed)


def read_event(payload: Any) -> HubEvent:
    """The repo a Hub webhook payload is about, and whether its content changed."""
    if not isinstance(payload, Mapping):
        raise BadHubPayload("the payload is not a JSON object")
    error = next(iter(sorted(_VALIDATOR.iter_errors(payload), key=lambda e: list(e.path))), None)
    if error is not None:
        where = ".".join(str(p) for p in error.absolute_path) or "the payload"
        if error.validator == "required":
            raise BadHubPayload(f"{where}: {error.message}".removeprefix("the payload: "))
        raise BadHubPayload(f"{where}: not {_kind(error.validator_value)}")
    event, repo = payload.get("event"), payload.get("repo")
    if not isinstance(event, Mapping) or not isinstance(event.get("scope"), str):
        raise BadHubPayload("event.scope is missing")
    if not isinstance(repo, Mapping) or not isinstance(repo.get("name"), str):
        raise BadHubPayload("repo.name is missing")
    try:
        repo_id = parse_repo_id(repo["name"])
    except InvalidRepoIdError as exc:
        # Not a repo id tracker can watch, so not a repo on the watchlist: acknowledged and
        # ignored like any unwatched repo (the hook is only a hint), not refused.
        return HubEvent(None, False, f"repo.name is not a watchable repo id ({exc})")
    scope = event["scope"]
    if repo.get("type", "model") != "model":
        return HubEvent(repo_id, False, f"a {repo.get('type')} repo, not a model")
    if scope != CONTENT_SCOPE:
        return HubEvent(repo_id, False, f"scope {scope!r} does not change the repo's files")
    refs: list[tuple[str, str | None]] = []
    for item in payload.get("updatedRefs") or []:
        if isinstance(item, Mapping) and isinstance(item.get("ref"), str):
            new = item.get("newSha")
            refs.append((item["ref"], new if isinstance(new, str) else None))
    return HubEvent(repo_id, True, None, tuple(refs))
