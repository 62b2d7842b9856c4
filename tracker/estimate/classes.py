"""The class `architectures[0]` names: known to the pinned transformers or not, and what it builds.

transformers builds the class a config names, not the family's usual one: `BartForCausalLM` is
BART's decoder with its LM head (no encoder), `Qwen2AudioModel` the towers and the text model
without a head, `*ForConditionalGeneration` the towers and the text model with its head.
`role(name)` sorts a class name by what the estimate can count exactly; `known(name)` says whether
transformers 5.24.0 has the class (CLASSES, written by `python -m bench.sweep --generate`).
"""

from __future__ import annotations

import functools
import json
from enum import StrEnum
from pathlib import Path

PINNED = "5.24.0"
CLASSES = Path(__file__).with_name(f"transformers-{PINNED}-classes.json")

LM_SUFFIXES = ("ForCausalLM", "LMHeadModel", "ForConditionalGeneration", "ModelWithLMHead")
"""Classes with a language-model head over the vocabulary (tied or not)."""
NOT_BASE_SUFFIXES = ("LMHeadModel", "EncoderModel", "DecoderModel")
"""`…Model` names that are not a family's base model (one stack, or a head)."""


class Role(StrEnum):
    """What a class builds, as far as the estimate is concerned.

    LM: the model with its LM head (the estimate's usual reading). DECODER: `…ForCausalLM`, which
    for an encoder-decoder family is the decoder alone with its LM head. BASE: `…Model`, the model
    without any head. OTHER: any other head (sequence or token classification, question answering,
    an encoder alone, ...), which the estimate models only where a family reader says so.
    """

    LM = "lm"
    DECODER = "decoder"
    BASE = "base"
    OTHER = "other"


def role(name: str) -> Role:
    """The Role of class `name` ("" — no `architectures` — is the model_type's causal LM)."""
    if not name:
        return Role.LM
    if name.endswith("ForCausalLM"):
        return Role.DECODER
    if name.endswith(LM_SUFFIXES):
        return Role.LM
    if name.endswith("Model") and not name.endswith(NOT_BASE_SUFFIXES):
        return Role.BASE
    return Role.OTHER


@functools.cache
def _classes() -> frozenset[str]:
    body = json.loads(CLASSES.read_text())
    return frozenset(body["classes"])


def known(name: str) -> bool:
    """Whether transformers 5.24.0 exports a model class called `name`."""
    return name in _classes()
