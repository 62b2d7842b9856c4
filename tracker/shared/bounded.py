"""Bounded parsing of upstream text: JSON and YAML whose depth, size and expansion are capped
before (or while) they are built, so that a hostile file costs memory proportional to its bytes.

Pure (stdlib and PyYAML only): the diff and estimate stages, the safetensors header parser and the
watchlist loader all read upstream or user text through here.

- `load_json(data, what, bounds)`: `json.loads` after a C-speed pre-scan that counts structural
  characters (an upper bound on the number of values, hence on memory: json.loads builds at most
  ~80 bytes of Python objects per structural character, at most ~25 per input byte) and measures
  the nesting depth outside strings. Over a bound, NaN/Infinity, a number that overflows to an
  infinite float, an integer over Python's digit limit, or invalid UTF-8 JSON raise
  `BoundsError` (an UnreadableArtifactError) with a one-line reason.
- `check_json(data, what, bounds)`: that pre-scan alone, for JSON another library parses (the
  Hub client's API answers, `tracker.sources.hub`).
- `load_yaml(text, what, bounds)`: PyYAML's safe loader (libyaml when present), with the composed
  node graph walked before anything is constructed: aliases are followed and counted as the
  copies they expand to, so an alias bomb ("billion laughs") or a recursive alias is refused
  after `max_nodes` visits, never expanded.

Limits per reader are `Bounds` values; `bounds_for(path)` is the table the diff stage uses.
"""

from __future__ import annotations

import functools
import json
import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import yaml

from tracker.shared.errors import UnreadableArtifactError


class BoundsError(UnreadableArtifactError):
    """Upstream text over a parsing bound (depth, values, alias expansion) or not parseable."""


@dataclass(frozen=True)
class Bounds:
    """How deep and how large a parsed document may be.

    `max_depth`: nesting of arrays/objects (mappings/sequences); `max_nodes`: values, counted
    as structural characters for JSON (an over-estimate: characters inside strings count too) and
    as composed nodes, aliases expanded, for YAML; `max_bytes`: the input length.
    """

    max_depth: int = 64
    max_nodes: int = 500_000
    max_bytes: int = 64_000_000


MAX_FILE_BYTES = 64_000_000
"""The default cap on one tracked file's size (`Settings.max_file_bytes`; tracker.shared.artifacts
re-exports it). Here, so that a one-off estimate of a local config reads under it without loading
tracker.shared.artifacts and tracker.shared.domain."""

DOCUMENT = Bounds(max_depth=64, max_nodes=500_000, max_bytes=16 * 1024 * 1024)
"""Config-like files (config, generation and processor configs, tokenizer_config, special tokens
map, chat_template.json): the largest real ones hold ~100k values in ~1 MB (Gemma 3's
tokenizer_config.json, a 6k-token added_tokens_decoder)."""

LARGE_DOCUMENT = Bounds(max_depth=64, max_nodes=4_000_000)
"""tokenizer.json (a 262k vocabulary with its merges is ~2M values) and weight-map indexes
(DeepSeek-V3's 91k tensors are ~180k values)."""

SAFETENSORS_HEADER = Bounds(max_depth=8, max_nodes=4_000_000, max_bytes=100_000_000)
"""A header is an object of tensor objects: depth 3 at most, ~10 values per tensor."""

FRONT_MATTER = Bounds(max_depth=32, max_nodes=50_000, max_bytes=1_000_000)
"""Model-card YAML front matter: the largest in the corpus is 9 KB (Llama 4 Maverick's). YAML
nodes are heavy (~350-850 bytes of Python objects each while composing), so the value bound is
what bounds memory here: 50k values ≈ 45 MB."""

CONFIG_YAML = Bounds(max_depth=32, max_nodes=100_000, max_bytes=4_000_000)
"""A hand-written YAML file such as the watchlist (10k repos ≈ 50k values)."""

HUB_ANSWER = Bounds(max_depth=64, max_nodes=4_000_000, max_bytes=64_000_000)
"""One JSON answer of the Hub API (refs, a page of commits or of the tree, paths-info), checked
by `check_json` before huggingface_hub parses it. The Hub pages its listings (1,000 tree entries
or 50 commits a page, ~20 values each); the bound leaves room for one unpaged answer of 100,000
LFS files (~1.7M values, ~26 MB; bench/reliability.py measures it)."""

_LARGE_FILES = ("tokenizer.json",)
_LARGE_SUFFIXES = (".index.json",)


def bounds_for(path: str) -> Bounds:
    """The JSON bounds of a tracked file, by its repo path."""
    name = path.rsplit("/", 1)[-1]
    if name in _LARGE_FILES or name.endswith(_LARGE_SUFFIXES):
        return LARGE_DOCUMENT
    return DOCUMENT


_STRING = re.compile(rb'"(?:[^"\\]++|\\.)*+"', re.DOTALL)
_KEEP_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_ONE_KIND = bytes.maketrans(b"{}", b"[]")


def json_depth(data: bytes, limit: int) -> int:
    """The nesting depth of JSON `data` outside strings, or `limit + 1` as soon as it exceeds
    `limit`. Runs at C speed (regex and `bytes.replace`), one pass per level, objects and arrays
    alike; unbalanced brackets (malformed JSON, left for json.loads to report) count as the
    depth reached."""
    brackets = _STRING.sub(b"", data).translate(_ONE_KIND, _KEEP_BRACKETS)
    depth = 0
    while brackets:
        shorter = brackets.replace(b"[]", b"")
        if len(shorter) == len(brackets):
            return depth  # unbalanced: json.loads says where
        depth += 1
        if depth > limit:
            return depth
        brackets = shorter
    return depth


def _structural(data: bytes) -> int:
    return data.count(b"[") + data.count(b"{") + data.count(b",") + data.count(b":") + 1


_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def _check_surrogates(value: Any) -> None:
    """Raise ValueError when a parsed string holds a lone surrogate (`"\\ud800"` is valid JSON
    but no UTF-8 text, so nothing downstream could store or print it)."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            try:
                v.encode("utf-8")
            except UnicodeEncodeError:
                raise ValueError("string holds a lone UTF-16 surrogate escape") from None
        elif isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text[:40]} is out of range")
    return value


class NonFinite(str):
    """NaN, Infinity or -Infinity read by `load_json(..., nonfinite="text")`: the constant's name,
    a string that JSON-encodes as one, that still says it was a number (`json_type`)."""

    __slots__ = ()


def _constant(name: str) -> Any:
    raise ValueError(f"non-standard JSON constant {name}")


def check_json(raw: bytes, what: str, bounds: Bounds) -> None:
    """`load_json`'s pre-scan alone, for JSON another library parses (the Hub client's answers):
    BoundsError "could not read WHAT: <why>" when `raw` is over `max_bytes`, over `max_nodes`
    structural characters or nested deeper than `max_depth`; builds nothing (C-speed scans)."""
    if len(raw) > bounds.max_bytes:
        raise BoundsError(f"could not read {what}: {len(raw):,} bytes, over {bounds.max_bytes:,}")
    nodes = _structural(raw)
    if nodes > bounds.max_nodes:
        raise BoundsError(
            f"could not read {what}: about {nodes:,} JSON values, over the bound of "
            f"{bounds.max_nodes:,}"
        )
    if json_depth(raw, bounds.max_depth) > bounds.max_depth:
        raise BoundsError(
            f"could not read {what}: JSON nested deeper than {bounds.max_depth} levels"
        )


def load_json(
    data: bytes | str,
    what: str,
    bounds: Bounds = DOCUMENT,
    *,
    nonfinite: bool | Literal["text"] = False,
) -> Any:
    """Parse JSON `data` (bytes: UTF-8, an optional BOM allowed) within `bounds`.

    `nonfinite=True` accepts the constants NaN, Infinity and -Infinity as Python's json and
    transformers do (config.json files carry them, e.g. Nemotron-H's `time_step_limit:
    [0.0, Infinity]`) as floats; `nonfinite="text"` accepts them as their names, `NonFinite`
    strings "NaN", "Infinity" and "-Infinity" (for the diff: NaN equals itself, and what is stored
    and served stays strict JSON); every other bound still holds.

    Raises BoundsError "could not read WHAT: <why>" for: over `max_bytes`, over `max_nodes`
    structural characters, nesting over `max_depth`, invalid UTF-8, invalid JSON (json's
    line/column message), NaN/Infinity, a float that overflows, an integer over Python's digit
    limit. Peak memory is bounded by ~80 bytes per structural character plus twice the input.
    """
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    check_json(raw, what, bounds)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise BoundsError(
            f"could not read {what}: not UTF-8 text ({exc.reason} at byte {exc.start})"
        ) from exc
    try:
        if nonfinite == "text":
            value = json.loads(text, parse_constant=NonFinite, parse_float=_finite)
        elif nonfinite:
            value = json.loads(text, parse_float=_finite)
        else:
            value = json.loads(text, parse_constant=_constant, parse_float=_finite)
        if _SURROGATE_ESCAPE.search(raw):
            _check_surrogates(value)
        return value
    except json.JSONDecodeError as exc:
        raise BoundsError(f"could not read {what}: {exc}") from exc
    except (ValueError, RecursionError, MemoryError) as exc:
        detail = str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__
        raise BoundsError(f"could not read {what}: {detail}") from exc


@functools.cache
def _bounded_loader() -> type:
    """PyYAML's safe loader whose `construct_document` first walks the node graph within bounds.

    Built on first use: PyYAML loads only when YAML is read (a JSON-only process, such as a
    one-off `tracker estimate`, never pays for it)."""
    import yaml

    class _BoundedLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
        bounds: Bounds = CONFIG_YAML

        def construct_document(self, node: yaml.Node) -> Any:
            _check_nodes(node, self.bounds)
            return super().construct_document(node)

    return _BoundedLoader


def _check_nodes(root: yaml.Node, bounds: Bounds) -> None:
    """Walk the composed graph as construction would see it (aliases expanded, each visit
    counted) and raise yaml.YAMLError over `bounds`; O(max_nodes) at most, cycles included."""
    import yaml

    stack: list[tuple[yaml.Node, int]] = [(root, 1)]
    seen = 0
    shared: set[int] = set()
    aliases = False
    while stack:
        node, depth = stack.pop()
        seen += 1
        if seen > bounds.max_nodes:
            why = "aliases expand to" if aliases else "has"
            raise yaml.YAMLError(f"{why} more than {bounds.max_nodes:,} values")
        if depth > bounds.max_depth:
            raise yaml.YAMLError(f"is nested deeper than {bounds.max_depth} levels")
        if isinstance(node, yaml.CollectionNode):
            if id(node) in shared:
                aliases = True
            shared.add(id(node))
            for item in node.value:
                if isinstance(item, tuple):
                    stack.append((item[0], depth + 1))
                    stack.append((item[1], depth + 1))
                else:
                    stack.append((item, depth + 1))


def load_yaml(
    text: str, what: str, bounds: Bounds = CONFIG_YAML, *, kind: str = "YAML", first_line: int = 1
) -> Any:
    """`yaml.safe_load(text)` within `bounds` (aliases allowed but counted as their expansion).

    Raises BoundsError "could not read WHAT: <why>" for over `max_bytes`, malformed YAML (with
    the line, counted from `first_line`), more than one document, over `max_nodes` values once
    aliases are expanded, or nesting over `max_depth`; `kind` names the text in the reason.
    """
    if len(text) > bounds.max_bytes:
        raise BoundsError(
            f"could not read {what}: {len(text):,} characters, over {bounds.max_bytes:,}"
        )
    import yaml

    loader_class = type("Loader", (_bounded_loader(),), {"bounds": bounds})
    loader = loader_class(text)
    try:
        return loader.get_single_data()
    except yaml.MarkedYAMLError as exc:
        mark = exc.context_mark or exc.problem_mark  # where the broken construct starts
        where = f" (line {mark.line + first_line})" if mark is not None else ""
        problem = " ".join(p for p in (exc.context, exc.problem) if p) or "malformed"
        raise BoundsError(f"could not read {what}: malformed {kind}{where}: {problem}") from exc
    except yaml.YAMLError as exc:  # our bounds, or a reader error (a control character)
        detail = " ".join(str(exc).split())
        raise BoundsError(f"could not read {what}: {kind} {detail}") from exc
    except (RecursionError, MemoryError, ValueError, TypeError) as exc:
        detail = str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__
        raise BoundsError(f"could not read {what}: {detail}") from exc
    finally:
        loader.dispose()


__all__ = [
    "CONFIG_YAML",
    "DOCUMENT",
    "FRONT_MATTER",
    "HUB_ANSWER",
    "LARGE_DOCUMENT",
    "SAFETENSORS_HEADER",
    "Bounds",
    "BoundsError",
    "bounds_for",
    "check_json",
    "json_depth",
    "load_json",
    "load_yaml",
]
