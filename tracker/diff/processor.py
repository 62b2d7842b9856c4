"""Key-level diffs of processor configs (preprocessor_config.json, processor_config.json, ...)."""

from __future__ import annotations

from tracker.diff.config import diff_json_file
from tracker.shared.domain import Artifact, Change, Snapshot

PROCESSOR_FILES = (
    "preprocessor_config.json",
    "processor_config.json",
    "video_preprocessor_config.json",
    "feature_extractor_config.json",
)


def diff_processor(before: Snapshot | None, after: Snapshot) -> list[Change]:
    """Changes of every processor config file, in PROCESSOR_FILES order, keys as JSON paths."""
    changes: list[Change] = []
    for path in PROCESSOR_FILES:
        changes.extend(diff_json_file(Artifact.PROCESSOR, path, before, after))
    return changes
