"""LoRA targets of a remote-code revision: module names from its checkpoint, kinds from its code (pure).

Families whose modeling code lives in the repo (chatglm, Qwen v1, internlm, falcon RW, …) have no
module-name table in `lora`. Their module tree is read from what the revision holds instead:

- **which modules exist, and how many**: the checkpoint's tensor names (the safetensors headers'
  tensors, and the weight index's `weight_map` keys, `model.safetensors.index.json` or
  `pytorch_model.bin.index.json`): module `M` exists when the checkpoint stores `M.weight`.
  This is exactly the tree `from_pretrained` fills, found without the code (a Linear whose weight
  the checkpoint does not store, such as a tied output head, is not seen);
- **which of them are Linear** (what PEFT's name matching and `all-linear` reach): the remote
  code's classes by AST (`codetree`): the leaf name `NAME` of `...parent.NAME.weight` is looked up
  as `self.NAME = ...` in the class that `parent` is built from, else in every class of the code
  (all assignments must agree); a name no class assigns, or assigns both as a Linear and as
  something else, is not understood and is stated;
- **in/out features**: the tensor's shape in the safetensors header (`[out, in]`; `[in, out]` for
  transformers' Conv1D) where the headers hold it and the dtype is not a packed quantized one,
  else the Linear call's arguments evaluated against config.json (`safeeval.evaluate`); a module
  whose features neither gives is counted and marked unsized, with why;
- **layer kind**: from the module path (attention / linear attention / MLP / shared and routed
  experts / router / vision), `other` for what none of these names (an output layer PEFT keeps);
- **the output head**: excluded from `all-linear` by PEFT's rule (`codewalk.output_head`).

A revision with no tensor names at all (a single `pytorch_model.bin`, no weights yet) is read by
walking the code from the model class instead (`codewalk`: ModuleList lengths from config.json);
a part of the tree the walk cannot follow leaves every target unresolved, naming the path. A
checkpoint of packed quantized weights (GPTQ/AWQ `qweight`, compressed-tensors `weight_packed`) is
not resolved: the quantizer swaps those layers for its own classes at load.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tracker.estimate.checkpoint import QUANTIZED_DTYPES
from tracker.preflight.codetree import Assigned, CodeTree
from tracker.preflight.codewalk import output_head, walk_modules
from tracker.preflight.imports import remote_code_modules
from tracker.preflight.lora import ALL_LINEAR, KINDS, LoraResolution
from tracker.preflight.safeeval import Unknown
from tracker.shared.bounded import BoundsError, bounds_for, load_json
from tracker.shared.domain import SafetensorsHeader

INDEX_NAMES = ("model.safetensors.index.json", "pytorch_model.bin.index.json")
ANY = "*"  # a not-understood entry that blocks every target
_VISION = re.compile(r"vision|visual|^vit$|image|img_|mm_projector|multi_modal_projector|^vpm$")
_LINEAR_ATTN = re.compile(r"linear_attn|linear_attention|^mamba|^mixer$|^ssm")
_ATTN = re.compile(r"attn|attention")
_MLP = re.compile(r"mlp|feed_forward|^ffn|moe")


@dataclass(frozen=True)
class CensusModule:
    """One Linear module of the checkpoint: path, layer kind, (in, out) or why unsized."""

    path: str
    kind: str
    features: tuple[int, int] | str


def kind_of(path: str) -> str:
    """The layer kind a module path names (see the module docstring)."""
    parts = path.split(".")
    if any(_VISION.search(p) for p in parts):
        return "vision"
    if any(p in ("shared_experts", "shared_expert", "shared_mlp") for p in parts):
        return "mlp.shared"
    if "experts" in parts:
        return "mlp.experts"
    if parts[-1] in ("gate", "router") and any(_MLP.search(p) for p in parts[:-1]):
        return "mlp.router"
    if any(_LINEAR_ATTN.search(p) for p in parts):
        return "attention.linear"
    if any(_ATTN.search(p) for p in parts):
        return "attention.full"
    if any(_MLP.search(p) for p in parts):
        return "mlp.dense"
    return "other"


def tensor_names(
    files: Mapping[str, bytes], headers: Mapping[str, SafetensorsHeader]
) -> tuple[dict[str, tuple[tuple[int, ...], str] | None], str] | str:
    """Every tensor name of the checkpoint → (shape, dtype) where a header gives it, else None;
    with the source in words. A string: why there are none."""
    out: dict[str, tuple[tuple[int, ...], str] | None] = {}
    sources = []
    for name in INDEX_NAMES:
        data = files.get(name)
        if data is None:
            continue
        try:  # bounded: a hostile index costs no more here than in the diff (issue 10)
            doc = load_json(data, name, bounds_for(name))
        except (BoundsError, ValueError):
            return f"{name} does not parse"
        weight_map = doc.get("weight_map") if isinstance(doc, dict) else None
        if not isinstance(weight_map, dict):
            return f"{name} has no weight_map"
        for key in weight_map:
            out.setdefault(str(key), None)
        sources.append(f"{name}'s weight_map")
        break
    for header in headers.values():
        for key, info in header.tensors.items():
            out[key] = (tuple(info.shape), info.dtype)
    if headers:
        sources.append("the safetensors headers")
    if not out:
        return "no tensor names at this revision (no weight index, no safetensors headers)"
    return out, " and ".join(sources)


def _model_modules(config: Mapping[str, Any]) -> list[str]:
    """The files auto_map's model classes live in (`modeling_x.XForCausalLM` → modeling_x.py)."""
    auto = config.get("auto_map")
    out: list[str] = []
    if isinstance(auto, Mapping):
        for key, ref in auto.items():
            if (
                key.startswith("AutoModel")
                and isinstance(ref, str)
                and "." in ref
                and "--" not in ref
            ):
                path = ref.rsplit(".", 1)[0].replace(".", "/") + ".py"
                if path not in out:
                    out.append(path)
    return out


def root_class(config: Mapping[str, Any], tree: CodeTree) -> str | None:
    """The model class PEFT wraps: auto_map's AutoModelForCausalLM, else the first of
    `architectures` or auto_map's AutoModel that the remote code defines."""
    auto = config.get("auto_map")
    names: list[str] = []
    if isinstance(auto, Mapping):
        for key in ("AutoModelForCausalLM", "AutoModel"):
            ref = auto.get(key)
            if isinstance(ref, str) and "." in ref:
                names.append(ref.rsplit(".", 1)[1])
        names[1:1] = [a for a in config.get("architectures") or [] if isinstance(a, str)]
    found = [n for n in names if n in tree.classes]
    return found[0] if found else None


def _owner_assignments(tree: CodeTree, parts: Sequence[str]) -> list[Assigned]:
    """What the class the parent module is built from assigns to the leaf name."""
    leaf = parts[-1]
    for parent in reversed(parts[:-1]):
        if parent.isdigit():
            continue
        owners = [
            a for _, a in tree.assignments(parent) if a.kind == "call" and a.target in tree.classes
        ]
        if len({a.target for a in owners}) != 1:
            return []
        sites = {a.bound for a in owners}
        bound = sites.pop() if len(sites) == 1 else ()
        return tree.attr_bound(str(owners[0].target), leaf, bound)
    return []


def _classify(tree: CodeTree, path: str) -> Assigned | str:
    """The assignment that makes module `path` (a Linear or not), or why not understood."""
    parts = path.split(".")
    leaf = parts[-1]
    if leaf.isdigit() and len(parts) > 1:  # an item of a ModuleList
        found = [a for _, a in tree.assignments(parts[-2])]
        if found and all(a.kind == "linear_list" for a in found):
            return found[0]
        if found and all(a.kind != "linear_list" for a in found):
            return Assigned("other")
        return f"`{parts[-2]}`"
    owned = _owner_assignments(tree, parts)
    if (
        owned
        and all(a.kind != "unknown" for a in owned)
        and (all(a.kind == "linear" for a in owned) or all(a.kind != "linear" for a in owned))
    ):
        return owned[-1]
    found = [a for _, a in tree.assignments(leaf)]
    if not found:
        return f"`{leaf}` (no class assigns it)"
    unknown = sorted({str(a.target) for a in found if a.kind == "unknown"})
    if unknown:
        return f"`{leaf}` (built by {', '.join(unknown)}, which the code does not show)"
    if all(a.kind == "linear" for a in found):
        feats = {a.features for a in found}
        return (
            found[0]
            if len(feats) == 1
            else Assigned("linear", features=f"`{leaf}` differs by class")
        )
    if all(a.kind != "linear" for a in found):
        return Assigned("other")
    return f"`{leaf}` (a Linear in one class, something else in another)"


def _features(
    assigned: Assigned, census: tuple[tuple[int, ...], str] | None
) -> tuple[int, int] | str:
    if census is not None:
        shape, dtype = census
        if len(shape) == 2 and dtype not in QUANTIZED_DTYPES:
            return (shape[0], shape[1]) if assigned.conv1d else (shape[1], shape[0])
    f = assigned.features
    if isinstance(f, tuple):
        return f
    return f or "unknown"


def census_modules(
    files: Mapping[str, bytes],
    headers: Mapping[str, SafetensorsHeader],
    config: Mapping[str, Any],
) -> tuple[list[CensusModule], list[str], dict[str, str]] | str:
    """(the Linear modules PEFT's `all-linear` reaches, notes, module name → why not understood)
    for a remote-code revision, or why its tree cannot be read (see the module docstring)."""
    modules, absent, broken = remote_code_modules(files)
    needed = [p for p in _model_modules(config) if p in absent or p in broken]
    if needed:
        return f"its modeling code {', '.join(needed)} is not in this revision or does not parse"
    code_files = {p: files[p] for p in modules if p not in broken}
    if not code_files:
        return "the revision has no remote code to read module classes from"
    tree = CodeTree(code_files, config)
    root = root_class(config, tree)
    head = output_head(tree, root) if root else Unknown("no model class of auto_map is in the code")
    names = tensor_names(files, headers)
    if isinstance(names, str):
        if root is None:
            return f"{names}, and no model class of auto_map is in the code to walk"
        return _walked(tree, root, head, names, sorted(code_files))
    tensors, source = names
    packed = sorted(n for n in tensors if n.endswith((".qweight", ".weight_packed")))
    if packed:
        return (
            f"the checkpoint stores packed quantized weights (`{packed[0]}`, {len(packed)} "
            "tensors): their layers are replaced by the quantizer's classes at load, which the "
            "remote code does not show"
        )
    out: list[CensusModule] = []
    unknown: dict[str, str] = {}
    notes = [
        f"read from the checkpoint's tensor names ({source}) and the classes of "
        f"{', '.join(sorted(code_files))} (by AST, never run)"
    ]
    for name in sorted(tensors):
        if not name.endswith(".weight"):
            continue
        path = name.removesuffix(".weight")
        census = tensors[name]
        if census is not None and len(census[0]) != 2:
            continue  # a Linear's weight is 2-D: a norm or a bias-like parameter
        if isinstance(head, str) and path == head:
            continue  # the output head: never adapted by all-linear, whatever else it is
        got = _classify(tree, path)
        if isinstance(got, str):
            leaf = path.rsplit(".", 1)[-1]
            unknown[leaf] = got
            continue
        if got.kind not in ("linear", "linear_list"):
            continue
        if isinstance(head, str) and path == head:
            continue
        out.append(CensusModule(path, kind_of(path), _features(got, census)))
    _head_notes(head, root, notes, unknown)
    return out, notes, unknown


def _head_notes(
    head: str | Unknown | None, root: str | None, notes: list[str], unknown: dict[str, str]
) -> None:
    if isinstance(head, Unknown):
        unknown[ALL_LINEAR] = f"the output head PEFT excludes is not known: {head.why}"
    elif head is None:
        notes.append(
            f"{root}.get_output_embeddings returns no module (transformers' default needs an "
            "`lm_head` attribute), so PEFT's all-linear excludes no output head"
        )
    else:
        notes.append(f"`{head}` is the output head: all-linear leaves it out, as PEFT does")


def _walked(
    tree: CodeTree, root: str, head: str | Unknown | None, why_no_names: str, code: list[str]
) -> tuple[list[CensusModule], list[str], dict[str, str]]:
    """The modules of the code walk (`codewalk`), for a revision without tensor names. A path
    the walk does not understand could hold any name, so it leaves every target unresolved."""
    walk = walk_modules(tree, root)
    out = [
        CensusModule(
            path,
            kind_of(path),
            a.features if isinstance(a.features, tuple) else str(a.features or "unknown"),
        )
        for path, a in walk.linears.items()
        if not (isinstance(head, str) and path == head)
    ]
    notes = [
        f"{why_no_names}: the module tree is walked from {root} through the classes of "
        f"{', '.join(code)} (by AST, never run), layer counts from config.json"
    ]
    unknown: dict[str, str] = {}
    if walk.unknown:
        shown = [f"`{p}` ({w})" for p, w in list(walk.unknown.items())[:3]]
        more = len(walk.unknown) - len(shown)
        unknown[ANY] = "; ".join(shown) + (f"; and {more} more" if more > 0 else "")
    _head_notes(head, root, notes, unknown)
    return out, notes, unknown


def resolve_census(
    files: Mapping[str, bytes],
    headers: Mapping[str, SafetensorsHeader],
    config: Mapping[str, Any],
    targets: Sequence[str],
    rank: int,
) -> tuple[LoraResolution | None, str | None]:
    """`targets` resolved against the checkpoint's Linear modules (PEFT's name matching: the
    last name part equals the target; `all-linear`: every one but the output head), split by
    layer kind; (None, why) when the tree cannot be read. A target that a module not understood
    could match is left `unresolved`, naming those modules."""
    found = census_modules(files, headers, config)
    if isinstance(found, str):
        return None, found
    modules, notes, unknown = found
    out: dict[str, dict[str, dict[str, int]]] = {}
    unresolved: dict[str, str] = {}
    unsized_why: dict[str, str] = {}
    for t in targets:
        # keys: a leaf name blocks itself and all-linear; ALL_LINEAR blocks all-linear; ANY all
        first = [unknown[k] for k in (ANY, ALL_LINEAR) if k in unknown and (k == ANY or t == k)]
        rest = sorted(
            why
            for leaf, why in unknown.items()
            if leaf not in (ANY, ALL_LINEAR) and (t == ALL_LINEAR or leaf == t)
        )
        blockers = first + rest
        if blockers:
            unresolved[t] = "not understood: " + "; ".join(blockers)
            continue
        per: dict[str, dict[str, int]] = {}
        for m in modules:
            if t != ALL_LINEAR and m.path.rsplit(".", 1)[-1] != t:
                continue
            slot = per.setdefault(m.kind, {"modules": 0, "adapter_params": 0})
            slot["modules"] += 1
            if isinstance(m.features, tuple):
                slot["adapter_params"] += rank * (m.features[0] + m.features[1])
            else:
                slot["unsized"] = slot.get("unsized", 0) + 1
                unsized_why.setdefault(m.path.rsplit(".", 1)[-1], m.features)
        out[t] = {k: per[k] for k in KINDS if k in per}
    for leaf, why in sorted(unsized_why.items()):
        notes.append(f"`{leaf}`: in/out features unknown ({why})")
    kinds = tuple(k for k in KINDS if any(m.kind == k for m in modules))
    return (
        LoraResolution(
            rank=rank, targets=out, kinds=kinds, notes=tuple(notes), unresolved=unresolved
        ),
        None,
    )
