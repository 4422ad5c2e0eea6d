"""Settings of the reference engine and its tiny model; frozen, with CPU-fast defaults."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["EngineConfig", "ModelConfig"]


@dataclass(frozen=True)
class ModelConfig:
    """A tiny causal transformer with an MTP head; random weights from ``seed``.

    ``residual_scale`` sets how much attention and MLP move the residual stream away from
    the token embedding: small values make the next token depend mostly on the current
    one, which is what lets a one-layer MTP head guess the target's choices.
    """

    vocab_size: int = 2048
    d_model: int = 64
    num_heads: int = 4
    num_layers: int = 2
    d_ff: int = 128
    residual_scale: float = 0.5
    mtp_hidden_scale: float = 0.05
    rope_base: float = 10000.0
    seed: int = 0

    @property
    def head_dim(self) -> int:
        """Width of one attention head."""
        return self.d_model // self.num_heads


@dataclass(frozen=True)
class EngineConfig:
    """Scheduler, KV-cache and speculation settings of one engine instance."""

    mtp_k: int = 3
    block_size: int = 16
    num_blocks: int = 2048
    max_num_seqs: int = 32
    max_num_batched_tokens: int = 1024
    device: str = "cpu"
    model: ModelConfig = field(default_factory=ModelConfig)
    drafter_max_model_len: int | None = None
    """The drafter's own context limit, when shorter than the target's: a seq whose
    context plus ``mtp_k`` does not fit is proposed no drafts (its row of the drafter's
    output is placeholder), and a step where no seq fits runs no drafter (vLLM's
    ``input_fits_in_drafter``)."""

    def __post_init__(self) -> None:
        if self.mtp_k < 1:
            raise ValueError(f"mtp_k must be at least 1, got {self.mtp_k}")
        if self.max_num_batched_tokens < self.mtp_k + 1:
            raise ValueError("max_num_batched_tokens must fit one decode span (mtp_k + 1)")
        if self.block_size < 1 or self.num_blocks < 1 or self.max_num_seqs < 1:
            raise ValueError("block_size, num_blocks and max_num_seqs must be positive")
