"""The preflight of one revision: remote-code compatibility, capacity and LoRA targets (pure).

`run_preflight` takes what the revision holds (tracked files, safetensors headers, the tree) and
the symbol tables of the configured transformers versions (or, per version, why there is none),
and returns a `Preflight`: three answers, each present or with the reason it could not be given.
`Preflight.to_json` is its one JSON form (store, `--json`); `from_json` reads it back.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field

from tracker.estimate import EstimateSettings, parse_config
from tracker.estimate.checkpoint import (
    QUANTIZED_DTYPES,
    header_census,
    index_total_size,
    quant_bits,
)
from tracker.estimate.params import read_config
from tracker.preflight.capacity import Capacity, capacity
from tracker.preflight.census_lora import resolve_census
from tracker.preflight.compat import (
    check_version,
    compiled,
    first_missing,
    other_packages,
    version_key,
)
from tracker.preflight.imports import remote_code_imports
from tracker.preflight.lora import LoraResolution, resolve_targets
from tracker.preflight.settings import PreflightSettings
from tracker.preflight.symbols import SymbolTable
from tracker.shared.domain import JSONValue, SafetensorsHeader, TreeEntry
from tracker.shared.errors import EstimateError

ShardCache = MutableMapping[
    tuple[str, str, int | None, int], tuple[dict[str, int], int, frozenset[str]]
]
"""Per-shard census by (path, content identity, layers, bits): (params per dtype, bytes, dtypes).
A caller analysing successive revisions passes one, so unchanged shards are counted once."""

CONFIG_UNREAD = "could not read config.json: "
"""How a preflight answer lost to an unreadable config.json begins (`delta` leaves it unpublished:
the unreadable config is its own advisory)."""


def _symbol(item: JSONValue) -> str:
    """A missing name as a reader knows it: its full symbol (`transformers.x.name`)."""
    if isinstance(item, dict):
        for key in ("symbol", "name", "module"):
            if isinstance(item.get(key), str):
                return str(item[key])
    return str(item)


@dataclass(frozen=True)
class RemoteCode:
    """Remote-code compatibility of one revision (`versions`: per checked version, in release
    order; `unchecked`: versions without a symbol table, with why)."""

    modules: tuple[str, ...]
    problems: tuple[str, ...]
    transformers_imports: tuple[Mapping[str, JSONValue], ...]
    packages: Mapping[str, str]
    compiled: Mapping[str, str]
    versions: tuple[Mapping[str, JSONValue], ...]
    first_missing: Mapping[str, str]
    unchecked: Mapping[str, str] = field(default_factory=dict)
    absent: tuple[str, ...] = ()
    """Modules `auto_map` names or the code imports relatively that the revision does not hold:
    the code cannot import on any version."""
    broken: tuple[str, ...] = ()
    """Why the code imports on no version whatever its names (a module that does not parse, a
    relative import above the repo's root)."""
    not_checked: tuple[str, ...] = ()
    """Code that was not checked (a module too large to parse, code in another repo): unless
    something checked stops it, whether it imports is unknown."""

    def importable(self, version: str) -> bool | None:
        """Whether the remote code imports on `version` (None: not checked). No remote code
        imports everywhere; a remote-code module the revision lacks, or one that does not parse,
        imports nowhere."""
        if self.absent or self.broken:
            return False
        if not self.modules and not self.not_checked:
            return True
        for v in self.versions:
            if v["version"] == version:
                return None if v["importable"] is None else bool(v["importable"])
        return None

    def why_not(self, version: str) -> str:
        """Why the code does not import on `version`, as a parenthesis (" (modules absent: a.py;
        names missing: transformers.x.y)"), or "" when nothing is recorded: the modules it
        lacks and the names (by their full symbol) the version lacks."""
        detail = next((d for d in self.versions if d.get("version") == version), None)
        why: list[str] = []
        for label, key in (("modules absent", "absent"), ("names missing", "missing")):
            items = detail.get(key) if detail else None
            listed = items if isinstance(items, list) else list(getattr(self, key, ()) or ())
            if listed:
                why.append(f"{label}: {', '.join(_symbol(i) for i in listed)}")
        return f" ({'; '.join(why)})" if why else ""

    def to_json(self) -> dict[str, JSONValue]:
        return {
            "modules": list(self.modules),
            "problems": list(self.problems),
            "transformers_imports": [dict(i) for i in self.transformers_imports],
            "packages": dict(self.packages),
            "compiled": dict(self.compiled),
            "versions": [dict(v) for v in self.versions],
            "first_missing": dict(self.first_missing),
            "unchecked": dict(self.unchecked),
            "absent": list(self.absent),
            "broken": list(self.broken),
            "not_checked": list(self.not_checked),
        }

    @classmethod
    def from_json(cls, d: Mapping[str, JSONValue]) -> RemoteCode:
        versions = tuple(d["versions"])
        not_checked = tuple(d.get("not_checked") or ())
        if "broken" not in d:
            # stored before unparsed modules counted: such a module's imports were never read,
            # so a version it called importable is not known
            not_checked = tuple(p for p in d["problems"] if _UNPARSED.match(p))
            if not_checked:
                versions = tuple(
                    {**v, "importable": None, "not_checked": list(not_checked)}
                    if v["importable"]
                    else v
                    for v in versions
                )
        return cls(
            modules=tuple(d["modules"]),
            problems=tuple(d["problems"]),
            transformers_imports=tuple(d["transformers_imports"]),
            packages=dict(d["packages"]),
            compiled=dict(d["compiled"]),
            versions=versions,
            first_missing=dict(d["first_missing"]),
            unchecked=dict(d.get("unchecked") or {}),
            absent=tuple(d["absent"]) if "absent" in d else _absent_of(d["problems"]),
            broken=tuple(d.get("broken") or ()),
            not_checked=not_checked,
        )


@dataclass(frozen=True)
class Preflight:
    """The three answers for one revision; an answer that could not be given is None with why."""

    remote_code: RemoteCode
    capacity: Capacity | None
    capacity_error: str | None
    lora: LoraResolution | None
    lora_error: str | None
    settings: Mapping[str, JSONValue]

    def to_json(self) -> dict[str, JSONValue]:
        return {
            "remote_code": self.remote_code.to_json(),
            "capacity": None if self.capacity is None else self.capacity.to_json(),
            "capacity_error": self.capacity_error,
            "lora": None if self.lora is None else self.lora.to_json(),
            "lora_error": self.lora_error,
            "settings": dict(self.settings),
        }

    @classmethod
    def from_json(cls, d: Mapping[str, JSONValue]) -> Preflight:
        cap, lora = d.get("capacity"), d.get("lora")
        return cls(
            remote_code=RemoteCode.from_json(d["remote_code"]),
            capacity=None if cap is None else Capacity.from_json(cap),
            capacity_error=d.get("capacity_error"),
            lora=None if lora is None else LoraResolution.from_json(lora),
            lora_error=d.get("lora_error"),
            settings=dict(d.get("settings") or {}),
        )


_UNPARSED = re.compile(r"^\S+ does not parse$")
_ABSENT = re.compile(r"^(\S+) is (?:named by auto_map|imported by \S+) but not in this revision$")


def _absent_of(problems: Sequence[str]) -> tuple[str, ...]:
    """The absent modules of a preflight stored before they were recorded apart (its problems
    name them), so a stored answer and a fresh one of the same revision agree."""
    return tuple(m.group(1) for p in problems if (m := _ABSENT.match(p)))


def remote_code(files: Mapping[str, bytes], tables: Mapping[str, SymbolTable | str]) -> RemoteCode:
    """Remote-code compatibility of `files` against `tables` (version → table, or why none)."""
    code = remote_code_imports(files)
    modules, imports, absent = code.modules, code.imports, code.absent
    tf: list[dict[str, JSONValue]] = []
    seen: set[tuple[str, str | None, str]] = set()
    for imp in imports:
        if (
            imp.top == "transformers"
            and imp.where != "typing"
            and (imp.module, imp.name, imp.file) not in seen
        ):
            seen.add((imp.module, imp.name, imp.file))
            tf.append(dict(imp.to_json()))
    built = [t for t in tables.values() if not isinstance(t, str)]
    packages = other_packages(imports, modules, built)
    results = []
    unchecked: dict[str, str] = {}
    for version in sorted(tables, key=version_key):
        table = tables[version]
        if isinstance(table, str):
            unchecked[version] = table
        elif modules or absent or code.not_checked:
            results.append(check_version(imports, table, absent, code.broken, code.not_checked))
    return RemoteCode(
        modules=tuple(modules),
        problems=tuple(code.problems),
        transformers_imports=tuple(tf),
        packages=packages,
        compiled=compiled(packages),
        versions=tuple(r.to_json() for r in results),
        first_missing=first_missing(results),
        unchecked=unchecked,
        absent=tuple(absent),
        broken=tuple(code.broken),
        not_checked=tuple(code.not_checked),
    )


def run_preflight(
    *,
    files: Mapping[str, bytes],
    headers: Mapping[str, SafetensorsHeader],
    tree: Sequence[TreeEntry],
    tables: Mapping[str, SymbolTable | str],
    settings: PreflightSettings,
    estimate_settings: EstimateSettings | None = None,
    shard_cache: ShardCache | None = None,
) -> Preflight:
    """The preflight of a revision (see the module docstring); `shard_cache` (see ShardCache)
    makes a shard already counted cost nothing."""
    est = estimate_settings or EstimateSettings()
    code = remote_code(files, tables)
    cap: Capacity | None = None
    cap_error: str | None = None
    lora: LoraResolution | None = None
    lora_error: str | None = None
    config = None
    reading = None
    if "config.json" in files:
        try:
            config = parse_config(files["config.json"])
            reading = read_config(config)
        except (EstimateError, RecursionError) as exc:
            cap_error = lora_error = f"{CONFIG_UNREAD}{exc}"
    else:
        lora_error = "no config.json at this revision"
    if reading is not None:
        lora, lora_error = resolve_targets(
            reading, config or {}, settings.lora_targets, est.lora_rank
        )
        if lora is None and (code.modules or code.problems):
            lora, census_error = resolve_census(
                files, headers, config or {}, settings.lora_targets, est.lora_rank
            )
            lora_error = None if lora else f"{lora_error}; read as remote code: {census_error}"
    if headers:
        built = None
        if reading is not None:
            built = len([x for x in reading.layers if x.kind != "encoder"]) or len(reading.layers)
        bits = quant_bits(config or {})
        identity = {e.path: e.identity for e in tree}
        by_dtype: dict[str, int] = {}
        census_bytes = 0
        dtypes: set[str] = set()
        for path, header in headers.items():
            key = (path, identity.get(path, ""), built, bits)
            hit = shard_cache.get(key) if shard_cache is not None and key[1] else None
            if hit is None:  # the estimate of this revision has walked the shard already
                shard = header_census(header)
                hit = (
                    shard.stored_by_dtype(layers=built, bits=bits),
                    shard.bytes,
                    frozenset(shard.dtypes),
                )
                if shard_cache is not None and key[1]:
                    shard_cache[key] = hit
            for dtype, n in hit[0].items():
                by_dtype[dtype] = by_dtype.get(dtype, 0) + n
            census_bytes += hit[1]
            dtypes |= hit[2]
        by_dtype = dict(sorted(by_dtype.items()))
        file_bytes = sum(e.size for e in tree if e.path.endswith(".safetensors"))
        cap = capacity(
            params_by_dtype=by_dtype,
            census_bytes=census_bytes,
            total_size=index_total_size(files),
            file_bytes=file_bytes or None,
            quantized=bool(dtypes & QUANTIZED_DTYPES),
            cards=[(c.name, c.vram_gb) for c in est.all_cards],
            boxes=settings.boxes,
            throughput_mb_s=settings.throughput_mb_s,
            window_hours=settings.provisioning_window_h,
        )
    else:  # whatever config.json says: capacity is counted from the headers alone
        cap_error = "no safetensors headers at this revision (nothing to count bytes from)"
    return Preflight(
        remote_code=code,
        capacity=cap,
        capacity_error=cap_error,
        lora=lora,
        lora_error=lora_error,
        settings={
            "transformers": list(settings.transformers),
            "lora_targets": list(settings.lora_targets),
            "lora_rank": est.lora_rank,
            "throughput_mb_s": settings.throughput_mb_s,
            "provisioning_window_h": settings.provisioning_window_h,
        },
    )
