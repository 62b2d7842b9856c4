"""Find the model pins in a codebase: where code names a Hub repo (and the revision it pins), and
the transformers/vLLM versions it runs.

Python is read by its syntax tree (`from_pretrained` on any class, `hf_hub_download`,
`snapshot_download`, `pipeline(model=…)`, vLLM's `LLM(model=…)`/`EngineArgs`, argparse defaults
and dataclass fields named like `model_name_or_path`; a name bound once to a string constant is
resolved), YAML/JSON/TOML configs by their keys (`model_name_or_path`, `model`, `base_model`, …
with `revision` beside them), shell scripts, Dockerfiles and command lists in YAML by their engine
flags (`vllm serve ORG/NAME --revision R`, `--model`, `--tokenizer`), versions from
requirements files, pyproject.toml, uv.lock and poetry.lock. Pure: reads the files under a root,
nothing else.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shlex
import tomllib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tracker.shared.domain import RepoId, parse_repo_id
from tracker.shared.errors import InvalidRepoIdError

TRACKED_PACKAGES = ("transformers", "vllm")
"""The packages whose versions a scan reports (what decides how a model loads and serves)."""

SKIPPED_DIRS = frozenset(
    {".git", ".hg", ".svn", ".venv", "venv", "env", "node_modules", "__pycache__", ".tox",
     ".mypy_cache", ".ruff_cache", ".pytest_cache", "site-packages", "dist", "build"}
)  # fmt: skip

MODEL_KEYS = frozenset(
    {
        "model",
        "model_name_or_path",
        "pretrained_model_name_or_path",
        "base_model",
        "base_model_name_or_path",
        "model_id",
        "model_name",
        "model_path",
        "repo_id",
    }
)
TOKENIZER_KEYS = frozenset({"tokenizer", "tokenizer_name", "tokenizer_name_or_path"})
REVISION_KEYS = ("revision", "model_revision")
TOKENIZER_REVISION_KEYS = ("tokenizer_revision",)

# Engine flags on a command line (vllm serve, the OpenAI server module, training scripts).
_MODEL_FLAGS = frozenset(
    {"--model", "--model_name_or_path", "--model-name-or-path", "--base_model", "--base-model",
     "--model_id", "--model-id", "--pretrained_model_name_or_path"}
)  # fmt: skip
_TOKENIZER_FLAGS = frozenset({"--tokenizer", "--tokenizer_name", "--tokenizer-name"})
_REVISION_FLAGS = frozenset({"--revision", "--model-revision", "--model_revision"})
_TOKENIZER_REVISION_FLAGS = frozenset({"--tokenizer-revision", "--tokenizer_revision"})

_CALL_SETTINGS = (
    ("tensor_parallel_size", "tensor_parallel"),
    ("max_model_len", "context"),
    ("trust_remote_code", "trust_remote_code"),
)
_COMMAND_SETTINGS = {
    "--tensor-parallel-size": "tensor_parallel",
    "-tp": "tensor_parallel",
    "--max-model-len": "context",
}
_DOWNLOADS = frozenset({"hf_hub_download", "snapshot_download", "hf_hub_url"})
_ENGINES = frozenset({"LLM", "AsyncLLMEngine", "LLMEngine", "EngineArgs", "AsyncEngineArgs"})


@dataclass(frozen=True, order=True)
class Location:
    """Where a pin is written: a path relative to the scanned root (POSIX), 1-based line and
    column."""

    path: str
    line: int
    column: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}:{self.column}"


@dataclass(frozen=True)
class Pin:
    """One place code names a Hub repo: the repo, the revision it pins (None: it follows the
    repo's default branch), what it loads (`model` or `tokenizer`) and how (`via`)."""

    location: Location
    repo_id: RepoId
    revision: str | None
    role: str
    via: str
    settings: tuple[tuple[str, str], ...] = ()
    """What the same call or command line says of the workload: `tensor_parallel`, `context`
    (vLLM's max model length), `trust_remote_code`, `lora_rank` (a LoraConfig in the file)."""


@dataclass(frozen=True)
class VersionPin:
    """A transformers or vLLM requirement: the specifier as written, the exact version where one
    is pinned (`==X` or a lockfile), and where."""

    location: Location
    package: str
    spec: str
    version: str | None
    source: str


@dataclass(frozen=True)
class Skipped:
    """A file the scan could not read, and why (a visible state, never a silent gap)."""

    path: str
    reason: str


@dataclass(frozen=True)
class Found:
    """What a scan found under a root: pins and versions in file and line order."""

    pins: tuple[Pin, ...]
    versions: tuple[VersionPin, ...]
    skipped: tuple[Skipped, ...]
    files: int


def repo_id_or_none(value: object) -> RepoId | None:
    """`value` as a Hub repo id (`ORG/NAME`) when it is one and not a local path."""
    if not isinstance(value, str):
        return None
    text = value.strip()
    if text != value or text.startswith(("./", "../", "/", "~")) or ":" in text:
        return None
    try:
        return parse_repo_id(text)
    except InvalidRepoIdError:
        return None


def _revision(value: object) -> str | None:
    return value if isinstance(value, str) and value.strip() and " " not in value else None


# -- files ---------------------------------------------------------------------------------------


def _kind(name: str) -> str | None:
    lower = name.lower()
    if lower.endswith(".py"):
        return "python"
    if lower in ("uv.lock", "poetry.lock"):
        return "lock"
    if lower == "pyproject.toml":
        return "pyproject"
    if lower.endswith(".txt") and ("requirements" in lower or "constraints" in lower):
        return "requirements"
    if lower.endswith((".yaml", ".yml")):
        return "yaml"
    if lower.endswith(".json"):
        return "json"
    if lower.endswith(".toml"):
        return "toml"
    if lower.endswith((".sh", ".bash")) or lower == "dockerfile" or lower.startswith("dockerfile."):
        return "shell"
    if lower.endswith(".dockerfile"):
        return "shell"
    return None


def _files(root: Path, max_files: int) -> Iterator[tuple[Path, str | None]]:
    """The candidate files under `root` with their kind; past `max_files`, one (root, None)."""
    if root.is_file():
        kind = _kind(root.name)
        if kind is not None:
            yield root, kind
        return
    n = 0
    for directory, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS and not d.endswith(".egg-info"))
        for name in sorted(names):
            kind = _kind(name)
            if kind is None:
                continue
            n += 1
            if n > max_files:
                yield root, None
                return
            yield Path(directory) / name, kind


def scan(root: Path, *, max_file_bytes: int, max_files: int) -> Found:
    """Every pin and version under `root` (a directory or one file); files over `max_file_bytes`,
    unreadable or unparsable ones are listed in `skipped` with the reason."""
    pins: list[Pin] = []
    versions: list[VersionPin] = []
    skipped: list[Skipped] = []
    base = root if root.is_dir() else root.parent
    files = 0
    for path, kind in _files(root, max_files):
        if kind is None:
            skipped.append(Skipped(".", f"over {max_files:,} candidate files: the rest not read"))
            break
        rel = path.relative_to(base).as_posix()
        try:
            if path.is_symlink() or not path.is_file():
                continue
            size = path.stat().st_size
            if size > max_file_bytes:
                skipped.append(Skipped(rel, f"over {max_file_bytes:,} bytes"))
                continue
            text = path.read_bytes().decode("utf-8")
        except OSError as exc:
            skipped.append(Skipped(rel, f"cannot be read: {exc.strerror or exc}"))
            continue
        except UnicodeDecodeError:
            skipped.append(Skipped(rel, "not UTF-8 text"))
            continue
        files += 1
        try:
            if kind == "python":
                pins.extend(python_pins(text, rel))
            elif kind == "yaml":
                pins.extend(yaml_pins(text, rel))
            elif kind == "json":
                pins.extend(data_pins(json.loads(text), text, rel, json_style=True))
            elif kind == "toml":
                pins.extend(data_pins(tomllib.loads(text), text, rel, json_style=False))
            elif kind == "shell":
                pins.extend(shell_pins(text, rel, docker="dockerfile" in path.name.lower()))
            elif kind == "requirements":
                versions.extend(requirements_versions(text, rel))
            elif kind == "pyproject":
                versions.extend(pyproject_versions(text, rel))
            elif kind == "lock":
                versions.extend(lock_versions(text, rel, path.name.lower()))
        except (SyntaxError, ValueError, yaml.YAMLError, RecursionError) as exc:
            reason = " ".join(str(exc).split())[:200]
            skipped.append(Skipped(rel, f"not valid {kind}: {reason}"))
    return Found(
        pins=tuple(sorted(pins, key=lambda p: (p.location, p.role))),
        versions=tuple(sorted(versions, key=lambda v: v.location)),
        skipped=tuple(skipped),
        files=files,
    )


# -- Python --------------------------------------------------------------------------------------


def _call_name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return None


class _Constants:
    """Names bound to a string constant, resolvable where the name has exactly one such value
    (module and function scopes alike; a name rebound to another value is not resolved)."""

    def __init__(self, tree: ast.AST) -> None:
        values: dict[str, set[str | None]] = {}
        for node in ast.walk(tree):
            targets: list[ast.expr] = []
            value: ast.expr | None = None
            if isinstance(node, ast.Assign):
                targets, value = node.targets, node.value
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                targets, value = [node.target], node.value
            for target in targets:
                if isinstance(target, ast.Name):
                    values.setdefault(target.id, set()).add(_literal(value, None))
        self._values = {k: next(iter(v)) for k, v in values.items() if len(v) == 1}

    def value(self, node: ast.expr | None) -> str | None:
        return _literal(node, self)


def _literal(node: ast.expr | None, constants: _Constants | None) -> str | None:
    """The string `node` evaluates to: a constant, a resolvable name, or the default of
    `os.environ.get(NAME, DEFAULT)` / `os.getenv(NAME, DEFAULT)`."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name) and constants is not None:
        return constants._values.get(node.id)
    if (
        isinstance(node, ast.Call)
        and _call_name(node.func) in ("get", "getenv")
        and len(node.args) == 2
    ):
        return _literal(node.args[1], constants)
    return None


def _kw(call: ast.Call, *names: str) -> ast.expr | None:
    for kw in call.keywords:
        if kw.arg in names:
            return kw.value
    return None


def _arg(call: ast.Call, index: int, *names: str) -> ast.expr | None:
    found = _kw(call, *names)
    if found is None and len(call.args) > index:
        a = call.args[index]
        return None if isinstance(a, ast.Starred) else a
    return found


def python_pins(text: str, path: str) -> list[Pin]:
    """The pins of a Python source (SyntaxError when it does not parse)."""
    tree = ast.parse(text, filename=path)
    consts = _Constants(tree)
    out: list[Pin] = []

    lora_ranks = {
        str(r.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and _call_name(node.func) == "LoraConfig"
        for r in [_kw(node, "r")]
        if isinstance(r, ast.Constant) and isinstance(r.value, int)
    }

    def add(node: ast.AST, model: str | None, revision: str | None, role: str, via: str) -> None:
        rid = repo_id_or_none(model)
        if rid is not None:
            where = Location(path, getattr(node, "lineno", 1), getattr(node, "col_offset", 0) + 1)
            found: list[tuple[str, str]] = []
            if isinstance(node, ast.Call):
                for key, name in _CALL_SETTINGS:
                    value = _kw(node, key)
                    if isinstance(value, ast.Constant) and isinstance(value.value, int | bool):
                        found.append((name, str(value.value).lower()))
            if role == "model" and len(lora_ranks) == 1 and via.endswith("from_pretrained"):
                found.append(("lora_rank", next(iter(lora_ranks))))
            out.append(Pin(where, rid, _revision(revision), role, via, tuple(sorted(found))))

    flag_defaults: dict[str, tuple[ast.Call, str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = _call_name(node.func)
            revision = consts.value(_kw(node, "revision"))
            if name == "from_pretrained":
                model = consts.value(_arg(node, 0, "pretrained_model_name_or_path"))
                owner = node.func.value if isinstance(node.func, ast.Attribute) else None
                cls = _call_name(owner) if isinstance(owner, ast.Name | ast.Attribute) else None
                role = "tokenizer" if cls and "Tokenizer" in cls else "model"
                add(node, model, revision, role, f"{cls or ''}.from_pretrained".lstrip("."))
            elif name in _DOWNLOADS:
                kind = consts.value(_kw(node, "repo_type"))
                if kind in (None, "model"):
                    add(node, consts.value(_arg(node, 0, "repo_id")), revision, "model", name)
            elif name == "pipeline":
                add(node, consts.value(_arg(node, 1, "model")), revision, "model", "pipeline")
                add(node, consts.value(_kw(node, "tokenizer")), revision, "tokenizer", "pipeline")
            elif name in _ENGINES:
                add(node, consts.value(_arg(node, 0, "model")), revision, "model", name)
                tok_rev = consts.value(_kw(node, "tokenizer_revision"))
                add(node, consts.value(_kw(node, "tokenizer")), tok_rev, "tokenizer", name)
            elif name == "add_argument" and node.args:
                flag = consts.value(node.args[0])
                default = consts.value(_kw(node, "default"))
                if flag and default is not None:
                    flag_defaults[flag] = (node, default)
        elif isinstance(node, ast.ClassDef):
            # dataclass fields such as `model_name_or_path: str = field(default="ORG/NAME")`
            fields: dict[str, tuple[ast.AST, str]] = {}
            for stmt in node.body:
                if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                    value = stmt.value
                    if isinstance(value, ast.Call) and _call_name(value.func) == "field":
                        value = _kw(value, "default")
                    literal = consts.value(value)
                    if literal is not None:
                        fields[stmt.target.id] = (stmt, literal)
            _keyed_pins(fields, add, via=f"{node.name} field")
    argparse = {k.lstrip("-").replace("-", "_"): v for k, v in flag_defaults.items()}
    _keyed_pins(argparse, add, via="argparse default")
    return out


def _keyed_pins(items: Mapping[str, tuple[Any, str]], add: Any, via: str) -> None:
    revision = next((items[k][1] for k in REVISION_KEYS if k in items), None)
    tok_revision = next((items[k][1] for k in TOKENIZER_REVISION_KEYS if k in items), None)
    for key, (node, value) in items.items():
        if key in MODEL_KEYS and key != "model":
            add(node, value, revision, "model", f"{via} {key}")
        elif key in TOKENIZER_KEYS:
            add(node, value, tok_revision or revision, "tokenizer", f"{via} {key}")


# -- configs (YAML, JSON, TOML) --------------------------------------------------------------------


def _mapping_pins(
    pairs: Mapping[str, Any], where: Any, path: str, via: str, out: list[Pin]
) -> None:
    """Pins of one mapping: each model/tokenizer key with the revision keys beside it.
    `where(key)` is the Location of a key's value."""
    revision = next((pairs[k] for k in REVISION_KEYS if isinstance(pairs.get(k), str)), None)
    tok_rev = next(
        (pairs[k] for k in TOKENIZER_REVISION_KEYS if isinstance(pairs.get(k), str)), None
    )
    for key, value in pairs.items():
        rid = repo_id_or_none(value)
        if rid is None:
            continue
        if key in MODEL_KEYS:
            out.append(Pin(where(key), rid, _revision(revision), "model", f"{via} {key}"))
        elif key in TOKENIZER_KEYS:
            out.append(
                Pin(where(key), rid, _revision(tok_rev or revision), "tokenizer", f"{via} {key}")
            )


def yaml_pins(text: str, path: str) -> list[Pin]:
    """The pins of a YAML file (every document; Hydra configs included): keyed values, and
    command lines written as strings or lists (`command: [vllm, serve, ORG/NAME, …]`)."""
    out: list[Pin] = []
    seen: set[int] = set()

    def loc(node: yaml.Node) -> Location:
        return Location(path, node.start_mark.line + 1, node.start_mark.column + 1)

    def walk(node: yaml.Node) -> None:
        if id(node) in seen:  # an alias: walked once
            return
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            scalars: dict[str, Any] = {}
            nodes: dict[str, yaml.Node] = {}
            for k, v in node.value:
                if isinstance(k, yaml.ScalarNode) and isinstance(v, yaml.ScalarNode):
                    scalars[str(k.value)] = v.value
                    nodes[str(k.value)] = v
                elif isinstance(k, yaml.ScalarNode) and str(k.value) in ("command", "args"):
                    _yaml_command(v, path, out)
                if (
                    isinstance(k, yaml.ScalarNode)
                    and str(k.value) in ("command", "args", "run")
                    and isinstance(v, yaml.ScalarNode)
                ):
                    out.extend(_relocate(shell_pins(str(v.value), path, docker=False), v))
                walk(v)
            _mapping_pins(scalars, lambda key: loc(nodes[key]), path, "config", out)
        elif isinstance(node, yaml.SequenceNode):
            for item in node.value:
                walk(item)

    for doc in yaml.compose_all(text, Loader=yaml.SafeLoader):
        if doc is not None:
            walk(doc)
    return out


def _relocate(pins: list[Pin], node: yaml.Node) -> list[Pin]:
    """Pins of a command string inside YAML, moved to the string's place in the file."""
    base = node.start_mark.line
    style = getattr(node, "style", None)
    shift = 1 if style in ("|", ">") else 0  # a block scalar starts on the line after its key
    out = []
    for p in pins:
        line = base + p.location.line + shift
        col = p.location.column if (p.location.line > 1 or shift) else node.start_mark.column + 1
        out.append(Pin(Location(p.location.path, line, col), p.repo_id, p.revision, p.role, p.via))
    return out


def _yaml_command(node: yaml.Node, path: str, out: list[Pin]) -> None:
    if not isinstance(node, yaml.SequenceNode):
        return
    items = [n for n in node.value if isinstance(n, yaml.ScalarNode)]
    tokens = [(str(n.value), Location(path, n.start_mark.line + 1, n.start_mark.column + 1))
              for n in items]  # fmt: skip
    out.extend(command_pins(tokens))


def data_pins(data: Any, text: str, path: str, *, json_style: bool) -> list[Pin]:
    """The pins of parsed JSON or TOML `data`; lines are found in `text` (key then value)."""
    out: list[Pin] = []
    cursor = [0]

    def where(key: str, value: str) -> Location:
        sep = r"\s*:\s*" if json_style else r"\s*=\s*"
        quoted = re.escape(json.dumps(value))
        pattern = re.compile(
            r'["\']?' + re.escape(key) + r'["\']?' + sep + f"({quoted}|'{re.escape(value)}')"
        )
        m = pattern.search(text, cursor[0]) or pattern.search(text)
        if m is None:
            return Location(path, 1, 1)
        cursor[0] = m.end()
        start = m.start(1)
        line = text.count("\n", 0, start) + 1
        return Location(path, line, start - (text.rfind("\n", 0, start) + 1) + 1)

    def walk(node: Any, depth: int) -> None:
        if depth > 64:
            return
        if isinstance(node, dict):
            pairs = {str(k): v for k, v in node.items()}
            _mapping_pins(pairs, lambda key: where(key, pairs[key]), path, "config", out)
            for v in node.values():
                walk(v, depth + 1)
        elif isinstance(node, list):
            for v in node:
                walk(v, depth + 1)

    walk(data, 0)
    return out


# -- shell scripts and Dockerfiles -----------------------------------------------------------------

_ASSIGN = re.compile(r"^(?:export\s+|ARG\s+|ENV\s+)?([A-Za-z_][A-Za-z0-9_]*)=(\S*)$")
_ENV_SPACE = re.compile(r"^ENV\s+([A-Za-z_][A-Za-z0-9_]*)\s+(\S+)\s*$")
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)")
_DOCKER_INSTR = re.compile(r"^(RUN|CMD|ENTRYPOINT)\s+(.*)$", re.S)


def _logical_lines(text: str) -> Iterator[tuple[int, list[str]]]:
    """(first line number, physical lines) of each backslash-continued command."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        start = i
        group = [lines[i]]
        while group[-1].rstrip().endswith("\\") and i + 1 < len(lines):
            i += 1
            group.append(lines[i])
        yield start + 1, group
        i += 1


def shell_pins(text: str, path: str, *, docker: bool) -> list[Pin]:
    """The pins of a shell script or Dockerfile: engine flags and `vllm serve ORG/NAME`, with
    variables set in the file (`NAME=…`, `export`, `ARG`, `ENV`) substituted."""
    env: dict[str, str] = {}
    out: list[Pin] = []
    for first, group in _logical_lines(text):
        joined = " ".join(ln.rstrip().removesuffix("\\") for ln in group).strip()
        if not joined or joined.startswith("#"):
            continue
        m = _ENV_SPACE.match(joined) if docker else None
        if m:
            env[m.group(1)] = m.group(2).strip("\"'")
            continue
        body = joined
        if docker:
            d = _DOCKER_INSTR.match(joined)
            if d is None:
                body = joined if joined.split(" ", 1)[0] in ("ARG", "ENV") else ""
            else:
                body = d.group(2)
        words = _words(body)
        if words is None:
            continue
        if words and (len(words) == 1 or words[0] in ("export", "ARG", "ENV")):
            for w in words if len(words) == 1 else words[1:]:
                a = _ASSIGN.match(w)
                if a:
                    env[a.group(1)] = _substitute(a.group(2), env)
        tokens = [(_substitute(w, env), _locate(w, group, first, path)) for w in words]
        out.extend(command_pins(tokens))
    return out


def _words(body: str) -> list[str] | None:
    if body.startswith("["):  # a Dockerfile's exec form: a JSON list
        try:
            value = json.loads(body)
        except ValueError:
            return None
        return [str(v) for v in value] if isinstance(value, list) else None
    try:
        return shlex.split(body, comments=True)
    except ValueError:
        return None


def _substitute(word: str, env: Mapping[str, str]) -> str:
    def one(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(3)
        return env.get(name, m.group(2) if m.group(2) is not None else m.group(0))

    return _VAR.sub(one, word)


def _locate(word: str, group: Sequence[str], first: int, path: str) -> Location:
    for offset, line in enumerate(group):
        col = line.find(word)
        if col >= 0:
            return Location(path, first + offset, col + 1)
    return Location(path, first, 1)


def command_pins(tokens: Sequence[tuple[str, Location]]) -> list[Pin]:
    """The pins of one command line's tokens (each with its place): `vllm serve ORG/NAME`,
    `huggingface-cli download ORG/NAME`, `--model`, `--tokenizer` and their revisions."""
    values: dict[str, tuple[str, Location]] = {}
    settings: dict[str, str] = {}
    words = [t for t, _ in tokens]
    i = 0
    while i < len(tokens):
        word, where = tokens[i]
        flag, eq, inline = word.partition("=")
        if word == "--trust-remote-code":
            settings["trust_remote_code"] = "true"
        elif flag in _COMMAND_SETTINGS and (eq or i + 1 < len(tokens)):
            value = inline if eq else tokens[i + 1][0]
            if value.isdigit():
                settings[_COMMAND_SETTINGS[flag]] = value
            i += 0 if eq else 1
        elif flag.startswith("--") and flag in (
            _MODEL_FLAGS | _TOKENIZER_FLAGS | _REVISION_FLAGS | _TOKENIZER_REVISION_FLAGS
        ):
            if eq:
                values.setdefault(flag, (inline, where))
            elif i + 1 < len(tokens):
                values.setdefault(flag, tokens[i + 1])
                i += 1
        elif (
            word in ("serve", "download")
            and i > 0
            and (words[i - 1].endswith("vllm") or words[i - 1] in ("huggingface-cli", "hf"))
            and i + 1 < len(tokens)
            and not tokens[i + 1][0].startswith("-")
        ):
            values.setdefault("--model", tokens[i + 1])
            i += 1
        i += 1
    via = _command_name(words)
    revision = next((values[f][0] for f in _REVISION_FLAGS if f in values), None)
    tok_rev = next((values[f][0] for f in _TOKENIZER_REVISION_FLAGS if f in values), None)
    out: list[Pin] = []
    for flag in sorted(_MODEL_FLAGS & values.keys()):
        value, where = values[flag]
        rid = repo_id_or_none(value)
        if rid is not None:
            out.append(
                Pin(where, rid, _revision(revision), "model", via, tuple(sorted(settings.items())))
            )
    for flag in sorted(_TOKENIZER_FLAGS & values.keys()):
        value, where = values[flag]
        rid = repo_id_or_none(value)
        if rid is not None:
            out.append(Pin(where, rid, _revision(tok_rev), "tokenizer", via))
    return out


def _command_name(words: Sequence[str]) -> str:
    for i, w in enumerate(words):
        if w.endswith("vllm") and i + 1 < len(words) and words[i + 1] == "serve":
            return "vllm serve"
        if w in ("huggingface-cli", "hf") and i + 1 < len(words) and words[i + 1] == "download":
            return f"{w} download"
        if "vllm.entrypoints" in w:
            return w
    return "command line"


# -- versions --------------------------------------------------------------------------------------


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _exact(spec: str) -> str | None:
    m = re.fullmatch(r"\s*===?\s*([0-9][A-Za-z0-9.+!-]*)\s*", spec)
    return m.group(1) if m and "*" not in m.group(1) else None


def _requirement(text: str) -> tuple[str, str] | None:
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        req = Requirement(text)
    except InvalidRequirement:
        return None
    name = _canonical(req.name)
    return (name, str(req.specifier)) if name in TRACKED_PACKAGES else None


def _line_col(text: str, index: int) -> tuple[int, int]:
    return text.count("\n", 0, index) + 1, index - (text.rfind("\n", 0, index) + 1) + 1


def requirements_versions(text: str, path: str) -> list[VersionPin]:
    """transformers/vLLM lines of a requirements file (options, includes and comments skipped)."""
    out: list[VersionPin] = []
    for n, raw in enumerate(text.splitlines(), start=1):
        line = raw.split(" #", 1)[0].split("\t#", 1)[0].strip()
        if not line or line.startswith(("#", "-")):
            continue
        found = _requirement(line.split(" --", 1)[0])
        if found:
            name, spec = found
            col = len(raw) - len(raw.lstrip()) + 1
            out.append(VersionPin(Location(path, n, col), name, spec, _exact(spec), "requirements"))
    return out


def _string_index(text: str, needle: str, start: int = 0) -> int:
    for quote in ('"', "'"):
        i = text.find(quote + needle, start)
        if i >= 0:
            return i + 1
    return -1


def pyproject_versions(text: str, path: str) -> list[VersionPin]:
    """transformers/vLLM in pyproject.toml: PEP 621 dependencies, optional dependencies and
    dependency groups, and Poetry's dependency tables."""
    data = tomllib.loads(text)
    out: list[VersionPin] = []
    project: dict[str, Any] = data["project"] if isinstance(data.get("project"), dict) else {}
    lists: list[Iterable[Any]] = [project.get("dependencies") or []]
    for table in (project.get("optional-dependencies"), data.get("dependency-groups")):
        if isinstance(table, dict):
            lists.extend(v for v in table.values() if isinstance(v, list))
    for items in lists:
        for item in items:
            if not isinstance(item, str):
                continue
            found = _requirement(item)
            if found:
                name, spec = found
                line, col = _line_col(text, max(_string_index(text, item), 0))
                out.append(
                    VersionPin(Location(path, line, col), name, spec, _exact(spec), "pyproject")
                )
    tool = data.get("tool")
    poetry = tool.get("poetry") if isinstance(tool, dict) else None
    poetry = poetry if isinstance(poetry, dict) else {}
    tables: list[object] = [poetry.get("dependencies")]
    groups = poetry.get("group")
    if isinstance(groups, dict):
        tables.extend(g.get("dependencies") for g in groups.values() if isinstance(g, dict))
    for deps in tables:
        if not isinstance(deps, dict):
            continue
        for name, value in deps.items():
            if _canonical(str(name)) not in TRACKED_PACKAGES:
                continue
            written: object = value.get("version") if isinstance(value, dict) else value
            if not isinstance(written, str):
                continue
            spec = written
            m = re.search(rf"(?m)^\s*{re.escape(str(name))}\s*=", text)
            line, col = _line_col(text, m.start() if m else 0)
            exact = spec if re.fullmatch(r"[0-9][A-Za-z0-9.+!-]*", spec) else _exact(spec)
            out.append(
                VersionPin(
                    Location(path, line, col), _canonical(str(name)), spec, exact, "pyproject"
                )
            )
    return out


def lock_versions(text: str, path: str, name: str) -> list[VersionPin]:
    """The locked transformers/vLLM versions of a uv.lock or poetry.lock (`[[package]]` tables)."""
    data = tomllib.loads(text)
    out: list[VersionPin] = []
    for pkg in data.get("package") or []:
        if not isinstance(pkg, dict):
            continue
        canonical = _canonical(str(pkg.get("name", "")))
        version = pkg.get("version")
        if canonical not in TRACKED_PACKAGES or not isinstance(version, str):
            continue
        m = re.search(rf'(?m)^name\s*=\s*"{re.escape(str(pkg["name"]))}"', text)
        line, col = _line_col(text, m.start() if m else 0)
        out.append(VersionPin(Location(path, line, col), canonical, f"=={version}", version, name))
    return out
