"""Oracle: our bounded renderer gives exactly what transformers' own chat-template renderer gives.

Every real chat template in tests/diff/data/templates (copied from ../shared/corpus/models: the
`chat_template*.jinja` files and the `chat_template` fields of tokenizer_config.json files), over
every canonical conversation: same output, or both fail (and then with the same outcome).
Slow: imports transformers.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tracker.diff.conversations import CONVERSATIONS, template_variables
from tracker.diff.sandbox import FIXED_NOW
from tracker.sandbox.render_backstop import render_template

TEMPLATES = sorted((Path(__file__).parent / "data" / "templates").glob("*.jinja"))
TOKENS = {"bos_token": "<BOS>", "eos_token": "<EOS>", "unk_token": "<UNK>", "pad_token": "<PAD>"}

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def transformers_render() -> object:
    ctu = pytest.importorskip("transformers.utils.chat_template_utils")

    class _FixedClock:
        @staticmethod
        def now() -> object:
            return FIXED_NOW

    saved = ctu.datetime
    ctu.datetime = _FixedClock  # strftime_now reads datetime.now() at call time
    yield ctu.render_jinja_template
    ctu.datetime = saved


def test_corpus_has_templates() -> None:
    assert len(TEMPLATES) >= 30


@pytest.mark.parametrize("path", TEMPLATES, ids=[p.stem for p in TEMPLATES])
def test_render_matches_transformers(path: Path, transformers_render: object) -> None:
    source = path.read_text()
    for conv in CONVERSATIONS:
        ours = render_template(source, template_variables(conv, TOKENS))
        try:
            rendered, _ = transformers_render(  # type: ignore[operator]
                [list(conv.messages)],
                tools=list(conv.tools) if conv.tools else None,
                chat_template=source,
                add_generation_prompt=conv.add_generation_prompt,
                **TOKENS,
            )
            theirs, failed = rendered[0], ""
        except Exception as exc:  # the template's own failure, as transformers reports it
            theirs, failed = "", type(exc).__name__
        if failed:
            assert not ours.ok, (conv.id, failed)
            expected = {"TemplateError": "raised", "SecurityError": "security"}.get(failed, "error")
            assert ours.outcome == expected, (conv.id, failed, ours)
        else:
            assert ours.ok, (conv.id, ours)
            assert ours.output == theirs, conv.id
