"""Key-level diffs of config.json and generation_config.json (deepdiff over parsed JSON)."""

from __future__ import annotations

from tracker.diff._common import json_key_changes, lifecycle, load_json_object, read_side
from tracker.shared.domain import Artifact, Change, Snapshot

CONFIG_FILE = "config.json"
GENERATION_CONFIG_FILE = "generation_config.json"

TOKEN_ID_KEYS = frozenset(
    {"bos_token_id", "eos_token_id", "pad_token_id", "unk_token_id", "decoder_start_token_id"}
)
"""Top-level keys reported once, resolved, by the special-tokens differ (not here)."""

CODE_KEYS = frozenset({"auto_map"})
"""Top-level keys reported by the custom-code differ (not here)."""


def diff_json_file(
    artifact: Artifact,
    path: str,
    before: Snapshot | None,
    after: Snapshot,
    *,
    skip: frozenset[str] = frozenset(),
) -> list[Change]:
    """Changes of one JSON-object file between two snapshots (`before=None`: first revision).

    Output: UNREADABLE / ADDED / REMOVED / readable-again whole-file changes, or key-level
    changes (JSON paths) from `json_key_changes`; top-level keys in `skip` are left to other differs.
    """
    first = before is None
    old = read_side(before, path, load_json_object)
    new = read_side(after, path, load_json_object)
    compare, changes = lifecycle(artifact, path, first, old, new)
    if compare:
        changes = json_key_changes(artifact, path, old.value, new.value, skip=skip)
    return changes


def diff_config(before: Snapshot | None, after: Snapshot) -> list[Change]:
    """config.json key changes (token ids and auto_map are reported by their own differs)."""
    return diff_json_file(
        Artifact.CONFIG, CONFIG_FILE, before, after, skip=TOKEN_ID_KEYS | CODE_KEYS
    )


def diff_generation_config(before: Snapshot | None, after: Snapshot) -> list[Change]:
    """generation_config.json key changes (token ids are reported by the special-tokens differ)."""
    return diff_json_file(
        Artifact.GENERATION_CONFIG, GENERATION_CONFIG_FILE, before, after, skip=TOKEN_ID_KEYS
    )
