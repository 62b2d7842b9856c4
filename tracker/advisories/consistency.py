"""Consistency checks that catch a broken revision (pure): findings a revision introduced.

Each check reads one revision (config.json, generation_config.json, the tokenizer as transformers
5.24.0's `AutoTokenizer` builds it from the tokenizer files (`tokenizer_view`), the chat templates,
the safetensors headers) and returns findings; a revision's new findings are those its parent did
not have, and every finding of a first ingested revision is new. Checks:

- `token-id-out-of-vocab`: a special-token id (bos/eos/pad/decoder_start, in config.json or
  generation_config.json) outside the embedding (`vocab_size`), e.g. an `eos_token_id` equal to
  `vocab_size`: generation can never emit it (or indexes past the embedding);
- `token-id-undefined`: such an id the tokenizer defines no token for;
- `special-token-mismatch`: a bos/eos/pad id of config.json or generation_config.json (or an eos
  list that leaves it out) other than the id of the tokenizer's own bos/eos/pad token;
- `token-id-disagrees`: config.json and generation_config.json name different ids for the same
  special token (generation uses generation_config.json's; code reading the config gets the other);
- `added-token-id-mislabelled`: tokenizer.json's `added_tokens` (or tokenizer_config.json's
  `added_tokens_decoder`) list a token under another id than the one transformers loads it with;
- `vocab-smaller-than-tokenizer`: `vocab_size` below the tokenizer's size (ids it produces that
  the embedding has no row for);
- `vocab-size-disagrees-with-checkpoint`: `vocab_size` other than the rows of the checkpoint's
  input embedding (its safetensors header);
- `dtype-disagrees-with-checkpoint`: `torch_dtype` (or `dtype`) is not the dtype most of the
  checkpoint's floating-point tensors are stored in (not checked for a quantized checkpoint, one
  whose config has a `quantization_config`);
- `architecture-class-unknown`: `architectures[0]` names a class transformers 5.24.0 does not
  define, in a config without `auto_map` (with one, the classes are the repo's own code):
  `AutoModelForCausalLM` / `AutoModel` still pick the class from `model_type` (and `pipeline()`
  skips names it cannot find), but code that takes the class by this name
  (`getattr(transformers, architectures[0])`: `transformers serve`; serving engines that pick
  their implementation by it, e.g. vLLM) fails;
- `auto-map-code-missing`: an `auto_map` entry of config.json or tokenizer_config.json names a
  module (`configuration_x.ConfigClass` → `configuration_x.py`) that the revision's tree does not
  have, and no other repo (`org/name--module.Class`): transformers fetches the module from this
  revision, so loading with `trust_remote_code=True` fails;
- `template-token-undefined`: the chat template writes a special-token literal the tokenizer
  does not define, so it is encoded as ordinary text: `<|name|>` or DeepSeek's `<｜name｜>`, or a
  literal in the style of the tokenizer's own special tokens (`<s>`, `[INST]`, `<start_of_turn>`:
  the same delimiters around a name) close to one of them, read from the template's text and
  string literals only.

A template that no longer renders the canonical conversations is the chat-template differ's own
BROKEN change, and a regression in the advisory's kind.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from weakref import WeakKeyDictionary

from tracker.advisories.effects import Context, Side
from tracker.advisories.knowledge import load
from tracker.advisories.tokenizer_view import TokenizerView, read_tokenizer
from tracker.diff import load_json_object, read_side
from tracker.estimate.classes import PINNED, known
from tracker.shared.domain import JSONValue, Severity

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
    """One inconsistency of a revision: check id, severity, the key it is about, a sentence, and
    the file the key is in (kept out of `to_json`, which records carry as they always have)."""

    check: str
    severity: Severity
    key: str
    text: str
    file: str = ""
    code: str = ""  # auto-map-code-missing: the code file that is missing

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


def tokenizer_of(side: Side) -> TokenizerView | None:
    """The tokenizer `side`'s files make (`tokenizer_view.read_tokenizer`), read once per side."""
    if side not in _VIEWS:
        _VIEWS[side] = read_tokenizer(side.snapshot)
    return _VIEWS[side]


_VIEWS: WeakKeyDictionary[Side, TokenizerView | None] = WeakKeyDictionary()

_CONSEQUENCE = {
    "bos": "the model and the tokenizer disagree on the token that starts a sequence",
    "eos": "the model and the tokenizer disagree on the token that ends a sequence",
    "pad": "the model and the tokenizer disagree on the padding token",
}
_ROLE_SEVERITY = {"bos": Severity.MODERATE, "eos": Severity.HIGH, "pad": Severity.MODERATE}


def _name(i: int, view: TokenizerView) -> str:
    token = view.tokens.get(i)
    return f"names `{token}`" if token is not None else "names no token"


def _role_findings(
    file: str, doc: Mapping[str, JSONValue], view: TokenizerView, skip: set[str]
) -> list[Finding]:
    """config.json's or generation_config.json's bos/eos/pad ids against the tokenizer's own
    bos/eos/pad tokens (ids already reported as outside the vocabulary or undefined: `skip`)."""
    out: list[Finding] = []
    for role in ("bos", "eos", "pad"):
        key = f"{role}_token_id"
        value = doc.get(key)
        named = view.special_id(role)
        ids = _ids(value)
        if named is None or not ids or key in skip:
            continue
        token, want = named
        where = view.named_in.get(role, "tokenizer_config.json")
        if isinstance(value, list):
            if want in ids:
                continue
            text = (
                f"`{key}` {value} in {file} does not include the tokenizer's {role} token "
                f"`{token}` (id {want}, named in {where}): generation does not stop at it"
                if role == "eos"
                else f"`{key}` {value} in {file} does not include the tokenizer's {role} token "
                f"`{token}` (id {want}, named in {where}): {_CONSEQUENCE[role]}"
            )
        elif ids[0] != want:
            text = (
                f"`{key}` {ids[0]} in {file} {_name(ids[0], view)}, but the tokenizer's {role} "
                f"token is `{token}` (id {want}, named in {where}): {_CONSEQUENCE[role]}"
            )
        else:
            continue
        out.append(Finding("special-token-mismatch", _ROLE_SEVERITY[role], key, text, file))
    return out


def _token_findings(side: Side) -> list[Finding]:
    config = side.config.value if side.config.state == "ok" else None
    generation = side.generation.value if side.generation.state == "ok" else None
    vocab = _vocab_size(config) if config is not None else None
    view = tokenizer_of(side)
    tokens = view.tokens if view is not None and view.complete else None
    out: list[Finding] = []
    for file, doc in (("config.json", config), ("generation_config.json", generation)):
        if doc is None:
            continue
        reported: set[str] = set()
        for key in TOKEN_KEYS:
            for i in _ids(doc.get(key)):
                if vocab is not None and not 0 <= i < vocab:
                    reported.add(key)
                    out.append(
                        Finding(
                            "token-id-out-of-vocab",
                            Severity.HIGH,
                            key,
                            f"`{key}` {i} in {file} is outside the vocabulary (`vocab_size` "
                            f"{vocab}: ids 0 to {vocab - 1}): the model cannot produce or embed it",
                            file,
                        )
                    )
                elif tokens is not None and i not in tokens:
                    reported.add(key)
                    out.append(
                        Finding(
                            "token-id-undefined",
                            Severity.HIGH,
                            key,
                            f"`{key}` {i} in {file} names no token the tokenizer defines",
                            file,
                        )
                    )
        if view is not None and view.complete:
            out += _role_findings(file, doc, view, reported)
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
                        "generation_config.json",
                    )
                )
    return out


def _mislabelled_findings(side: Side) -> list[Finding]:
    """Added tokens a file lists under other ids than the ones the tokenizer loads them with."""
    view = tokenizer_of(side)
    if view is None or not view.mislabelled:
        return []
    out: list[Finding] = []
    for file in dict.fromkeys(m.file for m in view.mislabelled):
        wrong = [m for m in view.mislabelled if m.file == file]
        field = "added_tokens" if file == "tokenizer.json" else "added_tokens_decoder"
        listed = " and ".join(f"`{m.token}` as id {m.listed}" for m in wrong[:4])
        loaded = " and ".join(str(m.loaded) for m in wrong[:4])
        more = f" (and {len(wrong) - 4} more)" if len(wrong) > 4 else ""
        plural = "s" if len(wrong) > 1 else ""
        out.append(
            Finding(
                "added-token-id-mislabelled",
                Severity.MODERATE,
                field,
                f"{file}'s `{field}` list{'' if plural else 's'} {listed}{more}, but transformers "
                f"loads {'them' if plural else 'it'} as id{plural} {loaded} (a token of the base "
                "vocabulary keeps the vocabulary's id; the others take the next free ids in "
                "the order of the listed ids): code that reads the file's ids gets other tokens",
                file,
            )
        )
    return out


_EMBEDDINGS = ("embed_tokens.weight", "wte.weight", "word_embeddings.weight", "embed_in.weight")


def _embedding(side: Side) -> tuple[str, int] | None:
    """(name, rows) of the checkpoint's input embedding as its safetensors headers declare it."""
    found = sorted(
        (name, t.shape[0])
        for h in side.snapshot.headers.values()
        for name, t in h.tensors.items()
        if len(t.shape) == 2 and (name.endswith(_EMBEDDINGS) or name == "shared.weight")
    )
    return found[0] if found else None


def _size_findings(side: Side) -> list[Finding]:
    """`vocab_size` against the tokenizer's size and the checkpoint's embedding rows."""
    config = side.config.value if side.config.state == "ok" else None
    vocab = _vocab_size(config) if config is not None else None
    if vocab is None:
        return []
    out: list[Finding] = []
    view = tokenizer_of(side)
    if view is not None and view.complete and view.size > vocab:
        last = view.size - 1
        out.append(
            Finding(
                "vocab-smaller-than-tokenizer",
                Severity.HIGH,
                "vocab_size",
                f"`vocab_size` {vocab} in config.json is smaller than the tokenizer, which "
                f"produces ids up to {last} (`{view.tokens[last]}`): the embedding has no row for "
                f"ids {vocab} to {last}",
                "config.json",
            )
        )
    embedding = _embedding(side)
    if embedding is not None and embedding[1] != vocab:
        name, rows = embedding
        out.append(
            Finding(
                "vocab-size-disagrees-with-checkpoint",
                Severity.HIGH,
                "vocab_size",
                f"`vocab_size` is {vocab} in config.json but the checkpoint's `{name}` has {rows} "
                f"rows: the model transformers builds from the config has {vocab}, so the "
                "checkpoint's embedding does not fit it",
                "config.json",
            )
        )
    return out


def _dtype_findings(side: Side) -> list[Finding]:
    config = side.config.value if side.config.state == "ok" else None
    headers = side.snapshot.headers
    shards = [e.path for e in side.snapshot.tree if e.path.endswith(".safetensors")]
    if config is None or not headers or any(p not in headers for p in shards):
        return []
    if "quantization_config" in config:
        # a quantized checkpoint (FP8 blocks with F32 scales, say) stores what its quantizer
        # reads, and `torch_dtype` is the dtype of the rest: no disagreement to tell from a census
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


def _class_findings(side: Side) -> list[Finding]:
    """`architectures[0]` against the classes transformers defines (`tracker.estimate.classes`)."""
    config = side.config.value if side.config.state == "ok" else None
    arch = config.get("architectures") if config is not None else None
    if config is None or not isinstance(arch, list) or not arch or not isinstance(arch[0], str):
        return []
    name = arch[0]
    if known(name) or isinstance(config.get("auto_map"), Mapping):
        return []  # with an auto_map the classes are the repo's own code (trust_remote_code)
    model_type = config.get("model_type")
    cls = load().classes.get(model_type) if isinstance(model_type, str) else None
    by_name = "code that takes the class by this name fails: `transformers serve` " \
        "(`getattr(transformers, architectures[0])`) and serving engines that pick their " \
        "implementation by it (vLLM)"  # fmt: skip
    if cls is None:
        return [
            Finding(
                "architecture-class-unknown",
                Severity.HIGH,
                "architectures",
                f"`architectures` names `{name}`, a class transformers {PINNED} does not define, "
                f"and `model_type` {show_json(model_type)} is not one it has either: "
                f"AutoConfig, AutoModelForCausalLM and `pipeline()` cannot load it, and {by_name}",
                "config.json",
            )
        ]
    family = cls.name.removesuffix("Config")
    causal = f"{family}ForCausalLM"
    builds = f" builds `{causal}` and" if known(causal) else ""
    return [
        Finding(
            "architecture-class-unknown",
            Severity.MODERATE,
            "architectures",
            f"`architectures` names `{name}`, a class transformers {PINNED} does not define: "
            f"AutoModelForCausalLM.from_pretrained{builds} works (it picks the class from "
            f'`model_type` "{model_type}", {cls.name}), and `pipeline()` skips the name, but '
            f"{by_name}",
            "config.json",
        )
    ]


_AUTO_MAP_FILES = ("config.json", "tokenizer_config.json")
HISTORY_CHECKS = frozenset({"auto-map-code-missing"})
"""Checks whose findings stand only on what a revision did (`_evidenced`): introduced where the
previous revision had what this one lacks, and fix evidence only for a finding published."""


def _auto_map_findings(side: Side) -> list[Finding]:
    """Each code file an `auto_map` names that `side`'s tree lacks (one finding per file)."""
    paths = {e.path for e in side.snapshot.tree}
    out: list[Finding] = []
    for file in _AUTO_MAP_FILES:
        doc = (
            side.config
            if file == "config.json"
            else read_side(side.snapshot, file, load_json_object)
        )
        value = doc.value if doc.state == "ok" else None
        auto_map = value.get("auto_map") if value is not None else None
        if not isinstance(auto_map, Mapping):
            continue
        missing: dict[str, None] = {}
        for refs in auto_map.values():
            for ref in refs if isinstance(refs, list) else [refs]:
                if not isinstance(ref, str) or "--" in ref or "." not in ref:
                    continue  # another repo's code (`org/name--module.Class`), or no module
                module = ref.rsplit(".", 1)[0]
                code = f"{module.replace('.', '/')}.py"
                if code not in paths:
                    missing.setdefault(code, None)
        for code in missing:
            out.append(
                Finding(
                    "auto-map-code-missing",
                    Severity.HIGH,
                    "auto_map",
                    f"`auto_map` in {file} names {code}, which this revision does not have: "
                    "loading with trust_remote_code=True fails",
                    file,
                    code,
                )
            )
    return out


def show_json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)


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
    view = tokenizer_of(side)
    # a named special token the vocabulary lacks is added when the tokenizer loads
    known = set(tokens.values()) | set(view.special.values() if view is not None else ())
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
                    templates.origins.get(name, "tokenizer_config.json"),
                )
            )
    return out


_TOKEN_FILES = ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
                "vocab.json", "special_tokens_map.json")  # fmt: skip
_CHECKS = (
    (_token_findings, lambda p: p in _TOKEN_FILES),
    (_mislabelled_findings, lambda p: p in _TOKEN_FILES),
    (_size_findings, lambda p: p in _TOKEN_FILES or p.endswith(".safetensors")),
    (_dtype_findings, lambda p: p == "config.json" or p.endswith(".safetensors")),
    (_class_findings, lambda p: p == "config.json" or p.endswith(".py")),
    (_auto_map_findings, lambda p: p in _AUTO_MAP_FILES or p.endswith(".py")),
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


def introduced(context: Context | None, *, first_code: bool = True) -> list[Finding]:
    """The findings of the revision `context` leads to that its parent did not have (a check
    runs only when a file it reads changed: otherwise it cannot find anything new). `first_code`
    False: the repo's trees may leave out its code files (the watchlist's `unlisted_code`), so a
    code file `auto_map` names is missing only where the parent had it (`_evidenced`)."""
    if context is None or context.after is None:
        return []
    changed = _changed(context)
    out: list[Finding] = []
    for check, reads in _CHECKS:
        if not any(reads(p) for p in changed):
            continue
        old = {(f.check, f.text) for f in (check(context.before) if context.before else [])}
        out += [
            f
            for f in check(context.after)
            if (f.check, f.text) not in old and _evidenced(f, context.before, first_code)
        ]
    return out


def _evidenced(finding: Finding, before: Side | None, first_code: bool) -> bool:
    """Whether a new finding stands on what the revision did. A code file that `auto_map` names
    is missing from the first ingested revision (`before` None) unless `first_code` is False;
    later, it counts as missing only where the previous revision had it (the revision deleted
    it): an `auto_map` entry that starts naming a file no revision had may be of a partial copy
    of the repo (the demo's trees leave out the code the corpus lacks, and its watchlist says so
    with `unlisted_code`), and a finding there could be false of the real revision."""
    if finding.check not in HISTORY_CHECKS:
        return True
    if before is None:
        return first_code
    paths = {e.path for e in before.snapshot.tree}
    return finding.code in paths


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
