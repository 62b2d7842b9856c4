"""Custom (remote) code diffs: auto_map entries and .py files, by AST only (never imported or run)."""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass
from typing import assert_never

from tracker.diff._common import (
    Side,
    SideState,
    Transition,
    decode_text,
    digest,
    load_json_object,
    path_change,
    read_side,
    show,
    transition,
    unified,
)
from tracker.shared.artifacts import AUTO_MAP_FILES
from tracker.shared.domain import Artifact, Change, ChangeKind, JSONValue, Snapshot
from tracker.shared.errors import UnreadableArtifactError

_ART = Artifact.CUSTOM_CODE


@dataclass(frozen=True)
class CodeFacts:
    """What AST analysis says about one .py file: imported modules and the transformers names it imports."""

    imports: tuple[str, ...]
    transformers: tuple[str, ...]
    sha256: str


def analyse_source(path: str, data: bytes) -> CodeFacts:
    """Imports of a Python file by `ast.parse` (no import, no exec).

    Raises UnreadableArtifactError for binary/non-UTF-8 content or a SyntaxError ("could not parse").
    """
    text = decode_text(path, data)
    try:
        tree = ast.parse(text, filename=path)
    except SyntaxError as exc:
        raise UnreadableArtifactError(
            f"could not parse {path}: {exc.msg} (line {exc.lineno})"
        ) from exc
    except (ValueError, RecursionError, MemoryError) as exc:
        raise UnreadableArtifactError(f"could not parse {path}: {type(exc).__name__}") from exc
    imports: set[str] = set()
    tf: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                imports.add(alias.name)
                if alias.name == "transformers" or alias.name.startswith("transformers."):
                    tf.add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            imports.add(module)
            if (
                node.level == 0
                and node.module
                and (node.module == "transformers" or node.module.startswith("transformers."))
            ):
                tf.update(f"{node.module}.{a.name}" for a in node.names)
    return CodeFacts(tuple(sorted(imports)), tuple(sorted(tf)), digest(data))


def _auto_map(snap: Snapshot | None) -> dict[str, tuple[JSONValue, str]] | None:
    """auto_map entries across AUTO_MAP_FILES (`AutoClass` → (value, file); first file wins); None if unknowable."""
    if snap is None:
        return None
    out: dict[str, tuple[JSONValue, str]] = {}
    for path in AUTO_MAP_FILES:
        side = read_side(snap, path, load_json_object)
        if side.state in (SideState.UNREADABLE, SideState.UNTRACKED):
            return None
        if side.state is SideState.OK:
            raw = side.value.get("auto_map")
            if isinstance(raw, list):  # old tokenizer_config format
                raw = {"AutoTokenizer": raw}
            if isinstance(raw, dict):
                for k, v in raw.items():
                    out.setdefault(k, (v, path))
    return out


def diff_code(before: Snapshot | None, after: Snapshot) -> list[Change]:
    """`auto_map.<AutoClass>` changes, then per-.py-file changes (unified diff; imports; transformers symbols).

    A .py file that does not parse at the new revision gives an UNREADABLE change.
    """
    out: list[Change] = []
    old_map, new_map = _auto_map(before), _auto_map(after)
    if before is not None and old_map is not None and new_map is not None:
        for cls in sorted(set(old_map) | set(new_map)):
            a, a_file = old_map.get(cls, (None, ""))
            b, b_file = new_map.get(cls, (None, ""))
            if a == b:
                continue
            key = f"auto_map.{cls}"
            kind = (
                ChangeKind.ADDED
                if a is None
                else ChangeKind.REMOVED
                if b is None
                else ChangeKind.CHANGED
            )
            out.append(
                Change(
                    _ART,
                    kind,
                    b_file or a_file,
                    key,
                    a,
                    b,
                    f"{key} {_what(kind, a, b)} (remote code)",
                )
            )
    out.extend(_diff_py_files(before, after))
    return out


def _py_paths(snap: Snapshot | None) -> set[str]:
    if snap is None:
        return set()
    return {p for p in (*snap.files, *snap.unreadable) if p.endswith(".py")}


def _what(kind: ChangeKind, a: JSONValue, b: JSONValue) -> str:
    if kind is ChangeKind.ADDED:
        return f"added: {show(b)}"
    if kind is ChangeKind.REMOVED:
        return f"removed (was {show(a)})"
    return f"changed: {show(a)} → {show(b)}"


def _diff_py_files(before: Snapshot | None, after: Snapshot) -> list[Change]:
    out: list[Change] = []
    for path in sorted(_py_paths(before) | _py_paths(after)):
        old = read_side(before, path, analyse_source)
        new = read_side(after, path, analyse_source)
        change = _py_change(path, transition(before is None, old, new), old, new, before, after)
        if change is not None:
            out.append(change)
    return out


def _py_change(
    path: str,
    step: Transition,
    old: Side,
    new: Side,
    before: Snapshot | None,
    after: Snapshot,
) -> Change | None:
    match step:
        case Transition.NONE:
            return None
        case Transition.UNREADABLE:
            return path_change(_ART, ChangeKind.UNREADABLE, path, None, new.reason, new.reason)
        case Transition.ADDED:
            f: CodeFacts = new.value
            summary = f"remote code file {path} added" + _tf_note((), f.transformers)
            return path_change(
                _ART, ChangeKind.ADDED, path, None, _facts(f), summary, _text(after, path)
            )
        case Transition.REMOVED:
            was = _facts(old.value) if old.state is SideState.OK else None
            return path_change(
                _ART, ChangeKind.REMOVED, path, was, None, f"remote code file {path} removed"
            )
        case Transition.READABLE_AGAIN:
            summary = f"{path} parses again (was: {old.reason})"
            return path_change(
                _ART, ChangeKind.CHANGED, path, old.reason, _facts(new.value), summary
            )
        case Transition.COMPARE:
            ob, nb = old.value, new.value
            if ob.sha256 == nb.sha256:
                return None
            plus = sorted(set(nb.imports) - set(ob.imports))
            minus = sorted(set(ob.imports) - set(nb.imports))
            notes = []
            if plus:
                notes.append("imports added: " + ", ".join(plus))
            if minus:
                notes.append("imports removed: " + ", ".join(minus))
            summary = f"remote code {path} changed" + (f" ({'; '.join(notes)})" if notes else "")
            return path_change(
                _ART,
                ChangeKind.CHANGED,
                path,
                _facts(ob),
                _facts(nb),
                summary + _tf_note(ob.transformers, nb.transformers),
                unified(_text(before, path), _text(after, path), path),
            )
        case _:
            assert_never(step)


def _text(snap: Snapshot | None, path: str) -> str:
    data = snap.files.get(path, b"") if snap is not None else b""
    return data.decode("utf-8", errors="replace")


def _facts(f: CodeFacts) -> Mapping[str, JSONValue]:
    return {"imports": list(f.imports), "transformers": list(f.transformers), "sha256": f.sha256}


def _tf_note(old: tuple[str, ...], new: tuple[str, ...]) -> str:
    plus = sorted(set(new) - set(old))
    minus = sorted(set(old) - set(new))
    parts = []
    if plus:
        parts.append("now imports from transformers: " + ", ".join(plus))
    if minus:
        parts.append("no longer imports: " + ", ".join(minus))
    return ("; " + "; ".join(parts)) if parts else ""
