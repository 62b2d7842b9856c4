"""Semantic diffs of every tracked artifact between two snapshots: `diff_snapshots` (pure).

Keys (`Change.key`) per artifact, what the advisory stage classifies on:
- config / generation_config / processor: JSON paths (`architectures`, `text_config.hidden_size`,
  `rope_scaling.factor`); arrays are one value; token ids and `auto_map` are left to their differs.
- tokenizer: `model_type`, `vocab_size`, `vocab`, `merges`, `added_tokens[<id>]`, `normalizer`,
  `pre_tokenizer`, `post_processor`, `decoder`, `truncation`, `padding` (tokenizer.json);
  tokenizer_config.json fields by name (`add_bos_token`, `model_max_length`, ...).
- special_tokens: `bos_token`, `eos_token`, `unk_token`, `pad_token`, ..., `additional_special_tokens`,
  `bos_token_id`, `eos_token_id`, `pad_token_id`, `unk_token_id`, `decoder_start_token_id`.
- chat_template: `source` (default template) or the template name; RENDERED/BROKEN keys are the
  conversation ids (`system_user`, `generation_prompt`, `multi_turn`, `tools`, `tool_calls`,
  `reasoning`), `<name>:<id>` for named templates.
- weights: tensor names, `shards`, `total_bytes`, `dtypes`, `content` (same names, new bytes).
- custom_code: `auto_map.<AutoClass>`, .py file paths. executable: file paths.
- model_card: front-matter field names, `text` for the body.
- inside GGUF files (`tracker.diff.gguf`, the file a `.gguf`): config changes keyed by the GGUF
  key (`llama.context_length`), special_tokens by transformers' id names (`eos_token_id`, the
  value `{"id", "token"}`), tokenizer by `vocab`/`merges`/`scores`/`token_type` or the key's last
  part, chat_template as above; a GGUF model added, removed or unreadable is weights, key "".
Whole-file events (added, removed, readable again) use the key "".
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from tracker.diff._common import Side, SideState, load_json_object, read_side
from tracker.diff.card import diff_card
from tracker.diff.chat_template import diff_chat_template
from tracker.diff.code import diff_code
from tracker.diff.config import diff_config, diff_generation_config
from tracker.diff.conversations import CONVERSATIONS
from tracker.diff.executable import diff_executable
from tracker.diff.gguf import diff_gguf
from tracker.diff.lineage import LineageLink, Unit, base_values, effective_units, read_links
from tracker.diff.processor import diff_processor
from tracker.diff.sandbox import DEFAULT_LIMITS, Renderer, RenderLimits, render_in_process
from tracker.diff.special_tokens import INFERRED, MODEL_READS_CLAUSE, diff_special_tokens
from tracker.diff.tokenizer import diff_tokenizer
from tracker.diff.weights import diff_weights
from tracker.shared.domain import Artifact, Change, ChangeKind, Snapshot

__all__ = [
    "CONVERSATION_IDS",
    "DIFFERS",
    "INFERRED",
    "MODEL_READS_CLAUSE",
    "LineageLink",
    "Side",
    "SideState",
    "Unit",
    "base_values",
    "diff_snapshots",
    "effective_units",
    "load_json_object",
    "read_links",
    "read_side",
]

CONVERSATION_IDS = frozenset(c.id for c in CONVERSATIONS)
"""The ids of the canonical conversations chat templates are rendered on (rendered changes'
keys end with one)."""

Differ = Callable[[Snapshot | None, Snapshot], list[Change]]

DIFFERS: tuple[tuple[Artifact, Differ], ...] = (
    (Artifact.CONFIG, diff_config),
    (Artifact.GENERATION_CONFIG, diff_generation_config),
    (Artifact.TOKENIZER, diff_tokenizer),
    (Artifact.SPECIAL_TOKENS, diff_special_tokens),
    (Artifact.CHAT_TEMPLATE, diff_chat_template),
    (Artifact.WEIGHTS, diff_weights),
    (Artifact.CUSTOM_CODE, diff_code),
    (Artifact.EXECUTABLE, diff_executable),
    (Artifact.MODEL_CARD, diff_card),
    (Artifact.PROCESSOR, diff_processor),
)
"""Every differ, in artifact order (the order of changes in a diff)."""

_ORDER = {artifact: i for i, artifact in enumerate(Artifact)}


def _within_budget(
    artifact: Artifact,
    differ: Differ,
    before: Snapshot | None,
    after: Snapshot,
) -> list[Change]:
    """The differ's changes; a differ that runs out of stack (content nested deeper than any
    bound foresaw) gives one recorded "could not analyse" change for its artifact instead of a
    crash that would leave the revision pending for ever (issue 10, item 6). Running out of memory
    is no property of the revision: the MemoryError goes up to the analysis budget
    (`tracker.sandbox.analysis_worker`), which records the whole revision as could not analyse."""
    try:
        return list(differ(before, after))
    except RecursionError as exc:
        why = "nested too deeply"
        return [
            Change(
                artifact=artifact,
                kind=ChangeKind.UNREADABLE,
                file="",
                key="",
                before=None,
                after=None,
                summary=f"could not analyse the {artifact.value} of this revision: {why} "
                f"({exc.__class__.__name__})",
            )
        ]


def diff_snapshots(
    before: Snapshot | None,
    after: Snapshot,
    *,
    kinds: frozenset[Artifact] | None = None,
    render_limits: RenderLimits = DEFAULT_LIMITS,
    renderer: Renderer = render_in_process,
) -> tuple[Change, ...]:
    """Every semantic change from `before` to `after`, in artifact, then file, then key order.

    Pure and deterministic: no I/O, clock or logging; chat templates render at a fixed time under
    a step budget (`tracker.diff.sandbox`) with `renderer`: in this process by default, or the
    backstop's (`tracker.sandbox.render_backstop.render_batch`: a killable worker process, which gives the
    same results or raises RetryLaterError, never a different change). `before=None` is the first
    revision: only UNREADABLE changes are reported for it. `kinds` restricts the differs run (None:
    all). Never raises for bad content: unparseable files become UNREADABLE (or BROKEN for
    templates) changes.
    """
    changes: list[Change] = []
    for artifact, differ in DIFFERS:
        if artifact is Artifact.CHAT_TEMPLATE:
            differ = functools.partial(diff_chat_template, limits=render_limits, render=renderer)
        if kinds is None or artifact in kinds:
            changes.extend(_within_budget(artifact, differ, before, after))
    # what is inside GGUF files: changes of several artifacts from one reader (tracker.diff.gguf)
    inside = functools.partial(diff_gguf, limits=render_limits, render=renderer)
    gguf = _within_budget(Artifact.WEIGHTS, inside, before, after)
    changes.extend(c for c in gguf if kinds is None or c.artifact in kinds)
    ordered = sorted(
        enumerate(changes), key=lambda ic: (_ORDER[ic[1].artifact], ic[1].file, ic[1].key, ic[0])
    )
    return tuple(c for _, c in ordered)
