"""Broken revisions are flagged, the first ingested one included, and their reverts mark them fixed
(issue 24 part 3), through the installed `tracker` polling a Hub replica and the OSV export.

Each history is a small git repo the replica serves, built from meta-llama/Llama-2-7b-hf's real
config.json, generation_config.json, tokenizer_config.json, special_tokens_map.json, README front
matter (../shared/corpus/models) and tokenizer.json (../shared/corpus/pairs, revision e469318),
then broken in one known way and reverted to the real bytes:

- `first-eos`: the first revision already has `eos_token_id` 32000 (= `vocab_size`) in
  config.json; a README is added; then the real config.json comes back;
- `tokenizer-eos`: the tokenizer's eos token becomes `<|im_end|>` (special_tokens_map.json and
  tokenizer_config.json) while the config ids stay 2; then both files come back;
- `swapped-added`: tokenizer.json's added_tokens give `<s>` id 2 and `</s>` id 1; then back;
- `swapped-vocab`: the same swap in the vocabulary too (the loaded tokenizer's ids swap); then back;
- `vocab`: the first revision has `vocab_size` 31000 beside a checkpoint whose embedding has
  32000 rows (a safetensors header); fixed to 32000; shrunk to 31000 again; then back.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tracker.replica import Replica
from tracker.replica.repos import commit, init_repo, write_sparse_lfs_object

pytestmark = pytest.mark.replica

TRACKER = Path(sys.executable).with_name("tracker")
CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "corpus"
MODEL = CORPUS / "models" / "meta-llama__Llama-2-7b-hf"
TOKENIZER = CORPUS / "pairs" / "meta-llama__Llama-2-7b-hf" / "rev-e469318" / "tokenizer.json"
T0 = datetime(2025, 3, 1, 9, 30, tzinfo=UTC)
REAL = {
    "config.json": (MODEL / "config.json").read_bytes(),
    "generation_config.json": (MODEL / "generation_config.json").read_bytes(),
    "tokenizer_config.json": (MODEL / "tokenizer_config.json").read_bytes(),
    "special_tokens_map.json": (MODEL / "special_tokens_map.json").read_bytes(),
    "tokenizer.json": TOKENIZER.read_bytes(),
}


def _edit(name: str, change: Callable[[dict[str, Any]], None]) -> bytes:
    doc = json.loads(REAL[name])
    change(doc)
    return (json.dumps(doc, indent=2, ensure_ascii=False) + "\n").encode()


def _set(**values: object) -> Callable[[dict[str, Any]], None]:
    return lambda doc: doc.update(values)


def _swap_added(doc: dict[str, Any]) -> None:
    added = {t["content"]: t for t in doc["added_tokens"]}
    added["<s>"]["id"], added["</s>"]["id"] = 2, 1


def _swap_everywhere(doc: dict[str, Any]) -> None:
    _swap_added(doc)
    doc["model"]["vocab"]["<s>"], doc["model"]["vocab"]["</s>"] = 2, 1


def _eos(token: str) -> Callable[[dict[str, Any]], None]:
    def change(doc: dict[str, Any]) -> None:
        doc["eos_token"] = dict(doc["eos_token"], content=token)

    return change


def _weights(repo: Path) -> object:
    """A model.safetensors with Llama-2-7b's embedding and head shapes (header real, data zeros)."""
    tensors = {}
    offset = 0
    for name in ("lm_head.weight", "model.embed_tokens.weight"):
        size = 32000 * 4096 * 2
        tensors[name] = {
            "dtype": "F16",
            "shape": [32000, 4096],
            "data_offsets": [offset, offset + size],
        }
        offset += size
    header = json.dumps(tensors, separators=(",", ":")).encode()
    header += b" " * (-len(header) % 8)
    head = struct.pack("<Q", len(header)) + header
    return write_sparse_lfs_object(repo, head, len(head) + offset)


@dataclass
class History:
    shas: list[str]
    records: list[dict[str, Any]]  # the repo's OSV records, by id


HISTORIES: dict[str, list[tuple[str, dict[str, Any]]]] = {
    "first-eos": [
        ("upload", {**REAL, "config.json": _edit("config.json", _set(eos_token_id=32000))}),
        ("Add README", {"README.md": (MODEL / "README.frontmatter.md").read_bytes()}),
        ("Restore eos_token_id", {"config.json": REAL["config.json"]}),
    ],
    "tokenizer-eos": [
        ("upload", dict(REAL)),
        (
            "ChatML eos",
            {
                "special_tokens_map.json": _edit("special_tokens_map.json", _eos("<|im_end|>")),
                "tokenizer_config.json": _edit("tokenizer_config.json", _eos("<|im_end|>")),
            },
        ),
        (
            "Revert eos",
            {k: REAL[k] for k in ("special_tokens_map.json", "tokenizer_config.json")},
        ),
    ],
    "swapped-added": [
        ("upload", dict(REAL)),
        ("Update tokenizer", {"tokenizer.json": _edit("tokenizer.json", _swap_added)}),
        ("Revert tokenizer", {"tokenizer.json": REAL["tokenizer.json"]}),
    ],
    "swapped-vocab": [
        ("upload", dict(REAL)),
        ("Update tokenizer", {"tokenizer.json": _edit("tokenizer.json", _swap_everywhere)}),
        ("Revert tokenizer", {"tokenizer.json": REAL["tokenizer.json"]}),
    ],
    "vocab": [
        ("upload", {**REAL, "config.json": _edit("config.json", _set(vocab_size=31000))}),
        ("Fix vocab_size", {"config.json": REAL["config.json"]}),
        ("Shrink vocab", {"config.json": _edit("config.json", _set(vocab_size=31000))}),
        ("Revert vocab", {"config.json": REAL["config.json"]}),
    ],
}


def _tracker(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [str(TRACKER), *args], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.fixture(scope="module")
def histories(tmp_path_factory: pytest.TempPathFactory) -> dict[str, History]:
    root = tmp_path_factory.mktemp("broken")
    shas: dict[str, list[str]] = {}
    for name, steps in HISTORIES.items():
        repo = init_repo(root / "hub", f"acme/{name}")
        shas[name] = []
        for day, (message, files) in enumerate(steps):
            if name == "vocab" and day == 0:
                files = {**files, "model.safetensors": _weights(repo)}
            shas[name].append(commit(repo, files, message, date=T0 + timedelta(days=day)))
    watchlist = root / "watchlist.yaml"
    watchlist.write_text("repos:\n" + "".join(f"  - id: acme/{n}\n" for n in HISTORIES))
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("TRACKER_", "HF_", "HUGGINGFACE_"))
    }
    env |= {
        "TRACKER_STATE_DIR": str(root / "state"),
        "TRACKER_WATCHLIST": str(watchlist),
        "TRACKER_RETRY_ATTEMPTS": "1",
    }
    with Replica(root / "hub") as hub:
        env["TRACKER_HF_ENDPOINT"] = hub.url
        _tracker(env, "poll", "--once")
    _tracker(env, "advisories", "export", str(root / "osv"))
    records = [json.loads(p.read_text()) for p in sorted((root / "osv").glob("*.json"))]
    out = {}
    for name in HISTORIES:
        mine = [r for r in records if r["database_specific"]["repo"] == f"acme/{name}"]
        out[name] = History(shas[name], sorted(mine, key=lambda r: int(r["id"].rsplit("-", 1)[1])))
    return out


def _events(record: dict[str, Any]) -> list[dict[str, str]]:
    (affected,) = record["affected"]
    (rng,) = affected["ranges"]
    return list(rng["events"])


def _findings(record: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(f["check"], f["severity"], f["text"]) for f in record["database_specific"]["findings"]]


def _status(record: dict[str, Any]) -> str:
    return str(record["details"].split("## Status\n\n", 1)[1].split("\n\n", 1)[0])


def test_broken_as_first_seen_is_its_own_advisory_and_its_revert_fixes_it(
    histories: dict[str, History],
) -> None:
    h = histories["first-eos"]
    c0, c1, c2 = h.shas
    first, readme = h.records  # the revert is absorbed by the fix: no third advisory
    assert first["summary"] == (
        "acme/first-eos: broken as first seen: a special-token id outside the vocabulary; "
        "config.json and generation_config.json disagree on a special-token id"
    )
    assert first["database_specific"]["severity"] == "high"
    assert first["database_specific"]["first_seen"] is True
    assert _findings(first) == [
        (
            "token-id-out-of-vocab",
            "high",
            "`eos_token_id` 32000 in config.json is outside the vocabulary (`vocab_size` 32000: "
            "ids 0 to 31999): the model cannot produce or embed it",
        ),
        (
            "token-id-disagrees",
            "moderate",
            "`eos_token_id` is 32000 in config.json but 2 in generation_config.json: generation "
            "uses the latter, code reading the model config the former",
        ),
    ]
    assert "**Kind: broken as first seen**" in first["details"]
    assert _events(first) == [{"introduced": c0}, {"fixed": c2}]
    assert first["affected"][0]["versions"] == [c0, c1]
    assert _status(first).startswith(f"**Fixed** by commit [`{c2[:12]}`]")
    assert "it resolves every consistency finding this advisory is about" in _status(first)
    # the README advisory never offers the broken revision as the one to stay on
    assert readme["summary"].startswith("acme/first-eos: model card")
    assert _events(readme) == [{"introduced": c1}]
    todo = readme["details"].split("## What to do\n\n", 1)[1]
    assert f'revision="{c0}"' not in todo
    assert todo.startswith(
        f"Do not pin the previous revision `{c0[:12]}` to avoid this change: it has the "
        f"consistency findings of {first['id']} (open)"
    )


def test_a_changed_tokenizer_eos_disagrees_with_the_config_ids(
    histories: dict[str, History],
) -> None:
    h = histories["tokenizer-eos"]
    _, c1, c2 = h.shas
    (adv,) = h.records
    assert adv["database_specific"]["group"] == "special_tokens"
    assert _findings(adv) == [
        (
            "special-token-mismatch",
            "high",
            "`eos_token_id` 2 in config.json names `</s>`, but the tokenizer's eos token is "
            "`<|im_end|>` (id 32000, named in special_tokens_map.json): the model and the "
            "tokenizer disagree on the token that ends a sequence",
        ),
        (
            "special-token-mismatch",
            "high",
            "`eos_token_id` 2 in generation_config.json names `</s>`, but the tokenizer's eos "
            "token is `<|im_end|>` (id 32000, named in special_tokens_map.json): the model and "
            "the tokenizer disagree on the token that ends a sequence",
        ),
        (
            "vocab-smaller-than-tokenizer",
            "high",
            "`vocab_size` 32000 in config.json is smaller than the tokenizer, which produces ids "
            "up to 32000 (`<|im_end|>`): the embedding has no row for ids 32000 to 32000",
        ),
    ]
    assert "**Kind: a regression**" in adv["details"]
    assert _events(adv) == [{"introduced": c1}, {"fixed": c2}]
    assert adv["affected"][0]["versions"] == [c1]


def test_ids_swapped_in_added_tokens_are_found(histories: dict[str, History]) -> None:
    h = histories["swapped-added"]
    _, c1, c2 = h.shas
    (adv,) = h.records
    assert _findings(adv) == [
        (
            "added-token-id-mislabelled",
            "moderate",
            "tokenizer.json's `added_tokens` list `</s>` as id 1 and `<s>` as id 2, but "
            "transformers loads them as ids 2 and 1 (a token of the base vocabulary keeps the "
            "vocabulary's id; the others take the next free ids in the order of the listed ids): "
            "code that reads the file's ids gets other tokens",
        ),
    ]
    assert _events(adv) == [{"introduced": c1}, {"fixed": c2}]


def test_ids_swapped_in_the_vocabulary_disagree_with_the_config(
    histories: dict[str, History],
) -> None:
    h = histories["swapped-vocab"]
    _, c1, c2 = h.shas
    (adv,) = h.records
    texts = [f[2] for f in _findings(adv)]
    assert texts == [
        f"`{key}` {i} in {file} names `{named}`, but the tokenizer's {role} token is `{token}` "
        f"(id {j}, named in special_tokens_map.json): the model and the tokenizer disagree on the "
        f"token that {what} a sequence"
        for file in ("config.json", "generation_config.json")
        for key, i, named, role, token, j, what in (
            ("bos_token_id", 1, "</s>", "bos", "<s>", 2, "starts"),
            ("eos_token_id", 2, "<s>", "eos", "</s>", 1, "ends"),
        )
    ]
    assert _events(adv) == [{"introduced": c1}, {"fixed": c2}]


def test_vocab_size_below_the_tokenizer_and_the_embedding(histories: dict[str, History]) -> None:
    h = histories["vocab"]
    c0, c1, c2, c3 = h.shas
    first, shrunk, estimate = h.records
    expected = [
        (
            "vocab-smaller-than-tokenizer",
            "high",
            "`vocab_size` 31000 in config.json is smaller than the tokenizer, which produces ids "
            "up to 31999 (`给`): the embedding has no row for ids 31000 to 31999",
        ),
        (
            "vocab-size-disagrees-with-checkpoint",
            "high",
            "`vocab_size` is 31000 in config.json but the checkpoint's `model.embed_tokens.weight` has "
            "32000 rows: the model transformers builds from the config has 31000, so the "
            "checkpoint's embedding does not fit it",
        ),
    ]
    assert first["summary"].startswith("acme/vocab: broken as first seen: ")
    assert _findings(first) == expected
    assert _events(first) == [{"introduced": c0}, {"fixed": c1}]
    assert first["affected"][0]["versions"] == [c0]
    # the fix at c1 is the first advisory's: its change (and the estimate's move) are absorbed
    assert shrunk["summary"] == "acme/vocab: config: vocab_size changed: 32000 → 31000"
    assert _findings(shrunk) == expected
    assert "**Kind: a regression**" in shrunk["details"]
    assert _events(shrunk) == [{"introduced": c2}, {"fixed": c3}]
    assert shrunk["affected"][0]["versions"] == [c2]
    assert estimate["summary"] == "acme/vocab: estimate: parameters 6.74B → 6.73B"
    assert _events(estimate) == [{"introduced": c2}, {"fixed": c3}]
