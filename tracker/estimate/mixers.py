"""The dimensions of attention's alternatives: MLA, linear attention (gated DeltaNet, Kimi delta
attention) and SSM mixers (Mamba2, Mamba1), as the general reader finds their keys.

A module of their own so that a config without them (most dense and MoE models) does not build
these classes at all: `tracker estimate` is a short process, and each dataclass costs its start
about half a millisecond (`make bench`, estimate section).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Mla:
    """Multi-head latent attention dimensions (DeepSeek-V2/V3 style).

    `indexer`: (index_n_heads, index_head_dim) of a DSA indexer; `out_gate`: a sigmoid output
    gate projecting the hidden state to heads × v_head.
    """

    q_lora_rank: int | None
    kv_lora_rank: int
    qk_nope: int
    qk_rope: int
    v_head: int
    indexer: tuple[int, int] | None = None
    out_gate: bool = False


@dataclass(frozen=True)
class Gdn:
    """Gated DeltaNet (Qwen3-Next / Qwen3.5 linear-attention layers)."""

    key_heads: int
    key_dim: int
    value_heads: int
    value_dim: int
    conv_kernel: int


@dataclass(frozen=True)
class Kda:
    """Kimi delta attention (Kimi-Linear's linear-attention layers): per-channel decay."""

    heads: int
    head_dim: int
    conv_kernel: int
    full_rank_gate: bool = False  # output gate h→heads×head_dim (Kimi-K3), not h→head_dim→that


@dataclass(frozen=True)
class Mamba2:
    """A Mamba2 mixer: `heads` × `head_dim` inner width, `groups` B/C groups of `state`."""

    heads: int
    head_dim: int
    groups: int
    state: int
    conv_kernel: int
    bias: bool = False
    conv_bias: bool = True


@dataclass(frozen=True)
class Mamba1:
    """A Mamba (v1) mixer: inner width `d_inner`, state `state`, Δ rank `dt_rank`."""

    d_inner: int
    state: int
    conv_kernel: int
    dt_rank: int
    bias: bool = False
    conv_bias: bool = True
