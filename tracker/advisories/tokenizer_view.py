"""What transformers 5.24.0's `AutoTokenizer` makes of a revision's tokenizer files, read without running it (pure).

The reading follows `PreTrainedTokenizerBase._from_pretrained` and `TokenizersBackend.__init__`:

- the base vocabulary is tokenizer.json's `model.vocab` (a token → id map, or Unigram's list in id
  order), else vocab.json;
- the named special tokens (`bos_token`, `eos_token`, `unk_token`, `sep_token`, `pad_token`,
  `cls_token`, `mask_token`) come from tokenizer_config.json; when it has no
  `added_tokens_decoder`, special_tokens_map.json overrides it key by key (with an
  `added_tokens_decoder`, transformers does not read special_tokens_map.json at all);
- the added tokens are tokenizer_config.json's `added_tokens_decoder` when it has one, else
  tokenizer.json's `added_tokens`: a token the base vocabulary has keeps the vocabulary's id
  whatever id the file gives it (the `tokenizers` library warns and takes the vocabulary's); the
  others are added in the order of the ids the file gives, each at the next free id;
- a named special token the tokenizer still lacks is added after them, at the next free id.

Where the two loading paths of transformers differ (a tokenizer class without its own `__init__`
adds tokenizer.json's added tokens in list order, one with its own `__init__` by id), this reads
the id order; they agree whenever the file lists its added tokens by id, as `save_pretrained`
writes them. A role the files do not name is left unknown (a tokenizer class may default it, e.g.
`LlamaTokenizer`'s `</s>`): nothing is said about it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from tracker.diff import SideState, load_json_object, read_side
from tracker.shared.domain import JSONValue, Snapshot

ROLES = ("bos", "eos", "unk", "sep", "pad", "cls", "mask")
"""The named special tokens, in transformers' `SPECIAL_TOKENS_ATTRIBUTES` order (without `_token`)."""


@dataclass(frozen=True)
class Mislabelled:
    """An added token a file (`file`: tokenizer.json's `added_tokens`, tokenizer_config.json's
    `added_tokens_decoder`) lists under an id other than the one it loads with."""

    file: str
    token: str
    listed: int
    loaded: int


@dataclass(frozen=True)
class TokenizerView:
    """The tokenizer a revision's files make: `tokens` (id → token, every id it can produce),
    `special` (role → token text, for the roles its files name), `base` (the base vocabulary's
    size), `complete` (whether the base vocabulary is known: False when only
    tokenizer_config.json's `added_tokens_decoder` is, e.g. beside a sentencepiece or tiktoken
    model file), `mislabelled` (added tokens a file lists under another id than the one they
    load with), `named_in` (role → the file that named its token) and `ids` (token → the id it
    loads with)."""

    tokens: Mapping[int, str]
    special: Mapping[str, str]
    base: int
    complete: bool
    mislabelled: tuple[Mislabelled, ...]
    named_in: Mapping[str, str]
    ids: Mapping[str, int]

    @property
    def size(self) -> int:
        """How many ids the tokenizer can produce (`len(tokenizer)`): one past the highest."""
        return max(self.tokens) + 1 if self.tokens else 0

    def id_of(self, token: str) -> int | None:
        """The id `token` loads with, or None when the tokenizer has no such token."""
        return self.ids.get(token)

    def special_id(self, role: str) -> tuple[str, int] | None:
        """(token, id) of the named special token `role` (`eos`, ...), None when not named."""
        token = self.special.get(role)
        if token is None:
            return None
        i = self.id_of(token)
        return (token, i) if i is not None else None


def _json(snap: Snapshot, path: str) -> Mapping[str, JSONValue] | None:
    side = read_side(snap, path, load_json_object)
    return side.value if side.state is SideState.OK and side.value is not None else None


def _content(value: object) -> str | None:
    """A token as a config names it: a string, or an AddedToken object's `content`."""
    if isinstance(value, Mapping):
        value = value.get("content")
    return value if isinstance(value, str) and value else None


def _int(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


def _base_vocab(tok: Mapping[str, JSONValue] | None, vocab_json: object) -> dict[str, int] | None:
    model = tok.get("model") if tok is not None else None
    table = model.get("vocab") if isinstance(model, Mapping) else None
    if isinstance(table, Mapping):
        return {str(t): i for t, i in table.items() if _int(i) is not None and i >= 0}  # type: ignore[operator]
    if isinstance(table, list):  # Unigram: [[piece, score], ...] in id order
        out: dict[str, int] = {}
        for i, p in enumerate(table):
            if isinstance(p, list) and p and isinstance(p[0], str):
                out.setdefault(p[0], i)
        return out
    if isinstance(vocab_json, Mapping):
        return {str(t): i for t, i in vocab_json.items() if _int(i) is not None and i >= 0}  # type: ignore[operator]
    return None


def read_tokenizer(snap: Snapshot) -> TokenizerView | None:
    """The tokenizer `snap`'s files make (see the module docstring); None when the revision has
    no tokenizer file transformers reads (tokenizer.json, vocab.json, tokenizer_config.json)."""
    tok = _json(snap, "tokenizer.json")
    vocab_json = _json(snap, "vocab.json")
    conf = _json(snap, "tokenizer_config.json")
    if tok is None and vocab_json is None and conf is None:
        return None
    base = _base_vocab(tok, vocab_json)
    ids: dict[str, int] = dict(base or {})
    tokens: dict[int, str] = {i: t for t, i in ids.items()}
    next_id = max(tokens) + 1 if tokens else 0

    def add(token: str) -> int:
        nonlocal next_id
        if token in ids:
            return ids[token]
        ids[token], tokens[next_id] = next_id, token
        next_id += 1
        return ids[token]

    config = dict(conf or {})
    decoder = config.get("added_tokens_decoder")
    listed: list[tuple[int, str]] = []
    mislabelled: list[Mislabelled] = []
    named_in = {role: "tokenizer_config.json" for role in ROLES}
    listed_in = "tokenizer_config.json"
    if isinstance(decoder, Mapping):
        for k, v in decoder.items():
            content = _content(v)
            if str(k).isdigit() and content is not None:
                listed.append((int(k), content))
        if base is None:  # only the decoder is known: its ids are all there is to go by
            for i, content in listed:
                tokens[i] = content
                ids.setdefault(content, i)
            next_id = max(tokens) + 1 if tokens else 0
            listed = []
    else:
        stm = _json(snap, "special_tokens_map.json")
        for key, value in (stm or {}).items():
            if key.endswith("_token") and key[: -len("_token")] in ROLES:
                config[key] = value
                named_in[key[: -len("_token")]] = "special_tokens_map.json"
        listed_in = "tokenizer.json"
        for added in (tok or {}).get("added_tokens") or []:  # type: ignore[union-attr]
            if not isinstance(added, Mapping):
                continue
            at, text = _int(added.get("id")), _content(added.get("content"))
            if at is not None and text is not None:
                listed.append((at, text))
    for i, content in sorted(listed, key=lambda x: x[0]):
        loaded = add(content)
        if loaded != i:
            mislabelled.append(Mislabelled(listed_in, content, i, loaded))
    special: dict[str, str] = {}
    for role in ROLES:
        named = _content(config.get(f"{role}_token"))
        if named is not None:
            special[role] = named
            if base is not None:
                add(named)
    named_in = {role: f for role, f in named_in.items() if role in special}
    return TokenizerView(
        tokens=tokens,
        special=special,
        base=len(base) if base is not None else 0,
        complete=base is not None,
        mislabelled=tuple(mislabelled),
        named_in=named_in,
        ids=ids,
    )
