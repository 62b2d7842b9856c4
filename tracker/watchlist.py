"""The watchlist (`watchlist.yaml`): which repos to watch, how often, and which files to track.

Shape: `defaults` (repo-level keys), `rules` (glob `match` + repo-level keys, applied in order)
and `repos` (`id` + repo-level keys). A repo resolves as defaults < matching rules < its entry.
Loading reports every problem at once (WatchlistError.problems), with "did you mean" for unknown
keys. `add_repo`/`remove_repo` edit the file as text, so comments and the rest are preserved.
"""

from __future__ import annotations

import difflib
import fnmatch
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tracker.domain import JSONValue, RepoId, parse_repo_id
from tracker.errors import ConfigError, InvalidRepoIdError, WatchlistError

DEFAULT_TRACKED: tuple[str, ...] = (
    "config.json",
    "generation_config.json",
    "tokenizer_config.json",
    "tokenizer.json",
    "special_tokens_map.json",
    "chat_template.jinja",
    "chat_template.json",
    "additional_chat_templates/*",
    "model.safetensors.index.json",
    "pytorch_model.bin.index.json",
    "*.safetensors",
    "README.md",
    "preprocessor_config.json",
    "processor_config.json",
    "feature_extractor_config.json",
    "video_preprocessor_config.json",
    "*.bin",
    "*.pt",
    "*.pth",
    "*.pkl",
    "*.ckpt",
)
"""Tracked by default; plus every `*.py` that `auto_map` names (found at ingest time)."""

PICKLE_PATTERNS: tuple[str, ...] = ("*.bin", "*.pt", "*.pth", "*.pkl", "*.ckpt")
"""Pickle-based files: tracked by tree identity (and scan status) only, never downloaded."""

HEADER_PATTERNS: tuple[str, ...] = ("*.safetensors",)
"""Files whose header only is read (HTTP Range), never the weights."""

REPO_KEYS = ("ref", "poll_interval", "tracked", "backfill", "git", "estimate", "advisories")
TOP_KEYS = ("defaults", "rules", "repos")
_INTERVAL = re.compile(r"^\s*(\d+)\s*(s|m|h|d)\s*$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
DEFAULT_POLL_S = 600


@dataclass(frozen=True)
class WatchedRepo:
    """One repo to watch, fully resolved (defaults < rules < entry)."""

    repo_id: RepoId
    ref: str = "main"
    poll_interval_s: int = DEFAULT_POLL_S
    tracked: tuple[str, ...] = DEFAULT_TRACKED
    backfill: int | None = None
    git: str | None = None
    estimate: Mapping[str, JSONValue] = field(default_factory=dict)
    advisories: Mapping[str, JSONValue] = field(default_factory=dict)


@dataclass(frozen=True)
class Watchlist:
    """All watched repos, in file order."""

    repos: tuple[WatchedRepo, ...]

    def get(self, repo_id: str) -> WatchedRepo:
        for r in self.repos:
            if r.repo_id == repo_id:
                return r
        raise WatchlistError(f"{repo_id} is not in the watchlist")


def parse_interval(text: object) -> int:
    """`30s`, `10m`, `1h`, `2d` (or a bare int of seconds) → seconds > 0; ValueError otherwise."""
    if isinstance(text, int) and not isinstance(text, bool) and text > 0:
        return text
    m = _INTERVAL.match(str(text)) if isinstance(text, str) else None
    if not m or int(m.group(1)) == 0:
        raise ValueError(f"poll_interval {text!r} must look like 30s, 10m, 1h or 2d")
    return int(m.group(1)) * _UNITS[m.group(2)]


def _unknown(key: str, allowed: tuple[str, ...], where: str) -> str:
    close = difflib.get_close_matches(key, allowed, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"{where}: unknown key {key!r}{hint}; allowed: {', '.join(allowed)}"


def _check_layer(
    layer: Any, where: str, extra: tuple[str, ...], problems: list[str]
) -> dict[str, Any]:
    """Validate one mapping of repo-level keys; append problems; return the valid keys."""
    if not isinstance(layer, dict):
        problems.append(f"{where}: must be a mapping, not {type(layer).__name__}")
        return {}
    out: dict[str, Any] = {}
    allowed = REPO_KEYS + extra
    for key, value in layer.items():
        if key not in allowed:
            problems.append(_unknown(str(key), allowed, where))
            continue
        if key in extra:
            continue
        try:
            out[key] = _check_value(key, value)
        except ValueError as exc:
            problems.append(f"{where}.{key}: {exc}")
    return out


def _check_value(key: str, value: Any) -> Any:
    if key == "ref":
        if not isinstance(value, str) or not value.strip() or any(c in value for c in " ~^:?*[\\"):
            raise ValueError(f"must be a branch, tag or commit name, not {value!r}")
        return value
    if key == "poll_interval":
        return parse_interval(value)
    if key == "tracked":
        if (
            not isinstance(value, list)
            or not value
            or not all(isinstance(p, str) and p for p in value)
        ):
            raise ValueError("must be a non-empty list of glob patterns")
        return tuple(value)
    if key == "backfill":
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"must be an integer >= 1, not {value!r}")
        return value
    if key == "git":
        if not isinstance(value, str) or not value.strip():
            raise ValueError("must be a git URL or a local path")
        return value
    if key in ("estimate", "advisories"):
        if not isinstance(value, dict):
            raise ValueError("must be a mapping")
        return dict(value)
    raise ValueError(f"unknown key {key!r}")  # pragma: no cover - filtered by _check_layer


def _merge(base: dict[str, Any], layer: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in layer.items():
        if key == "advisories" and isinstance(out.get(key), dict):
            # The more specific layer's rules and suppressions come first (first match wins).
            merged = {**out[key], **value}
            for part in ("rules", "suppress"):
                if isinstance(value.get(part), list) and isinstance(out[key].get(part), list):
                    merged[part] = [*value[part], *out[key][part]]
            out[key] = merged
        elif key == "estimate" and isinstance(out.get(key), dict):
            out[key] = {**out[key], **value}
        else:
            out[key] = value
    return out


def _stage_problems(where: str, merged: Mapping[str, Any]) -> list[str]:
    """Problems in a repo's `estimate:` and `advisories:` blocks, found at load time, not at publish."""
    from tracker.advisories.classify import parse_overrides
    from tracker.estimate.settings import EstimateSettings

    out: list[str] = []
    try:
        EstimateSettings.from_mapping(merged.get("estimate") or None)
    except ConfigError as exc:
        out.extend(f"{where}: {p}" for p in exc.problems or (str(exc),))
    try:
        parse_overrides(merged.get("advisories") or None, where=f"{where}.advisories")
    except ConfigError as exc:
        out.extend(exc.problems or (str(exc),))
    return out


def parse_watchlist(data: Any, source: str = "watchlist") -> Watchlist:
    """Validate parsed YAML `data` and resolve every repo; WatchlistError lists all problems."""
    problems: list[str] = []
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise WatchlistError(f"{source}: must be a mapping with defaults, rules, repos")
    for key in data:
        if key not in TOP_KEYS:
            problems.append(_unknown(str(key), TOP_KEYS, source))
    defaults = _check_layer(data.get("defaults") or {}, "defaults", (), problems)
    rules: list[tuple[str, dict[str, Any]]] = []
    raw_rules = data.get("rules") or []
    if not isinstance(raw_rules, list):
        problems.append("rules: must be a list")
        raw_rules = []
    for i, rule in enumerate(raw_rules):
        where = f"rules[{i}]"
        checked = _check_layer(rule, where, ("match",), problems)
        match = rule.get("match") if isinstance(rule, dict) else None
        if not isinstance(match, str) or not match:
            problems.append(f"{where}: needs a 'match' glob such as 'deepseek-ai/*'")
            continue
        rules.append((match, checked))
    raw_repos = data.get("repos") or []
    if not isinstance(raw_repos, list):
        problems.append("repos: must be a list")
        raw_repos = []
    repos: list[WatchedRepo] = []
    seen: set[str] = set()
    for i, entry in enumerate(raw_repos):
        where = f"repos[{i}]"
        if isinstance(entry, str):
            entry = {"id": entry}
        checked = _check_layer(entry, where, ("id",), problems)
        raw_id = entry.get("id") if isinstance(entry, dict) else None
        if not isinstance(raw_id, str):
            problems.append(f"{where}: needs 'id: ORG/NAME'")
            continue
        try:
            repo_id = parse_repo_id(raw_id)
        except InvalidRepoIdError as exc:
            problems.append(f"{where}: {exc}")
            continue
        if repo_id in seen:
            problems.append(f"{where}: {repo_id} is listed twice")
            continue
        seen.add(repo_id)
        merged = dict(defaults)
        for pattern, layer in rules:
            if fnmatch.fnmatchcase(repo_id, pattern):
                merged = _merge(merged, layer)
        merged = _merge(merged, checked)
        problems.extend(_stage_problems(where, merged))
        repos.append(
            WatchedRepo(
                repo_id=repo_id,
                ref=merged.get("ref", "main"),
                poll_interval_s=merged.get("poll_interval", DEFAULT_POLL_S),
                tracked=merged.get("tracked", DEFAULT_TRACKED),
                backfill=merged.get("backfill"),
                git=merged.get("git"),
                estimate=merged.get("estimate", {}),
                advisories=merged.get("advisories", {}),
            )
        )
    if problems:
        raise WatchlistError(f"{source} is invalid", tuple(problems))
    return Watchlist(tuple(repos))


def load_watchlist(path: Path) -> Watchlist:
    """Read and validate `path`; a missing file is an empty watchlist."""
    if not path.exists():
        return Watchlist(())
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise WatchlistError(f"{path}: not valid YAML", (str(exc),)) from exc
    except OSError as exc:
        raise WatchlistError(f"{path}: cannot be read: {exc.strerror or exc}") from exc
    return parse_watchlist(data, str(path))


def _scalar(value: Any) -> str:
    """`value` as YAML text: plain when it reads back unchanged, else JSON (which YAML accepts)."""
    plain = isinstance(value, str) and re.fullmatch(r"[A-Za-z0-9_./@+-][A-Za-z0-9_./:@+-]*", value)
    if plain and yaml.safe_load(value) == value:
        return str(value)
    return json.dumps(value)


def _format_entry(repo_id: RepoId, fields: Mapping[str, Any], indent: str) -> list[str]:
    lines = [f"{indent}- id: {repo_id}"]
    for key, value in fields.items():
        lines.append(f"{indent}  {key}: {_scalar(value)}")
    return lines


def _repos_block(lines: list[str]) -> tuple[int, int] | None:
    """(index of the `repos:` line, index one past its block) or None."""
    start = next((i for i, ln in enumerate(lines) if re.match(r"^repos\s*:", ln)), None)
    if start is None:
        return None
    end = len(lines)
    for j in range(start + 1, len(lines)):
        ln = lines[j]
        if ln.strip() and not ln.startswith((" ", "\t", "-", "#")):
            end = j
            break
    while end > start + 1 and not lines[end - 1].strip():
        end -= 1
    return start, end


def add_repo(path: Path, repo_id: str, **fields: Any) -> Watchlist:
    """Append a repo entry to the watchlist file (created if missing), keeping everything else.

    `fields` are repo-level keys (ref, git, backfill, ...; None values are skipped). The result
    is validated before it is written; WatchlistError if the repo is already listed or invalid.
    """
    rid = parse_repo_id(repo_id)
    current = load_watchlist(path)
    if any(r.repo_id == rid for r in current.repos):
        raise WatchlistError(f"{rid} is already in {path}")
    clean = {k: v for k, v in fields.items() if v is not None}
    problems: list[str] = []
    _check_layer(clean, rid, (), problems)
    if problems:
        raise WatchlistError(f"cannot add {rid}", tuple(problems))
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    lines = text.splitlines()
    block = _repos_block(lines)
    if block is None:
        lines += ["repos:", *_format_entry(rid, clean, "  ")]
    else:
        start, end = block
        if re.match(r"^repos\s*:\s*(\[\s*\]|null|~)?\s*(#.*)?$", lines[start]) is None:
            raise WatchlistError(f"{path}: cannot edit a flow-style 'repos:' list; edit it by hand")
        lines[start] = "repos:"
        items = [ln for ln in lines[start + 1 : end] if ln.lstrip().startswith("- ")]
        indent = items[0][: len(items[0]) - len(items[0].lstrip())] if items else "  "
        lines[end:end] = _format_entry(rid, clean, indent)
    new_text = "\n".join(lines) + "\n"
    result = _reparse(new_text, path)
    path.write_text(new_text, encoding="utf-8")
    return result


def _reparse(text: str, path: Path) -> Watchlist:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:  # pragma: no cover - the edit keeps valid YAML valid
        raise WatchlistError(
            f"{path}: editing would break the file; edit it by hand", (str(exc),)
        ) from exc
    return parse_watchlist(data, str(path))


def remove_repo(path: Path, repo_id: str) -> Watchlist:
    """Remove a repo's entry from the watchlist file, keeping everything else."""
    rid = parse_repo_id(repo_id)
    current = load_watchlist(path)
    if not any(r.repo_id == rid for r in current.repos):
        raise WatchlistError(f"{rid} is not in {path}")
    lines = path.read_text(encoding="utf-8").splitlines()
    block = _repos_block(lines)
    item = re.compile(
        r"^(\s*)-\s+(?:\{\s*)?(?:id\s*:\s*)?['\"]?" + re.escape(rid) + r"['\"]?\s*(?:[,}#].*)?$"
    )
    if block is None:  # pragma: no cover - the repo was found, so the block exists
        raise WatchlistError(f"{path}: no repos block")
    start, end = block
    for i in range(start + 1, end):
        m = item.match(lines[i])
        if not m:
            continue
        indent = len(m.group(1))
        j = i + 1
        while j < end:
            ln = lines[j]
            ind = len(ln) - len(ln.lstrip())
            if ln.strip() and (ind < indent or (ind == indent and ln.lstrip().startswith("-"))):
                break
            j += 1
        del lines[i:j]
        new_text = "\n".join(lines) + "\n"
        result = _reparse(new_text, path)
        if any(r.repo_id == rid for r in result.repos):  # pragma: no cover - defensive
            break
        path.write_text(new_text, encoding="utf-8")
        return result
    raise WatchlistError(f"{path}: could not find the entry of {rid} to remove; edit it by hand")


def is_pickle(path: str) -> bool:
    return any(fnmatch.fnmatchcase(path, p) for p in PICKLE_PATTERNS)


def is_header_only(path: str) -> bool:
    return any(fnmatch.fnmatchcase(path, p) for p in HEADER_PATTERNS)
