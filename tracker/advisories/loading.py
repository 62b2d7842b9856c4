"""Whether a revision loads with `from_pretrained`, as advice that pins it needs (pure).

A revision loads when its config.json can be read and its tree holds the weights transformers'
`from_pretrained` reads for the config's class at the repo's root: `model.safetensors` or
`pytorch_model.bin`, or a sharded checkpoint's index (`model.safetensors.index.json`,
`pytorch_model.bin.index.json`) with every shard its `weight_map` names in the tree. A tree with a
config and no such files (Mixtral's first release: the weights in Mistral's own format; a repo
before its first upload) has nothing `from_pretrained` can load, so advice never pins it.
"""

from __future__ import annotations

import json

from tracker.diff import SideState, load_json_object, read_side
from tracker.shared.domain import Snapshot

SINGLE = ("model.safetensors", "pytorch_model.bin")
INDEXES = ("model.safetensors.index.json", "pytorch_model.bin.index.json")


def why_not_loading(snap: Snapshot) -> str | None:
    """Why `from_pretrained` cannot load `snap`, or None when it can: a phrase that follows
    "the revision has" ("no readable config.json")."""
    if read_side(snap, "config.json", load_json_object).state is not SideState.OK:
        return "no readable config.json"
    paths = snap.paths
    if any(name in paths for name in SINGLE):
        return None
    for index in INDEXES:
        if index not in paths:
            continue
        shards = _shards(snap, index)
        if shards is None:
            return f"an unreadable {index}"
        missing = sorted(shards - paths)
        if not missing:
            return None
        return (
            f"a {index} naming {len(missing)} shard{'s' * (len(missing) != 1)} its tree lacks "
            f"(`{missing[0]}`{', …' if len(missing) > 1 else ''})"
        )
    return (
        "a config.json but no weights transformers loads (no model.safetensors, "
        "pytorch_model.bin or a complete sharded index)"
    )


def loads(snap: Snapshot) -> bool:
    """Whether `from_pretrained` can load `snap` (`why_not_loading` is None)."""
    return why_not_loading(snap) is None


def _shards(snap: Snapshot, index: str) -> frozenset[str] | None:
    """The shard files `index`'s `weight_map` names (None: the index cannot be read)."""
    raw = snap.files.get(index)
    if raw is None:
        return None
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    weight_map = doc.get("weight_map") if isinstance(doc, dict) else None
    if not isinstance(weight_map, dict) or not weight_map:
        return None
    if not all(isinstance(v, str) for v in weight_map.values()):
        return None
    return frozenset(weight_map.values())
