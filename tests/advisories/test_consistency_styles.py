"""`template-token-undefined` in the tokenizer's own style (issue 11 item 6): the delimiters of its
special tokens (`<start_of_turn>`, `[INST]`, `<s>`) read from tokenizer_config.json, so a misspelt
literal of that style is flagged; prose in the same style (`<co>`, `[citation]`) is not, and the
corpus's real templates and tokenizer files give no finding at all."""

from __future__ import annotations

import json
from pathlib import Path

from tests.diff.diffkit import make_snapshot
from tracker.advisories.consistency import _styles, _template_findings, introduced
from tracker.advisories.effects import Context, Side

CORPUS = Path(__file__).parents[3] / "shared" / "corpus"
GEMMA = CORPUS / "models" / "google__gemma-3-1b-it" / "tokenizer_config.json"
TOKENIZER_FILES = ("tokenizer_config.json", "tokenizer.json", "vocab.json", "chat_template.jinja",
                   "chat_template.json")  # fmt: skip


def _findings(before: dict[str, bytes], after: dict[str, bytes]) -> list[str]:
    ctx = Context(make_snapshot(before), make_snapshot(after, sha="1" * 40))
    return [f.text for f in introduced(ctx) if f.check == "template-token-undefined"]


def test_gemma_misspelt_turn_token_is_flagged_in_its_own_style() -> None:
    raw = GEMMA.read_bytes()
    conf = json.loads(raw)
    conf["chat_template"] = conf["chat_template"].replace("<end_of_turn>", "<end_of_trun>", 1)
    side = Side(make_snapshot({"tokenizer_config.json": raw}))
    assert _styles(side.special_tokens) == {("<", ">")}
    assert _findings(
        {"tokenizer_config.json": raw}, {"tokenizer_config.json": json.dumps(conf).encode()}
    ) == [
        "the chat template writes `<end_of_trun>`, which the tokenizer does not define as a "
        "token: the prompt encodes it as ordinary text pieces, not the special token the model "
        "was trained on"
    ]


def _mistral(template: str) -> bytes:
    specials = {"1": "<s>", "2": "</s>", "3": "[INST]", "4": "[/INST]"}
    return json.dumps(
        {
            "added_tokens_decoder": {
                k: {"content": v, "special": True} for k, v in specials.items()
            },
            "chat_template": template,
        }
    ).encode()


def test_bracket_style_tokens_misspelt_are_flagged_and_prose_is_not() -> None:
    good = "{{ bos_token }}{% for m in messages %}[INST] {{ m.content }} [/INST]{% endfor %}"
    typo = good.replace("[/INST]", "[/INTS]")
    prose = good.replace("[INST] ", "[INST] see [citation] and <co>, messages[0] ")
    side = Side(make_snapshot({"tokenizer_config.json": _mistral(good)}))
    assert _styles(side.special_tokens) == {("<", ">"), ("</", ">"), ("[", "]"), ("[/", "]")}
    assert _findings(
        {"tokenizer_config.json": _mistral(good)}, {"tokenizer_config.json": _mistral(typo)}
    ) == [
        "the chat template writes `[/INTS]`, which the tokenizer does not define as a token: the "
        "prompt encodes it as ordinary text pieces, not the special token the model was trained on"
    ]
    assert (
        _findings(
            {"tokenizer_config.json": _mistral(good)}, {"tokenizer_config.json": _mistral(prose)}
        )
        == []
    )


def _corpus_snapshots() -> list[tuple[str, dict[str, bytes]]]:
    out = []
    dirs = sorted({p.parent for p in CORPUS.rglob("*tokenizer_config.json")})
    for d in dirs:
        files = {n: (d / n).read_bytes() for n in TOKENIZER_FILES if (d / n).is_file()}
        if files:
            out.append((str(d.relative_to(CORPUS)), files))
            continue
        for f in sorted(d.iterdir()):  # a history: NN_sha_tokenizer_config.json per revision
            for n in TOKENIZER_FILES:
                if f.name.endswith("_" + n):
                    out.append((f"{d.relative_to(CORPUS)}/{f.name}", {n: f.read_bytes()}))
    return out


def test_the_corpus_real_templates_give_no_finding() -> None:
    snaps = _corpus_snapshots()
    assert len(snaps) == 40
    styled = 0
    for name, files in snaps:
        side = Side(make_snapshot(files))
        styled += bool(_styles(side.special_tokens))
        assert _template_findings(side) == [], name
    assert styled == 32  # tokenizers with special tokens whose style is checked
