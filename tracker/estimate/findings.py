"""Findings (ESTIMATES.md §4): each with an id, a level, the evidence and a fix.

Rules (each pure, over the parsed config, its reading, the settings and the checkpoint census):

- `huge-linear-params`: one dense MLP or attention linear (not an embedding or vocab head)
  holds more than `huge_linear_threshold` parameters.
- `context-exceeds-positions`: a context the config declares (`n_ctx`, `seq_length`,
  `max_sequence_length`, `max_seq_len`, `model_max_length`) is longer than its position
  encoding supports. A learned absolute position table (GPT-2, OPT, BERT-style
  `position_embedding_type: absolute`) supports exactly its rows (`n_positions` /
  `max_position_embeddings`): longer indexes past the table, an error. Rotary encodings
  support `max_position_embeddings` (any `rope_scaling` is already folded into it; its own
  consistency is the next rule): longer is a warning. ALiBi and relative-bucket encodings have
  no such limit, and a sliding window neither extends nor limits it (positions stay absolute;
  a window wider than the context just never slides). Separately, an info finding when the
  estimate's own `serve_seq_len` is longer than the supported context (its KV figures then
  describe a context the model cannot use).
- `rope-scaling-inconsistent`: for `linear`/`dynamic`/`yarn`/`llama3` scaling, a factor that
  is missing, not a number or below 1; for `linear`/`dynamic`/`yarn`, `original × factor`
  below `max_position_embeddings` (the declared context is not reached); for any type,
  `original_max_position_embeddings` above `max_position_embeddings`; for `longrope`,
  `short_factor`/`long_factor` lengths other than rotary dims / 2. (`llama3` scaling is not
  held to `original × factor`: its frequency-band rule is published for longer contexts.)
- `head-dim-mismatch`: heads × head_dim ≠ hidden in a family whose attention derives its
  head size as hidden / heads (transformers raises on these).
- `dtype-disagrees`: `torch_dtype`/`dtype` differs from the dtype holding most stored elements
  (quantized element types are left out of the census when the config declares a
  `quantization_config`).
- `vocab-too-small`: the tokenizer's highest token id (`max_token_id`, when the caller has
  it) is not below `vocab_size`.
- `custom-code`, `unknown-architecture`, `mtp-not-built`: info, from the reading's flags.
- `class-unknown` (info, like `unknown-architecture`; the estimate is unverified unless a census
  confirms it): `architectures[0]` names a class transformers 5.24.0 does not have and the config
  has no `auto_map` (no code in the repo): transformers cannot build it (other runtimes may:
  MiMo-7B's `MiMoForCausalLM`).
- `class-not-modelled` (info): the named class builds a head the estimate does not model
  (question answering, token classification, an encoder alone, ...).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tracker.estimate.reading import Reading
from tracker.estimate.settings import EstimateSettings
from tracker.shared.estimate_values import CheckpointCensus, Finding

DTYPE_CENSUS = {"bfloat16": "BF16", "float16": "F16", "float32": "F32"}
QUANTIZED_DTYPES = frozenset({"F8_E4M3", "F8_E5M2", "F8_E8M0", "U8", "I8", "U4", "I4"})
EQUAL_HEAD_FAMILIES = frozenset(
    {
        "gpt2",
        "gpt_bigcode",
        "gpt_neo",
        "gptj",
        "opt",
        "bloom",
        "gpt_neox",
        "bert",
        "roberta",
        "xlm-roberta",
        "falcon",
        "RefinedWeb",
    }
)
LEARNED_POSITION_FAMILIES = frozenset(
    {"gpt2", "gpt_bigcode", "gpt_neo", "opt", "bert", "roberta", "xlm-roberta", "biogpt"}
)
NO_POSITION_LIMIT_FAMILIES = frozenset({"bloom", "mpt", "t5", "mt5", "umt5"})
CONTEXT_KEYS = ("n_ctx", "seq_length", "max_sequence_length", "max_seq_len", "model_max_length")
SCALED_ROPE = ("linear", "dynamic", "yarn")
TEXT_KEYS = ("text_config", "llm_config", "language_config")


def _finding(fid: str, level: str, evidence: str, fix: str) -> Finding:
    return Finding(id=fid, level=level, evidence=evidence, fix=fix)


def _int(value: Any) -> int | None:
    """`value` as a positive int (integral floats accepted), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return None
    if value != int(value) or value < 1:
        return None
    return int(value)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if float(value) == float(value) else None


class _Lookup:
    """Keys of the text sub-config first (where a multimodal config keeps them), then the root."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.root = config
        sub = next((config[k] for k in TEXT_KEYS if isinstance(config.get(k), Mapping)), None)
        self.text: Mapping[str, Any] = sub if sub is not None else {}

    def get(self, key: str) -> Any:
        value = self.text.get(key)
        return self.root.get(key) if value is None else value


def findings(
    config: Mapping[str, Any],
    r: Reading,
    s: EstimateSettings,
    checkpoint: CheckpointCensus | None,
    max_token_id: int | None = None,
) -> list[Finding]:
    """Findings about `config` and its reading `r`; pure, in a fixed rule order."""
    c = _Lookup(config)
    out: list[Finding] = []
    out += _huge_linear(r, s)
    out += _context(c, r, s)
    out += _rope(c, r)
    if r.family in EQUAL_HEAD_FAMILIES and r.num_heads * r.head_dim != r.hidden:
        out.append(
            _finding(
                "head-dim-mismatch",
                "error",
                f"heads {r.num_heads} × head_dim {r.head_dim} = {r.num_heads * r.head_dim} "
                f"≠ hidden {r.hidden} in {r.family}, which derives head size as hidden / heads",
                "make hidden_size a multiple of num_attention_heads",
            )
        )
    out += _dtype(c, checkpoint)
    if max_token_id is not None and max_token_id >= r.vocab:
        out.append(
            _finding(
                "vocab-too-small",
                "error",
                f"vocab_size {r.vocab} but the tokenizer's highest token id is {max_token_id}",
                f"resize the embeddings to at least {max_token_id + 1} (max token id + 1)",
            )
        )
    for flag in r.flags:
        if flag in ("unknown-architecture", "custom-code", "mtp-not-built"):
            note = r.flag_notes.get(flag, flag)
            fix = (
                "compare the count with the checkpoint census (the verification says whether it "
                "was)"
                if flag == "custom-code"
                else "treat the count as derived, not verified"
            )
            out.append(_finding(flag, "info", note, fix))
        elif flag == "class-unknown":
            fix = "name a transformers class in architectures, or ship its code with an auto_map"
            out.append(_finding(flag, "info", r.flag_notes[flag], fix))
        elif flag == "class-not-modelled":
            fix = "treat the count as unverified; the checkpoint census is the stored count"
            out.append(_finding(flag, "info", r.flag_notes[flag], fix))
    return out


def _huge_linear(r: Reading, s: EstimateSettings) -> list[Finding]:
    seen: set[tuple[int, int]] = set()
    for spec in r.layer_kinds:  # the same object gives the same widths: each kind once, in order
        dense = (spec.ffn_width or r.intermediate) if spec.ffn in ("swiglu", "gelu") else 0
        key = (dense, spec.q_width or r.num_heads * r.head_dim)
        if key in seen:
            continue
        seen.add(key)
        sizes = {"dense MLP": r.hidden * key[0], "attention": r.hidden * key[1]}
        comp, biggest = max(sizes.items(), key=lambda kv: kv[1])
        if biggest > s.huge_linear_threshold:
            return [
                _finding(
                    "huge-linear-params",
                    "warning",
                    f"a single {comp} linear holds {biggest:,} parameters "
                    f"(threshold {s.huge_linear_threshold:,})",
                    "check hidden_size / intermediate_size / head counts for a typo",
                )
            ]
    return []


def _position_limit(c: _Lookup, r: Reading) -> tuple[str, int, bool] | None:
    """(key, supported positions, learned table?) or None when the encoding has no limit."""
    if r.family in NO_POSITION_LIMIT_FAMILIES or c.get("alibi") is True:
        return None
    learned = r.family in LEARNED_POSITION_FAMILIES and c.get("position_embedding_type") in (
        None,
        "absolute",
    )
    for key in ("max_position_embeddings", "n_positions"):
        limit = _int(c.get(key))
        if limit is not None:
            return key, limit, learned
    return None


def _context(c: _Lookup, r: Reading, s: EstimateSettings) -> list[Finding]:
    limit = _position_limit(c, r)
    if limit is None:
        return []
    key, supported, learned = limit
    out: list[Finding] = []
    for ctx_key in CONTEXT_KEYS:
        declared = _int(c.get(ctx_key))
        if declared is None or declared <= supported:
            continue
        if learned:
            out.append(
                _finding(
                    "context-exceeds-positions",
                    "error",
                    f"{ctx_key} {declared} > {key} {supported}: the learned position table "
                    f"has {supported} rows, so positions past {supported} index out of it",
                    f"lower {ctx_key} to {supported} or extend the position table",
                )
            )
        else:
            out.append(
                _finding(
                    "context-exceeds-positions",
                    "warning",
                    f"{ctx_key} {declared} > {key} {supported}: the rotary encoding is set up "
                    f"for {supported} positions",
                    f"lower {ctx_key} to {supported}, or raise {key} with a matching rope_scaling",
                )
            )
    if s.serve_seq_len > supported:
        out.append(
            _finding(
                "context-exceeds-positions",
                "info",
                f"serving figures assume serve_seq_len {s.serve_seq_len} tokens, longer than "
                f"{key} {supported}",
                f"set estimate.serve_seq_len to at most {supported} for this model",
            )
        )
    return out


def _rope(c: _Lookup, r: Reading) -> list[Finding]:
    rope = c.get("rope_scaling")
    if not isinstance(rope, Mapping):
        rope = c.get("rope_parameters")
    if not isinstance(rope, Mapping):
        return []
    kind = rope.get("rope_type", rope.get("type"))
    mpe = _int(c.get("max_position_embeddings"))
    orig = _int(rope.get("original_max_position_embeddings"))
    factor = _number(rope.get("factor"))
    out: list[Finding] = []

    def bad(evidence: str, fix: str) -> None:
        out.append(_finding("rope-scaling-inconsistent", "warning", evidence, fix))

    if kind in (*SCALED_ROPE, "llama3") and (factor is None or factor < 1):
        bad(
            f"rope_scaling type {kind} with factor {rope.get('factor')!r} (needs a number ≥ 1)",
            "set rope_scaling.factor to the context extension ratio",
        )
    elif kind in SCALED_ROPE and orig and mpe and factor and orig * factor < mpe * 0.99:
        bad(
            f"rope_scaling factor {factor:g} × original {orig} = {orig * factor:g} < "
            f"max_position_embeddings {mpe}",
            "raise the rope factor or lower max_position_embeddings",
        )
    if orig and mpe and orig > mpe:
        bad(
            f"original_max_position_embeddings {orig} > max_position_embeddings {mpe}: "
            "the scaling shrinks the context",
            "swap or fix the two lengths",
        )
    if kind == "longrope":
        partial = _number(c.get("partial_rotary_factor")) or 1.0
        partial = partial if 0 < partial <= 1 else 1.0
        half = int(r.head_dim * partial) // 2
        for name in ("short_factor", "long_factor"):
            values = rope.get(name)
            if isinstance(values, list) and len(values) != half:
                bad(
                    f"longrope {name} has {len(values)} entries, rotary dims / 2 = {half}",
                    f"give {name} exactly {half} entries",
                )
    return out


def _dtype(c: _Lookup, checkpoint: CheckpointCensus | None) -> list[Finding]:
    declared = c.get("torch_dtype") or c.get("dtype")
    if not checkpoint or not isinstance(declared, str) or declared not in DTYPE_CENSUS:
        return []
    census = dict(checkpoint.dtypes)
    if isinstance(c.get("quantization_config"), Mapping):
        census = {d: n for d, n in census.items() if d not in QUANTIZED_DTYPES}
    if not census:
        return []
    top = max(sorted(census), key=lambda d: census[d])
    want = DTYPE_CENSUS[declared]
    if top == want:
        return []
    return [
        _finding(
            "dtype-disagrees",
            "warning",
            f"config torch_dtype {declared} but most stored elements are {top} "
            f"({census[top]:,} of {sum(census.values()):,})",
            f"set torch_dtype to the stored dtype ({top}) or re-save the weights as {want}",
        )
    ]
