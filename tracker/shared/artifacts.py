"""The one place that knows the artifacts: which repo files carry each kind, how each is fetched,
and under which size cap.

Used by the watchlist (its default `tracked` list), ingest (what to fetch and how), the sources
(which files need the Hub's pickle scan; which the fake stores as LFS) and the diff stage (which
files are pickles; where `auto_map` is read). Pure: data and matching only.

Fetch modes:
- CONTENT: the whole file, at most `Limits.max_file_bytes` (over it: recorded unreadable, never
  downloaded);
- HEADER: only the safetensors header, by HTTP Range, declared length at most
  `Limits.max_header_bytes`; never the weights;
- GGUF: only the GGUF header (metadata and tensor infos), by HTTP Range, read as it is parsed
  and at most `Limits.max_header_bytes` long (`tracker.sources.gguf`); never the weights;
- IDENTITY: never read; tracked by tree identity (blob id / LFS oid) and the Hub's security scan
  (pickle-based files, which run code when loaded).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from fnmatch import fnmatchcase

from tracker.shared.bounded import MAX_FILE_BYTES as MAX_FILE_BYTES
from tracker.shared.domain import Artifact


class Fetch(StrEnum):
    """How a tracked file is read (see the module docstring)."""

    CONTENT = "content"
    HEADER = "header"
    GGUF = "gguf"
    IDENTITY = "identity"


@dataclass(frozen=True)
class FileRule:
    """Files matching `patterns` (fnmatch globs, `*` crosses `/`) carry `artifact`, read by `fetch`.

    `default`: in the default tracked list. Custom code is not: a `*.py` file is fetched when
    `auto_map` names it (or a relative import of such a file does), or when the watchlist's
    `tracked` list names it.
    """

    artifact: Artifact
    patterns: tuple[str, ...]
    fetch: Fetch = Fetch.CONTENT
    default: bool = True


FILE_RULES: tuple[FileRule, ...] = (
    FileRule(Artifact.CONFIG, ("config.json",)),
    FileRule(Artifact.GENERATION_CONFIG, ("generation_config.json",)),
    FileRule(
        Artifact.TOKENIZER,
        ("tokenizer_config.json", "tokenizer.json", "special_tokens_map.json"),
    ),
    FileRule(
        Artifact.CHAT_TEMPLATE,
        ("chat_template.jinja", "chat_template.json", "additional_chat_templates/*"),
    ),
    FileRule(Artifact.WEIGHTS, ("model.safetensors.index.json", "pytorch_model.bin.index.json")),
    FileRule(Artifact.WEIGHTS, ("*.safetensors",), Fetch.HEADER),
    FileRule(Artifact.WEIGHTS, ("*.gguf",), Fetch.GGUF),
    FileRule(Artifact.MODEL_CARD, ("README.md",)),
    FileRule(
        Artifact.PROCESSOR,
        (
            "preprocessor_config.json",
            "processor_config.json",
            "feature_extractor_config.json",
            "video_preprocessor_config.json",
        ),
    ),
    FileRule(Artifact.CUSTOM_CODE, ("*.py",), default=False),
    FileRule(
        Artifact.EXECUTABLE,
        ("*.bin", "*.pt", "*.pth", "*.pkl", "*.pickle", "*.ckpt"),
        Fetch.IDENTITY,
    ),
)
"""Every tracked kind of file, in artifact order (first matching rule wins)."""

DEFAULT_TRACKED: tuple[str, ...] = tuple(p for r in FILE_RULES if r.default for p in r.patterns)
"""The watchlist's default `tracked` list."""

AUTO_MAP_FILES: tuple[str, ...] = (
    "config.json",
    "tokenizer_config.json",
    "preprocessor_config.json",
    "processor_config.json",
)
"""The files whose `auto_map` names custom code (the classes `trust_remote_code` loads)."""

PICKLE_PATTERNS: tuple[str, ...] = next(
    r.patterns for r in FILE_RULES if r.artifact is Artifact.EXECUTABLE
)
HEADER_PATTERNS: tuple[str, ...] = tuple(
    p for r in FILE_RULES if r.fetch is Fetch.HEADER for p in r.patterns
)


def _matches(path: str, patterns: tuple[str, ...], *, fold: bool = False) -> bool:
    name = path.lower() if fold else path
    return any(fnmatchcase(name, p) for p in patterns)


def rule_for(path: str) -> FileRule | None:
    """The rule of `path` (pickles matched case-insensitively, as loaders ignore case), or None."""
    for rule in FILE_RULES:
        if _matches(path, rule.patterns, fold=rule.fetch is Fetch.IDENTITY):
            return rule
    return None


def fetch_mode(path: str) -> Fetch:
    """How `path` is read when tracked: by its rule, else as content."""
    rule = rule_for(path)
    return rule.fetch if rule is not None else Fetch.CONTENT


def is_pickle(path: str) -> bool:
    """A pickle-based file (runs code when loaded): tracked by identity only, never read."""
    return _matches(path, PICKLE_PATTERNS, fold=True)


def is_header_only(path: str) -> bool:
    """A file of which only the safetensors header is read."""
    return _matches(path, HEADER_PATTERNS)


def is_gguf(path: str) -> bool:
    """A GGUF file, of which only the header is read."""
    return rule_for(path) is not None and fetch_mode(path) is Fetch.GGUF


def is_tracked(path: str, patterns: tuple[str, ...]) -> bool:
    """True when `path` matches one of the watchlist's `tracked` globs."""
    return _matches(path, patterns)


MAX_HEADER_BYTES = 100_000_000


@dataclass(frozen=True)
class Limits:
    """The size caps and the deadline of fetching (from `Settings.max_file_bytes`,
    `max_safetensors_header_bytes` and `poll_deadline_s`; these defaults are theirs). The header
    cap bounds GGUF headers too."""

    max_file_bytes: int = MAX_FILE_BYTES
    max_header_bytes: int = MAX_HEADER_BYTES
    poll_deadline_s: float = 900.0

    def cap(self, fetch: Fetch) -> int:
        """The most bytes read for a file fetched by `fetch` (0: never read)."""
        if fetch is Fetch.CONTENT:
            return self.max_file_bytes
        if fetch in (Fetch.HEADER, Fetch.GGUF):
            return self.max_header_bytes
        return 0


__all__ = [
    "AUTO_MAP_FILES",
    "DEFAULT_TRACKED",
    "FILE_RULES",
    "HEADER_PATTERNS",
    "PICKLE_PATTERNS",
    "Fetch",
    "FileRule",
    "Limits",
    "fetch_mode",
    "is_gguf",
    "is_header_only",
    "is_pickle",
    "is_tracked",
    "rule_for",
]
