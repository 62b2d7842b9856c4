"""Remote-code compatibility: a revision's imports checked against transformers symbol tables (pure).

For each configured transformers version: whether every `required` transformers import of the
remote code resolves (importable), and the names that do not, with the module that lacks them;
for each name missing somewhere, the first version (in release order) where it is missing after
being present in an earlier one (the version it vanished in), or the first version checked when it
is missing from all. Other packages are listed by top-level name, and those known to build a
native (CUDA/C++) extension on install are named with why: they need a compiler and the CUDA
toolkit where the wheel index has no binary for the platform.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tracker.preflight.imports import WHERE_ORDER, Import
from tracker.preflight.symbols import SymbolTable
from tracker.shared.domain import JSONValue

COMPILED: Mapping[str, str] = {
    "flash_attn": "flash-attn builds CUDA kernels from source unless a prebuilt wheel matches your torch/CUDA",
    "flash_attn_interface": "FlashAttention-3 (hopper) builds CUDA kernels from source",
    "causal_conv1d": "causal-conv1d builds a CUDA extension on install",
    "mamba_ssm": "mamba-ssm builds CUDA extensions (selective scan) on install",
    "selective_scan_cuda": "a CUDA extension module (mamba's selective scan)",
    "apex": "NVIDIA apex builds C++/CUDA extensions from source",
    "xformers": "xformers ships compiled CUDA kernels tied to one torch version (else builds from source)",
    "deepspeed": "DeepSpeed compiles its C++/CUDA ops (JIT or at install)",
    "grouped_gemm": "grouped_gemm builds a CUDA extension on install",
    "deep_gemm": "DeepGEMM builds CUDA kernels (JIT, needs the CUDA toolkit)",
    "deep_ep": "DeepEP builds CUDA extensions (needs NVSHMEM)",
    "flash_mla": "FlashMLA builds CUDA kernels from source",
    "fast_hadamard_transform": "fast-hadamard-transform builds a CUDA extension on install",
    "fused_dense_lib": "a CUDA extension of flash-attn's repository",
    "rotary_emb": "a CUDA extension of flash-attn's repository",
    "dropout_layer_norm": "a CUDA extension of flash-attn's repository",
    "bitsandbytes": "bitsandbytes ships native CUDA libraries per platform",
}
"""Packages that are, or need, a native extension (not pure Python). `fla`
(flash-linear-attention) and `triton` kernels are Python, compiled at run time by triton: not
listed."""

_NUM = re.compile(r"(\d+)")


def version_key(version: str) -> tuple[tuple[int, ...], str]:
    """Release order of plain version strings (`4.57.1` < `5.1.0` < `5.24.0`)."""
    head = version.split("rc")[0].split("a")[0].split("b")[0].split(".dev")[0]
    nums = tuple(int(n) for n in _NUM.findall(head))
    return nums, version[len(head) :] or "~"  # a final release sorts after its pre-releases


@dataclass(frozen=True)
class Missing:
    """A transformers import that does not resolve in one version."""

    module: str
    name: str | None
    status: str  # "no-module", "missing", or "dynamic" (not found; the module has __getattr__)
    file: str
    line: int
    where: str

    @property
    def symbol(self) -> str:
        return self.module if self.name is None else f"{self.module}.{self.name}"

    @property
    def breaks(self) -> bool:
        """Whether it stops the module from importing (a required import, definitely absent)."""
        return self.where == "required" and self.status != "dynamic"

    def to_json(self) -> dict[str, JSONValue]:
        return {
            "symbol": self.symbol,
            "module": self.module,
            "name": self.name,
            "status": self.status,
            "file": self.file,
            "line": self.line,
            "where": self.where,
        }


@dataclass(frozen=True)
class VersionResult:
    """The answer for one version: `importable` True, False (does not import), or None (not
    checked: part of the code could not be read, and nothing read stops it)."""

    version: str
    importable: bool | None
    missing: tuple[Missing, ...]
    absent: tuple[str, ...] = ()
    broken: tuple[str, ...] = ()
    not_checked: tuple[str, ...] = ()

    def to_json(self) -> dict[str, JSONValue]:
        return {
            "version": self.version,
            "importable": self.importable,
            "missing": [m.to_json() for m in self.missing],
            "absent": list(self.absent),
            "broken": list(self.broken),
            "not_checked": list(self.not_checked),
        }


def check_version(
    imports: Sequence[Import],
    table: SymbolTable,
    absent: Sequence[str] = (),
    broken: Sequence[str] = (),
    not_checked: Sequence[str] = (),
) -> VersionResult:
    """Every transformers import of `imports` looked up in `table`. A remote-code module the
    revision does not hold (`absent`: named by auto_map, or imported relatively) stops the load on
    every version: transformers fetches each such file from the repo and fails without it; so does
    any of `broken` (a module that does not parse, a relative import above the repo's root). Code
    that was `not_checked` (too large to parse, in another repo) leaves the answer unknown (None)
    unless something checked already stops the load."""
    missing: list[Missing] = []
    seen: set[tuple[str, str | None, str]] = set()
    tried: dict[tuple[str, int], bool] = {}  # (file, try line) -> a transformers import there fails
    for imp in imports:
        if imp.top == "transformers" and imp.where == "guarded" and imp.try_line is not None:
            key_ = (imp.file, imp.try_line)
            fails = _status(imp, table) not in ("ok", "dynamic")
            tried[key_] = tried.get(key_, False) or fails
    for imp in imports:
        if imp.top != "transformers" or imp.where == "typing":
            continue
        key = (imp.module, imp.name, imp.file)
        if key in seen:
            continue
        seen.add(key)
        status = _status(imp, table)
        if status != "ok":
            where = imp.where
            if where == "fallback" and tried.get((imp.file, imp.try_line or 0), True):
                # the try's import fails here too (or it is no transformers import): this one runs
                where = "required"
            missing.append(Missing(imp.module, imp.name, status, imp.file, imp.line, where))
    missing.sort(key=lambda m: (WHERE_ORDER.index(m.where), m.file, m.line, m.symbol))
    importable: bool | None = not absent and not broken and not any(m.breaks for m in missing)
    if importable and not_checked:
        importable = None
    return VersionResult(
        table.version, importable, tuple(missing), tuple(absent), tuple(broken), tuple(not_checked)
    )


def _status(imp: Import, table: SymbolTable) -> str:
    if imp.name is None:
        return "ok" if table.has_module(imp.module) else "no-module"
    return table.lookup(imp.module, imp.name)


def check_imports_guard(name: str, tables: Sequence[SymbolTable]) -> bool:
    """Whether transformers' `check_imports` skips an `if` whose test calls `name` on every one
    of `tables`: `is_flash_attn…available`, or a name `transformers.utils.import_utils` holds
    (`hasattr`). Without a table: a name of the `is_…_available` form."""
    if name.startswith("is_flash_attn") and name.endswith("available"):
        return True
    if not tables:
        return name.startswith("is_") and name.endswith("_available")
    return all(t.lookup("transformers.utils.import_utils", name) == "ok" for t in tables)


def first_missing(results: Sequence[VersionResult]) -> dict[str, str]:
    """For each symbol missing in some version: the first version where it is missing after being
    present in an earlier one, else the first version it is missing in."""
    ordered = sorted(results, key=lambda r: version_key(r.version))
    out: dict[str, str] = {}
    present_before: set[str] = set()
    all_symbols = {m.symbol for r in ordered for m in r.missing}
    for r in ordered:
        gone = {m.symbol for m in r.missing}
        for s in sorted(gone):
            if s in present_before and s not in out:
                out[s] = r.version
        present_before |= all_symbols - gone
    for r in ordered:
        for m in r.missing:
            out.setdefault(m.symbol, r.version)
    return dict(sorted(out.items()))


def other_packages(
    imports: Sequence[Import], local: Sequence[str], tables: Sequence[SymbolTable] = ()
) -> dict[str, str]:
    """Top-level packages other than transformers, stdlib and the repo's own modules, each with
    where it is imported at its most demanding (`required` before `conditional` ...). A package
    transformers' `check_imports` requires before loading (see `imports`) is `required` wherever
    it is imported: a function-level import included."""
    own = {p.rsplit("/", 1)[-1].removesuffix(".py") for p in local}
    out: dict[str, str] = {}
    for imp in imports:
        top = imp.top
        if top in ("transformers", "__future__") or top in sys.stdlib_module_names or top in own:
            continue
        where = imp.where
        if imp.checked and not any(check_imports_guard(g, tables) for g in imp.guards):
            where = "required"
        elif where == "typing":
            continue
        prev = out.get(top)
        if prev is None or WHERE_ORDER.index(where) < WHERE_ORDER.index(prev):
            out[top] = where
    return dict(sorted(out.items()))


def compiled(packages: Mapping[str, str]) -> dict[str, str]:
    """The packages of `packages` that need a native build, with why."""
    return {p: COMPILED[p] for p in packages if p in COMPILED}
