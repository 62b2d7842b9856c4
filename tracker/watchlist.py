"""The watchlist (`watchlist.yaml`): which repos to watch, how often, and which files to track.

Shape: `defaults` (repo-level keys), `rules` (glob `match` + repo-level keys, applied in order)
and `repos` (`id` + repo-level keys). A repo resolves as defaults < matching rules < its entry.
Loading reports every problem at once (WatchlistError.problems), with "did you mean" for unknown
keys. `add_repo`/`remove_repo` edit the file as text, so comments and the rest are preserved.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field

from tracker.advisories.classify import OverridesBlock
from tracker.estimate.settings import EstimateBlock
from tracker.preflight.settings import PreflightBlock
from tracker.shared.artifacts import DEFAULT_TRACKED
from tracker.shared.bounded import CONFIG_YAML, BoundsError, load_yaml
from tracker.shared.domain import JSONValue, RepoId, is_ref_name, parse_repo_id
from tracker.shared.errors import InvalidRepoIdError, NotFoundError, NotWatchedError, WatchlistError
from tracker.shared.problems import collect, validate
from tracker.teams.profile import Team, TeamFields, team_of, team_problems

_INTERVAL = re.compile(r"^\s*(\d+)\s*(s|m|h|d)\s*$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
DEFAULT_POLL_S = 600
MAX_POLL_S = 365 * 86400
"""A longer interval is a typo, not a schedule (and overflows the scheduler's clock)."""
MAX_BACKFILL = 1_000_000
"""The largest `backfill:` (commits a first poll reads); a larger number is a typo (no repo in
reach has that many commits), refused like one."""


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
    preflight: Mapping[str, JSONValue] = field(default_factory=dict)


@dataclass(frozen=True)
class Watchlist:
    """All watched repos, in file order, and the teams' profiles (`teams:`)."""

    repos: tuple[WatchedRepo, ...]
    teams: tuple[Team, ...] = ()

    def team(self, name: str) -> Team:
        for t in self.teams:
            if t.name == name:
                return t
        known = ", ".join(t.name for t in self.teams) or "none"
        raise NotFoundError(f"no team {name!r} in the watchlist (teams: {known})")

    def get(self, repo_id: str) -> WatchedRepo:
        for r in self.repos:
            if r.repo_id == repo_id:
                return r
        raise NotWatchedError(f"{repo_id} is not in the watchlist")


def parse_interval(text: object) -> int:
    """`30s`, `10m`, `1h`, `2d` (or a bare int of seconds) → seconds in 1..MAX_POLL_S;
    ValueError otherwise."""
    if isinstance(text, int) and not isinstance(text, bool) and text > 0:
        seconds = text
    else:
        m = _INTERVAL.match(str(text)) if isinstance(text, str) else None
        if not m or int(m.group(1)) == 0:
            raise ValueError(f"poll_interval {text!r} must look like 30s, 10m, 1h or 2d")
        seconds = int(m.group(1)) * _UNITS[m.group(2)]
    if seconds > MAX_POLL_S:
        raise ValueError(f"poll_interval {text!r} is over the maximum of {MAX_POLL_S // 86400}d")
    return seconds


def _ref(value: str) -> str:
    if not is_ref_name(value):
        raise ValueError(
            f"must be a branch, tag or commit name (git's ref-name rules), not {value!r}"
        )
    return value


def _tracked(value: object) -> object:
    if not isinstance(value, list) or not value or not all(isinstance(p, str) and p for p in value):
        raise ValueError("must be a non-empty list of glob patterns")
    return tuple(value)


def _nonblank(value: str) -> str:
    if not value.strip():
        raise ValueError("must be a git URL or a local path")
    return value


def _repo_id(value: str) -> str:
    try:
        return parse_repo_id(value)
    except InvalidRepoIdError as exc:
        raise ValueError(str(exc)) from exc


def _entry(value: object) -> object:
    """A repo entry may be just its id."""
    return {"id": value} if isinstance(value, str) else value


_Str = Annotated[str, Field(strict=True)]


class RepoFields(BaseModel):
    """The repo-level keys of a watchlist layer (`defaults`, a rule, a repo entry)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    ref: Annotated[_Str, AfterValidator(_ref)] | None = None
    poll_interval: Annotated[int, BeforeValidator(parse_interval)] | None = None
    tracked: Annotated[tuple[str, ...], BeforeValidator(_tracked)] | None = None
    backfill: Annotated[int, Field(strict=True, ge=1, le=MAX_BACKFILL)] | None = None
    git: Annotated[_Str, AfterValidator(_nonblank)] | None = None
    estimate: EstimateBlock | None = None
    advisories: OverridesBlock | None = None
    preflight: PreflightBlock | None = None

    def layer(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        """The keys this layer sets: parsed scalars; `estimate`/`advisories` as written (`raw`),
        since layers merge them key by key and rule by rule (`_merge`)."""
        out: dict[str, Any] = {}
        for key in self.model_fields_set & set(REPO_KEYS):
            out[key] = raw[key] if key in _RAW_KEYS else getattr(self, key)
        return {k: v for k, v in out.items() if v is not None}


REPO_KEYS = tuple(RepoFields.model_fields)
_RAW_KEYS = ("estimate", "advisories", "preflight")


class RuleFields(RepoFields):
    """A `rules:` item: repo-level keys for every repo whose id matches the glob `match`."""

    match: Annotated[_Str, Field(min_length=1)] = Field(
        description="a 'match' glob such as 'deepseek-ai/*'"
    )


class EntryFields(RepoFields):
    """A `repos:` item: a repo id and its own repo-level keys."""

    id: Annotated[_Str, AfterValidator(_repo_id)] = Field(description="'id: ORG/NAME'")


class WatchlistFile(BaseModel):
    """The whole watchlist file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    defaults: RepoFields | None = None
    rules: list[RuleFields] | None = None
    repos: list[Annotated[EntryFields, BeforeValidator(_entry)]] | None = None
    teams: list[TeamFields] | None = None


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
        elif key in ("estimate", "preflight") and isinstance(out.get(key), dict):
            out[key] = {**out[key], **value}
        else:
            out[key] = value
    return out


def _duplicates(data: Mapping[str, Any]) -> list[str]:
    """`repos[i]: X is listed twice` for every repeated (valid) id."""
    raw = data.get("repos")
    seen: set[str] = set()
    out: list[str] = []
    for i, entry in enumerate(raw if isinstance(raw, list) else []):
        value = _entry(entry)
        rid = value.get("id") if isinstance(value, dict) else None
        try:
            repo_id = parse_repo_id(rid) if isinstance(rid, str) else None
        except InvalidRepoIdError:
            repo_id = None
        if repo_id is not None and repo_id in seen:
            out.append(f"repos[{i}]: {repo_id} is listed twice")
        elif repo_id is not None:
            seen.add(repo_id)
    return out


def parse_watchlist(data: Any, source: str = "watchlist") -> Watchlist:
    """Validate parsed YAML `data` (`WatchlistFile`) and resolve every repo; WatchlistError lists
    every problem at once."""
    if data is None:
        data = {}
    problems: list[str] = []
    model = collect(WatchlistFile, data, "", problems, name=source)
    if isinstance(data, dict):
        problems.extend(_duplicates(data))
    if model is not None and model.teams:
        problems.extend(team_problems(model.teams))
    if model is None or problems:
        raise WatchlistError(f"{source} is invalid", tuple(problems))
    defaults = model.defaults.layer(data["defaults"]) if model.defaults else {}
    rules = [
        (rule.match, rule.layer(raw))
        for rule, raw in zip(model.rules or (), data.get("rules") or (), strict=True)
    ]
    repos: list[WatchedRepo] = []
    for entry, raw in zip(model.repos or (), data.get("repos") or (), strict=True):
        repo_id = RepoId(entry.id)
        merged = dict(defaults)
        for pattern, layer in rules:
            if fnmatch.fnmatchcase(repo_id, pattern):
                merged = _merge(merged, layer)
        merged = _merge(merged, entry.layer(_entry(raw)))  # type: ignore[arg-type]
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
                preflight=merged.get("preflight", {}),
            )
        )
    return Watchlist(tuple(repos), tuple(team_of(t) for t in model.teams or ()))


MAX_WATCHLIST_BYTES = CONFIG_YAML.max_bytes
"""The largest watchlist file read (4 MB; 10k repos take about 0.5 MB)."""
_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
)


def read_bounded(path: Path) -> bytes:
    """The bytes of the watchlist file `path`, read without blocking and to at most
    `MAX_WATCHLIST_BYTES`: WatchlistError (one line) for anything but a regular file (a device
    such as /dev/zero reads without end, a FIFO blocks until a writer comes), a larger file, or
    an OSError."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO's open waits for a writer
    except OSError as exc:
        raise WatchlistError(f"{path}: cannot be read: {exc.strerror or exc}") from exc
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
            raise WatchlistError(
                f"{path}: cannot be read: it is {kind}, not a regular file (a watchlist is a "
                "YAML file)"
            )
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(MAX_WATCHLIST_BYTES + 1)
    except OSError as exc:
        raise WatchlistError(f"{path}: cannot be read: {exc.strerror or exc}") from exc
    finally:
        os.close(fd)
    if len(data) > MAX_WATCHLIST_BYTES:
        raise WatchlistError(
            f"{path}: cannot be read: over {MAX_WATCHLIST_BYTES:,} bytes (a watchlist is at most "
            f"{MAX_WATCHLIST_BYTES // 1_000_000} MB)"
        )
    return data


def load_watchlist(path: Path) -> Watchlist:
    """Read (`read_bounded`) and validate `path`; a missing file is an empty watchlist."""
    if not path.exists():
        return Watchlist(())
    data = read_bounded(path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise WatchlistError(
            f"{path}: not valid YAML", (f"not UTF-8 text ({exc.reason})",)
        ) from exc
    return parse_watchlist(_load_yaml(text, path), str(path))


def _load_yaml(text: str, path: Path) -> Any:
    """The YAML of the watchlist, bounded (`tracker.shared.bounded.CONFIG_YAML`): nesting, size and
    alias expansion are capped, so a hostile file is refused, never expanded."""
    try:
        return load_yaml(text, str(path), CONFIG_YAML)
    except BoundsError as exc:
        detail = str(exc).removeprefix(f"could not read {path}: ")
        raise WatchlistError(f"{path}: not valid YAML", (detail,)) from exc


def _write(path: Path, text: str) -> None:
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise WatchlistError(f"cannot write {path}: {exc.strerror or exc}") from exc


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
    validate(RepoFields, clean, where=rid, message=f"cannot add {rid}", error=WatchlistError)
    text = _read(path) if path.exists() else ""
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
    _write(path, new_text)
    return result


def _read(path: Path) -> str:
    try:
        return read_bounded(path).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise WatchlistError(f"{path}: cannot be read: {exc}") from exc


def _reparse(text: str, path: Path) -> Watchlist:
    return parse_watchlist(_load_yaml(text, path), str(path))


def remove_repo(path: Path, repo_id: str) -> Watchlist:
    """Remove a repo's entry from the watchlist file, keeping everything else."""
    rid = parse_repo_id(repo_id)
    current = load_watchlist(path)
    if not any(r.repo_id == rid for r in current.repos):
        raise NotWatchedError(f"{rid} is not in {path}")
    lines = _read(path).splitlines()
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
        _write(path, new_text)
        return result
    raise WatchlistError(f"{path}: could not find the entry of {rid} to remove; edit it by hand")
