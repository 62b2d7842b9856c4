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

    def saved_bytes(self) -> int:
        """Bytes autograd keeps per token for backward in transformers' gated DeltaNet layer on
        its torch path (`torch_chunk_gated_delta_rule`, chunks of 64, run where the
        flash-linear-attention kernels are not installed), bf16 input, mixer input excluded:
        fitted to the byte over 32 small layers at T = 512 (`bench.activations.fit("gdn")`).

        The rule works in fp32 with q and k repeated to the value heads (qd = value heads × key
        size): 8·kd + 34·vd + 32·qd per channel (projections, conv input and output, fp32
        copies, the gated norm), 1318 per value head (chunk-sized decay and attention rows),
        and the per-chunk fp32 state, 4·value heads·key size·value size / 64.
        """
        kd = self.key_heads * self.key_dim
        vd = self.value_heads * self.value_dim
        qd = self.value_heads * self.key_dim
        state = 4 * self.value_heads * self.key_dim * self.value_dim // 64
        return 8 * kd + 34 * vd + 32 * qd + 1318 * self.value_heads + state


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
    chunk: int = 128  # the scan's chunk length (`chunk_size` / `mamba_chunk_size`)
    norm: bool = True  # the gated RMSNorm over the inner width (`mamba_rms_norm`)

    def saved_bytes(self) -> int:
        """Bytes autograd keeps per token for backward in transformers' Mamba2 mixer on its
        torch path (Nemotron-H's `torch_forward`, run where the mamba-ssm kernels are not
        installed), bf16 input, mixer input excluded: fitted to the byte over 32 small mixers at
        T = 512 and chunks of 64 and 128 (`bench.activations.fit("mamba2", chunk=...)`).

        48·di per inner channel (projections, conv, fp32 copies, gated norm), 8 per B/C group
        channel, 12·chunk + 22 per head (the chunk's decay and score rows in fp32), 20 per head
        and state channel (B and C repeated to the heads), and the per-chunk fp32 states,
        8·heads·head size·state / chunk.
        """
        di = self.heads * self.head_dim
        per_head = 12 * self.chunk + 22
        states = 8 * self.heads * self.head_dim * self.state // self.chunk
        gs = self.groups * self.state
        return 48 * di + 8 * gs + per_head * self.heads + 20 * self.heads * self.state + states


@dataclass(frozen=True)
class Mamba1:
    """A Mamba (v1) mixer: inner width `d_inner`, state `state`, Δ rank `dt_rank`."""

    d_inner: int
    state: int
    conv_kernel: int
    dt_rank: int
    bias: bool = False
    conv_bias: bool = True
