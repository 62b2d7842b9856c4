"""tokenizer.json summaries (files serialised by the real `tokenizers` library), tokenizer_config and special tokens."""

from __future__ import annotations

import json

import pytest
from diffkit import make_snapshot, version
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

from tracker.diff import diff_snapshots
from tracker.diff.tokenizer import summarise_tokenizer
from tracker.shared.domain import Artifact, ChangeKind
from tracker.shared.errors import UnreadableArtifactError

TEXT = [
    "An on-call engineer needs to know what changed between two revisions of a model repository.",
    "A raw text diff of a large tokenizer file helps nobody; a summary of the vocabulary does.",
] * 20


def _trained(
    vocab_size: int = 200, *, nfc: bool = False, specials: tuple[str, ...] = ("<s>", "</s>")
) -> Tokenizer:
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    if nfc:
        tok.normalizer = normalizers.NFC()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=["<unk>", *specials], show_progress=False
    )
    tok.train_from_iterator(TEXT, trainer)
    return tok


def _bytes(tok: Tokenizer) -> bytes:
    return tok.to_str().encode()


def _diff(a: bytes, b: bytes) -> list[tuple[str, str, object, object]]:
    changes = diff_snapshots(
        make_snapshot({"tokenizer.json": a}), make_snapshot({"tokenizer.json": b})
    )
    assert all(c.artifact is Artifact.TOKENIZER and c.file == "tokenizer.json" for c in changes)
    return [(c.kind.value, c.key, c.before, c.after) for c in changes]


def test_summary_of_a_real_serialised_tokenizer() -> None:
    tok = _trained()
    summary = summarise_tokenizer("tokenizer.json", _bytes(tok))
    assert summary.model_type == "BPE"
    assert len(summary.vocab) == tok.get_vocab_size(with_added_tokens=True)
    assert summary.merges_count == len(json.loads(tok.to_str())["model"]["merges"])
    assert summary.added_tokens[1] == {
        "content": "<s>",
        "special": True,
        "lstrip": False,
        "rstrip": False,
        "normalized": False,
        "single_word": False,
    }


def test_re_serialised_tokenizer_gives_no_change() -> None:
    raw = _bytes(_trained())
    pretty = json.dumps(json.loads(raw), indent=4, sort_keys=True).encode()
    assert _diff(raw, pretty) == []


def test_vocab_merges_added_tokens_and_normalizer_changes() -> None:
    old = _trained(vocab_size=100)
    new = _trained(vocab_size=120, nfc=True, specials=("<s>", "</s>", "<|im_end|>"))
    got = _diff(_bytes(old), _bytes(new))
    keys = [(k, key) for k, key, _b, _a in got]
    assert keys == [
        ("added", "added_tokens[3]"),
        ("changed", "merges"),
        ("added", "normalizer"),
        ("changed", "vocab"),
        ("changed", "vocab_size"),
    ]
    vs = got[4]
    assert (vs[2], vs[3]) == (old.get_vocab_size(), new.get_vocab_size())
    added = next(g for g in got if g[1] == "added_tokens[3]")
    assert added[3]["content"] == "<|im_end|>" and added[3]["special"] is True


def test_added_token_special_flag_flip() -> None:
    doc = json.loads(_bytes(_trained()))
    flipped = json.loads(json.dumps(doc))
    flipped["added_tokens"][2]["special"] = False
    got = _diff(json.dumps(doc).encode(), json.dumps(flipped).encode())
    fields = {k: v for k, v in doc["added_tokens"][2].items() if k != "id"}
    assert got == [("changed", "added_tokens[2]", fields, {**fields, "special": False})]


@pytest.mark.parametrize(
    ("doc", "reason"),
    [
        (
            {"version": "1.0", "added_tokens": []},
            "no `model` object (not a tokenizers tokenizer.json)",
        ),
        ({"model": {"type": "BPE", "vocab": 5}}, "`model.vocab` is neither an object nor an array"),
        (
            {"model": {"type": "BPE", "vocab": {}, "merges": "a b"}},
            "`model.merges` is not an array",
        ),
        ({"model": {"type": "BPE", "vocab": {"a": "1"}}}, "`model.vocab` has non-integer ids"),
        (
            {"model": {"type": "BPE", "vocab": {}}, "added_tokens": [{"id": "x"}]},
            'malformed added token {"id": "x"}',
        ),
    ],
)
def test_malformed_tokenizer_json_is_unreadable(doc: object, reason: str) -> None:
    with pytest.raises(UnreadableArtifactError, match=r"could not read tokenizer\.json"):
        summarise_tokenizer("tokenizer.json", json.dumps(doc).encode())
    (change,) = diff_snapshots(None, make_snapshot({"tokenizer.json": json.dumps(doc).encode()}))
    assert (change.kind, change.summary) == (
        ChangeKind.UNREADABLE,
        f"could not read tokenizer.json: {reason}",
    )


def test_deepseek_r1_add_bos_token_toggles_are_tokenizer_config_changes() -> None:
    name = "deepseek-ai__DeepSeek-R1"
    v1, v2, v3 = (
        make_snapshot({"tokenizer_config.json": version(name, p)}) for p in ("01_", "02_", "03_")
    )
    assert [(c.artifact, c.kind, c.key, c.before, c.after) for c in diff_snapshots(v1, v2)] == [
        (Artifact.TOKENIZER, ChangeKind.CHANGED, "add_bos_token", True, False)
    ]
    assert [(c.key, c.before, c.after) for c in diff_snapshots(v2, v3)] == [
        ("add_bos_token", False, True)
    ]


def test_special_tokens_resolved_across_files_and_reported_once() -> None:
    tc = json.loads(version("deepseek-ai__DeepSeek-R1", "03_"))
    gen = {"bos_token_id": 0, "eos_token_id": 1}
    cfg = {"bos_token_id": 0, "eos_token_id": 1}
    before = make_snapshot(
        {
            "tokenizer_config.json": json.dumps(tc).encode(),
            "generation_config.json": json.dumps(gen).encode(),
            "config.json": json.dumps(cfg).encode(),
        }
    )
    tc2 = dict(tc, eos_token="<|EOT|>")
    gen2 = dict(gen, eos_token_id=[1, 32014])
    cfg2 = dict(cfg, eos_token_id=32014)
    after = make_snapshot(
        {
            "tokenizer_config.json": json.dumps(tc2).encode(),
            "generation_config.json": json.dumps(gen2).encode(),
            "config.json": json.dumps(cfg2).encode(),
        }
    )
    got = [
        (c.artifact, c.kind, c.file, c.key, c.before, c.after)
        for c in diff_snapshots(before, after)
    ]
    assert got == [
        (
            Artifact.SPECIAL_TOKENS,
            ChangeKind.TYPE_CHANGED,
            "generation_config.json",
            "eos_token_id",
            1,
            [1, 32014],
        ),
        (
            Artifact.SPECIAL_TOKENS,
            ChangeKind.CHANGED,
            "tokenizer_config.json",
            "eos_token",
            "<｜end▁of▁sentence｜>",
            "<|EOT|>",
        ),
    ]


def test_special_tokens_map_is_used_when_tokenizer_config_does_not_set_a_token() -> None:
    name = "meta-llama__Llama-2-7b-hf"
    stm = json.loads(version(name, "02_e4693182_special_tokens_map"))
    tc = {"tokenizer_class": "LlamaTokenizer"}
    before = make_snapshot(
        {
            "tokenizer_config.json": json.dumps(tc).encode(),
            "special_tokens_map.json": json.dumps(stm).encode(),
        }
    )
    stm2 = dict(stm, pad_token="<unk>")
    after = make_snapshot(
        {
            "tokenizer_config.json": json.dumps(tc).encode(),
            "special_tokens_map.json": json.dumps(stm2).encode(),
        }
    )
    (change,) = diff_snapshots(before, after)
    assert (change.kind, change.file, change.key, change.after) == (
        ChangeKind.ADDED if "pad_token" not in stm else ChangeKind.CHANGED,
        "special_tokens_map.json",
        "pad_token",
        "<unk>",
    )


def test_merges_as_strings_or_pairs_are_the_same_rules() -> None:
    doc = json.loads(_bytes(_trained()))
    pairs = doc["model"]["merges"]
    assert isinstance(pairs[0], list)  # tokenizers 0.20+ writes [a, b] pairs
    old_style = json.loads(json.dumps(doc))
    old_style["model"]["merges"] = [" ".join(p) for p in pairs]
    assert _diff(json.dumps(old_style).encode(), json.dumps(doc).encode()) == []
    swapped = json.loads(json.dumps(doc))
    swapped["model"]["merges"][0], swapped["model"]["merges"][1] = pairs[1], pairs[0]
    assert _diff(json.dumps(doc).encode(), json.dumps(swapped).encode()) == [
        (
            "changed",
            "merges",
            {
                "count": len(pairs),
                "sha256": summarise_tokenizer("t", json.dumps(doc).encode()).merges_digest,
            },
            {
                "count": len(pairs),
                "sha256": summarise_tokenizer("t", json.dumps(swapped).encode()).merges_digest,
            },
        )
    ]


def test_malformed_merges_are_unreadable() -> None:
    doc = {"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [["a", 1]]}}
    with pytest.raises(
        UnreadableArtifactError, match=r"merges` items must be strings or \[a, b\] string pairs"
    ):
        summarise_tokenizer("tokenizer.json", json.dumps(doc).encode())
