"""Consistency checks that catch a broken revision (pure): findings a revision introduced.

Each check reads one revision (config.json, generation_config.json, the tokenizer's id → token map,
the safetensors headers) and returns findings; a revision's new findings are those its parent did
not have. Checks:

- `token-id-out-of-vocab`: a special-token id (bos/eos/pad/decoder_start, in config.json or
  generation_config.json) outside the embedding (`vocab_size`), e.g. an `eos_token_id` equal to
  `vocab_size`: generation can never emit it (or indexes past the embedding);
- `token-id-undefined`: such an id the tokenizer defines no token for;
- `token-id-disagrees`: config.json and generation_config.json name different ids for the same
  special token (generation uses generation_config.json's; code reading the config gets the other);
- `dtype-disagrees-with-checkpoint`: `torch_dtype` (or `dtype`) is not the dtype most of the
  checkpoint's floating-point tensors are stored in;
- `template-token-undefined`: the chat template writes a special-token literal the tokenizer
  does not define, so it is encoded as ordinary text: `<|name|>` or DeepSeek's `<｜name｜>`, or a
  literal in the style of the tokenizer's own special tokens (`<s>`, `[INST]`, `<start_of_turn>`:
  the same delimiters around a name) close to one of them, read from the template's text and
  string literals only.

A template that no longer renders the canonical conversations is the chat-template differ's own
BROKEN change, and a regression in the advisory's kind.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tracker.advisories.effects import Context, Side
from tracker.domain import JSONValue, Severity

TOKEN_KEYS = ("bos_token_id", "eos_token_id", "pad_token_id", "decoder_start_token_id")
_DTYPES = {
    "float32": "F32",
    "float16": "F16",
    "bfloat16": "BF16",
    "float64": "F64",
    "float8_e4m3fn": "F8_E4M3",
    "float8_e5m2": "F8_E5M2",
}
_FLOATS = {"F64", "F32", "F16", "BF16", "F8_E4M3", "F8_E5M2"}


@dataclass(frozen=True)
class Finding:
    """One inconsistency of a revision: check id, severity, the key it is about, a sentence."""

    check: str
    severity: Severity
    key: str
    text: str

    def to_json(self) -> dict[str, JSONValue]:
        return {
            "check": self.check,
            "severity": self.severity.value,
            "key": self.key,
            "text": self.text,
        }


def _ids(value: object) -> list[int]:
    if isinstance(value, bool):
        return []
    if isinstance(value, int):
        return [value]
    if isinstance(value, list):
        return [v for v in value if isinstance(v, int) and not isinstance(v, bool)]
    return []


def _vocab_size(config: Mapping[str, JSONValue]) -> int | None:
    for doc in (config, config.get("text_config")):
        if isinstance(doc, Mapping):
            v = doc.get("vocab_size")
            if isinstance(v, int) and not isinstance(v, bool) and v > 0:
                return v
    return None


def _token_findings(side: Side) -> list[Finding]:
    config = side.config.value if side.config.state == "ok" else None
    generation = side.generation.value if side.generation.state == "ok" else None
    vocab = _vocab_size(config) if config is not None else None
    tokens = side.tokens
    out: list[Finding] = []
    for file, doc in (("config.json", config), ("generation_config.json", generation)):
        if doc is None:
            continue
        for key in TOKEN_KEYS:
            for i in _ids(doc.get(key)):
                if vocab is not None and not 0 <= i < vocab:
                    out.append(
                        Finding(
                            "token-id-out-of-vocab",
                            Severity.HIGH,
                            key,
                            f"`{key}` {i} in {file} is outside the vocabulary (`vocab_size` "
                            f"{vocab}: ids 0 to {vocab - 1}): the model cannot produce or embed it",
                        )
                    )
                elif tokens is not None and i not in tokens:
                    out.append(
                        Finding(
                            "token-id-undefined",
                            Severity.HIGH,
                            key,
                            f"`{key}` {i} in {file} names no token the tokenizer defines",
                        )
                    )
    if config is not None and generation is not None:
        for key in TOKEN_KEYS:
            a, b = config.get(key), generation.get(key)
            present = key in config and key in generation and a is not None and b is not None
            if present and sorted(_ids(a)) != sorted(_ids(b)):
                out.append(
                    Finding(
                        "token-id-disagrees",
                        Severity.MODERATE,
                        key,
                        f"`{key}` is {a} in config.json but {b} in generation_config.json: "
                        "generation uses the latter, code reading the model config the former",
                    )
                )
    return out


def _dtype_findings(side: Side) -> list[Finding]:
    config = side.config.value if side.config.state == "ok" else None
    headers = side.snapshot.headers
    shards = [e.path for e in side.snapshot.tree if e.path.endswith(".safetensors")]
    if config is None or not headers or any(p not in headers for p in shards):
        return []
    key = "torch_dtype" if "torch_dtype" in config else "dtype"
    declared = config.get(key)
    want = _DTYPES.get(declared) if isinstance(declared, str) else None
    if want is None:
        return []
    census = Counter(
        t.dtype for h in headers.values() for t in h.tensors.values() if t.dtype in _FLOATS
    )
    if not census:
        return []
    stored, _ = census.most_common(1)[0]
    if stored == want:
        return []
    listed = ", ".join(f"{n} {d}" for d, n in sorted(census.items()))
    return [
        Finding(
            "dtype-disagrees-with-checkpoint",
            Severity.MODERATE,
            key,
            f"`{key}` is {declared!r} but the checkpoint's floating-point tensors are stored as "
            f'{listed}: loading with `{key}="auto"` converts them',
        )
    ]


_SPECIAL = re.compile(r"<\|[A-Za-z0-9_.:/-]{1,64}\|>|<\uff5c[^<>\n]{1,64}\uff5c>")
"""The `<|name|>` and DeepSeek's `<｜name｜>` literals: special tokens in any tokenizer that uses them."""
_OPENERS = "<[|\uff5c/"
_CLOSERS = ">]|\uff5c/"
_INNER = r"[A-Za-z][A-Za-z0-9_.:\u2581-]{0,63}"


def _styles(specials: frozenset[str]) -> set[tuple[str, str]]:
    """The (opening, closing) delimiters of the tokenizer's own special tokens: `<s>` gives
    ("<", ">"), `</s>` ("</", ">"), `[INST]` ("[", "]"), `<start_of_turn>` ("<", ">")."""
    out: set[tuple[str, str]] = set()
    for token in specials:
        m = re.fullmatch(
            f"([{re.escape(_OPENERS)}]{{1,3}})({_INNER})([{re.escape(_CLOSERS)}]{{1,3}})", token
        )
        if m:
            out.add((m.group(1), m.group(3)))
    return out


def _literal_texts(source: str) -> list[str]:
    """The template's text and string literals (what it can write into a prompt), by jinja's own
    lexer; the whole source when it does not lex (the differ reports that)."""
    from jinja2 import Environment
    from jinja2.exceptions import TemplateSyntaxError

    try:
        return [
            value
            for _, kind, value in Environment().lex(source)
            if kind in ("data", "string") and value
        ]
    except TemplateSyntaxError:
        return [source]


SIMILAR = 0.75
"""How close (difflib's ratio of the names) a literal in a tag-like style (`<name>`, `[NAME]`)
must be to one of the tokenizer's special tokens of that style to be taken for a misspelt one:
such styles also write prose (`<co>`, `<think>`, `[citation]`), the `<|name|>` style does not."""


def _styled_literals(source: str, specials: frozenset[str]) -> set[str]:
    """Literals of the template that look like special tokens: every `<|name|>` / `<｜name｜>`,
    and, in the style of the tokenizer's own special tokens (never part of a longer run of the
    same delimiters: `<<SYS>>` is not a `<SYS>`), those whose name is within SIMILAR of the name
    of one of its special tokens of that style (`<start_of_trun>` beside `<start_of_turn>`)."""
    from difflib import SequenceMatcher

    texts = _literal_texts(source)
    found = {t for text in texts for t in _SPECIAL.findall(text)}
    for opening, closing in _styles(specials):
        pattern = re.compile(
            f"(?<![{re.escape(_OPENERS)}]){re.escape(opening)}({_INNER}){re.escape(closing)}"
            f"(?![{re.escape(_CLOSERS)}])"
        )
        names = [
            t[len(opening) : len(t) - len(closing)]
            for t in specials
            if pattern.fullmatch(t) and t.startswith(opening) and t.endswith(closing)
        ]
        for text in texts:
            for m in pattern.finditer(text):
                if m.group(0) in specials:
                    continue
                if any(SequenceMatcher(None, m.group(1), n).ratio() >= SIMILAR for n in names):
                    found.add(m.group(0))
    return found


def _template_findings(side: Side) -> list[Finding]:
    from tracker.diff.chat_template import resolve_templates

    tokens = side.tokens
    if tokens is None:
        return []
    try:
        templates = resolve_templates(side.snapshot)
    except Exception:  # unreadable or unfetched: the differ records that; nothing to check here
        return []
    known = set(tokens.values())
    out: list[Finding] = []
    for name, source in sorted(templates.sources.items()):
        missing = sorted(t for t in _styled_literals(source, side.special_tokens) if t not in known)
        if missing:
            where = "the chat template" if name == "default" else f"the chat template `{name}`"
            out.append(
                Finding(
                    "template-token-undefined",
                    Severity.MODERATE,
                    "source",
                    f"{where} writes {', '.join(f'`{t}`' for t in missing)}, which the "
                    "tokenizer does not define as a token: the prompt encodes it as ordinary "
                    "text pieces, not the special token the model was trained on",
                )
            )
    return out


_TOKEN_FILES = ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
                "vocab.json")  # fmt: skip
_CHECKS = (
    (_token_findings, lambda p: p in _TOKEN_FILES),
    (_dtype_findings, lambda p: p == "config.json" or p.endswith(".safetensors")),
    (
        _template_findings,
        lambda p: p in _TOKEN_FILES or "chat_template" in p or p.endswith(".jinja"),
    ),
)


def _changed(context: Context) -> set[str]:
    """The paths whose content (or readability) differs between the two revisions."""
    a = context.before.snapshot if context.before is not None else None
    b = context.after.snapshot if context.after is not None else None
    if b is None:
        return set()
    if a is None:
        return {e.path for e in b.tree} | set(b.files)
    ids_a = {e.path: e.identity for e in a.tree}
    ids_b = {e.path: e.identity for e in b.tree}
    out = {p for p in ids_a.keys() | ids_b.keys() if ids_a.get(p) != ids_b.get(p)}
    return out | {p for p in a.unreadable.keys() ^ b.unreadable.keys()}


def findings_of(side: Side | None) -> list[Finding]:
    """Every finding of one revision (empty for none)."""
    if side is None:
        return []
    return [f for check, _ in _CHECKS for f in check(side)]


def introduced(context: Context | None) -> list[Finding]:
    """The findings of the revision `context` leads to that its parent did not have (a check
    runs only when a file it reads changed: otherwise it cannot find anything new)."""
    if context is None or context.after is None:
        return []
    changed = _changed(context)
    out: list[Finding] = []
    for check, reads in _CHECKS:
        if not any(reads(p) for p in changed):
            continue
        old = {(f.check, f.text) for f in (check(context.before) if context.before else [])}
        out += [f for f in check(context.after) if (f.check, f.text) not in old]
    return out


def resolved(context: Context | None) -> list[Finding]:
    """The findings of the parent revision that the revision `context` leads to no longer has
    (fix evidence: the change resolved an inconsistency), for the checks whose files changed."""
    if context is None or context.after is None or context.before is None:
        return []
    changed = _changed(context)
    out: list[Finding] = []
    for check, reads in _CHECKS:
        if not any(reads(p) for p in changed):
            continue
        new = {(f.check, f.text) for f in check(context.after)}
        out += [f for f in check(context.before) if (f.check, f.text) not in new]
    return out


def assign(findings: Sequence[Finding], keys: Sequence[set[str]]) -> list[list[Finding]]:
    """Which advisory of a revision carries each finding: the first whose changes touch the key
    it is about (a change's key, or its last dotted part), else the revision's first advisory.
    `keys[i]` holds the keys of advisory i's changes."""
    out: list[list[Finding]] = [[] for _ in keys]
    if not keys:
        return out
    for f in findings:
        at = next((i for i, ks in enumerate(keys) if f.key in ks), 0)
        out[at].append(f)
    return out
