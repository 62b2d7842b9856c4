"""Tokenizer effects by execution (issue 24): a tokenizer_config.json / special_tokens_map.json /
tokenizer.json change is decided by what `AutoTokenizer.from_pretrained` of the pinned
transformers builds from each side's files (never remote code), compared as users meet it.

Real files: Llama-2-7b-hf's tokenizer_config.json and special_tokens_map.json of its history
(../shared/corpus/histories) with its real tokenizer.json (../shared/corpus/pairs, revision
e469318, the "Upload tokenizer" commit). The broken tokenizer.json edits are stand-ins made from
that real file (two ids swapped), said so where they are made."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from labelkit import CORPUS, corpus_steps, with_changes

from tracker.advisories.classify import Classified, Context, classify
from tracker.advisories.execute import Executor
from tracker.diff import diff_snapshots
from tracker.shared.domain import RepoId, Severity, Sha, Snapshot, TreeEntry

pytest.importorskip("transformers")
pytestmark = pytest.mark.slow

LLAMA = CORPUS / "meta-llama__Llama-2-7b-hf"
PAIR = CORPUS.parent / "pairs" / "meta-llama__Llama-2-7b-hf" / "rev-e469318" / "tokenizer.json"
FILES = ("tokenizer_config.json", "special_tokens_map.json", "tokenizer.json")


def _version() -> str:
    import transformers

    return str(transformers.__version__)


def _llama(nn: str, sha: str) -> bytes:
    return (LLAMA / f"{nn}_{sha}").read_bytes()


def _snap(name: str, files: dict[str, bytes]) -> Snapshot:
    tree = tuple(
        TreeEntry(p, hashlib.sha1(b).hexdigest(), len(b)) for p, b in sorted(files.items())
    )
    return Snapshot(RepoId("t/" + name), Sha(hashlib.sha1(name.encode()).hexdigest()), tree, files)


def _classified(
    before: dict[str, bytes], after: dict[str, bytes], executor: Executor
) -> list[Classified]:
    b, a = _snap("before", before), _snap("after", after)
    ctx = Context(b, a, executor=executor)
    return [classify(c, context=ctx) for c in diff_snapshots(b, a) if c.file in FILES]


@pytest.fixture(scope="module")
def executor() -> Executor:
    ex = Executor()
    assert ex.warm()
    return ex


def _one(rows: list[Classified], file: str, key: str) -> Classified:
    (hit,) = [r for r in rows if (r.change.file, r.change.key) == (file, key)]
    return hit


UPLOAD_CONFIG = _llama("02_e4693182", "tokenizer_config.json")
UPLOAD_MAP = _llama("02_e4693182", "special_tokens_map.json")
NO_USE_FAST = _llama("03_25bd8085", "tokenizer_config.json")


def test_use_fast_is_ignored_by_autotokenizer_so_removing_it_is_low(executor: Executor) -> None:
    """issue 24: `use_fast` is moderate today; AutoTokenizer of 5.24.0 builds the same tokenizer."""
    tok = PAIR.read_bytes()
    before = {"tokenizer_config.json": UPLOAD_CONFIG, "special_tokens_map.json": UPLOAD_MAP,
              "tokenizer.json": tok}  # fmt: skip
    after = {**before, "tokenizer_config.json": NO_USE_FAST}
    got = _one(_classified(before, after, executor), "tokenizer_config.json", "use_fast")
    assert (got.severity, got.rule, got.decided_by) == (
        Severity.LOW,
        "executed-no-effect",
        f"transformers {_version()}",
    )
    # with the real vocabulary, the ids are the tokenizer's own and are named
    assert 'bos "<s>" (1), eos "</s>" (2), unk "<unk>" (0)' in got.rationale
    assert "model_max_length unlimited (1e30); 7 texts encode to the same ids" in got.rationale
    assert "empty vocabulary" not in got.rationale


def test_pad_token_removed_from_special_tokens_map_is_a_real_removal(executor: Executor) -> None:
    """special_tokens_map.json overrides tokenizer_config.json (`pad_token: null`): dropping
    `pad_token: "<unk>"` from it leaves the tokenizer without a pad token (pad_token_id None)."""
    tok = PAIR.read_bytes()
    first_map = _llama("01_637a7485", "special_tokens_map.json")
    before = {"tokenizer_config.json": UPLOAD_CONFIG, "special_tokens_map.json": first_map,
              "tokenizer.json": tok}  # fmt: skip
    after = {**before, "special_tokens_map.json": UPLOAD_MAP}
    got = _one(_classified(before, after, executor), "special_tokens_map.json", "pad_token")
    assert (got.severity, got.rule, got.decided_by) == (
        Severity.HIGH,
        "executed-tokenizer-special",
        f"transformers {_version()}",
    )
    assert 'pad token "<unk>" (0) → none' in got.rationale
    assert "shadowed" not in got.rationale and "unchanged" not in got.change.summary


def _swapped(tokens: tuple[str, str], *, vocab: bool) -> bytes:
    """A stand-in edit of Llama-2's real tokenizer.json: two tokens' ids swapped (in the vocab,
    and in `added_tokens` where they are listed)."""
    doc: dict[str, Any] = json.loads(PAIR.read_bytes())
    table = doc["model"]["vocab"]
    a, b = tokens
    table[a], table[b] = table[b], table[a]
    if not vocab:
        for added in doc["added_tokens"]:
            if added["content"] in tokens:
                added["id"] = table[added["content"]]
    return json.dumps(doc).encode()


def test_special_ids_swapped_in_tokenizer_json_are_high_with_the_ids(executor: Executor) -> None:
    before = {"tokenizer_config.json": NO_USE_FAST, "special_tokens_map.json": UPLOAD_MAP,
              "tokenizer.json": PAIR.read_bytes()}  # fmt: skip
    after = {**before, "tokenizer.json": _swapped(("<s>", "</s>"), vocab=False)}
    rows = _classified(before, after, executor)
    assert rows
    for got in rows:
        assert (got.severity, got.rule) == (Severity.HIGH, "executed-tokenizer-special"), got
        assert 'bos token "<s>" (1) → "<s>" (2); eos token "</s>" (2) → "</s>" (1)' in got.rationale


def test_ordinary_token_ids_swapped_are_critical(executor: Executor) -> None:
    before = {"tokenizer_config.json": NO_USE_FAST, "special_tokens_map.json": UPLOAD_MAP,
              "tokenizer.json": PAIR.read_bytes()}  # fmt: skip
    after = {**before, "tokenizer.json": _swapped(("▁Hello", "▁world"), vocab=True)}
    rows = _classified(before, after, executor)
    assert rows
    for got in rows:
        assert (got.severity, got.rule) == (Severity.CRITICAL, "executed-tokenizer-text"), got
        assert '"Hello world" encodes to [1, 15043, 3186] → [1, 3186, 15043]' in got.rationale


def test_a_remote_tokenizer_class_is_never_run_and_says_so(executor: Executor) -> None:
    """chatglm2-6b's tokenizer is the repo's own (auto_map.AutoTokenizer): not executed, the
    inferred rule decides and the rationale says why it was not run."""
    steps = [
        s
        for s in corpus_steps()
        if s.history == "corpus/THUDM__chatglm2-6b" and s.commit == "e186c891"
    ]
    ((step, changes),) = with_changes(steps)
    ctx = Context(step.before, step.after, executor=executor)
    (got,) = [classify(c, context=ctx) for c in changes if c.file == "tokenizer_config.json"]
    assert got.decided_by == "inferred"
    assert got.rationale.startswith(
        f"inferred (transformers {_version()} not run on it: the tokenizer class is the repo's "
        'own (`auto_map.AutoTokenizer` = "tokenization_chatglm.ChatGLMTokenizer"), which '
        "tracker never runs)"
    )


def test_corpus_tokenizer_changes_take_the_band_of_their_measured_effect(
    executor: Executor,
) -> None:
    band = {
        "tokenizer-same": Severity.LOW,
        "tokenizer-settings": Severity.MODERATE,
        "tokenizer-loads": Severity.MODERATE,
        "tokenizer-special": Severity.HIGH,
        "tokenizer-broken": Severity.HIGH,
        "tokenizer-text": Severity.CRITICAL,
    }
    kinds: dict[str, int] = {}
    for step, changes in with_changes(list(corpus_steps())):
        ctx = Context(step.before, step.after, executor=executor)
        for change in changes:
            if change.file not in FILES or change.artifact.value == "chat_template":
                continue
            got = classify(change, context=ctx)
            measured = ctx.executed(change)
            kind = "none" if measured is None else measured.kind
            kinds[kind] = kinds.get(kind, 0) + 1
            if measured is None or kind == "unexecuted":
                assert got.decided_by == "inferred", got
                continue
            assert (got.severity, got.decided_by) == (band[kind], f"transformers {_version()}")
    # 2 use_fast edits the same; padding side and 2 model_max_length settings; 4 add_bos_token
    # flips and the pad_token removal special; chatglm2 (remote class) and bloom (no
    # tokenizer.json: PreTrainedTokenizerFast cannot load at either side) not run; bert's
    # whole-file addition is not a keyed change
    assert kinds == {
        "tokenizer-same": 2,
        "tokenizer-settings": 3,
        "tokenizer-special": 5,
        "unexecuted": 3,
        "none": 1,
    }


def test_tokenizer_loads_are_cached_by_file_digest(executor: Executor, tmp_path: Path) -> None:
    files = {"tokenizer_config.json": UPLOAD_CONFIG, "tokenizer.json": PAIR.read_bytes()}
    first = executor._tokenizer(files)
    assert executor._tokenizer(dict(files)) is first
    assert executor._tokenizer({**files, "tokenizer_config.json": NO_USE_FAST}) is not first
