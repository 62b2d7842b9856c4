"""The module tree of a remote-code model, built by walking its classes' `__init__` (pure, AST only).

From the model class down: every attribute an instance holds (`codetree.instance_attrs`, with the
call site's arguments bound) is a Linear (a module path), a ModuleList of Linears, a remote class
(walked in turn, once per ModuleList item: `nn.ModuleList([Block(config) for _ in
range(config.num_hidden_layers)])` gives `h.0` … `h.N-1`), a leaf module from torch (an Embedding,
a norm, dropout, an activation: no Linear inside), or something the code does not show (a class
from another package, a function's result, a list whose length the evaluator cannot tell), which
is stated with its path. The walk is what `from_pretrained` builds, read without a checkpoint;
`census_lora` uses it when a revision has no tensor names, and the tests check it against the
checkpoint's names where both exist.

`output_head` applies PEFT's rule for `all-linear` (peft 0.21 `_maybe_include_all_linear_layers`):
the module `model.get_output_embeddings()` returns is excluded; transformers' default
(5.24 `EmbeddingAccessMixin`) returns the model's `lm_head` attribute, or nothing without one.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from tracker.preflight.codetree import Assigned, CodeTree
from tracker.preflight.safeeval import Unknown, Value

# torch.nn modules that hold no Linear (PEFT's all-linear cannot reach inside them)
LEAF_MODULES = frozenset(
    {
        "Embedding",
        "EmbeddingBag",
        "LayerNorm",
        "RMSNorm",
        "GroupNorm",
        "BatchNorm1d",
        "BatchNorm2d",
        "Dropout",
        "Dropout1d",
        "Dropout2d",
        "Identity",
        "GELU",
        "SiLU",
        "ReLU",
        "Tanh",
        "Sigmoid",
        "Softmax",
        "Conv1d",
        "Conv2d",
        "Conv3d",
        "Parameter",
        "AvgPool1d",
        "AvgPool2d",
        "MaxPool2d",
        "Flatten",
        "Upsample",
        "PixelShuffle",
    }
)
MAX_DEPTH = 16
MAX_MODULES = 1_000_000


@dataclass
class Walk:
    """The Linear modules found (path → assignment) and the paths not understood (path → why)."""

    linears: dict[str, Assigned] = field(default_factory=dict)
    unknown: dict[str, str] = field(default_factory=dict)


def walk_modules(tree: CodeTree, root: str) -> Walk:
    """Every Linear module an instance of `root` holds (see the module docstring)."""
    out = Walk()
    _visit(tree, root, "", (), 0, out)
    return out


def _may_hold_linear(tree: CodeTree, cls: str, name: str) -> bool:
    """Whether any assignment of `self.name` in `cls` could put a Linear there: every one is a
    value, a torch leaf module, or a remote class whose own walk finds no Linear and nothing
    unknown (e.g. Qwen's flash-attention wrapper, built only when flash-attn imports)."""
    for a in tree.attr(cls, name):
        if a.kind == "other" or (a.kind == "call" and a.target in LEAF_MODULES):
            continue
        if a.kind == "call" and a.target in tree.classes:
            inner = Walk()
            _visit(tree, str(a.target), f"{name}.", (), 1, inner)
            if not inner.linears and not inner.unknown:
                continue
        return True
    return False


def _visit(
    tree: CodeTree,
    cls: str,
    prefix: str,
    bound: tuple[tuple[str, Value], ...],
    depth: int,
    out: Walk,
) -> None:
    if depth > MAX_DEPTH or len(out.linears) > MAX_MODULES:
        out.unknown[prefix.rstrip(".") or cls] = "nested deeper than the walk goes"
        return
    attrs, uncertain = tree.instance_attrs(cls, bound)
    for name, a in attrs.items():
        path = prefix + name
        if a.kind == "other" or (a.kind == "call" and a.target in LEAF_MODULES and not a.items):
            continue
        if f"self.{name}" in uncertain:
            if not _may_hold_linear(tree, cls, name):
                continue
            out.unknown[path] = f"`self.{name}` of {cls} is set under a condition or in a loop"
            continue
        if a.kind == "linear":
            out.linears[path] = a
        elif a.kind == "linear_list":
            if isinstance(a.items, int):
                for i in range(a.items):
                    out.linears[f"{path}.{i}"] = a
            else:
                out.unknown[path] = f"a list of Linears of unknown length ({a.items})"
        elif a.kind == "call" and a.target in tree.classes:
            if a.items is None:
                _visit(tree, str(a.target), path + ".", a.bound, depth + 1, out)
            elif isinstance(a.items, int):
                for i in range(a.items):
                    _visit(tree, str(a.target), f"{path}.{i}.", a.bound, depth + 1, out)
            else:
                out.unknown[path] = f"a list of {a.target} of unknown length ({a.items})"
        elif a.kind == "call" and a.target in LEAF_MODULES:
            continue
        elif a.kind == "call":
            out.unknown[path] = f"a {a.target} from outside the remote code"
        else:
            out.unknown[path] = f"built by {a.target}, which the code does not show"


def _self_path(node: ast.expr) -> str | None:
    """`self.a.b` → "a.b"."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name) and node.id == "self" and parts:
        return ".".join(reversed(parts))
    return None


def _returned_path(fn: ast.FunctionDef) -> str | Unknown | None:
    """What a one-return accessor returns: a `self.` path, None, or Unknown."""
    returns = [n for n in ast.walk(fn) if isinstance(n, ast.Return)]
    if len(returns) != 1:
        return Unknown(f"{fn.name} has {len(returns)} returns")
    value = returns[0].value
    if value is None or (isinstance(value, ast.Constant) and value.value is None):
        return None
    path = _self_path(value)
    return path if path is not None else Unknown(f"{fn.name} returns `{ast.unparse(value)}`")


def output_head(tree: CodeTree, root: str) -> str | Unknown | None:
    """The module path PEFT's `all-linear` excludes for model class `root` (see the module
    docstring): None when it excludes nothing, Unknown when the code does not tell."""
    for info in tree.mro(root):
        fn = info.methods.get("get_output_embeddings")
        if fn is not None:
            return _returned_path(fn)
    for info in tree.mro(root):
        if "lm_head" in info.attrs:
            return "lm_head"
        fn = info.methods.get("lm_head")
        if fn is not None:  # a property that forwards to the real module
            return _returned_path(fn)
    if not tree.mro(root):
        return Unknown(f"the model class {root} is not in the remote code")
    return None
