"""Serving estimate of GGUF models from their headers alone (issue 28, item 3): per model (a quant
file, or a split's shards read as one) its weight bytes exactly (the sum of its tensors' bytes,
whole blocks of each ggml type, as the header declares them), its KV cache from the header's own
numbers, and a fit table per card × context at batch 1 (ESTIMATES.md §2's headroom: a card is
used up to VRAM / `headroom`).

KV cache per token (llama.cpp's default f16 cache, `kv_bytes_per_value` bytes a value): over the
`<arch>.block_count` layers, `head_count_kv` × (`key_length` + `value_length`) values, where
`key_length`/`value_length` default to `embedding_length` / `head_count` (llama.cpp's own
defaults); a per-layer `head_count_kv` array is summed layer by layer. Every layer is counted
at the full context: an upper bound where llama.cpp caches less (sliding-window layers, MLA's
shared latent, recurrent layers), which the header alone does not say uniformly. Contexts: 4k, 8k, 32k and
128k up to the header's `<arch>.context_length`, and that length itself. Pure: headers in, values
out.

Per revision (`gguf_snapshot_delta`), each model present at both revisions is estimated again and
what moved is a Change of the ESTIMATE artifact on its file, as the safetensors side's
`tracker.estimate.delta`: its weight bytes, KV cache per token and context length, and per card
the longest context it holds at batch 1 (FIT_LOST where a context both headers offer held before
and no longer does, FIT_GAINED where the card held none before, else CHANGED).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tracker.estimate.settings import Card, EstimateSettings
from tracker.shared.domain import (
    Artifact,
    Change,
    ChangeKind,
    GGUFModel,
    JSONValue,
    Snapshot,
)
from tracker.shared.errors import EstimateError

CONTEXTS = (4096, 8192, 32768, 131072)
_QUANT = re.compile(
    r"(?<![A-Za-z0-9])(I?Q\d(?:_[A-Z0-9]+)*|BF16|F16|F32)(?![A-Za-z0-9])", re.IGNORECASE
)


@dataclass(frozen=True)
class ContextFit:
    """One context length on one card at batch 1: the bytes needed and whether they fit."""

    context: int
    need_bytes: int
    fits: bool


@dataclass(frozen=True)
class GGUFEstimate:
    """One GGUF model's serving estimate (see the module docstring)."""

    path: str
    quant: str
    weight_bytes: int
    census: Mapping[str, tuple[int, int]]
    kv_bytes_per_token: int
    context_length: int
    fits: Mapping[str, tuple[ContextFit, ...]]  # card name → per context

    def sentences(self) -> list[str]:
        """ "Q4_K_M fits L4 24 GB at 8k context, batch 1" for the longest context each card
        holds ("does not fit" where none)."""
        out = []
        for card, fits in self.fits.items():
            held = [f for f in fits if f.fits]
            if held:
                out.append(f"{self.quant} fits {card} at {_k(held[-1].context)} context, batch 1")
            else:
                shortest = _k(fits[0].context) if fits else "any"
                out.append(f"{self.quant} does not fit {card} at {shortest} context, batch 1")
        return out

    def to_json(self) -> dict[str, JSONValue]:
        return {
            "file": self.path,
            "quant": self.quant,
            "weight_bytes": self.weight_bytes,
            "census": {t: {"tensors": n, "bytes": b} for t, (n, b) in self.census.items()},
            "kv_bytes_per_token": self.kv_bytes_per_token,
            "context_length": self.context_length,
            "cards": [
                {
                    "name": card,
                    "fits": [
                        {"context": f.context, "need_bytes": f.need_bytes, "fits": f.fits}
                        for f in fits
                    ],
                }
                for card, fits in self.fits.items()
            ],
            "summary": list(self.sentences()),
        }


def context_label(tokens: int) -> str:
    """4096 → `4k`, 131072 → `128k` (how the fit sentences name a context)."""
    return _k(tokens)


def _k(tokens: int) -> str:
    return f"{tokens // 1024}k" if tokens % 1024 == 0 else f"{tokens:,}"


def _int(meta: Mapping[str, JSONValue], key: str) -> int | None:
    value = meta.get(key)
    return value if type(value) is int else None


def kv_bytes_per_token(model: GGUFModel, bytes_per_value: float) -> int:
    """The KV cache of one token over every layer (see the module docstring); EstimateError
    naming the key where the header lacks what it needs."""
    meta = model.metadata
    arch = meta.get("general.architecture")
    if not isinstance(arch, str):
        raise EstimateError(f"{model.path}: no general.architecture in its header")
    layers = _int(meta, f"{arch}.block_count")
    embd = _int(meta, f"{arch}.embedding_length")
    heads = _int(meta, f"{arch}.attention.head_count")
    if layers is None or embd is None or not heads:
        raise EstimateError(
            f"{model.path}: its header lacks {arch}.block_count, {arch}.embedding_length or "
            f"{arch}.attention.head_count"
        )
    k_len = _int(meta, f"{arch}.attention.key_length") or embd // heads
    v_len = _int(meta, f"{arch}.attention.value_length") or embd // heads
    kv = meta.get(f"{arch}.attention.head_count_kv", heads)
    if isinstance(kv, Sequence) and not isinstance(kv, str):
        per_layer = [int(h) for h in kv if isinstance(h, int)]
        if len(per_layer) != layers:
            raise EstimateError(
                f"{model.path}: {arch}.attention.head_count_kv lists {len(per_layer)} layers, "
                f"not {layers}"
            )
        values = sum(per_layer) * (k_len + v_len)
    elif type(kv) is int:
        values = layers * kv * (k_len + v_len)
    else:
        raise EstimateError(f"{model.path}: {arch}.attention.head_count_kv is not a count")
    return round(values * bytes_per_value)


def quant_label(model: GGUFModel) -> str:
    """The quant a file's name says (`Q4_K_M`, `IQ3_XXS`, `F16`), else its model path."""
    name = model.path.rsplit("/", 1)[-1].removesuffix(".gguf")
    found = _QUANT.findall(name)
    return found[-1].upper() if found else model.path


def estimate_gguf(model: GGUFModel, settings: EstimateSettings | None = None) -> GGUFEstimate:
    """The serving estimate of one readable GGUF model (EstimateError where it is not)."""
    s = settings or EstimateSettings()
    if not model.complete or not model.headers:
        raise EstimateError(f"{model.path}: its header could not be read")
    census = model.quant_census
    weights = sum(size for _, size in census.values())
    per_token = kv_bytes_per_token(model, s.kv_bytes_per_value)
    arch = model.metadata.get("general.architecture")
    length = _int(model.metadata, f"{arch}.context_length") or 0
    contexts = sorted({c for c in CONTEXTS if not length or c <= length} | ({length} - {0}))
    fits: dict[str, tuple[ContextFit, ...]] = {}
    for card in s.all_cards:
        fits[card.name] = tuple(_fit(card, s, weights + per_token * c, c) for c in contexts)
    return GGUFEstimate(model.path, quant_label(model), weights, census, per_token, length, fits)


def _fit(card: Card, s: EstimateSettings, need: int, context: int) -> ContextFit:
    return ContextFit(context, need, need <= card.vram_gb * 1e9 / s.headroom)


def gguf_estimates(
    models: Mapping[str, GGUFModel], settings: EstimateSettings | None = None
) -> dict[str, GGUFEstimate]:
    """The estimate of each model that can be estimated, by model path (the others are left out:
    the page and `tracker estimate` say why)."""
    out: dict[str, GGUFEstimate] = {}
    for path, model in sorted(models.items()):
        try:
            out[path] = estimate_gguf(model, settings)
        except EstimateError:
            continue
    return out


def _held(fits: Sequence[ContextFit]) -> int:
    """The longest context a card holds at batch 1 (0: none)."""
    return max((f.context for f in fits if f.fits), default=0)


def _held_words(tokens: int) -> str:
    return f"fits at {_k(tokens)} context" if tokens else "does not fit at any context"


def gguf_delta(
    before: Mapping[str, GGUFEstimate], after: Mapping[str, GGUFEstimate]
) -> tuple[Change, ...]:
    """What moved between two revisions' GGUF estimates (by model path), for each model at both
    (an added or removed quant file is the weights diff's): CHANGED `gguf.weight_bytes`,
    `gguf.kv_bytes_per_token` and `gguf.context_length`; per card `gguf.cards.<card>` with the
    longest context held at batch 1 before and after (0: none), FIT_LOST where a context both
    headers offer fitted before and no longer does, FIT_GAINED where none fitted before, else
    CHANGED when that longest context moved. Equal estimates → ()."""
    out: list[Change] = []
    for path in sorted(before.keys() & after.keys()):
        b, a = before[path], after[path]
        q = a.quant
        for key, x, y, unit in (
            ("weight_bytes", b.weight_bytes, a.weight_bytes, " bytes"),
            ("kv_bytes_per_token", b.kv_bytes_per_token, a.kv_bytes_per_token, " bytes"),
            ("context_length", b.context_length, a.context_length, " tokens"),
        ):
            if x != y:
                words = f"{q} {key.replace('_', ' ')}: {x:,} → {y:,}{unit}"
                out.append(
                    Change(Artifact.ESTIMATE, ChangeKind.CHANGED, path, f"gguf.{key}", x, y, words)
                )
        for card, fits in a.fits.items():
            old = b.fits.get(card)
            if old is None:
                continue
            held_b, held_a = _held(old), _held(fits)
            was = {f.context for f in old if f.fits}
            lost = sorted(f.context for f in fits if not f.fits and f.context in was)
            key = f"gguf.cards.{card}"
            if lost:
                words = (
                    f"{q} no longer fits {card} at {_k(lost[-1])} context, batch 1 "
                    f"(now: {_held_words(held_a)})"
                )
                out.append(
                    Change(Artifact.ESTIMATE, ChangeKind.FIT_LOST, path, key, held_b, held_a, words)
                )
            elif held_a and not held_b:
                words = f"{q} now fits {card} at {_k(held_a)} context, batch 1"
                out.append(
                    Change(
                        Artifact.ESTIMATE, ChangeKind.FIT_GAINED, path, key, held_b, held_a, words
                    )
                )
            elif held_a != held_b:
                words = f"{q} on {card}: {_held_words(held_b)} → {_held_words(held_a)}, batch 1"
                out.append(
                    Change(Artifact.ESTIMATE, ChangeKind.CHANGED, path, key, held_b, held_a, words)
                )
    return tuple(out)


def gguf_snapshot_delta(
    before: Snapshot, after: Snapshot, settings: EstimateSettings | None = None
) -> tuple[Change, ...]:
    """`gguf_delta` of two revisions' GGUF models, where neither has a config.json (a GGUF repo:
    its estimate is per quant file, as the repo page and `tracker estimate` give it); () else."""
    if "config.json" in before.files or "config.json" in after.files:
        return ()
    if not before.gguf_models or not after.gguf_models:
        return ()
    return gguf_delta(
        gguf_estimates(before.gguf_models, settings), gguf_estimates(after.gguf_models, settings)
    )


__all__ = [
    "CONTEXTS",
    "ContextFit",
    "GGUFEstimate",
    "context_label",
    "estimate_gguf",
    "gguf_delta",
    "gguf_estimates",
    "gguf_snapshot_delta",
    "kv_bytes_per_token",
]
