"""The tokenizer's highest token id, from tokenizer_config.json and tokenizer.json, for findings.

`estimate(..., max_token_id=...)` compares it with `vocab_size` (`vocab-too-small`): an id at or
past `vocab_size` indexes outside the embedding table.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tracker.shared.bounded import BoundsError, bounds_for, load_json

TOKENIZER_FILES = ("tokenizer_config.json", "tokenizer.json")


def _id(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int) and value >= 0:
        return value
    if isinstance(value, str) and value.isdecimal() and len(value) <= 12:
        return int(value)
    return None


def _highest(ids: Any) -> int | None:
    best: int | None = None
    for value in ids:
        i = _id(value)
        if i is not None and (best is None or i > best):
            best = i
    return best


def highest_token_id(
    tokenizer_config: Mapping[str, Any] | None, tokenizer: Mapping[str, Any] | None
) -> int | None:
    """The highest token id either file declares, or None when neither declares one.

    tokenizer_config.json: the keys of `added_tokens_decoder`. tokenizer.json: `added_tokens[].id`
    and the model vocabulary (`model.vocab` as token → id, or a Unigram list whose index is the
    id). Malformed entries are skipped, never raised on.
    """
    found: list[int | None] = []
    if isinstance(tokenizer_config, Mapping):
        decoder = tokenizer_config.get("added_tokens_decoder")
        if isinstance(decoder, Mapping):
            found.append(_highest(decoder.keys()))
    if isinstance(tokenizer, Mapping):
        added = tokenizer.get("added_tokens")
        if isinstance(added, list):
            found.append(_highest(t.get("id") for t in added if isinstance(t, Mapping)))
        model = tokenizer.get("model")
        vocab = model.get("vocab") if isinstance(model, Mapping) else None
        if isinstance(vocab, Mapping):
            found.append(_highest(vocab.values()))
        elif isinstance(vocab, list) and vocab:
            found.append(len(vocab) - 1)
    return max((i for i in found if i is not None), default=None)


def highest_token_id_from_files(files: Mapping[str, bytes]) -> int | None:
    """`highest_token_id` over whichever of TOKENIZER_FILES `files` (path → bytes) holds.

    Files that are not JSON objects are ignored (the diff stage reports them).
    """
    parsed: dict[str, Mapping[str, Any] | None] = {}
    for name in TOKENIZER_FILES:
        data = files.get(name)
        value: Any = None
        if data is not None:
            try:
                value = load_json(data, name, bounds_for(name))
            except BoundsError:
                value = None
        parsed[name] = value if isinstance(value, Mapping) else None
    return highest_token_id(parsed["tokenizer_config.json"], parsed["tokenizer.json"])
